"""The SLURM launcher's pure parts (the cluster itself is exercised in tests/workflow/test_slurm.py)."""

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


@pytest.mark.parametrize(
    "states, adopted, outcome",
    [
        # Accounting lagged the cancel of a pending array task: a stale PENDING, then CANCELLED.  Adopted
        # from the cell's record, that is the cancelled pending job decide() resubmits, seen late.
        (["PENDING", "CANCELLED"], True, "gone"),
        ([None, "CANCELLED"], True, "gone"),
        # A job seen running, or one this client submitted itself, was cancelled on purpose: the rule fails.
        (["PENDING", "RUNNING", "CANCELLED"], True, "failed"),
        (["PENDING", "CANCELLED"], False, "failed"),
        (["RUNNING", "FAILED"], True, "failed"),
        (["PENDING", "RUNNING", "COMPLETED"], True, "completed"),
        # A lost node, a preemption without requeue, a node that never booted: not the stage's fault, resubmitted.
        (["RUNNING", "NODE_FAIL"], False, "gone"),
        (["RUNNING", "PREEMPTED"], True, "gone"),
        (["PENDING", "BOOT_FAIL"], False, "gone"),
    ],
)
def test_the_waiting_client_tells_a_late_seen_cancel_from_a_failure(
    states, adopted, outcome, tmp_path, monkeypatch, capsys
):
    from ring.cluster import launch, slurm
    from ring.core import accounting

    job = _fake_job(tmp_path)
    replies = iter(states)
    monkeypatch.setattr(slurm, "job_states", lambda ids: {ids[0]: next(replies)})
    monkeypatch.setattr(accounting, "add_ended_job", lambda cell, job_id: 1)  # a run to report, as in CI
    res = Resources(poll_s=0, unknown_grace_s=60)
    assert launch.wait(job, tmp_path, res, adopted=adopted) == outcome
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("ring: ")]
    if outcome == "failed":
        # The last sentence (the one ring.core.failures shows) is the stage's reason, not the accounting line.
        assert said[-1] == "ring: the stage's own reason" and any("failed (" in line for line in said)


def _polls(monkeypatch, replies):
    """SLURM's clients answering each poll from ``replies``: (sacct output, squeue output) pairs, in order."""
    import subprocess

    from ring.cluster import slurm

    answers = iter(replies)
    current = {}

    def call(args, timeout=60):
        if args[0] == "sacct":
            current["squeue"] = None
            current["sacct"], current["squeue"] = next(answers)
            return subprocess.CompletedProcess(args, 0, current["sacct"], "")
        return subprocess.CompletedProcess(args, 0, current["squeue"], "")

    monkeypatch.setattr(slurm, "slurm_call", call)


def test_status_lines_change_only_when_the_job_does(tmp_path, monkeypatch, capsys):
    """Issue 34 item 7: accounting learns of a start a poll or two after the controller; the client printed
    RUNNING, PENDING, RUNNING.  A real requeue (the controller holds the job PENDING again) is still shown."""
    from ring.cluster import launch

    _polls(
        monkeypatch,
        [
            ("", "9_1|RUNNING\n"),
            ("9_1|PENDING\n", "9_1|RUNNING\n"),
            ("9_1|RUNNING\n", ""),
            ("9_1|REQUEUED\n", ""),
            ("9_1|PENDING\n", "9_1|PENDING\n"),
            ("9_1|PENDING\n", "9_1|RUNNING\n"),
            ("9_1|COMPLETED\n", ""),
        ],
    )
    assert launch.wait(_fake_job(tmp_path), tmp_path, Resources(poll_s=0)) == "completed"
    shown = [line.split(" SLURM job 9_1 ")[1].split()[0] for line in capsys.readouterr().err.splitlines()]
    assert shown == ["RUNNING", "REQUEUED", "PENDING", "RUNNING", "COMPLETED"]


