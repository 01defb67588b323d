"""The SLURM launcher's pure parts (the cluster itself is exercised in tests/workflow/test_slurm_*.py)."""

import pytest

from ring.cluster.launch import decide
from ring.cluster.slurm import (
    Resources,
)


@pytest.mark.parametrize(
    "state, present, action",
    [
        ("COMPLETED", True, "collect"),  # finished while no client watched: collected, never rerun
        ("COMPLETED", False, "resubmit"),  # Snakemake deleted the outputs of an incomplete rule: resume
        ("RUNNING", False, "wait"),
        ("REQUEUED", False, "wait"),
        ("PENDING", True, "wait"),
        (None, False, "wait"),  # unknown: waited on for unknown_grace_s, then resubmitted
        ("CANCELLED", False, "resubmit"),
        ("TIMEOUT", False, "resubmit"),
        ("NODE_FAIL", True, "resubmit"),
    ],
)
def test_a_restarted_client_decides_from_the_recorded_jobs_state(state, present, action):
    assert decide(state, present) == action


def _fake_job(tmp_path, job_id="9_1", tasks=1):
    """A submitit job of ``tasks`` tasks, each with its own log (task 0's is ``job.err``)."""
    from types import SimpleNamespace

    (tmp_path / "job.err").write_text("ring: the stage's own reason\n")
    logs = [tmp_path / ("job.err" if i == 0 else f"job_{i}.err") for i in range(tasks)]
    return SimpleNamespace(
        job_id=job_id,
        num_tasks=tasks,
        task=lambda i: SimpleNamespace(paths=SimpleNamespace(stderr=logs[i])),
        paths=SimpleNamespace(stderr=tmp_path / "job.err"),
        done=lambda force_check=False: True,
        results=lambda: [0],
    )


def test_stop_signals_after_the_outputs_are_noted_in_the_jobs_segment(tmp_path, capsys):
    """Issue 34 item 3: the job's log says it ignored USR2 after its outputs; provenance says it too."""
    import json
    from types import SimpleNamespace

    from ring.cluster import launch
    from ring.cluster.jobs import IGNORED_STOP

    log = tmp_path / "7_0_log.err"
    log.write_text(f"ring: the pretrain job {IGNORED_STOP}; ignored\n" * 2)
    (tmp_path / "provenance.json").write_text(
        json.dumps(
            {"segments": [{"job_id": "6", "outcome": "killed (COMPLETED)"}, {"job_id": "7", "outcome": "completed"}]}
        )
    )
    launch.note_ignored_stops(tmp_path, SimpleNamespace(job_id="7", paths=SimpleNamespace(stderr=log)))
    segments = json.loads((tmp_path / "provenance.json").read_text())["segments"]
    assert [s.get("stop_signals_after_outputs") for s in segments] == [None, 2]
    assert "SLURM job 7 " + IGNORED_STOP + " (2x)" in capsys.readouterr().err


def _edited_cell(tmp_path, record_hash):
    """A pretraining cell whose config.yaml is lr 0.01, with a launcher record of job 7 (``record_hash``) and the
    encoder that job wrote with the lr 0.03 config."""
    from ring.cluster.jobs import StageJob
    from ring.cluster.slurm import write_record
    from ring.core import config
    from ring.core.files import CHECKSUMS, write_json
    from tests.helpers import TINY_PRETRAIN

    cell = tmp_path / "results" / "g" / "pretrain" / "digits" / "IR" / "seed0"
    cell.mkdir(parents=True)
    old, new = (config.PretrainConfig(method="IR", **{**TINY_PRETRAIN, "lr": lr}) for lr in (0.03, 0.01))
    config.save(new, cell / "config.yaml")
    write_record(cell, "7", cell / "slurm", "pretrain", config_hash=record_hash(config.config_hash(old)))
    (cell / "encoder.pt").write_bytes(b"lr 0.03")
    write_json(cell / CHECKSUMS, {"config_hash": config.config_hash(old), "files": {}})
    return (
        cell,
        StageJob("pretrain", ["--config", str(cell / "config.yaml"), "--out", str(cell)]),
        config.config_hash(old),
    )


