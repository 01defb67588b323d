"""ring.plan.estimate / `python -m ring.cluster.batch estimate`: a grid priced from throughput files, torch-free."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from ring.core import config as C
from ring.plan import estimate as E
from ring.plan import grid as G

ROOT = Path(__file__).resolve().parents[1]
GRIDS = sorted((ROOT / "workflow" / "grids").glob("*.yaml"))


def _write_figures(folder: Path, device: str, date: str, rate: float, image_size: int = 224) -> None:
    machine = {"device": device, "torch": "2.11.0", "cuda": "13.0" if device != "cpu" else None, "date": date}
    tag = device.replace(" ", "_")
    for fam in E.FAMILIES:
        doc = {"machine": machine, "method": fam, "image_size": image_size, "compile": False,
               "images_per_s": {"synthetic": 2 * rate, "device": rate, "pil": rate / 2}, "eval_images_per_s": 4 * rate}
        if fam == "LA":
            doc.update(kmeans={"n": 50_000, "k": 1000, "clusterings": 10, "iters": 20}, kmeans_recluster_s=2.0)
        (folder / f"throughput_{fam}-{tag}.json").write_text(json.dumps(doc))
    steps = [{"ring": "IRing", "n": 50_000, "ratio": 1.1}, {"ring": "IRing", "n": 1_281_167, "ratio": 1.3},
             {"ring": "MoCoRing", "n": 65_536, "ratio": 1.05}]
    (folder / f"ring_selection-{tag}.json").write_text(json.dumps({"machine": machine, "steps": steps}))


def test_newest_gpu_figures_are_chosen_and_named(tmp_path):
    _write_figures(tmp_path, "cpu", "2026-11-26T10:00:00Z", 10.0, image_size=32)
    _write_figures(tmp_path, "NVIDIA H100 80GB HBM3", "2026-11-26T11:00:00Z", 5000.0)
    figures = E.load_figures(results=tmp_path)
    assert figures.device == "NVIDIA H100 80GB HBM3" and figures.feed == "device"
    assert figures.images_per_s["MoCo"] == 5000.0 and "ring_selection-NVIDIA_H100_80GB_HBM3.json" in figures.files
    assert E.load_figures("cpu", results=tmp_path).feed == "pil"  # augment: auto on a CPU
    assert "H100" in figures.describe() and "days old" in figures.describe()


def test_pretrain_and_lincls_hours_follow_the_model(tmp_path):
    _write_figures(tmp_path, "GPU X", "2026-11-26T11:00:00Z", 5000.0)
    figures = E.load_figures(results=tmp_path)
    moco = C.PretrainConfig(method="MoCoRing", dataset="cifar10", queue_size=65_536, knn_every=0)
    # 300 epochs of 50k images at 5000 images/s, times MoCoRing's ratio at its queue size.
    assert math.isclose(E.pretrain_hours(moco, figures), 300 * 50_000 / 5000 * 1.05 / 3600)
    ir = C.PretrainConfig(method="IR", dataset="cifar10", knn_every=1, resize=32, crop=32)
    # At 32 px a ResNet-18 image costs (32/224)^2 of a 224-px one; kNN: 60k images a pass, forward only.
    rate = 5000 * (224 / 32) ** 2
    expected = (300 * 50_000 / rate + 300 * 60_000 / (4 * rate)) / 3600
    assert math.isclose(E.pretrain_hours(ir, figures), expected)
    la = C.PretrainConfig(method="LA", dataset="cifar10", knn_every=0)
    assert math.isclose(E.pretrain_hours(la, figures), (300 * 50_000 / 5000 + 290 * 2.0) / 3600)
    (tmp_path / "jpeg_decode-GPU_X.json").write_text(json.dumps({"views_per_s": {"decode_only": 10_000.0}}))
    figures = E.load_figures(results=tmp_path)
    imagenet = C.PretrainConfig(method="MoCo", dataset="imagenet", epochs=200, knn_every=0)
    assert math.isclose(E.pretrain_hours(imagenet, figures), 200 * 1_281_167 * (1 / 5000 + 1 / 10_000) / 3600)
    lin = C.LinclsConfig(dataset="cifar10", method="CMC")  # crop_flip: 100 passes over the train split, two trunks
    assert math.isclose(E.lincls_hours(lin, figures), (100 * 50_000 + 10_000) * 2 / 20_000 / 3600)


@pytest.mark.parametrize("path", GRIDS, ids=[p.stem for p in GRIDS])
def test_every_grid_is_priced(tmp_path, path):
    _write_figures(tmp_path, "GPU X", "2026-11-26T11:00:00Z", 5000.0)
    text = E.report(G.load(path), E.load_figures(results=tmp_path))
    assert "GPU X" in text and "total" in text
    rows = E.estimate(G.load(path), E.load_figures(results=tmp_path))
    assert rows and all(h > 0 and math.isfinite(h) for *_, h in rows)


def test_missing_figures_fail_with_one_sentence(tmp_path):
    with pytest.raises(ValueError, match="run benchmarks/gpu_suite.sh"):
        E.load_figures(results=tmp_path)
    _write_figures(tmp_path, "GPU X", "2026-11-26T11:00:00Z", 5000.0)
    (tmp_path / "throughput_LA-GPU_X.json").unlink()
    with pytest.raises(ValueError, match=r"IR, MoCo, CMC and LA.*GPU X"):
        E.load_figures(results=tmp_path)


def test_cli_prices_the_paper_grid_from_committed_figures_without_torch():
    code = ("import sys; from ring import batch; rc = batch.main(['estimate', '--grid', 'paper']); "
            "assert 'torch' not in sys.modules; sys.exit(rc)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "predicted" in out.stdout and "total" in out.stdout and "imagenet" in out.stdout
