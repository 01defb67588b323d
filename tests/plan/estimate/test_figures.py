"""ring.plan.estimate / `ring estimate`: a grid priced from throughput files, torch-free."""

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from ring.core.config import LinclsConfig, PretrainConfig
from ring.plan import estimate
from ring.plan import grid as grid_plan
from tests import ROOT

GRIDS = sorted((ROOT / "ring" / "resources" / "grids").glob("*.yaml"))


def _write_figures(folder: Path, device: str, date: str, rate: float, image_size: int = 224) -> None:
    machine = {"device": device, "torch": "2.11.0", "cuda": "13.0" if device != "cpu" else None, "date": date}
    tag = device.replace(" ", "_")
    for fam in estimate.FAMILIES:
        doc = {
            "machine": machine,
            "method": fam,
            "image_size": image_size,
            "compile": False,
            "images_per_s": {"synthetic": 2 * rate, "device": rate, "pil": rate / 2},
            "eval_images_per_s": 4 * rate,
            "device_augment_views_per_s": 4 * rate,
            "batch": 256,
        }
        if fam == "LA":
            doc.update(kmeans={"n": 50_000, "k": 1000, "clusterings": 10, "iters": 20}, kmeans_recluster_s=2.0)
        (folder / f"throughput_{fam}-{tag}.json").write_text(json.dumps(doc))
    steps = [
        {"ring": "IRing", "n": 50_000, "ratio": 1.1},
        {"ring": "IRing", "n": 1_281_167, "ratio": 1.3},
        {"ring": "MoCoRing", "n": 65_536, "ratio": 1.05},
    ]
    (folder / f"ring_selection-{tag}.json").write_text(json.dumps({"machine": machine, "steps": steps}))


def test_newest_gpu_figures_are_chosen_and_named(tmp_path):
    _write_figures(tmp_path, "cpu", "2026-11-26T10:00:00Z", 10.0, image_size=32)
    _write_figures(tmp_path, "NVIDIA H100 80GB HBM3", "2026-11-26T11:00:00Z", 5000.0)
    figures = estimate.load_figures(results=tmp_path)
    assert figures.device == "NVIDIA H100 80GB HBM3" and figures.feed == "device"
    assert figures.images_per_s["MoCo"] == 5000.0 and "ring_selection-NVIDIA_H100_80GB_HBM3.json" in figures.files
    assert estimate.load_figures("cpu", results=tmp_path).feed == "pil"  # augment: auto on a CPU
    assert "H100" in figures.describe() and "days old" in figures.describe()


def test_pretrain_and_lincls_hours_follow_the_model(tmp_path):
    _write_figures(tmp_path, "GPU X", "2026-11-26T11:00:00Z", 5000.0)
    figures = estimate.load_figures(results=tmp_path)
    moco = PretrainConfig(method="MoCoRing", dataset="cifar10", queue_size=65_536, knn_every=0)
    # 300 epochs of 50k images: the device-tensor step (10,000 images/s) times MoCoRing's ratio at its queue size
    # (measured on device tensors: it prices the step), then the views (the pipeline's 1/5000 s less the step's).
    per_image = 1.05 / 10_000 + (1 / 5000 - 1 / 10_000)
    assert math.isclose(estimate.pretrain_hours(moco, figures), 300 * 50_000 * per_image / 3600)
    ir = PretrainConfig(method="IR", dataset="cifar10", knn_every=1, knn_schedule="every", resize=32, crop=32)
    # At 32 px a ResNet-18 image costs (32/224)^2 of a 224-px one; kNN: 60k images a pass, forward only.
    rate = 5000 * (224 / 32) ** 2
    expected = (300 * 50_000 / rate + 300 * 60_000 / (4 * rate)) / 3600
    assert math.isclose(estimate.pretrain_hours(ir, figures), expected)
    la = PretrainConfig(method="LA", dataset="cifar10", knn_every=0)
    assert math.isclose(estimate.pretrain_hours(la, figures), (300 * 50_000 / 5000 + 290 * 2.0) / 3600)
    imagenet = PretrainConfig(method="MoCo", dataset="imagenet", epochs=200, knn_every=0)
    # Without a JPEG path figure ImageNet is priced as in-memory views (a decoding figure alone is no path).
    (tmp_path / "jpeg_decode-GPU_X.json").write_text(json.dumps({"views_per_s": {"decode_only": 10_000.0}}))
    assert math.isclose(
        estimate.pretrain_hours(imagenet, estimate.load_figures(results=tmp_path)), 200 * 1_281_167 / 5000 / 3600
    )
    # crop_flip: 100 passes over the train split; CMC's own forward figure is its two trunks' network.
    lin = LinclsConfig(dataset="cifar10", method="CMC")
    assert math.isclose(estimate.lincls_hours(lin, figures), (100 * 50_000 + 10_000) / 20_000 / 3600)


