"""The GPU-hours table (ring.reports.tables.cost): compute spent per stage, opened by when the grid will end (the
outlook JSON of ring.cluster.outlook, tests/cluster/test_outlook.py: `ring status`'s lines)."""

import json

import pytest

from ring.plan import eta
from ring.reports import captions
from ring.reports.tables import registry
from ring.reports.tables.cost import gpu_hours
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
    from ring.core.config import PretrainConfig, save
    from ring.plan import estimate
    from tests.plan.estimate.test_figures import _write_figures

    figures_dir = tmp_path / "figures"
    figures_dir.mkdir()
    _write_figures(figures_dir, "GPU X", "2026-11-26T11:00:00Z", 5000.0)
    monkeypatch.setattr(estimate, "RESULTS", figures_dir)
    cells = []
    for stage, cfg in [
        ("pretrain", PretrainConfig(method="MoCo", dataset="cifar10", knn_every=0)),
        ("transfer", None),
    ]:
        cell = tmp_path / "results" / "g" / stage / "cifar10" / "MoCo" / "seed0"
        cell.mkdir(parents=True)
        if cfg:
            save(cfg, cell / "config.yaml")
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
    source = tmp_path / "outlook.json"
    source.write_text(json.dumps({"grid": "smoke", "when": "2026-11-28 23:30 UTC", "lines": lines}))
    out = tmp_path / "gpu_hours"
    assert registry.main(["gpu_hours", "--out", str(out), "--provenance", "--outlook", str(source)]) == 0
    text = out.with_suffix(".md").read_text()
    assert "```text\n" + "\n".join(lines) + "\n```" in text
    assert "grid smoke: 3 done, 1 running, 6 pending; 31 GPU-h spent, 32.5-45.5 GPU-h left" in text
    assert text.index("at 2026-11-28 23:30 UTC") < text.index("grid smoke:") < text.index("| stage")
    assert captions.outlook(out.with_suffix(".md")) == {"when": "2026-11-28 23:30 UTC", "lines": lines}
    gpu_hours([], tmp_path / "plain")  # no outlook given: none written, none read
    assert captions.outlook(tmp_path / "plain.md") == {} and captions.outlook(tmp_path / "absent.md") == {}


@pytest.mark.parametrize("text", ["", "not json", "[]", '{"when": "now", "lines": [1]}', '{"lines": ["a"]}'])
def test_an_outlook_that_is_not_the_commands_json_is_one_sentence_and_leaves_the_old_table(tmp_path, capsys, text):
    source, out = tmp_path / "outlook.json", tmp_path / "gpu_hours"
    source.write_text(text)
    out.with_suffix(".md").write_text("old")
    assert registry.main(["gpu_hours", "--out", str(out), "--outlook", str(source)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"ring: The outlook {source} ") and len(err.strip().splitlines()) == 1, err
    assert "python -m ring.cluster.outlook" in err and out.with_suffix(".md").read_text() == "old"
