"""ring.plan.estimate's per-pass model (issue 39): each pass priced by what it reads and how, from small figures
whose expectations are computed by hand."""

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from ring.core.config import LinclsConfig, PretrainConfig
from ring.plan import estimate
from ring.plan import grid as grid_plan
from ring.plan.estimate.passes import store_of
from tests import ROOT
from tests.plan.estimate.test_figures import _write_figures

IMAGENET = 1_281_167
EVAL_IMAGES = 1_281_167 + 50_000  # a kNN pass: the labelled train split and the test split
PAPER = ROOT / "ring" / "resources" / "grids" / "paper.yaml"
# The figures of _write_figures at 5000: device tensors 10,000 images/s, device pipeline 5,000, forward 20,000,
# eager views 20,000 views/s; IRing's ratio 1.3 at the 1.28M bank.
STEP, VIEW, FORWARD = 1 / 10_000, 1 / 20_000, 1 / 20_000


def _jpeg(folder: Path, device: str = "GPU X") -> None:
    """Today's JPEG path: 2,000 views/s on the device (decode, resize, one eager view), decoding 10,000 images/s;
    PIL's views 800 images/s in 8 workers."""
    doc = {
        "image_size": 224,
        "resize": 256,
        "workers": 8,
        "views_per_s": {"device": 2000.0, "decode_only": 10_000.0, "pil": 800.0},
    }
    (folder / f"jpeg_decode-{device.replace(' ', '_')}.json").write_text(json.dumps(doc))


def _store(folder: Path, device: str = "GPU X", **views) -> None:
    doc = {
        "machine": {"device": device, "torch": "2.11.0", "date": "2026-11-28T00:00:00Z"},
        "resize": 256,
        "image_size": 224,
        "workers": 8,
        "timed_batches": 48,  # 3x the 8 workers' prefetch: its loader rates are read
        "per_core_images_per_s": {
            "original_decode_resize": 120.0,
            "store_jpeg95_decode": 500.0,
            "store_raw_read": 50_000.0,
            "eval_original": 100.0,
            "eval_store_jpeg95": 250.0,
            "eval_store_raw": 1000.0,
        },
        "loader_images_per_s": {"original_eval": 600.0},
        "views_per_s": {"store_device": None, "store_device_compiled": None, "gpu_decode": None, **views},
    }
    (folder / f"store_loader-{device.replace(' ', '_')}.json").write_text(json.dumps(doc))


@pytest.fixture
def figures(tmp_path):
    _write_figures(tmp_path, "GPU X", "2026-11-26T11:00:00Z", 5000.0)
    _jpeg(tmp_path)
    return tmp_path


def _cell(method: str, **kw) -> PretrainConfig:
    return PretrainConfig(method=method, dataset="imagenet", **{"epochs": 10, "knn_every": 0, "compile": "off", **kw})


def test_the_jpeg_path_charges_one_decode_and_one_resize_and_ring_s_ratio_on_the_step_only(figures):
    f = estimate.load_figures(results=figures)
    resize = 1 / 2000 - 1 / 10_000 - VIEW  # the benchmark's seconds per view less its decode and its eager view
    per_image = 1.3 * STEP + 1 / 10_000 + resize + VIEW
    assert math.isclose(estimate.pretrain_hours(_cell("IRing"), f), 10 * IMAGENET * per_image / 3600)
    # MoCo: the same decode and resize, then two views (before: the resize too, twice).
    per_image = STEP + 1 / 10_000 + resize + 2 * VIEW
    assert math.isclose(estimate.pretrain_hours(_cell("MoCo"), f), 10 * IMAGENET * per_image / 3600)


def test_compiled_cells_take_the_compiled_step_and_views(figures):
    machine = {"device": "GPU X", "torch": "2.11.0", "cuda": "13.0", "date": "2026-11-26T11:00:00Z"}
    doc = {
        "machine": machine,
        "method": "IR",
        "image_size": 224,
        "compile": True,
        "images_per_s": {"synthetic": 20_000.0, "device": 16_000.0},
        "device_augment_views_per_s": 80_000.0,
    }
    (figures / "throughput_IR_compile-GPU_X.json").write_text(json.dumps(doc))
    f = estimate.load_figures(results=figures)
    resize = 1 / 2000 - 1 / 10_000 - VIEW  # the JPEG benchmark's views are eager: its resize from the eager view
    per_image = 1.3 / 20_000 + 1 / 10_000 + resize + 1 / 80_000
    assert math.isclose(estimate.pretrain_hours(_cell("IRing", compile="auto"), f), 10 * IMAGENET * per_image / 3600)