@pytest.mark.parametrize(
    "record_hash, state",
    [
        (lambda old: old, "COMPLETED"),  # a job of the previous config that finished while no client watched
        (
            lambda old: None,
            "RUNNING",
        ),  # a record from before hashes were recorded: re-attached, then its output checked
    ],
)
def test_the_launcher_accepts_only_an_output_of_its_own_config_hash(record_hash, state, tmp_path, monkeypatch, capsys):
    """Issue 34, item 2: another config's encoder in the cell is one sentence, kept under runs/<its hash>/, and a job
    of the cell's own config is submitted; its encoder, of the right hash, is accepted."""
    from ring.cluster import admission, launch, slurm
    from ring.core import accounting, config
    from ring.core.files import CHECKSUMS, write_json

    cell, job, old = _edited_cell(tmp_path, record_hash)
    wanted = config.config_hash(config.load(config.PretrainConfig, cell / "config.yaml"))
    submitted = []

    def submit(job, cell, res):
        submitted.append(_fake_job(tmp_path, job_id="8"))
        return submitted[-1]

    def wait(attached, cell, res, adopted=False):
        if attached.job_id == "8":  # the new job writes the edited config's encoder
            (cell / "encoder.pt").write_bytes(b"lr 0.01")
            write_json(cell / CHECKSUMS, {"config_hash": wanted, "files": {}})
        return "completed"

    monkeypatch.setattr(slurm, "job_states", lambda ids: {i: state for i in ids})
    monkeypatch.setattr(launch, "submit", submit)
    monkeypatch.setattr(launch, "wait", wait)
    monkeypatch.setattr(admission, "preflight", lambda res, interval, cell=None: None)
    monkeypatch.setattr(launch, "recorded_job", lambda record: _fake_job(tmp_path, job_id=record["job_id"]))
    monkeypatch.setattr(accounting, "add_ended_job", lambda cell, job_id: 0)
    assert launch._launch_slurm(job, cell, Resources(poll_s=0)) == 0
    said = capsys.readouterr().err
    assert f"SLURM job 7 wrote encoder.pt with config {old}, not this cell's {wanted}" in said, said
    assert len(submitted) == 1 and (cell / "encoder.pt").read_bytes() == b"lr 0.01"
    assert (cell / "runs" / old / "encoder.pt").read_bytes() == b"lr 0.03"  # kept, not deleted


def test_a_running_job_of_the_previous_config_is_cancelled_before_anything_moves(tmp_path, monkeypatch, capsys):
    """Issue 34, item 2: ring.cluster.detach (the config rule's first step) cancels and waits; a job of the cell's
    own config, or one that ended, is left alone."""
    from ring.cluster import detach, slurm
    from ring.core import config

    cell, job, old = _edited_cell(tmp_path, lambda old: old)
    wanted = config.config_hash(config.load(config.PretrainConfig, cell / "config.yaml"))
    cancelled = []
    monkeypatch.setattr(slurm, "cancel_and_wait", lambda cell, job_id, res: cancelled.append(job_id))
    monkeypatch.setattr(slurm, "account_ended", lambda cell, job_id: None)
    for state, expected in (("COMPLETED", []), ("RUNNING", ["7"])):
        monkeypatch.setattr(slurm, "job_states", lambda ids, state=state: {i: state for i in ids})
        assert detach.detach(cell, old, Resources(), log=print) is False  # its own config: nothing to do
        assert detach.detach(cell, wanted, Resources(), log=print) is bool(expected)
        assert cancelled == expected
    assert "cancelling it first" in capsys.readouterr().out
    assert slurm.read_record(cell) is None and (cell / "slurm" / "job-7.json").is_file()  # retired
    assert (cell / "encoder.pt").exists()  # detach moves nothing: ring.core.cell_runs does, after it


@pytest.mark.parametrize(
    "sinfo, gpus, refused",
    [
        ("debug* drain node1 8 32000 gpu:2\n", 1, None),  # drained: not a refusal, the jobs would wait
        ("debug* down* node1 8 32000 gpu:a100:2(S:0)\n", 2, None),
        ("debug* idle node1 8 32000 gpu:2\n", 1, "Requested node configuration is not available"),  # the resources
        ("debug* drain node1 8 32000 gpu:2\n", 8, "Requested node configuration is not available"),  # fit no node
        ("debug* drain node1 8 32000 gpu:2\nother idle node2 8 32000 gpu:2\n", 1, None),  # another partition's
    ],
)
def test_a_drained_partition_is_told_apart_from_refused_resources(monkeypatch, capsys, sinfo, gpus, refused):
    """Issue 40 item 6: with the only node drained, `sbatch --test-only` refuses while a plain sbatch waits; the
    check said "fix them in profiles/slurm/site.yaml"."""
    import subprocess

    from ring.cluster import admission, slurm

    def call(args, timeout=60):
        if args[0] == "sbatch":
            return subprocess.CompletedProcess(
                args, 1, "", "sbatch: error: Requested node configuration is not available\n"
            )
        return subprocess.CompletedProcess(args, 0, sinfo if "%P %t %N %c %m %G" in args else "idle\n", "")

    monkeypatch.setattr(slurm, "slurm_call", call)
    # mem_gb is per task: 2 tasks x 15 GB fit the node's 32000 MB.
    assert admission.sbatch_refusal(Resources(gpus_per_node=gpus, cpus_per_task=2, mem_gb=15)) == refused
    err = capsys.readouterr().err
    if refused is None:
        assert err.startswith("ring: warning: partition debug has no node that takes a job now (node1: ")
        assert "these resources are not refused, so the jobs are submitted and wait PENDING" in err
    else:
        assert err == ""


