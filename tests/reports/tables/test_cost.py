"""The GPU-hours table (ring.reports.tables.cost): compute spent per stage, and when the grid will end, opened by the
same lines as `ring status` (ring.plan.eta's arithmetic, on a grid with finished, running and pending cells)."""

import json
import os
import socket

import pytest
import yaml

from ring import resources
from ring.cluster import batch, progress
from ring.plan import eta
from ring.reports import captions
from ring.reports.tables import cost, registry
from ring.reports.tables.cost import gpu_hours
from tests.cluster.test_batch import _finished_pretraining, _grid
from tests.plan.test_eta import CELLS


def test_gpu_hours_add_up_requeued_segments(tmp_path):
    cells = []
    for stage, gpus, walls, restarts in [("pretrain", 2, [1800, 1800], [0, 1]), ("lincls", 1, [360], [0])]:
        cell = tmp_path / "results" / "g" / stage / "cifar10" / "IR" / "seed0"
        cell.mkdir(parents=True)
        segments = [{"wall_s": w, "gpus": gpus, "restart_count": r} for w, r in zip(walls, restarts, strict=True)]
        doc = {
            "segments": segments,
            "wall_s": sum(walls),
            "gpu_hours": sum(walls) * gpus / 3600,
            "requeues": max(restarts),
        }
        (cell / "provenance.json").write_text(json.dumps(doc))
        cells.append(cell / "provenance.json")
    summary = gpu_hours(cells, tmp_path / "gpu_hours")
    assert summary.loc["pretrain", "gpu_hours"] == pytest.approx(2.0)
    assert summary.loc["total", "gpu_hours"] == pytest.approx(2.1)
    assert summary.loc["pretrain", "requeues"] == 1 and summary.loc["total", "cells"] == 2
    assert (
        "| pretrain |       1 |          2 |          1 |    1.000 |       2.000 |"
        in (tmp_path / "gpu_hours.md").read_text()
    )


def test_gpu_hours_show_predicted_beside_measured(tmp_path, monkeypatch):
    from ring.core import config as C
    from ring.plan import estimate
    from tests.plan.estimate.test_figures import _write_figures

    figures_dir = tmp_path / "figures"
    figures_dir.mkdir()
    _write_figures(figures_dir, "GPU X", "2026-11-26T11:00:00Z", 5000.0)
    monkeypatch.setattr(estimate, "RESULTS", figures_dir)
    cells = []
    for stage, cfg in [
        ("pretrain", C.PretrainConfig(method="MoCo", dataset="cifar10", knn_every=0)),
        ("transfer", None),
    ]:
        cell = tmp_path / "results" / "g" / stage / "cifar10" / "MoCo" / "seed0"
        cell.mkdir(parents=True)
        if cfg:
            C.save(cfg, cell / "config.yaml")
        doc = {
            "segments": [{"wall_s": 3600, "gpus": 1, "restart_count": 0}],
            "wall_s": 3600,
            "gpu_hours": 1.0,
            "requeues": 0,
        }
        (cell / "provenance.json").write_text(json.dumps(doc))
        cells.append(cell / "provenance.json")
    summary = gpu_hours(cells, tmp_path / "gpu_hours")
    expected = 300 * 50_000 / 5000 / 3600  # ring.plan.estimate's model: epochs x images / images per second
    assert summary.loc["pretrain", "predicted_gpu_hours"] == f"{expected:.3f}"
    assert summary.loc["transfer", "predicted_gpu_hours"] == "n/a"  # a stage the model does not price
    assert summary.loc["total", "predicted_gpu_hours"] == f"{expected:.3f}"
    assert "GPU X figures" in (tmp_path / "gpu_hours.md").read_text()


def test_gpu_hours_count_each_job_once_the_runs_an_edit_set_aside_included(tmp_path):
    """Issue 40 item 6: an edited cell's earlier jobs (its run kept under runs/<hash>/) were counted zero times."""
    cell = tmp_path / "results" / "g" / "pretrain" / "digits" / "IR" / "seed0"
    files = []
    for folder, hours in ((cell, 1.0), (cell / "runs" / "0123abcd", 2.0), (cell / "runs" / "4567ef01", 0.5)):
        folder.mkdir(parents=True)
        doc = {"segments": [{"wall_s": 3600 * hours}], "wall_s": 3600 * hours, "gpu_hours": hours, "requeues": 0}
        (folder / "provenance.json").write_text(json.dumps(doc))
        files.append(folder / "provenance.json")
    summary = gpu_hours(files, tmp_path / "gpu_hours")
    assert summary.loc["pretrain", "gpu_hours"] == 3.5 and summary.loc["pretrain", "cells"] == 1
    assert summary.loc["pretrain", "segments"] == 3 and summary.loc["total", "gpu_hours"] == 3.5
    assert "each run an edit set aside in it" in (tmp_path / "gpu_hours.md").read_text()