def test_a_cancelled_pending_job_keeps_accountings_word(monkeypatch):
    from ring.cluster import slurm

    _polls(monkeypatch, [("9_1|PENDING\n", "")])  # the controller no longer holds it: accounting has not caught up
    assert slurm.job_states(["9_1"]) == {"9_1": "PENDING"}


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
    from ring.core import config as C
    from ring.core.files import CHECKSUMS, write_json
    from tests.helpers import TINY_PRETRAIN

    cell = tmp_path / "results" / "g" / "pretrain" / "digits" / "IR" / "seed0"
    cell.mkdir(parents=True)
    old, new = (C.PretrainConfig(method="IR", **{**TINY_PRETRAIN, "lr": lr}) for lr in (0.03, 0.01))
    C.save(new, cell / "config.yaml")
    write_record(cell, "7", cell / "slurm", "pretrain", config_hash=record_hash(C.config_hash(old)))
    (cell / "encoder.pt").write_bytes(b"lr 0.03")
    write_json(cell / CHECKSUMS, {"config_hash": C.config_hash(old), "files": {}})
    return cell, StageJob("pretrain", ["--config", str(cell / "config.yaml"), "--out", str(cell)]), C.config_hash(old)


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
    from ring.cluster import launch, slurm
    from ring.core import accounting
    from ring.core import config as C
    from ring.core.files import CHECKSUMS, write_json

    cell, job, old = _edited_cell(tmp_path, record_hash)
    wanted = C.config_hash(C.load(C.PretrainConfig, cell / "config.yaml"))
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
    monkeypatch.setattr(slurm, "preflight", lambda res, interval, cell=None: None)
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
    from ring.core import config as C

    cell, job, old = _edited_cell(tmp_path, lambda old: old)
    wanted = C.config_hash(C.load(C.PretrainConfig, cell / "config.yaml"))
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
    assert (cell / "encoder.pt").exists()  # detach moves nothing: ring.plan.rerun does, after it


@pytest.mark.parametrize(
    "state, log, says",
    [
        ("OUT_OF_MEMORY", "slurmstepd: error: Detected 1 oom_kill event\n", "ran out of host memory at mem_gb=8 GB"),
        (
            "FAILED",
            "RuntimeError: [enforce fail at alloc_cpu.cpp:121] data. DefaultCPUAllocator: can't allocate memory: "
            "you tried to allocate 4096000000 bytes.\nsrun: error: node1: task 0: Exited with exit code 1\n",
            "ran out of host memory at mem_gb=8 GB; raise mem_gb of this stage under slurm: in "
            "profiles/slurm/site.yaml",
        ),
        ("FAILED", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n", "out of GPU memory"),
        ("FAILED", "ring: the stage's own reason\nsrun: error: Exited with exit code 1\n", None),
    ],
)
def test_a_job_out_of_memory_ends_with_one_sentence_naming_mem_gb(tmp_path, monkeypatch, capsys, state, log, says):
    """Issue 40 item 6: it ended with torch's allocator traceback and no sentence naming memory or mem_gb."""
    from ring.cluster import launch, slurm
    from ring.core import accounting

    job = _fake_job(tmp_path)
    (tmp_path / "job.err").write_text(log)
    replies = iter(["RUNNING", state])
    monkeypatch.setattr(slurm, "job_states", lambda ids: {ids[0]: next(replies)})
    monkeypatch.setattr(accounting, "add_ended_job", lambda cell, job_id: 0)
    monkeypatch.setattr(job, "results", lambda: (_ for _ in ()).throw(RuntimeError("failed")))
    assert launch.wait(job, tmp_path, Resources(poll_s=0, unknown_grace_s=60, mem_gb=8)) == "failed"
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("ring: ")]
    if says is None:
        assert said[-1] == "ring: the stage's own reason" and not any("ran out of" in line for line in said)
    else:
        assert said[-1].startswith(f"ring: {tmp_path}: SLURM job 9_1 ran out of ") and says in said[-1], said
    # ring status shows the job's own last sentence, not srun's line after it.
    assert launch.last_sentence(tmp_path / "job.err") == (
        "the stage's own reason" if says is None else log.strip().splitlines()[-1]
    )


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

    from ring.cluster import slurm

    def call(args, timeout=60):
        if args[0] == "sbatch":
            return subprocess.CompletedProcess(
                args, 1, "", "sbatch: error: Requested node configuration is not available\n"
            )
        return subprocess.CompletedProcess(args, 0, sinfo if "%P %t %N %c %m %G" in args else "idle\n", "")

    monkeypatch.setattr(slurm, "slurm_call", call)
    assert slurm.sbatch_refusal(Resources(gpus_per_node=gpus, cpus_per_task=2, mem_gb=16)) == refused
    err = capsys.readouterr().err
    if refused is None:
        assert err.startswith("ring: warning: partition debug has no node that takes a job now (node1: ")
        assert "these resources are not refused, so the jobs are submitted and wait PENDING" in err
    else:
        assert err == ""