@pytest.mark.parametrize("path", GRIDS, ids=[p.stem for p in GRIDS])
def test_every_grid_is_priced(tmp_path, path):
    _write_figures(tmp_path, "GPU X", "2026-11-26T11:00:00Z", 5000.0)
    text = estimate.report(grid_plan.load(path), estimate.load_figures(results=tmp_path))
    assert "GPU X" in text and "total" in text
    rows = estimate.estimate(grid_plan.load(path), estimate.load_figures(results=tmp_path))
    assert rows and all(h > 0 and math.isfinite(h) for *_, h in rows)


def test_missing_figures_fail_with_one_sentence(tmp_path):
    with pytest.raises(ValueError, match="run benchmarks/gpu_suite.sh"):
        estimate.load_figures(results=tmp_path)
    _write_figures(tmp_path, "GPU X", "2026-11-26T11:00:00Z", 5000.0)
    (tmp_path / "throughput_LA-GPU_X.json").unlink()
    with pytest.raises(ValueError, match=r"IR, MoCo, CMC and LA.*GPU X"):
        estimate.load_figures(results=tmp_path)


def test_cli_prices_the_paper_grid_from_committed_figures_without_torch():
    code = (
        "import sys; from ring.cli import main; rc = main(['estimate', '--grid', 'paper']); "
        "assert 'torch' not in sys.modules; sys.exit(rc)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "predicted" in out.stdout and "total" in out.stdout and "imagenet" in out.stdout


def _compiled_figure(folder: Path, fam: str, rates: dict, device: str = "GPU X") -> None:
    machine = {"device": device, "torch": "2.11.0", "cuda": "13.0", "date": "2026-11-26T11:00:00Z"}
    doc = {"machine": machine, "method": fam, "image_size": 224, "compile": True, "images_per_s": rates}
    (folder / f"throughput_{fam}_compile-{device.replace(' ', '_')}.json").write_text(json.dumps(doc))


def test_compile_auto_cells_on_a_gpu_are_priced_from_the_compiled_figures(tmp_path):
    _write_figures(tmp_path, "GPU X", "2026-11-26T11:00:00Z", 5000.0)  # eager: tensors 10,000, pipeline 5,000
    _compiled_figure(tmp_path, "IR", {"synthetic": 20_000.0})  # device tensors only
    _compiled_figure(tmp_path, "MoCo", {"synthetic": 20_000.0, "device": 16_000.0})  # its own pipeline
    figures = estimate.load_figures(results=tmp_path)
    ir = PretrainConfig(method="IR", dataset="cifar10", knn_every=0)  # compile: auto
    # The compiled step plus the eager file's views (1/5000 - 1/10000 s per image, in the training stream).
    assert math.isclose(
        estimate.pretrain_hours(ir, figures), 300 * 50_000 * (1 / 20_000 + 1 / 5000 - 1 / 10_000) / 3600
    )
    moco = PretrainConfig(method="MoCo", dataset="cifar10", knn_every=0)
    assert math.isclose(estimate.pretrain_hours(moco, figures), 300 * 50_000 / 16_000 / 3600)
    off = PretrainConfig(method="MoCo", dataset="cifar10", knn_every=0, compile="off")
    assert math.isclose(estimate.pretrain_hours(off, figures), 300 * 50_000 / 5000 / 3600)
    cmc = PretrainConfig(method="CMC", dataset="cifar10", knn_every=0)  # no compiled CMC file: eager
    assert math.isclose(estimate.pretrain_hours(cmc, figures), 300 * 50_000 / 5000 / 3600)
    text = estimate.report(grid_plan.load(ROOT / "ring" / "resources" / "grids" / "paper.yaml"), figures)
    assert "throughput_IR_compile-GPU_X.json" in text and "throughput_MoCo_compile-GPU_X.json" in text
    assert "no throughput_CMC_compile file" in text
    _write_figures(tmp_path, "cpu", "2026-11-26T12:00:00Z", 10.0, image_size=32)
    _compiled_figure(tmp_path, "IR", {"synthetic": 1e6}, device="cpu")
    cpu = estimate.load_figures("cpu", results=tmp_path)  # compile: auto is off on a CPU
    assert not cpu.compiled and math.isclose(
        estimate.pretrain_hours(dataclasses.replace(ir, crop=32, resize=32), cpu), 300 * 50_000 / 5 / 3600
    )


def test_jpeg_datasets_are_priced_by_the_jpeg_path(tmp_path):
    _write_figures(tmp_path, "GPU X", "2026-11-26T11:00:00Z", 5000.0)
    (tmp_path / "jpeg_decode-GPU_X.json").write_text(
        json.dumps({"image_size": 224, "views_per_s": {"device": 2000.0, "decode_only": 10_000.0}})
    )
    figures = estimate.load_figures(results=tmp_path)
    moco = PretrainConfig(method="MoCo", dataset="imagenet", epochs=200, knn_every=0)
    # The device-tensor step (10,000 images/s), one decode and one resize per image (the path's seconds per view
    # less its decode and the 20,000 views/s of the eager views), then each of MoCo's two views: the resize was
    # charged per view before, twice for MoCo.
    resize = 1 / 2000 - 1 / 10_000 - 1 / 20_000
    per_image = 1 / 10_000 + 1 / 10_000 + resize + 2 / 20_000
    assert math.isclose(estimate.pretrain_hours(moco, figures), 200 * 1_281_167 * per_image / 3600)
    cifar = PretrainConfig(method="MoCo", dataset="cifar10", knn_every=0)  # in memory: the device pipeline
    assert math.isclose(estimate.pretrain_hours(cifar, figures), 300 * 50_000 / 5000 / 3600)
    assert "jpeg_decode-GPU_X.json" in estimate.report(
        grid_plan.load(ROOT / "ring" / "resources" / "grids" / "paper.yaml"), figures
    )


def test_the_cpu_estimate_says_gpu_figures_exist_when_they_do(tmp_path):
    grid = grid_plan.load(ROOT / "ring" / "resources" / "grids" / "paper.yaml")
    _write_figures(tmp_path, "cpu", "2026-11-26T10:00:00Z", 10.0, image_size=32)
    assert "no GPU figures committed" in estimate.report(grid, estimate.load_figures("cpu", results=tmp_path))
    _write_figures(tmp_path, "NVIDIA H100 80GB HBM3", "2026-11-26T11:00:00Z", 5000.0)
    text = estimate.report(grid, estimate.load_figures("cpu", results=tmp_path))
    assert "no GPU figures committed" not in text and "NVIDIA H100 80GB HBM3" in text.splitlines()[0]


def test_a_ring_kind_without_a_measured_ratio_is_refused(tmp_path):
    _write_figures(tmp_path, "GPU X", "2026-11-26T11:00:00Z", 5000.0)
    steps = [{"ring": "IRing", "n": 50_000, "ratio": 1.1}]  # no MoCoRing row
    (tmp_path / "ring_selection-GPU_X.json").write_text(json.dumps({"steps": steps}))
    figures = estimate.load_figures(results=tmp_path)
    moco_ring = PretrainConfig(method="MoCoRing", dataset="cifar10", queue_size=65_536, knn_every=0)
    with pytest.raises(
        ValueError,
        match=r"^MoCoRing's Ring kind MoCoRing has no measured step-time ratio in the GPU X figures \(they have "
        r"IRing\); measure it on that device with `RING_BENCH_RESULTS=DIR python benchmarks/ring_selection.py "
        r"--method MoCoRing` \(DIR: ring/resources/figures\), or price the grid with figures that have it "
        r"\(`--device cpu` reads the CPU's\)\.$",
    ):
        estimate.pretrain_hours(moco_ring, figures)
    assert estimate.pretrain_hours(PretrainConfig(method="IRing", dataset="cifar10", knn_every=0), figures) > 0


def test_a_later_folders_ring_ratios_add_their_kinds_and_keep_the_others(tmp_path):
    """A plug-in's ring_selection file (its own kind) is read beside the package's, kind by kind, not instead of it."""
    package, plugin = tmp_path / "package", tmp_path / "plugin"
    package.mkdir(), plugin.mkdir()
    _write_figures(package, "GPU X", "2026-11-26T11:00:00Z", 5000.0)
    steps = [{"ring": "IRing", "n": 50_000, "ratio": 1.1}, {"ring": "MoCoRing", "n": 65_536, "ratio": 1.2}]
    (package / "ring_selection-GPU_X.json").write_text(json.dumps({"steps": steps}))
    mine = [{"ring": "InBatchRing", "n": 256, "ratio": 1.5}, {"ring": "MoCoRing", "n": 65_536, "ratio": 1.3}]
    (plugin / "ring_selection-GPU_X.json").write_text(json.dumps({"steps": mine}))
    figures = estimate.load_figures(results=package, extra=[plugin])
    assert figures.ring_ratios == {"IRing": [(50_000, 1.1)], "MoCoRing": [(65_536, 1.3)], "InBatchRing": [(256, 1.5)]}
    assert figures.ring_files == {
        "IRing": "ring_selection-GPU_X.json",
        "MoCoRing": str(plugin / "ring_selection-GPU_X.json"),
        "InBatchRing": str(plugin / "ring_selection-GPU_X.json"),
    }
