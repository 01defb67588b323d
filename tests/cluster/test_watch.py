"""Following a submitted job until it ends: status lines, a late-seen cancel, a lost job, and a failure's log and
sentence (the cluster itself is exercised in tests/workflow/test_slurm_*.py)."""

import pytest

from ring.cluster.slurm import Resources
from tests.cluster.test_launch import _fake_job


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
    from ring.cluster import slurm, watch
    from ring.core import accounting

    job = _fake_job(tmp_path)
    replies = iter(states)
    monkeypatch.setattr(slurm, "job_states", lambda ids: {ids[0]: next(replies)})
    # squeue's reason for a PENDING line: faked too, or a real squeue waits 18 s for a controller that CI lacks.
    monkeypatch.setattr(slurm, "pending_reason", lambda job_id: "Priority")
    monkeypatch.setattr(accounting, "add_ended_job", lambda cell, job_id: 1)  # a run to report, as in CI
    res = Resources(poll_s=0, unknown_grace_s=60)
    assert watch.wait(job, tmp_path, res, adopted=adopted) == outcome
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
    from ring.cluster import watch

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
    assert watch.wait(_fake_job(tmp_path), tmp_path, Resources(poll_s=0)) == "completed"
    shown = [line.split(" SLURM job 9_1 ")[1].split()[0] for line in capsys.readouterr().err.splitlines()]
    assert shown == ["RUNNING", "REQUEUED", "PENDING", "RUNNING", "COMPLETED"]


def test_a_cancelled_pending_job_keeps_accountings_word(monkeypatch):
    from ring.cluster import slurm

    _polls(monkeypatch, [("9_1|PENDING\n", "")])  # the controller no longer holds it: accounting has not caught up
    assert slurm.job_states(["9_1"]) == {"9_1": "PENDING"}


@pytest.mark.parametrize("sacct, squeue, state", [("NODE_FAIL", "PENDING", "PENDING"), ("NODE_FAIL", "", "NODE_FAIL")])
def test_a_lost_job_slurm_requeued_itself_is_waited_on_not_submitted_again(monkeypatch, sacct, squeue, state):
    """SLURM (JobRequeue=1) requeues a job whose node failed under its own id; accounting says NODE_FAIL until the
    requeued run's record arrives.  While the controller holds the job its word wins, so the launcher waits on it
    instead of submitting a second job for the cell; a lost job it no longer holds stays lost (resubmitted)."""
    from ring.cluster import slurm

    _polls(monkeypatch, [(f"9|{sacct}\n", f"9|{squeue}\n" if squeue else "")])
    assert slurm.job_states(["9"]) == {"9": state}
    assert (state in slurm.ALIVE) == bool(squeue)


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
    from ring.cluster import slurm, watch
    from ring.core import accounting

    job = _fake_job(tmp_path)
    (tmp_path / "job.err").write_text(log)
    replies = iter(["RUNNING", state])
    monkeypatch.setattr(slurm, "job_states", lambda ids: {ids[0]: next(replies)})
    monkeypatch.setattr(accounting, "add_ended_job", lambda cell, job_id: 0)
    monkeypatch.setattr(job, "results", lambda: (_ for _ in ()).throw(RuntimeError("failed")))
    assert watch.wait(job, tmp_path, Resources(poll_s=0, unknown_grace_s=60, mem_gb=8)) == "failed"
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("ring: ")]
    if says is None:
        assert said[-1] == "ring: the stage's own reason" and not any("ran out of" in line for line in said)
    else:
        assert said[-1].startswith(f"ring: {tmp_path}: SLURM job 9_1 ran out of ") and says in said[-1], said
    # ring status shows the launcher's sentence where it has one, else the job's own, never srun's line after it.
    shown = watch.failure_sentence(job, tmp_path, state, Resources(mem_gb=8))
    assert shown == ("the stage's own reason" if says is None else said[-1].removeprefix(f"ring: {tmp_path}: "))


def test_a_waiting_client_shows_why_its_job_is_pending(tmp_path, monkeypatch, capsys):
    from ring.cluster import slurm, watch

    replies = iter(["PENDING", "PENDING", "RUNNING", "COMPLETED"])
    monkeypatch.setattr(slurm, "job_states", lambda ids: {ids[0]: next(replies)})
    monkeypatch.setattr(slurm, "pending_reason", lambda job_id: "ReqNodeNotAvail, UnavailableNodes:node1")
    assert watch.wait(_fake_job(tmp_path), tmp_path, Resources(poll_s=0)) == "completed"
    lines = capsys.readouterr().err.splitlines()
    assert "SLURM job 9_1 PENDING (ReqNodeNotAvail, UnavailableNodes:node1) (0.0 min)" in lines[0]
    assert len(lines) == 3  # PENDING once, RUNNING, COMPLETED


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
    from ring.cluster import slurm, watch
    from ring.core import accounting

    job = _fake_job(tmp_path, tasks=4)
    for i, kind in enumerate(logs):
        job.task(i).paths.stderr.write_text(TRACEBACK_OF[kind])
    monkeypatch.setattr(slurm, "job_states", lambda ids: {ids[0]: "FAILED"})
    monkeypatch.setattr(accounting, "add_ended_job", lambda cell, job_id: 0)
    assert watch.wait(job, tmp_path, Resources(poll_s=0)) == "failed"
    err = capsys.readouterr().err
    assert f"task {task} of 4 holds the traceback; last lines of {job.task(task).paths.stderr}:" in err
    assert err.rstrip().endswith(TRACEBACK_OF[logs[task]].rstrip().splitlines()[-1])