def test_knn_and_linear_evaluation_are_bound_by_their_loader_workers(figures):
    f = estimate.load_figures(results=figures)
    # 20 epochs, every 10th: 2 passes.  PIL makes 800 images/s in 8 workers, 400 in this cell's 4: 2.5 ms an image
    # against the forward's 0.05 ms.
    ir = _cell("IR", knn_every=10, knn_schedule="every", epochs=20, num_workers=4)
    assert math.isclose(estimate.knn_hours(ir, f), 2 * EVAL_IMAGES * 8 / (800 * 4) / 3600)
    # Without workers the main process decodes, then runs the forward.
    solo = _cell("IR", knn_every=10, knn_schedule="every", epochs=20, num_workers=0)
    assert math.isclose(estimate.knn_hours(solo, f), 2 * EVAL_IMAGES * (8 / 800 + FORWARD) / 3600)
    lin = LinclsConfig(dataset="imagenet", method="IR", augmentation="none", num_workers=16)
    assert math.isclose(estimate.lincls_hours(lin, f), EVAL_IMAGES * 8 / (800 * 16) / 3600)
    # In-memory datasets with no measured input figure: the forward alone (as before).
    cifar = PretrainConfig(method="IR", dataset="cifar10", knn_every=10, epochs=20, num_workers=4)
    assert math.isclose(estimate.knn_hours(cifar, f), 2 * 60_000 * FORWARD / 3600)


def test_in_memory_evaluation_input_is_priced_where_measured(figures):
    path = figures / "throughput_IR-GPU_X.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "eval_pil_images_per_s_one_process": 500.0}))
    f = estimate.load_figures(results=figures)
    # PIL's centre crops of CIFAR's arrays, 500 images/s per core, in 4 workers: 0.5 ms against the 0.05 ms forward.
    cifar = PretrainConfig(method="IR", dataset="cifar10", knn_every=10, epochs=20, num_workers=4)
    assert math.isclose(estimate.knn_hours(cifar, f), 2 * 60_000 / (500 * 4) / 3600)
    assert "in-memory datasets' evaluation input: 500 images/s per core (throughput_IR-GPU_X.json)" in estimate.report(
        grid_plan.load(PAPER), f
    )


def test_the_store_s_figures_price_the_evaluation_passes(figures):
    _store(figures)
    f = estimate.load_figures(results=figures)
    lin = LinclsConfig(dataset="imagenet", method="IR", augmentation="none", num_workers=4)
    # Today's files: the store benchmark's loader of the original files, 600 images/s at 8 workers.
    assert math.isclose(estimate.lincls_hours(lin, f, store="none"), EVAL_IMAGES * 8 / (600 * 4) / 3600)
    # The store: its per-core centre-crop rates, times the cell's workers.
    assert math.isclose(estimate.lincls_hours(lin, f, store="jpeg95"), EVAL_IMAGES / (250 * 4) / 3600)
    assert math.isclose(estimate.lincls_hours(lin, f, store="raw"), EVAL_IMAGES / (1000 * 4) / 3600)
    # A config's own store key (ring.data.store's) is what the price reads without an override.
    assert store_of(SimpleNamespace(dataset="imagenet", resize=256, store="raw"), f, None) == "raw"
    assert store_of(SimpleNamespace(dataset="imagenet", resize=256), f, None) == "none"  # before the key: the files


def test_pretraining_from_the_store_is_the_slower_of_the_training_stream_and_the_loader(figures):
    _store(figures)
    f = estimate.load_figures(results=figures)
    # jpeg95 at 500 images/s per core: 4 workers (0.5 ms an image) hold back the step and its view (0.15 ms).
    assert math.isclose(estimate.pretrain_hours(_cell("IR", num_workers=4), f, "jpeg95"), 10 * IMAGENET / 2000 / 3600)
    # 16 workers (0.125 ms) keep up: the step, then one view, no decode and no resize on the device.
    assert math.isclose(
        estimate.pretrain_hours(_cell("IR", num_workers=16), f, "jpeg95"), 10 * IMAGENET * (STEP + VIEW) / 3600
    )
    # raw: a copy; MoCo's two views of one record.
    moco = _cell("MoCo", num_workers=4)
    assert math.isclose(estimate.pretrain_hours(moco, f, "raw"), 10 * IMAGENET * (STEP + 2 * VIEW) / 3600)
    # Where the GPU measured the store loader with the device views (4,000 images/s), that bounds it too.
    _store(figures, store_device=4000.0)
    f = estimate.load_figures(results=figures)
    assert math.isclose(estimate.pretrain_hours(_cell("IR", num_workers=16), f, "jpeg95"), 10 * IMAGENET / 4000 / 3600)


