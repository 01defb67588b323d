"""`python -m ring.cluster.batch status` on local runs: done / running (epoch, kNN) / pending / failed / missing."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from ring.cluster import batch, cells, launch, progress, slurm
from ring.core import config as config_io
from ring.plan import grid as grid_plan
from tests.helpers import TINY_PRETRAIN, TINY_PRETRAIN_BLOCK, launch_command

GRID = {
    "datasets": ["digits"],
    "methods": ["IR", "MoCoRing"],
    "seeds": [0, 1],
    "pretrain": {"all": {**TINY_PRETRAIN_BLOCK, "epochs": 2}},
}


def _grid(tmp_path: Path, values=GRID) -> Path:
    grids = tmp_path / "grids"
    grids.mkdir(exist_ok=True)
    (grids / "tiny.yaml").write_text(yaml.safe_dump({k: v for k, v in values.items() if k != "dataset"}))
    return grids


def _finished_pretraining(cell: Path, values=GRID, name="tiny", method="IR", seed=0, config_hash=None) -> None:
    """encoder.pt with the checksum record ring.pretrain writes, made with the grid's config of the cell."""
    from ring.core.files import record_checksums

    cfg = grid_plan.from_dict(name, values).pretrain_config("digits", method, seed, "data")
    (cell / "encoder.pt").write_bytes(b"trunk")
    record_checksums(cell, ["encoder.pt"], config_hash=config_hash or config_io.config_hash(cfg))


def _status(tmp_path, grids, capsys) -> list[str]:
    assert (
        batch.main(["status", "--grid", "tiny", "--grids-dir", str(grids), "--results", str(tmp_path / "results")]) == 0
    )
    return capsys.readouterr().out.splitlines()


def test_status_reads_local_cells_from_their_folders(tmp_path, capsys):
    grids = _grid(tmp_path)

    def cell(stage, method, seed):
        return tmp_path / "results" / "tiny" / stage / "digits" / method / f"seed{seed}"

    for c in (cell("pretrain", m, s) for m in ("IR", "MoCoRing") for s in (0, 1)):
        c.mkdir(parents=True)
        (c / "config.yaml").write_text("epochs: 10\n")
    _finished_pretraining(cell("pretrain", "IR", 0))
    running = cell("pretrain", "IR", 1)
    (running / progress.MARKER).write_text(
        json.dumps({"state": "running", "pid": os.getpid(), "host": os.uname().nodename})
    )
    (running / progress.LOG).write_text(
        '{"epoch": 0, "loss": 9.1, "knn_top1": 38.25}\n{"epoch": 1, "loss": 8.7}\n{"epo'
    )
    (cell("pretrain", "MoCoRing", 0) / progress.MARKER).write_text(
        json.dumps({"state": "failed", "pid": 1, "host": "x", "error": "exit status 1"})
    )
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())  # no process can have a larger id
    (cell("pretrain", "MoCoRing", 1) / progress.MARKER).write_text(
        json.dumps({"state": "running", "pid": pid_max + 1, "host": os.uname().nodename})
    )
    cell("lincls", "IR", 0).mkdir(parents=True)
    (cell("lincls", "IR", 0) / "config.yaml").write_text("epochs: 100\n")
    lines = _status(tmp_path, grids, capsys)
    states = {tuple(line.split()[1:4]) + (line.split()[0],): line.split()[4] for line in lines[:-1]}
    assert states[("digits", "IR", "seed0", "pretrain")] == "done"
    assert states[("digits", "IR", "seed1", "pretrain")] == "running"
    assert "epoch 2/10, kNN 38.25%" in lines[1]  # the last whole line's epoch, the last kNN measured
    assert states[("digits", "MoCoRing", "seed0", "pretrain")] == "failed" and "exit status 1" in lines[2]
    assert states[("digits", "MoCoRing", "seed1", "pretrain")] == "failed" and "is gone" in lines[3]
    assert states[("digits", "IR", "seed0", "lincls")] == "pending"
    assert lines[-1] == "total 8 stage runs: 1 done, 0 stale, 1 running, 1 pending, 2 failed, 3 missing"