def test_the_table_opens_with_the_outlook_and_the_caption_reads_it_back(tmp_path):
    """eta's grid of finished, running and pending cells: its lines, as computed, open the table's Markdown (before
    the per-stage table), and the report's caption param reads exactly them back."""
    lines = eta.outlook(CELLS).lines("smoke")
    gpu_hours([], tmp_path / "gpu_hours", lines)
    text = (tmp_path / "gpu_hours.md").read_text()
    assert "```text\n" + "\n".join(lines) + "\n```" in text
    assert "grid smoke: 3 done, 1 running, 7 pending; 31 GPU-h spent, 32.5-45.5 GPU-h left" in text
    assert text.index("grid smoke:") < text.index("| stage")
    read = captions.outlook(tmp_path / "gpu_hours.md")
    assert read["lines"] == lines and read["when"].endswith(" UTC")
    gpu_hours([], tmp_path / "plain")  # no grid given: no outlook, none read
    assert captions.outlook(tmp_path / "plain.md") == {} and captions.outlook(tmp_path / "absent.md") == {}


def _provenance(cell, hours):
    cell.mkdir(parents=True, exist_ok=True)
    doc = {"segments": [{"wall_s": 1800 * hours, "gpus": 2}], "wall_s": 1800 * hours, "gpu_hours": hours, "requeues": 0}
    (cell / "provenance.json").write_text(json.dumps(doc))
    return cell / "provenance.json"


def test_ring_table_gpu_hours_tells_the_grids_end_as_ring_status_does(tmp_path, monkeypatch, capsys):
    """A tiny grid (digits x IR, MoCoRing x seeds 0, 1): IR seed 0's pretraining finished (2 GPU-h, twice its price),
    IR seed 1's runs (0.5 GPU-h in provenance, its running segment 0.5 GPU-h more, 1 of 2 epochs in 0.25 h on 2
    GPUs), the rest pending; pretraining priced 1 GPU-h, linear evaluation 0.25 (one GPU)."""
    grids, results = _grid(tmp_path), tmp_path / "results"
    prices = {"pretrain": 1.0, "lincls": 0.25}
    monkeypatch.setattr(batch.E, "predict_cell", lambda stage, cfg, figures, store=None: prices[stage])
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump({"slurm": {"pretrain": {"gpus_per_node": 2}, "lincls": {"gpus_per_node": 1}}}))
    configs = [str(resources.CONFIG), str(resources.CLUSTER), str(site)]
    done, running = (results / "tiny" / "pretrain" / "digits" / "IR" / f"seed{s}" for s in (0, 1))
    files = [_provenance(done, 2.0), _provenance(running, 0.5)]
    _finished_pretraining(done)
    marker = {"state": "running", "pid": os.getpid(), "host": socket.gethostname(), "started": "2026-11-28T00:00:00"}
    (running / progress.MARKER).write_text(json.dumps(marker))
    rate = {"epoch": 1, "epochs": 2, "segment_epochs": 1.0, "segment_wall_s": 900.0, "gpus": 2}
    (running / progress.PROGRESS).write_text(json.dumps(rate))
    where = ["--grid", "tiny", "--grids-dir", str(grids), "--results", str(results), "--configfile", *configs]

    out = tmp_path / "tables" / "gpu_hours"
    assert registry.main(["gpu_hours", "--out", str(out), "--provenance", *map(str, files), *where]) == 0
    lines = captions.outlook(out.with_suffix(".md"))["lines"]
    # Pretraining: 2 + 0.5 + 0.5 spent; left 0.25 h x 2 GPUs running, 2 pending x 1 GPU-h x the finished cell's 2x.
    # Linear evaluation: uncalibrated, 4 x 0.25.  Floor: a MoCoRing chain, 2 GPU-h on 2 GPUs then 0.25 h; ceiling:
    # 5.5 GPU-h at the 2 GPUs running now.
    assert lines == [
        "pretrain: 1 done, 1 running, 2 pending; 3 GPU-h spent, 4.5 GPU-h left",
        "lincls: 0 done, 0 running, 4 pending; 0 GPU-h spent, 1 GPU-h left",
        "grid tiny: 1 done, 1 running, 6 pending; 3 GPU-h spent, 5.5 GPU-h left; 1.25-2.75 h left (at least the "
        "longest pretrain->lincls chain, 75 min; at most at the 2 GPUs it holds now); prices calibrated on the grid's "
        "1 finished cells",
    ]
    assert capsys.readouterr().out.startswith("\n".join(lines))  # and printed first
    # `ring status` on the same grid ends with the same lines: one computation, not two.
    assert batch.main(["status", *where]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert all(line in printed for line in lines), printed


def test_a_grid_the_gate_refuses_is_one_sentence_and_leaves_the_old_table(tmp_path, capsys):
    out = tmp_path / "gpu_hours"
    out.with_suffix(".md").write_text("old")
    assert registry.main(["gpu_hours", "--out", str(out), "--grid", "nosuchgrid", "--grids-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ring: ") and len(err.strip().splitlines()) == 1 and "nosuchgrid" in err
    assert out.with_suffix(".md").read_text() == "old"
    assert issubclass(cost.OutlookError, ValueError)
