"""Following a submitted SLURM job until it ends (torch-free, on a login node), and saying why it failed.

:func:`wait` asks SLURM every ``poll_s`` seconds (sacct, then squeue for jobs accounting has not recorded yet or
still calls PENDING), prints one status line per state change (a pending job's reason with it), and tells a job
that completed from one the cluster lost (a lost node, or a step srun could not start while the controller was
away: resubmitted, it resumes) and from one that failed: then the tail of the log that holds the traceback
(:func:`failing_task`), and for a job out of memory one sentence naming what to raise (:func:`out_of_memory`).
``ring status`` shows a failed job's most specific sentence (:func:`failure_sentence`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import submitit

from ring.cluster import slurm

LOG_TAIL_LINES = 30


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    if not path.exists():
        return f"(no log at {path})"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


# Lines SLURM's step daemon, srun and submitit add to a task's log after the job's own words: never its reason.
AFTERWORDS = ("srun: ", "slurmstepd: ", "submitit ")


def last_sentence(path: Path) -> str:
    """The job's own reason: the last ``ring:`` sentence of its log, else its last line that srun, slurmstepd or
    submitit did not add (the exception's line above srun's "Exited with exit code 1"), else the log's last line."""
    if not path.exists():
        return f"(no log at {path})"
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    said = [line for line in lines if line.startswith("ring: ")]
    own = [line for line in lines if not line.startswith(AFTERWORDS)]
    return said[-1].removeprefix("ring: ") if said else (own or lines or [f"(empty log {path})"])[-1]


def failure_sentence(job: submitit.SlurmJob, cell: Path, state: str, res: slurm.Resources) -> str:
    """The most specific sentence known of a failed job, for ``ring status``: the launcher's own (out of memory,
    naming what to raise: :func:`out_of_memory`), else the job's :func:`last_sentence` in the log of the task that
    holds the traceback (:func:`failing_task`)."""
    _, stderr = failing_task(job)
    text = stderr.read_text(errors="replace") if stderr.is_file() else ""
    if said := out_of_memory(cell, job.job_id, state, text, res):
        return said.removeprefix(f"ring: {cell}: ")
    return last_sentence(stderr)


# What a job out of memory leaves in its log: torch's allocators, Python's, the kernel's OOM killer through slurmstepd.
HOST_MEMORY = ("DefaultCPUAllocator: can't allocate memory", "MemoryError", "oom-kill", "Out Of Memory", "OOM Killed")
GPU_MEMORY = ("CUDA out of memory", "OutOfMemoryError", "HIP out of memory")


def out_of_memory(cell: Path, job_id: str, state: str | None, log: str, res: slurm.Resources) -> str | None:
    """The one sentence for a job that ran out of memory (SLURM's OUT_OF_MEMORY state, or an allocator's failure in
    its log), naming what to raise; None for any other failure."""
    if any(marker in log for marker in GPU_MEMORY):
        return (
            f"ring: {cell}: SLURM job {job_id} ran out of GPU memory; lower the stage's batch_size (the GPU's memory "
            "is fixed: mem_gb is the host's), or ask for a GPU with more memory (gres in profiles/slurm/site.yaml)."
        )
    if state == "OUT_OF_MEMORY" or any(marker in log for marker in HOST_MEMORY):
        return (
            f"ring: {cell}: SLURM job {job_id} ran out of host memory at mem_gb={res.mem_gb:g} GB; raise mem_gb of "
            "this stage under slurm: in profiles/slurm/site.yaml (or lower its num_workers or batch_size) and rerun."
        )
    return None


TRACEBACK = "Traceback (most recent call last)"
# What a rank's traceback says when it only saw another rank go (gloo's and NCCL's words): not the cause.
PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "remote process exited", "NCCL communicator")


def failing_task(job: submitit.SlurmJob) -> tuple[int, Path]:
    """The task whose log holds the failure's traceback, and that log: of the tasks with a traceback, the first one
    whose traceback is not only about a peer that went away (then the first with any); task 0 when none has one
    (one task per GPU on every node: the traceback is often in another task's log than task 0's)."""
    logs = [(i, Path(job.task(i).paths.stderr)) for i in range(job.num_tasks)] if job.num_tasks > 1 else []
    texts = {i: path.read_text(errors="replace") for i, path in logs if path.is_file()}
    with_traceback = [i for i, text in texts.items() if TRACEBACK in text]
    causes = [i for i in with_traceback if not any(m in texts[i].rpartition(TRACEBACK)[2] for m in PEER_GONE)]
    task = (causes or with_traceback or [0])[0]
    return task, Path(job.task(task).paths.stderr) if job.num_tasks > 1 else Path(job.paths.stderr)