@pytest.mark.parametrize(
    ("log", "shown"),
    [
        ("ring: loading\nring: the stage's own reason\nsrun: error: vm: task 0: Exited with exit code 1\n", None),
        (
            "Traceback (most recent call last):\n  File x\nValueError: bad shard\n"
            "srun: error: vm: task 0: Exited with exit code 1\nsubmitit WARNING (2026-12-01) - Bypassing signal\n",
            "ValueError: bad shard",
        ),
        ("slurmstepd: error: *** JOB 9 CANCELLED ***\n", "slurmstepd: error: *** JOB 9 CANCELLED ***"),
    ],
)
def test_a_failed_cell_shows_the_most_specific_sentence_known(tmp_path, log, shown):
    """Issue 50 item 3: `ring status` showed srun's "Exited with exit code 1" for a job out of memory, and for any
    job whose log had no `ring:` line."""
    from ring.cluster import watch

    job = _fake_job(tmp_path)
    (tmp_path / "job.err").write_text(log)
    assert watch.failure_sentence(job, tmp_path, "FAILED", Resources()) == (shown or "the stage's own reason")
    (tmp_path / "job.err").write_text("slurmstepd: error: Detected 1 oom_kill event\n" + log)
    assert watch.failure_sentence(job, tmp_path, "OUT_OF_MEMORY", Resources(mem_gb=6, gpus_per_node=2)).startswith(
        "SLURM job 9_1 ran out of host memory at mem_gb=6 GB; raise mem_gb of this stage"
    )


def test_a_job_the_scheduler_has_not_looked_at_shows_no_reason(monkeypatch):
    """squeue's reason of a job just submitted is "None": the status line read "PENDING (None)"."""
    import subprocess

    from ring.cluster import slurm

    for reason, shown in (("None", ""), ("Priority", "Priority"), ("", "")):
        reply = subprocess.CompletedProcess([], 0, stdout=f"{reason}\n", stderr="")
        monkeypatch.setattr(slurm, "slurm_call", lambda args, timeout=60, reply=reply: reply)
        assert slurm.pending_reason("9") == shown


# srun's words, as the local cluster printed them with slurmctld stopped while a batch script reached srun.
SRUN_AWAY = (
    "srun: error: Unable to confirm allocation for job 1002: Unable to contact slurm controller (connect failure)\n"
    "srun: Check SLURM_JOB_ID environment variable. Expired or invalid job 1002\n"
)
STARTED = "submitit INFO (2026-12-03 18:03:18,000) - Starting with JobEnvironment(job_id=1002, ...)\n"
TASK_FAILED = "Traceback (most recent call last):\nValueError: bad\nsrun: error: vm: task 0: Exited with exit code 1\n"


@pytest.mark.parametrize(
    "log, never",
    [
        (SRUN_AWAY, True),
        # A requeued job's runs share one log: the last run is the one that counts.
        (STARTED + "slurmstepd: error: *** JOB 1002 CANCELLED DUE TO JOB REQUEUE ***\n" + SRUN_AWAY, True),
        (SRUN_AWAY + STARTED + TASK_FAILED, False),
        (STARTED + TASK_FAILED, False),
        ("", False),
    ],
)
def test_a_step_srun_could_not_start_is_told_from_a_task_that_failed(log, never):
    from ring.cluster.watch import step_never_started

    assert step_never_started(log) is never


def test_a_job_that_failed_before_its_step_started_is_submitted_again(tmp_path, monkeypatch, capsys):
    from ring.cluster import slurm, watch
    from ring.core import accounting

    job = _fake_job(tmp_path)
    (tmp_path / "job.err").write_text(SRUN_AWAY)
    replies = iter(["RUNNING", "FAILED"])
    monkeypatch.setattr(slurm, "job_states", lambda ids: {ids[0]: next(replies)})
    monkeypatch.setattr(accounting, "add_ended_job", lambda cell, job_id: 1)
    assert watch.wait(job, tmp_path, Resources(poll_s=0, unknown_grace_s=60)) == "gone"
    said = capsys.readouterr().err
    assert "ended FAILED before its stage started: srun could not reach SLURM's controller" in said
    assert "failed (" not in said  # no failure's log tail: the stage never ran