@pytest.mark.slow
def test_status_of_a_local_cell_mid_run_then_killed(tmp_path, capsys):
    # 16x16 views, 10 steps an epoch: the first epoch's log line is the point, not the pixels.
    grids = _grid(
        tmp_path,
        {
            **GRID,
            "methods": ["IR"],
            "seeds": [0],
            "pretrain": {"all": {**TINY_PRETRAIN_BLOCK, "epochs": 2, "resize": 16, "crop": 16, "batch_size": 128}},
        },
    )
    cell = tmp_path / "results" / "tiny" / "pretrain" / "digits" / "IR" / "seed0"
    cell.mkdir(parents=True)
    config_io.save(grid_plan.load(grids / "tiny.yaml").pretrain_config("digits", "IR", 0, "data"), cell / "config.yaml")
    run = subprocess.Popen(
        launch_command(cell),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 600
        while not progress.last_records(cell / progress.LOG):
            assert run.poll() is None and time.monotonic() < deadline, "pretraining ended before its first epoch"
            time.sleep(0.2)
        run.send_signal(signal.SIGSTOP)  # held after its first epoch, so the view cannot race the run
        lines = _status(tmp_path, grids, capsys)
        assert lines[0].split()[4] == "running" and "epoch 1/2, kNN " in lines[0] and f"pid {run.pid}" in lines[0]
        assert lines[-1] == "total 2 stage runs: 0 done, 0 stale, 1 running, 0 pending, 0 failed, 1 missing"
    finally:
        run.kill()  # no chance to clean up, as when a node is lost
        run.wait()
    lines = _status(tmp_path, grids, capsys)
    assert lines[0].split()[4] == "failed" and f"pid {run.pid} on {os.uname().nodename} is gone (epoch 1/2" in lines[0]


def test_local_launcher_marks_a_failed_stage_and_clears_a_finished_one(tmp_path):
    # A config the plan's checks refuse (here: none at all) never starts a stage: no marker, still missing.
    bad = tmp_path / "bad"
    assert (
        launch.main(["pretrain", "--cell", str(bad), "--", "--config", str(tmp_path / "none.yaml"), "--out", str(bad)])
        == 1
    )
    assert progress.local_state(bad) == ("missing", "")
    # One the checks pass but the stage refuses (its dataset is not under data_root): marked failed.
    failing = tmp_path / "failing"
    failing.mkdir()
    config_io.save(
        config_io.PretrainConfig(
            method="IR", **{**TINY_PRETRAIN, "dataset": "cifar10", "data_root": str(tmp_path / "no-data")}
        ),
        failing / "config.yaml",
    )
    assert (
        launch.main(
            ["pretrain", "--cell", str(failing), "--", "--config", str(failing / "config.yaml"), "--out", str(failing)]
        )
        == 1
    )
    assert progress.local_state(failing) == ("failed", f"pid {os.getpid()} on {os.uname().nodename}: exit status 1")
    good = tmp_path / "good"
    with progress.running(good) as run:
        assert progress.local_state(good)[0] == "running"
        run["status"] = 0
    assert progress.local_state(good) == ("missing", "") and not (good / progress.MARKER).exists()


def test_a_grid_file_anywhere_is_a_grid_and_its_stem_names_the_results_folder(tmp_path, capsys):
    grids = _grid(tmp_path)  # ring/resources/grids stand-in holding tiny.yaml
    mine = tmp_path / "elsewhere" / "mine.yaml"
    mine.parent.mkdir()
    mine.write_text(yaml.safe_dump(GRID))
    (tmp_path / "results" / "mine" / "pretrain" / "digits" / "IR" / "seed0").mkdir(parents=True)
    _finished_pretraining(tmp_path / "results" / "mine" / "pretrain" / "digits" / "IR" / "seed0", name="mine")
    args = ["--grids-dir", str(grids), "--results", str(tmp_path / "results")]
    assert batch.main(["status", "--grid", str(mine), *args]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:5] == ["pretrain", "digits", "IR", "seed0", "done"] and lines[-1].startswith("total 8 ")
    # A file whose stem is a named grid's would share that grid's results folder: refused in one sentence.
    clash = tmp_path / "elsewhere" / "tiny.yaml"
    clash.write_text(yaml.safe_dump(GRID))
    assert batch.main(["status", "--grid", str(clash), *args]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "would write results/tiny/, which belongs to" in err
    assert batch.main(["status", "--grid", "tinny", *args]) == 1
    err = capsys.readouterr().err
    assert "grid='tinny' has no file" in err and "choose one of tiny or give the path of a grid file" in err


def _fake_slurm(bin_dir: Path, calls: Path, sacct_lines: list[str], squeue_lines: list[str]) -> None:
    """sacct and squeue that log their arguments (one line per call) and print fixed records."""
    bin_dir.mkdir()
    for name, lines in (("sacct", sacct_lines), ("squeue", squeue_lines)):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\nprintf "%s\\n" {" ".join(map(repr, lines))}\n')
        script.chmod(0o755)


def test_status_asks_sacct_once_for_every_recorded_job_of_the_grid(tmp_path, capsys, monkeypatch):
    grids = _grid(tmp_path)
    results = tmp_path / "results" / "tiny"

    def cell(stage, method, seed):
        return results / stage / "digits" / method / f"seed{seed}"

    long_ago = "2020-01-01T00:00:00+00:00"
    for (stage, method, seed), job_id in {
        ("pretrain", "IR", 0): "201",
        ("pretrain", "IR", 1): "202_0",
        ("pretrain", "MoCoRing", 0): "202_1",
        ("pretrain", "MoCoRing", 1): "203",
        ("lincls", "IR", 0): "204",
        ("lincls", "IR", 1): "205",
        ("lincls", "MoCoRing", 0): "206",
    }.items():
        slurm.write_record(cell(stage, method, seed), job_id, tmp_path / "logs", stage)
    for stage, method, seed in (("lincls", "IR", 1), ("lincls", "MoCoRing", 0)):  # submitted long ago
        record = cell(stage, method, seed) / "slurm" / "job.json"
        record.write_text(json.dumps({**json.loads(record.read_text()), "submitted": long_ago}))
    # An output: SLURM is not asked about 206 (it records nothing it was made from, so it is stale, not done).
    (cell("lincls", "MoCoRing", 0) / "metrics.json").write_text("{}")
    calls = tmp_path / "calls.txt"
    # 202_1 still pending shows as the array's range; 204 and 205 are unknown to sacct, 204 queued per squeue.
    _fake_slurm(
        tmp_path / "bin", calls, ["201|RUNNING", "202_0|COMPLETED", "202_[1]|PENDING", "203|FAILED"], ["204|PENDING"]
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    lines = _status(tmp_path, grids, capsys)
    rows = [line for line in lines[:-1] if not line.startswith(("pretrain:", "lincls:", "grid "))]  # not the outlook
    states = {(line.split()[0], line.split()[2], line.split()[3]): line.split()[4] for line in rows}
    assert states == {
        ("pretrain", "IR", "seed0"): "running",
        ("pretrain", "IR", "seed1"): "gone",
        ("pretrain", "MoCoRing", "seed0"): "pending",
        ("pretrain", "MoCoRing", "seed1"): "failed",
        ("lincls", "IR", "seed0"): "pending",
        ("lincls", "IR", "seed1"): "gone",
        ("lincls", "MoCoRing", "seed0"): "stale",
        ("lincls", "MoCoRing", "seed1"): "missing",
    }
    sacct, squeue = (
        [line for line in calls.read_text().splitlines() if line.startswith("sacct")],
        [line for line in calls.read_text().splitlines() if line.startswith("squeue")],
    )
    assert len(sacct) == 1 and len(squeue) == 1, calls.read_text()
    assert sacct[0].split("-j ")[1].split()[0].split(",") == ["201", "202_0", "202_1", "203", "204", "205"]


def test_status_lists_every_study_cell_by_method_and_variant(tmp_path, capsys):
    study = {
        "dataset": "digits",
        "methods": ["IR", "IRing"],
        "seeds": [0, 1],
        "variants": {"base": {}, "wl50": {"ring_w_l": [0.0, 50.0]}},
        "variant_methods": {"base": ["IR"], "wl50": ["IRing"]},
    }
    grids = _grid(tmp_path, {**GRID, "studies": {"ring_window": study}})
    folder = tmp_path / "results" / "tiny" / "study" / "ring_window" / "digits"
    (folder / "IR" / "base" / "seed0").mkdir(parents=True)
    (folder / "IR" / "base" / "seed0" / "encoder.pt").write_bytes(b"")
    (folder / "IRing" / "wl50" / "seed1").mkdir(parents=True)
    (folder / "IRing" / "wl50" / "seed1" / "config.yaml").write_text("epochs: 15\n")
    lines = _status(tmp_path, grids, capsys)
    study_rows = {(line.split()[2], line.split()[3]): line.split()[4] for line in lines if line.startswith("study")}
    assert study_rows == {
        ("IR/base", "seed0"): "done",
        ("IR/base", "seed1"): "missing",
        ("IRing/wl50", "seed0"): "missing",
        ("IRing/wl50", "seed1"): "pending",
    }
    assert lines[-1] == "total 12 stage runs: 1 done, 0 stale, 0 running, 1 pending, 0 failed, 10 missing"


def test_status_shows_cells_the_grid_no_longer_describes_as_stale_and_a_failed_data_check_as_failed(tmp_path, capsys):
    grids = _grid(tmp_path)
    results = tmp_path / "results" / "tiny"

    def cell(stage, method, seed):
        return results / stage / "digits" / method / f"seed{seed}"

    for method, seed in (("IR", 0), ("IR", 1)):
        cell("pretrain", method, seed).mkdir(parents=True)
    _finished_pretraining(cell("pretrain", "IR", 0))
    _finished_pretraining(cell("pretrain", "IR", 1), seed=1, config_hash="0" * 16)  # made before the grid was edited
    # IR seed 0's evaluation: of this encoder, but with another linear-evaluation config than the grid's.
    lin = cell("lincls", "IR", 0)
    lin.mkdir(parents=True)
    (lin / "metrics.json").write_text(
        json.dumps({"dataset": "digits", "method": "IR", "seed": 0, "top1": 50.0, "config_hash": "1" * 16})
    )
    (results / "data").mkdir()
    (results / "data" / "digits.log").write_text("ring: Dataset digits is corrupted: replace it.\n")
    lines = _status(tmp_path, grids, capsys)
    rows = {(line.split()[0], line.split()[2], line.split()[3]): line for line in lines[:-1]}
    assert rows[("pretrain", "IR", "seed0")].split()[4] == "done"
    stale = rows[("pretrain", "IR", "seed1")]
    assert (
        stale.split()[4] == "stale"
        and "made with another config than the grid's; the next all_tables reruns it" in stale
    )
    assert rows[("lincls", "IR", "seed0")].split()[4] == "stale"
    failed = rows[("pretrain", "MoCoRing", "seed0")]
    assert failed.split()[4] == "failed" and failed.endswith("data check: Dataset digits is corrupted: replace it.")
    assert lines[-1] == "total 8 stage runs: 1 done, 2 stale, 0 running, 0 pending, 5 failed, 0 missing"


def _stale_and_done(results: Path):
    """Grid tiny's IR pretraining cells: seed 0 finished with another config (stale), seed 1 done; the cell's path
    by (method, seed)."""

    def cell(method, seed):
        return results / "tiny" / "pretrain" / "digits" / method / f"seed{seed}"

    for seed in (0, 1):
        cell("IR", seed).mkdir(parents=True)
    _finished_pretraining(cell("IR", 0), config_hash="0" * 16)
    _finished_pretraining(cell("IR", 1), seed=1)
    return cell


def fake_slurm(monkeypatch, array: str) -> list[Path]:
    """``batch.submit``'s executor and preflight stood in for: each job's cell is appended to the list returned, its
    task id ``array_<n>``."""
    from contextlib import nullcontext
    from types import SimpleNamespace

    submitted = []

    def executor(folder, res, name):
        def submit(job):
            submitted.append(Path(job.argv[job.argv.index("--out") + 1]))
            return SimpleNamespace(job_id=f"{array}_{len(submitted) - 1}")

        return SimpleNamespace(batch=nullcontext, submit=submit)

    monkeypatch.setattr(batch, "make_executor", executor)
    monkeypatch.setattr(batch, "preflight", lambda res, interval: None)
    return submitted


def test_submit_submits_a_stale_cell_like_a_missing_one_and_keeps_its_output(tmp_path, monkeypatch, capsys):
    """Issue 34, item 2: the cell `status` calls stale (an encoder another config made) is submitted by `submit`, never
    called done; its encoder is set aside in runs/<its hash>/ first, so status shows the job, not the stale output."""

    from ring.cluster import slurm

    grids = _grid(tmp_path)
    results = tmp_path / "results"
    cell = _stale_and_done(results)
    (results / "tiny" / "data").mkdir()
    (results / "tiny" / "data" / "digits.ok").touch()  # the data check passed
    submitted = fake_slurm(monkeypatch, "5")
    grid = grid_plan.load(grids / "tiny.yaml")
    assert batch.submit(grid, "pretrain", batch.load_config(batch.DEFAULT_CONFIGS), results) == "5"
    assert sorted(submitted) == sorted([cell("IR", 0), cell("MoCoRing", 0), cell("MoCoRing", 1)])
    assert not (cell("IR", 0) / "encoder.pt").exists()
    assert (cell("IR", 0) / "runs" / ("0" * 16) / "encoder.pt").read_bytes() == b"trunk"  # kept, not deleted
    assert "its encoder.pt is superseded (another config made it)" in capsys.readouterr().err
    assert slurm.read_record(cell("IR", 0))["job_id"] == "5_0"


def _finished_chain(tmp_path):
    """A one-cell grid's finished pretraining and its evaluation's folder with the grid's config (no output yet)."""
    grids = _grid(tmp_path, {**GRID, "methods": ["IR"], "seeds": [0]})
    pre = tmp_path / "results" / "tiny" / "pretrain" / "digits" / "IR" / "seed0"
    lin = pre.parents[3] / "lincls" / "digits" / "IR" / "seed0"
    pre.mkdir(parents=True)
    _finished_pretraining(pre)
    lin.mkdir(parents=True)
    cfg = grid_plan.from_dict("tiny", GRID).lincls_config("digits", "IR", 0, "data")
    config_io.save(cfg, lin / "config.yaml")
    return grids, pre, lin, cfg


def test_status_reports_a_damaged_or_gone_output_of_a_finished_cell(tmp_path, capsys):
    """Issue 40 item 3: an encoder damaged after its cell finished was 'done'; a deleted metrics.json 'failed'."""
    from ring.core import cell_runs

    grids, pre, lin, cfg = _finished_chain(tmp_path)
    (lin / "log.jsonl").write_text('{"epoch": 0}\n')
    (lin / "metrics.json").write_text("{}")
    cell_runs.keep_outputs(lin, "lincls", cfg, "sha")
    (lin / "metrics.json").unlink()
    (pre / "encoder.pt").write_bytes(b"trunk, damaged")
    lines = _status(tmp_path, grids, capsys)
    assert lines[0].split()[4] == "damaged" and f"{pre / 'encoder.pt'} differs from the SHA-256" in lines[0]
    assert lines[1].split()[4] == "missing" and "its metrics.json is gone, though export.json records it" in lines[1]
    assert "total 2 stage runs: 0 done, 0 stale, 0 running, 0 pending, 0 failed, 1 missing, 1 damaged" in lines


def test_status_and_submit_agree_with_the_plan_on_an_evaluation_of_a_stale_encoder(tmp_path, capsys, monkeypatch):
    """Issue 40 item 6: an evaluation whose encoder another config made (the grid edited, config.yaml not yet
    rewritten) was 'done' to status and submit while snakemake -n planned to rerun it."""
    grids = _grid(tmp_path, {**GRID, "methods": ["IR"], "seeds": [0]})
    pre = tmp_path / "results" / "tiny" / "pretrain" / "digits" / "IR" / "seed0"
    lin = pre.parents[3] / "lincls" / "digits" / "IR" / "seed0"
    pre.mkdir(parents=True)
    # Made, with the config.yaml beside it, before the grid's pretraining epochs were edited: its chain holds.
    before = {**GRID, "pretrain": {"all": {**GRID["pretrain"]["all"], "epochs": 3}}}
    _finished_pretraining(pre, values=before)
    config_io.save(grid_plan.from_dict("tiny", before).pretrain_config("digits", "IR", 0, "data"), pre / "config.yaml")
    lin.mkdir(parents=True)
    cfg = grid_plan.from_dict("tiny", GRID).lincls_config("digits", "IR", 0, "data")
    config_io.save(cfg, lin / "config.yaml")
    record = json.loads((pre / "export.json").read_text())
    (lin / "metrics.json").write_text(
        json.dumps(
            {
                "dataset": "digits",
                "method": "IR",
                "seed": 0,
                "top1": 50.0,
                "config_hash": config_io.config_hash(cfg),
                "protocol": {"encoder_files": record["files"]},
            }
        )
    )
    lines = _status(tmp_path, grids, capsys)
    assert [line.split()[4] for line in lines[:2]] == ["stale", "stale"], lines
    assert f"evaluated the encoder of {pre}, which another config than the grid's made" in lines[1]
    assert cells.stale_detail(grid_plan.from_dict("tiny", GRID), "lincls", lin, "digits", "IR", 0, "data")


def test_status_calls_a_diverged_evaluation_diverged_not_done(tmp_path, capsys):
    """Issue 51 item 1: a linear evaluation that finished without an accuracy (the tables' "diverged") was 'done'."""
    from ring.core import cell_runs

    grids, pre, lin, cfg = _finished_chain(tmp_path)
    config_io.save(grid_plan.from_dict("tiny", GRID).pretrain_config("digits", "IR", 0, "data"), pre / "config.yaml")
    record = json.loads((pre / "export.json").read_text())
    sentence = f"{lin}: the linear evaluation diverged: its top-1 10.2% is at chance"
    metrics = {"dataset": "digits", "method": "IR", "seed": 0, "config_hash": config_io.config_hash(cfg)}
    (lin / "metrics.json").write_text(json.dumps({**metrics, "protocol": {"encoder_files": record["files"]}}))
    cell_runs.keep_outputs(lin, "lincls", cfg, "sha")
    assert [line.split()[4] for line in _status(tmp_path, grids, capsys)[:2]] == ["done", "done"]
    (lin / "metrics.json").write_text(
        json.dumps({**metrics, "protocol": {"encoder_files": record["files"]}, "diverged": sentence})
    )
    cell_runs.keep_outputs(lin, "lincls", cfg, "sha")  # as ring.lincls keeps a diverged evaluation's metrics.json
    lines = _status(tmp_path, grids, capsys)
    assert lines[0].split()[4] == "done"  # its encoder is fine: only the evaluation diverged
    assert lines[1].split()[4] == "diverged" and sentence in lines[1], lines
    assert "total 2 stage runs: 1 done, 0 stale, 0 running, 0 pending, 0 failed, 0 missing, 1 diverged" in lines
    # Finished with its verdict: the grid's end does not wait for it to run again.
    grid, config = grid_plan.from_dict("tiny", GRID), batch.load_config(batch.DEFAULT_CONFIGS)
    rows = batch.status(grid, tmp_path / "results", config)
    assert batch.outlook(grid, tmp_path / "results", config, rows, figures=None).stages["lincls"].done == 1


def test_status_says_when_the_grid_will_end_from_its_own_cells(tmp_path, monkeypatch):
    """The outlook's inputs read from the cells: a finished cell's provenance (spent 2x its price), a running cell's
    provenance and progress.json (its rate), the stage's GPUs from the resources; the arithmetic is ring.plan.eta's."""
    grid = grid_plan.from_dict("tiny", GRID)
    results = tmp_path / "results"
    prices = {"pretrain": 1.0, "lincls": 0.25}
    monkeypatch.setattr(batch.estimate, "predict_cell", lambda stage, cfg, figures: prices[stage])
    config = {"slurm": {"defaults": {"gpus_per_node": 2}, "lincls": {"gpus_per_node": 1}}}
    done = cells.cell_dir(results, "tiny", "pretrain", "digits", "IR", 0)
    running = cells.cell_dir(results, "tiny", "pretrain", "digits", "IR", 1)
    for cell, hours in ((done, 2.0), (running, 0.5)):
        cell.mkdir(parents=True)
        (cell / "provenance.json").write_text(json.dumps({"gpu_hours": hours}))
    # 1 of 2 epochs in 0.25 h on 2 GPUs in the running segment: 0.5 GPU-h more spent, 0.25 h left.
    progress_record = {"epoch": 1, "epochs": 2, "segment_epochs": 1.0, "segment_wall_s": 900.0, "gpus": 2}
    (running / progress.PROGRESS).write_text(json.dumps(progress_record))
    rows = [
        ("pretrain", "digits", "IR", 0, "done", ""),
        ("pretrain", "digits", "IR", 1, "running", ""),
        ("pretrain", "digits", "MoCoRing", 0, "pending", ""),
        ("lincls", "digits", "IR", 0, "pending", ""),
        ("lincls", "digits", "IR", 1, "pending", ""),
        ("lincls", "digits", "MoCoRing", 0, "missing", ""),
    ]
    out = batch.outlook(grid, results, config, rows, figures=None)
    pre = out.stages["pretrain"]
    assert (pre.done, pre.running, pre.pending, pre.spent) == (1, 1, 1, pytest.approx(3.0))
    # Running: 0.25 h x 2 GPUs; pending MoCoRing: its price x the 2x the finished cell spent.
    assert pre.left == pytest.approx((0.5 + 2.0, 0.5 + 2.0))
    # lincls: nothing finished, uncalibrated: 3 x 0.25 GPU-h, one GPU each.
    assert out.stages["lincls"].left == pytest.approx((0.75, 0.75))
    # Floor: MoCoRing seed 0's chain, 2 GPU-h on 2 GPUs then 0.25 h; ceiling: one cell at a time on its own GPUs,
    # 0.25 h + 2 GPU-h / 2 + 3 x 0.25 h.
    assert out.hours == pytest.approx((1.25, 2.0)) and out.gpus_all == 2 + 2 + 3


def test_submit_refuses_what_the_plan_refuses_before_the_array_is_queued(tmp_path, monkeypatch):
    """Issue 50 item 4: `ring submit` checks each cell by the workflow plan's rules (ring.cluster.admission.
    plan_problems): here the shipped pretraining's 32 GB per task on a site whose largest node has 16."""
    grids, results = _grid(tmp_path), tmp_path / "results"
    (results / "tiny" / "data").mkdir(parents=True)
    (results / "tiny" / "data" / "digits.ok").touch()  # the data check passed
    monkeypatch.setattr(batch, "make_executor", lambda *a: pytest.fail("queued"))
    monkeypatch.setattr(batch, "preflight", lambda res, interval: pytest.fail("asked SLURM"))
    config = batch.merge(batch.load_config(batch.DEFAULT_CONFIGS), {"slurm": {"largest_node": {"mem_gb": 16}}})
    with pytest.raises(ValueError, match="pretrain asks for 32 GB of memory per node .* largest node has 16"):
        batch.submit(grid_plan.load(grids / "tiny.yaml"), "pretrain", config, results)


def test_submit_leaves_a_set_aside_runs_job_with_that_run(tmp_path, monkeypatch):
    """Issue 50 item 3: `ring submit` added the ended job of a cell's record to the live cell's provenance, from sacct,
    though the run an edit set aside (runs/<key>/) holds it: counted twice."""
    import json
    from contextlib import nullcontext
    from types import SimpleNamespace

    from ring.cluster import slurm
    from tests.cluster.test_launch import _one_completed_job

    grids, results = _grid(tmp_path), tmp_path / "results"
    (results / "tiny" / "data").mkdir(parents=True)
    (results / "tiny" / "data" / "digits.ok").touch()  # the data check passed
    cell = results / "tiny" / "pretrain" / "digits" / "IR" / "seed0"
    (cell / "runs" / "abc").mkdir(parents=True)
    _one_completed_job(monkeypatch, cell / "runs" / "abc" / "provenance.json", "3")
    monkeypatch.setattr(cells, "job_states", slurm.job_states)  # the fake's: job 3 COMPLETED
    slurm.write_record(cell, "3", cell / "slurm", "pretrain", config_hash="abc")
    executor = SimpleNamespace(batch=nullcontext, submit=lambda job: SimpleNamespace(job_id="5_0"))
    monkeypatch.setattr(batch, "make_executor", lambda folder, res, name: executor)
    monkeypatch.setattr(batch, "preflight", lambda res, interval: None)
    assert batch.submit(
        grid_plan.load(grids / "tiny.yaml"), "pretrain", batch.load_config(batch.DEFAULT_CONFIGS), results
    )
    assert not (cell / "provenance.json").exists()
    assert [s["job_id"] for s in json.loads((cell / "runs" / "abc" / "provenance.json").read_text())["segments"]] == [
        "3"
    ]


def listing(folder: Path) -> dict[str, str]:
    """Every file and folder under ``folder``: a file's SHA-256, a folder's mark; byte-equal listings, equal trees."""
    import hashlib

    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "folder"
        for p in sorted(folder.rglob("*"))
    }


def test_a_refused_submit_changes_nothing_and_the_corrected_one_submits_every_cell(tmp_path, monkeypatch, capsys):
    """Issue 52 item 2: `ring submit` refused (batch 64 does not split over 3 processes) had written the cells'
    configs, so the corrected submit said "every pretrain cell ... is done or already submitted" and queued nothing."""

    grids = _grid(tmp_path)
    results = tmp_path / "results"
    cell = _stale_and_done(results)
    submitted = fake_slurm(monkeypatch, "7")
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump({"slurm": {"pretrain": {"nodes": 3}}}))
    argv = ["submit", "--stage", "pretrain", "--grid", "tiny", "--grids-dir", str(grids), "--results", str(results)]
    configs = ["--configfile", str(batch.resources.CONFIG), str(batch.resources.CLUSTER), str(site)]
    before = listing(results)
    assert batch.main([*argv, *configs]) == 1
    assert "batch_size=64 does not split evenly over the 3 processes" in capsys.readouterr().err
    assert listing(results) == before and not submitted
    site.write_text(yaml.safe_dump({"slurm": {"pretrain": {"nodes": 2}}}))
    assert batch.main([*argv, *configs]) == 0
    assert sorted(submitted) == sorted([cell("IR", 0), cell("MoCoRing", 0), cell("MoCoRing", 1)])
    assert "submitted 3 pretrain cells of grid tiny as job array 7" in capsys.readouterr().out
    assert (cell("IR", 0) / "runs" / ("0" * 16) / "encoder.pt").read_bytes() == b"trunk"
    assert all(slurm.read_record(c)["job_id"].startswith("7_") for c in submitted)
    assert (results / "tiny" / "data" / "digits.ok").is_file()  # the data check ran once every other check passed