@pytest.mark.parametrize(
    ("stage", "resources", "overrides", "problem"),
    [
        ("lincls", {"gpus_per_node": 2}, {}, "ring: lincls runs one task (one process on one GPU)"),
        ("pretrain", {"nodes": 3}, {"batch_size": 64}, "ring: batch_size=64 does not split evenly over the 3"),
    ],
)
def test_the_launcher_refuses_tasks_its_stage_cannot_use_before_anything_is_submitted(
    tmp_path, monkeypatch, capsys, stage, resources, overrides, problem
):
    import json

    from ring.cluster import launch
    from ring.core import config
    from tests.helpers import lincls_config, pretrain_config

    cfg = lincls_config(**overrides) if stage == "lincls" else pretrain_config("IR", **overrides)
    config.save(cfg, tmp_path / "config.yaml")
    monkeypatch.setattr(launch, "launch_slurm", lambda *a: pytest.fail("submitted"))
    monkeypatch.setattr("ring.cluster.slurm.slurm_call", lambda *a, **k: pytest.fail("asked SLURM"))
    argv = [stage, "--cell", str(tmp_path), "--launcher", "slurm", "--resources", json.dumps(resources)]
    assert launch.main([*argv, "--", "--config", str(tmp_path / "config.yaml"), "--out", str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith(problem)


def test_lost_jobs_are_resubmitted_at_most_max_requeues_times(tmp_path, monkeypatch, capsys):
    from ring.cluster import admission, launch
    from ring.cluster.jobs import StageJob

    submitted = []
    monkeypatch.setattr(admission, "preflight", lambda *a, **k: None)
    monkeypatch.setattr(launch, "submit", lambda job, cell, res: submitted.append(1) or _fake_job(tmp_path))
    monkeypatch.setattr(launch, "wait", lambda *a, **k: "gone")
    res = Resources(max_requeues=2)
    assert launch._launch_slurm(StageJob("pretrain", ["--out", str(tmp_path)]), tmp_path, res) == 1
    assert len(submitted) == 3
    assert (
        "3 jobs were lost by SLURM (gone, or ended NODE_FAIL, PREEMPTED, BOOT_FAIL); giving up"
        in capsys.readouterr().err
    )


def _one_completed_job(monkeypatch, provenance, job_id):
    """``provenance`` holding the one segment of ``job_id``, a job SLURM and its accounting call COMPLETED."""
    import json

    from ring.cluster import slurm
    from ring.core import accounting

    segment = {"job_id": job_id, "restart_count": 0, "wall_s": 60.0, "gpus": 1, "outcome": "completed"}
    provenance.write_text(json.dumps({"segments": [segment], "gpu_hours": 60.0 / 3600}))
    run = {"state": "COMPLETED", "started": "2026-12-01T00:00", "ended": "x", "wall_s": 60.0, "node": "vm", "gpus": 1}
    monkeypatch.setattr(accounting, "accounted_runs", lambda jid: [run])
    monkeypatch.setattr(slurm, "job_states", lambda ids: dict.fromkeys(ids, "COMPLETED"))


def test_a_job_of_a_run_set_aside_stays_with_it_and_is_not_submitted_again_in_words(tmp_path, monkeypatch, capsys):
    """Issue 50 item 3: after its pretraining cell was edited, a linear evaluation's run of the old encoder is set
    aside (ring.core.cell_runs keeps it per config and encoder) with the provenance of its COMPLETED job 11; the record
    still names job 11, of the same lincls config hash.  The launcher copied job 11 from sacct into the live cell's
    provenance as "killed (COMPLETED)" (counted twice) and said its metrics.json was missing, submitting again."""
    import json

    from ring.cluster import launch, slurm
    from ring.cluster.jobs import StageJob

    cell = tmp_path / "lincls" / "seed0"
    kept = cell / "runs" / "abc-0123456789ab"
    kept.mkdir(parents=True)
    _one_completed_job(monkeypatch, kept / "provenance.json", "11")
    slurm.write_record(cell, "11", cell / "slurm", "lincls", config_hash="abc")
    job = StageJob("lincls", ["--out", str(cell)])
    assert launch.reattach(job, cell, Resources(), slurm.read_record(cell), "abc") == (False, None)
    assert not (cell / "provenance.json").exists()  # job 11 counted once: in the run it made
    assert [s["job_id"] for s in json.loads((kept / "provenance.json").read_text())["segments"]] == ["11"]
    said = capsys.readouterr().err
    assert (
        f"SLURM job 11 made a run of this cell that an edit or a retrained encoder set aside since (kept in {kept})"
        in said
    )
    assert "is missing" not in said
    # A job no kept run holds is the live cell's, as before: its hard-killed run comes from sacct.
    slurm.write_record(cell, "12", cell / "slurm", "lincls", config_hash="abc")
    assert launch.accounting_folder(cell, slurm.read_record(cell), "abc") == cell


def test_a_job_of_a_run_continued_to_more_epochs_stays_in_the_cells_provenance(tmp_path, monkeypatch):
    """Issue 50 item 3: a longer `epochs` continues the cell's run, whose provenance keeps job 7 of the shorter
    config; only the shorter encoder is kept under runs/<its hash>/.  The launcher, finding job 7 of that hash, copied
    it from sacct into a new runs/<its hash>/provenance.json: counted twice."""
    import json

    from ring.cluster import launch, slurm

    cell, job, old = _edited_cell(tmp_path, lambda old: old)
    (cell / "runs" / old).mkdir(parents=True)
    (cell / "runs" / old / "encoder.pt").write_bytes(b"lr 0.03")  # what continue_longer sets aside
    _one_completed_job(monkeypatch, cell / "provenance.json", "7")
    (cell / "encoder.pt").unlink()  # Snakemake's rerun deleted the output: the edited cell is submitted
    assert launch.reattach(job, cell, Resources(), slurm.read_record(cell), "new") == (False, None)
    assert not (cell / "runs" / old / "provenance.json").exists()
    assert [s["job_id"] for s in json.loads((cell / "provenance.json").read_text())["segments"]] == ["7"]


def test_a_second_local_launcher_waits_for_the_first_and_takes_what_it_finished(tmp_path):
    """Issue 52 item 4: after a killed Snakemake, `--unlock` and a rerun, a second local launcher trained the cell
    beside the orphaned first (epoch 1 logged twice).  Now it waits on the cell folder's lock, trains nothing, and
    takes the encoder the first finished with its config."""
    import os
    import subprocess
    import sys
    import time

    from ring.cluster import launch
    from ring.core import config
    from ring.core.files import record_checksums
    from tests import ROOT
    from tests.helpers import pretrain_config

    cell = tmp_path / "pretrain" / "digits" / "IR" / "seed0"
    cell.mkdir(parents=True)
    cfg = pretrain_config("IR", epochs=1)
    config.save(cfg, cell / "config.yaml")
    command = [sys.executable, "-m", "ring.cluster.launch", "pretrain", "--cell", str(cell), "--launcher", "local"]
    command += ["--", "--config", str(cell / "config.yaml"), "--out", str(cell)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with launch.folder_lock(cell):  # the first launcher, still training
        second = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
        lines = []
        while (line := second.stderr.readline()) and "another launcher runs this cell" not in line:
            lines.append(line)
        assert "another launcher runs this cell; waiting for it to end" in line, "".join(lines)
        time.sleep(2)
        assert second.poll() is None and not (cell / "running.json").exists() and not (cell / "log.jsonl").exists()
        (cell / "encoder.pt").write_bytes(b"trunk")  # the first launcher finishes the cell
        record_checksums(cell, ["encoder.pt"], config_hash=config.config_hash(cfg))
    _, rest = second.communicate(timeout=300)
    assert second.returncode == 0, rest
    assert "encoder.pt of this config is there (finished by the launcher this one waited for); nothing to run" in rest
    assert not (cell / "log.jsonl").exists() and (cell / "encoder.pt").read_bytes() == b"trunk"


def test_a_rerun_says_why_a_job_that_never_started_its_step_is_submitted_again(tmp_path, monkeypatch, capsys):
    """A job that ended FAILED while no client watched, because srun could not reach the controller: the rerun says
    so (the cluster's doing), not "ended FAILED" as for a stage that failed."""
    from pathlib import Path

    from ring.cluster import launch, slurm
    from ring.cluster.jobs import StageJob
    from ring.core import accounting
    from tests.cluster.test_watch import SRUN_AWAY, STARTED, TASK_FAILED

    cell = tmp_path / "pretrain" / "seed0"
    cell.mkdir(parents=True)
    monkeypatch.setattr(slurm, "job_states", lambda ids: dict.fromkeys(ids, "FAILED"))
    monkeypatch.setattr(accounting, "add_ended_job", lambda cell, job_id: 0)
    job = StageJob("pretrain", ["--out", str(cell)])
    for job_id, log, words in [
        ("13", SRUN_AWAY, "before its stage started"),
        ("14", STARTED + TASK_FAILED, "job 14 ended FAILED;"),
    ]:
        slurm.write_record(cell, job_id, cell / "slurm", "pretrain")
        log_path = Path(launch.recorded_job(slurm.read_record(cell)).paths.stderr)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(log)
        assert launch.reattach(job, cell, Resources(), slurm.read_record(cell), None) == (False, None)
        assert words in capsys.readouterr().err