def test_a_waiting_client_shows_why_its_job_is_pending(tmp_path, monkeypatch, capsys):
    from ring.cluster import launch, slurm

    replies = iter(["PENDING", "PENDING", "RUNNING", "COMPLETED"])
    monkeypatch.setattr(slurm, "job_states", lambda ids: {ids[0]: next(replies)})
    monkeypatch.setattr(slurm, "pending_reason", lambda job_id: "ReqNodeNotAvail, UnavailableNodes:node1")
    assert launch.wait(_fake_job(tmp_path), tmp_path, Resources(poll_s=0)) == "completed"
    lines = capsys.readouterr().err.splitlines()
    assert "SLURM job 9_1 PENDING (ReqNodeNotAvail, UnavailableNodes:node1) (0.0 min)" in lines[0]
    assert len(lines) == 3  # PENDING once, RUNNING, COMPLETED


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
    from ring.core import config as C
    from tests.helpers import lincls_config, pretrain_config

    cfg = lincls_config(**overrides) if stage == "lincls" else pretrain_config("IR", **overrides)
    C.save(cfg, tmp_path / "config.yaml")
    monkeypatch.setattr(launch, "launch_slurm", lambda *a: pytest.fail("submitted"))
    monkeypatch.setattr("ring.cluster.slurm.slurm_call", lambda *a, **k: pytest.fail("asked SLURM"))
    argv = [stage, "--cell", str(tmp_path), "--launcher", "slurm", "--resources", json.dumps(resources)]
    assert launch.main([*argv, "--", "--config", str(tmp_path / "config.yaml"), "--out", str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith(problem)


TRACEBACK_OF = {
    "cause": "Traceback (most recent call last):\n  File x\nValueError: the stage's own reason\n",
    "peer": "Traceback (most recent call last):\n  File y\nRuntimeError: [gloo] Connection closed by peer [10.0.0.2]\n",
    "clean": "ring: pretrain epoch=0 loss=7.7\n",
}


@pytest.mark.parametrize(
    ("logs", "task"),
    [
        (["peer", "peer", "cause", "peer"], 2),  # the task that failed, not those that saw it go
        (["clean", "peer", "clean", "peer"], 1),  # only peers' tracebacks: the first of them
        (["clean", "clean", "clean", "clean"], 0),  # none: task 0's log
    ],
)
def test_a_failure_shows_the_log_of_the_task_that_holds_the_traceback(tmp_path, monkeypatch, capsys, logs, task):
    from ring.cluster import launch, slurm
    from ring.core import accounting

    job = _fake_job(tmp_path, tasks=4)
    for i, kind in enumerate(logs):
        job.task(i).paths.stderr.write_text(TRACEBACK_OF[kind])
    monkeypatch.setattr(slurm, "job_states", lambda ids: {ids[0]: "FAILED"})
    monkeypatch.setattr(accounting, "add_ended_job", lambda cell, job_id: 0)
    assert launch.wait(job, tmp_path, Resources(poll_s=0)) == "failed"
    err = capsys.readouterr().err
    assert f"task {task} of 4 holds the traceback; last lines of {job.task(task).paths.stderr}:" in err
    assert err.rstrip().endswith(TRACEBACK_OF[logs[task]].rstrip().splitlines()[-1])


def test_lost_jobs_are_resubmitted_at_most_max_requeues_times(tmp_path, monkeypatch, capsys):
    from ring.cluster import launch, slurm
    from ring.cluster.jobs import StageJob

    submitted = []
    monkeypatch.setattr(slurm, "preflight", lambda *a, **k: None)
    monkeypatch.setattr(launch, "submit", lambda job, cell, res: submitted.append(1) or _fake_job(tmp_path))
    monkeypatch.setattr(launch, "wait", lambda *a, **k: "gone")
    res = Resources(max_requeues=2)
    assert launch._launch_slurm(StageJob("pretrain", ["--out", str(tmp_path)]), tmp_path, res) == 1
    assert len(submitted) == 3
    assert (
        "3 jobs were lost by SLURM (gone, or ended NODE_FAIL, PREEMPTED, BOOT_FAIL); giving up"
        in capsys.readouterr().err
    )