def wait(job: submitit.SlurmJob, cell: Path, res: slurm.Resources, adopted: bool = False) -> str:
    """Poll SLURM every ``poll_s`` until the job ends: "completed", "failed" (the tail of the log that holds the
    traceback printed: :func:`failing_task`) or "gone" (ended NODE_FAIL, PREEMPTED or BOOT_FAIL: ``slurm.LOST``;
    ended FAILED before its step started: :func:`never_started`; unknown to sacct and squeue for
    ``unknown_grace_s``; or, for a job ``adopted`` from the cell's record, cancelled before this client saw it run:
    accounting can lag a cancel, so that is the cancelled pending job that ``decide`` resubmits, seen late)."""
    state, ran = poll(job, cell, res)
    if state is None:
        return "gone"
    if state == "COMPLETED":
        try:
            job.done(force_check=True)
            job.results()  # every task's (one per GPU); raises if any failed
            return "completed"
        except Exception as err:  # noqa: BLE001 -- the job failed: its log says why
            reason = type(err).__name__
    else:
        reason = state
    slurm.account_ended(cell, job.job_id)  # first, so that the failure below stays the log's last sentence
    if state in slurm.LOST:
        say(
            f"ring: {cell}: SLURM job {job.job_id} ended {state} (the cluster's doing, not the stage's); submitting "
            "again (it resumes from its checkpoint)"
        )
        return "gone"
    if state == "FAILED" and never_started(job):
        say(never_started_sentence(cell, job.job_id))
        return "gone"
    if state == "CANCELLED" and adopted and not ran:
        say(f"ring: {cell}: SLURM job {job.job_id} was cancelled before it ran; submitting again (it resumes)")
        return "gone"
    report_failure(job, cell, state, reason, res)
    return "failed"


# submitit's first line in a task that started (each run of a requeued job says it again in the same log).
TASK_STARTED = "Starting with JobEnvironment"


def step_never_started(log: str) -> bool:
    """Whether the batch log's last run ended with srun unable to reach SLURM's controller before any task of it
    started: srun asks slurmctld for the job's step, and a controller away longer than srun waits (MessageTimeout,
    about 10 s) ends the batch script FAILED with nothing of the stage run (seen when a requeued job started during
    a controller restart)."""
    refused = [line for line in log.splitlines() if line.startswith("srun: error:") and slurm.unreachable(line)]
    return bool(refused) and log.rfind(refused[-1]) > log.rfind(TASK_STARTED)


def never_started(job: submitit.SlurmJob) -> bool:
    """:func:`step_never_started` for the job's batch log (srun's own errors go to the batch script's stderr)."""
    path = Path(job.paths.stderr)
    return path.is_file() and step_never_started(path.read_text(errors="replace"))


def never_started_sentence(cell: Path, job_id: str) -> str:
    return (
        f"ring: {cell}: SLURM job {job_id} ended FAILED before its stage started: srun could not reach SLURM's "
        "controller (the cluster's doing, not the stage's); submitting again (it resumes from its checkpoint)"
    )


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def poll(job: submitit.SlurmJob, cell: Path, res: slurm.Resources) -> tuple[str | None, bool]:
    """The job's state once it has ended (None: unknown to sacct and squeue for ``unknown_grace_s``, gone), and
    whether it was seen running; one status line per state change on the way."""
    start, last, unknown_since, ran = time.monotonic(), None, None, False
    while True:
        state = slurm.retrying(
            lambda: slurm.job_states([job.job_id])[job.job_id], res, f"asking about job {job.job_id}", cell=cell
        )
        if state is None:
            unknown_since = unknown_since if unknown_since is not None else time.monotonic()
            if time.monotonic() - unknown_since >= res.unknown_grace_s:
                say(
                    f"ring: {cell}: SLURM job {job.job_id} is unknown to sacct and squeue for "
                    f"{res.unknown_grace_s:.0f} s; treating it as gone"
                )
                return None, ran
        else:
            unknown_since = None
        shown = state or "UNKNOWN"
        if shown != last:
            minutes = (time.monotonic() - start) / 60
            # Why a job waits (Resources, Priority, a drained node's ReqNodeNotAvail): squeue's reason, once.
            why = slurm.pending_reason(job.job_id) if shown == "PENDING" else ""
            shown_why = f"{shown} ({why})" if why else shown
            say(f"ring: {cell}: SLURM job {job.job_id} {shown_why} ({minutes:.1f} min)")
            last = shown
        ran = ran or (state in slurm.ALIVE and state != "PENDING")
        if state in slurm.ENDED:
            return state, ran
        time.sleep(res.poll_s)


def report_failure(job: submitit.SlurmJob, cell: Path, state: str, reason: str, res: slurm.Resources) -> None:
    """The failure's lines: the tail of the log that holds the traceback, then, for a job out of memory, the one
    sentence naming what to raise (the last sentence: ``ring status`` shows it)."""
    task, stderr = failing_task(job)
    which = f"task {task} of {job.num_tasks} holds the traceback; " if job.num_tasks > 1 else ""
    say(f"ring: {cell}: SLURM job {job.job_id} failed ({reason}); {which}last lines of {stderr}:\n{log_tail(stderr)}")
    whole = stderr.read_text(errors="replace") if stderr.exists() else ""
    if sentence := out_of_memory(cell, job.job_id, state, whole, res):
        say(sentence)