def test_only_image_folders_at_the_store_s_256_px_read_it(figures):
    _store(figures)
    f = estimate.load_figures(results=figures)
    small = _cell("IR", resize=240, crop=224)  # not the store's 256: the files, as today
    assert estimate.pretrain_hours(small, f, "raw") == estimate.pretrain_hours(small, f, "none")
    cifar = PretrainConfig(method="IR", dataset="cifar10", knn_every=0)
    assert estimate.pretrain_hours(cifar, f, "raw") == estimate.pretrain_hours(cifar, f, "none")
    with pytest.raises(ValueError, match="^Unknown store 'lmdb'; choose none, jpeg95, raw.$"):
        estimate.pretrain_hours(cifar, f, "lmdb")


def test_a_missing_store_figure_falls_back_to_named_figures_then_is_one_sentence(figures, tmp_path):
    # No store file at all: cells that would read the store are priced reading the files, as today; the header says.
    f = estimate.load_figures(results=figures)
    assert estimate.pretrain_hours(_cell("IR"), f, "jpeg95") == estimate.pretrain_hours(_cell("IR"), f, "none")
    assert "nor store_loader-cpu.json: cells that would read the prepared store are priced reading the original" in (
        estimate.report(grid_plan.load(PAPER), f)
    )
    _store(figures, device="cpu")  # the loader's cores are the host's: the CPU's file, named in the header
    f = estimate.load_figures(results=figures)
    assert math.isclose(estimate.pretrain_hours(_cell("IR", num_workers=4), f, "jpeg95"), 10 * IMAGENET / 2000 / 3600)
    assert "store_loader-cpu.json: store_jpeg95_decode per core" in estimate.report(grid_plan.load(PAPER), f)
    # A store file without the rate a cell needs: one sentence.
    path = figures / "store_loader-cpu.json"
    doc = json.loads(path.read_text())
    del doc["per_core_images_per_s"]["store_jpeg95_decode"]
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"^The GPU X figures have no store_jpeg95_decode rate .*--store none\.$"):
        estimate.pretrain_hours(_cell("IR"), estimate.load_figures(results=figures), "jpeg95")


def test_k_means_is_priced_from_its_gemm_work(tmp_path):
    _write_figures(tmp_path, "NVIDIA H200", "2026-11-26T11:00:00Z", 5000.0)
    la = PretrainConfig(method="LA", dataset="imagenet", epochs=20, kmeans_k=30_000, knn_every=0)
    flops = 10 * 21 * 2 * IMAGENET * 30_000 * 128  # 10 clusterings of 20 iterations and a last assignment
    assert 2.0e15 < flops < 2.1e15  # "about 2 PFLOP per epoch"
    # 10 epochs after the warm-up at the H200's stated 67 TFLOP/s: 31 s an epoch, not 321.
    assert math.isclose(estimate.kmeans_hours(la, estimate.load_figures(results=tmp_path)), 10 * flops / 67e12 / 3600)
    # A clustering no larger than the measured run costs what it took: CIFAR10's 10 x 1,000 clusters, 2 s an epoch.
    cifar = PretrainConfig(method="LA", dataset="cifar10", epochs=20, knn_every=0)
    assert math.isclose(estimate.kmeans_hours(cifar, estimate.load_figures(results=tmp_path)), 10 * 2.0 / 3600)
    # A device without a stated rate: the rate of its measured run (10 x 21 x 2 x 50,000 x 1,000 x 128 in 2 s).
    _write_figures(tmp_path, "GPU X", "2026-11-27T11:00:00Z", 5000.0)
    rate = 10 * 21 * 2 * 50_000 * 1000 * 128 / 2.0
    assert math.isclose(
        estimate.kmeans_hours(la, estimate.load_figures("GPU X", results=tmp_path)), 10 * flops / rate / 3600
    )


def test_the_committed_figures_price_the_paper_grid_today_and_with_the_store():
    """The package's H200 figures, the store's own included (store_loader-NVIDIA_H200.json, and IR's jpeg95 feed end to
    end as the loader's rate): reading the store costs the evaluation passes less than today's PIL decode of the
    original files, and jpeg95's pretraining is bound by its loader's 3,674 images/s."""
    grid = grid_plan.load(PAPER)
    f = estimate.load_figures()
    assert f.gpu and f.store and f.store.file == "store_loader-NVIDIA_H200.json"
    assert f.store.end_to_end[:2] == (pytest.approx(3673.9, abs=0.1), 8) and f.store.loader == {}  # prefetch-timed
    today = {(p, d): h for p, d, _, h in estimate.estimate_passes(grid, f, "none")}
    for store in ("jpeg95", "raw"):
        stored = {(p, d): h for p, d, _, h in estimate.estimate_passes(grid, f, store)}
        for key in (("kNN monitor", "imagenet"), ("linear evaluation", "imagenet")):
            assert stored[key] < today[key]
        assert stored[("pretraining", "cifar10")] == today[("pretraining", "cifar10")]
