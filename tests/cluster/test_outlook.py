"""ring.cluster.outlook: when a grid will end, `ring status`'s lines as JSON, and the gpu_hours table opened by them
(ring.plan.eta's arithmetic on a grid with finished, running and pending cells)."""

import json
import os
import socket

import yaml

from ring import resources
from ring.cluster import batch, outlook, progress
from ring.reports import captions
from ring.reports.tables import registry
from tests.cluster.test_batch import _finished_pretraining, _grid


def _provenance(cell, hours):
    cell.mkdir(parents=True, exist_ok=True)
    doc = {"segments": [{"wall_s": 1800 * hours, "gpus": 2}], "wall_s": 1800 * hours, "gpu_hours": hours, "requeues": 0}
    (cell / "provenance.json").write_text(json.dumps(doc))
    return cell / "provenance.json"


def test_the_gpu_hours_table_tells_the_grids_end_as_ring_status_does(tmp_path, monkeypatch, capsys):
    """A tiny grid (digits x IR, MoCoRing x seeds 0, 1): IR seed 0's pretraining finished (2 GPU-h, twice its price),
    IR seed 1's runs (0.5 GPU-h in provenance, its running segment 0.5 GPU-h more, 1 of 2 epochs in 0.25 h on 2
    GPUs), the rest pending; pretraining priced 1 GPU-h, linear evaluation 0.25 (one GPU)."""
    grids, results = _grid(tmp_path), tmp_path / "results"
    prices = {"pretrain": 1.0, "lincls": 0.25}
    monkeypatch.setattr(batch.estimate, "predict_cell", lambda stage, cfg, figures, store=None: prices[stage])
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

    assert outlook.main(where) == 0
    printed = json.loads(capsys.readouterr().out)
    # Pretraining: 2 + 0.5 + 0.5 spent; left 0.25 h x 2 GPUs running, 2 pending x 1 GPU-h x the finished cell's 2x.
    # Linear evaluation: uncalibrated, 4 x 0.25.  Floor: a MoCoRing chain, 2 GPU-h on 2 GPUs then 0.25 h (above
    # 5.5 GPU-h over the 3 x 2 + 4 GPUs of the cells left); ceiling: one cell at a time, 0.25 + 2 x 1 + 4 x 0.25 h.
    lines = [
        "pretrain: 1 done, 1 running, 2 pending; 3 GPU-h spent, 4.5 GPU-h left",
        "lincls: 0 done, 0 running, 4 pending; 0 GPU-h spent, 1 GPU-h left",
        "grid tiny: 1 done, 1 running, 6 pending; 3 GPU-h spent, 5.5 GPU-h left; 1.25-3.25 h left (at least the "
        "longest pretrain->lincls chain, 75 min, and the work over the 10 GPUs its cells left hold at once, 33 min; "
        "at most one cell at a time on its own GPUs); prices calibrated on the grid's 1 finished cells",
    ]
    assert printed["grid"] == "tiny" and printed["lines"] == lines and printed["when"].endswith(" UTC")
    # `ring status` on the same grid ends with the same lines: one computation, not two.
    assert batch.main(["status", *where]) == 0
    status = capsys.readouterr().out.splitlines()
    assert all(line in status for line in lines), status
    # The table, fed the JSON as the workflow's rule pipes it, opens with them and the caption reads them back.
    source, out = tmp_path / "outlook.json", tmp_path / "tables" / "gpu_hours"
    source.write_text(json.dumps(printed))
    assert (
        registry.main(["gpu_hours", "--out", str(out), "--provenance", *map(str, files), "--outlook", str(source)]) == 0
    )
    assert captions.outlook(out.with_suffix(".md")) == {"when": printed["when"], "lines": lines}
    assert capsys.readouterr().out.startswith("\n".join(lines))  # printed first too


def test_a_grid_the_gate_refuses_is_one_sentence(tmp_path, capsys):
    assert outlook.main(["--grid", "nosuchgrid", "--grids-dir", str(tmp_path), "--results", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ring: ") and len(err.strip().splitlines()) == 1 and "nosuchgrid" in err
