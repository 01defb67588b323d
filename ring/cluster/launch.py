"""Launchers: run one cell's stage here, or on SLURM through submitit and wait for it.

    python -m ring.cluster.launch pretrain --cell CELL [--launcher slurm --resources JSON] -- --config ... --out CELL

The workflow's rules call this for every GPU stage.  ``local`` runs the stage in this process.
``slurm`` is the light client of a login node (torch is never imported here):

* it submits the stage as a submitit job with the stage's resources, after ``sbatch --test-only``
  has accepted them, and records the job id in ``CELL/slurm/job.json``;
* a restarted client (Ctrl-C, lost session, crashed Snakemake) finds that record and re-attaches
  to the queued or running job instead of submitting a second one; a job that COMPLETED (before the
  client started, or after it re-attached) is collected when the stage's output (``ring.cluster.jobs.OUTPUT``)
  is present or its stage's collector (``COLLECTORS``) puts back the copies the job kept (Snakemake deletes
  the outputs of a rule it reruns as incomplete, even while their job still runs), and resubmitted
  otherwise: the stage then resumes from its checkpoint, which is never a declared output.  Jobs that
  ended badly are resubmitted
  and resume too.  Runs of an ended job that wrote no segment (hard-killed) are added to the
  cell's provenance from sacct first (ring.core.accounting);
* it asks SLURM itself every ``poll_s`` seconds (sacct, then squeue for jobs accounting has not
  recorded yet or still calls PENDING) and prints one status line per state change;
* a job that neither sacct nor squeue knows for ``unknown_grace_s`` seconds is gone (e.g. a
  cancelled pending array task): it is resubmitted and resumes;
* an unreachable controller (sbatch/sacct/squeue "Unable to contact slurm controller") is retried
  with doubling delays for ``controller_wait_s`` seconds (one line per retry naming the cell; SLURM's
  own words only with ``--verbose``); only a real refusal is reported as bad resources;
* a failed job fails the rule with the tail of its SLURM log and the log's path.

Stopping the client never cancels the cluster job; ``ring cancel`` does.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import submitit

from ring.cluster import slurm
from ring.cluster.detach import accepts, detach
from ring.cluster.jobs import IGNORED_STOP, OUTPUT, StageJob
from ring.core import accounting
from ring.core import config as C
from ring.plan import checks, rerun

LOCK = "launch.lock"  # held by the one client attached to a cell (cell_lock)


LOG_TAIL_LINES = 30


def job_config_hash(job: StageJob) -> str | None:
    """The hash of the cell config a job runs (None when its argv names none)."""
    if "--config" not in job.argv or job.stage not in checks.STAGE_CONFIGS:
        return None
    return C.config_hash(C.load(checks.STAGE_CONFIGS[job.stage], job.argv[job.argv.index("--config") + 1]))


def decide(state: str | None, output_present: bool) -> str:
    """What a restarted client does with a cell's recorded job in ``state`` (None: SLURM does not
    know it): "collect" its outputs, "wait" for it, or "resubmit" (the stage resumes)."""
    if state == "COMPLETED":
        return "collect" if output_present else "resubmit"
    if state is None or state in slurm.ALIVE:
        return "wait"  # an unknown job is waited on for unknown_grace_s, then resubmitted
    return "resubmit"


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    if not path.exists():
        return f"(no log at {path})"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def last_sentence(path: Path) -> str:
    """The job's own reason: the last ``ring:`` sentence of its log (srun's "Exited with exit code 1" or a submitit
    warning may follow it), else the log's last line."""
    if not path.exists():
        return f"(no log at {path})"
    lines = path.read_text(errors="replace").splitlines()
    said = [line for line in lines if line.startswith("ring: ")]
    return said[-1].removeprefix("ring: ") if said else (lines[-1] if lines else f"(empty log {path})")


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
    unknown to sacct and squeue for ``unknown_grace_s``; or, for a job ``adopted`` from the
    cell's record, cancelled before this client saw it run: accounting can lag a cancel, so that is the
    cancelled pending job that ``decide`` resubmits, seen late)."""
    start, last, unknown_since, ran = time.monotonic(), None, None, False
    while True:
        state = slurm.retrying(
            lambda: slurm.job_states([job.job_id])[job.job_id], res, f"asking about job {job.job_id}", cell=cell
        )
        if state is None:
            unknown_since = unknown_since if unknown_since is not None else time.monotonic()
            if time.monotonic() - unknown_since >= res.unknown_grace_s:
                print(
                    f"ring: {cell}: SLURM job {job.job_id} is unknown to sacct and squeue for "
                    f"{res.unknown_grace_s:.0f} s; treating it as gone",
                    file=sys.stderr,
                    flush=True,
                )
                return "gone"
        else:
            unknown_since = None
        shown = state or "UNKNOWN"
        if shown != last:
            minutes = (time.monotonic() - start) / 60
            # Why a job waits (Resources, Priority, a drained node's ReqNodeNotAvail): squeue's reason, once.
            why = slurm.pending_reason(job.job_id) if shown == "PENDING" else ""
            shown_why = f"{shown} ({why})" if why else shown
            print(f"ring: {cell}: SLURM job {job.job_id} {shown_why} ({minutes:.1f} min)", file=sys.stderr, flush=True)
            last = shown
        ran = ran or (state in slurm.ALIVE and state != "PENDING")
        if state in slurm.ENDED:
            break
        time.sleep(res.poll_s)
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
        print(
            f"ring: {cell}: SLURM job {job.job_id} ended {state} (the cluster's doing, not the stage's); submitting "
            "again (it resumes from its checkpoint)",
            file=sys.stderr,
            flush=True,
        )
        return "gone"
    if state == "CANCELLED" and adopted and not ran:
        print(
            f"ring: {cell}: SLURM job {job.job_id} was cancelled before it ran; submitting again (it resumes)",
            file=sys.stderr,
            flush=True,
        )
        return "gone"
    task, stderr = failing_task(job)
    which = f"task {task} of {job.num_tasks} holds the traceback; " if job.num_tasks > 1 else ""
    print(
        f"ring: {cell}: SLURM job {job.job_id} failed ({reason}); {which}last lines of {stderr}:\n{log_tail(stderr)}",
        file=sys.stderr,
        flush=True,
    )
    whole = stderr.read_text(errors="replace") if stderr.exists() else ""
    if sentence := out_of_memory(cell, job.job_id, state, whole, res):  # the last sentence: status shows it
        print(sentence, file=sys.stderr, flush=True)
    return "failed"


def checkpoint_interval(argv: list[str]) -> float | None:
    if "--config" not in argv:
        return None
    return (C.read_yaml(argv[argv.index("--config") + 1], "Config file") or {}).get("checkpoint_interval_min")


def recorded_job(record: dict) -> submitit.SlurmJob:
    return submitit.SlurmJob(folder=record["folder"], job_id=record["job_id"], tasks=range(record.get("tasks", 1)))


def submit(job: StageJob, cell: Path, res: slurm.Resources) -> submitit.SlurmJob:
    folder = cell / "slurm"
    # The job's name is the cell's path below the grid: ring-pretrain-cifar10-IRing-seed0.
    executor = slurm.make_executor(folder, res, "ring-" + "-".join(cell.parts[-4:]))

    def once() -> submitit.SlurmJob:
        try:
            return executor.submit(job)
        except submitit.core.utils.FailedJobError as err:
            if slurm.unreachable(str(err)):
                raise slurm.ControllerUnreachable(" ".join(str(err).split())) from None
            raise ValueError(f"sbatch refused the job ({' '.join(str(err).split())}).") from None

    submitted = slurm.retrying(once, res, "submitting", cell=cell)
    slurm.write_record(cell, submitted.job_id, folder, job.stage, tasks=res.tasks, config_hash=job_config_hash(job))
    print(
        f"ring: {cell}: submitted SLURM job {submitted.job_id} (log {submitted.paths.stderr})",
        file=sys.stderr,
        flush=True,
    )
    return submitted


def accounting_folder(cell: Path, record: dict, config_hash: str | None) -> Path | None:
    """Where the recorded job's runs are accounted: the cell when the job ran its current config (or a record that
    names none), else the run of the job's own config kept under ``runs/<its hash>/`` (an edit set it aside there,
    its provenance with it), or None when nothing of it was kept.  A cell's provenance holds its own config's jobs
    only: an earlier config's job added there would be counted twice, there and in its kept run."""
    recorded = record.get("config_hash")
    if recorded is None or config_hash is None or recorded == config_hash:
        return cell
    from ring.plan.rerun import RUNS  # torch-free

    kept = cell / RUNS / recorded
    return kept if kept.is_dir() else None


def note_ignored_stops(cell: Path, attached: submitit.SlurmJob) -> None:
    """A COMPLETED job that got SLURM's stop signal after its outputs were complete says so in its log; the launcher
    says it too and records it in the job's provenance segment (the segment itself was written before the export)."""
    stderr = Path(attached.paths.stderr)
    count = stderr.read_text(errors="replace").count(IGNORED_STOP) if stderr.is_file() else 0
    if count and accounting.note_ignored_stops(cell, attached.job_id, count):
        print(
            f"ring: {cell}: SLURM job {attached.job_id} {IGNORED_STOP} ({count}x); it ignored it and ended "
            f"COMPLETED (noted in {accounting.FILE})",
            file=sys.stderr,
            flush=True,
        )


@contextmanager
def cell_lock(cell: Path):
    """One client per cell at a time: a second ``ring.cluster.launch`` of the same cell (two Snakemake runs, or one
    and a by-hand launch) waits here, then finds the first one's record and re-attaches instead of submitting."""
    path = cell / "slurm" / LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(
                f"ring: {cell}: another client is attached to this cell; waiting for it, then re-attaching",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


# The evaluation stages and the argument naming the encoder each evaluates: their runs are kept per config and
# encoder, and a finished one is collected (or restored, an edit undone) on the login node without a job.
EVALUATED_ENCODER = {"lincls": "--encoder", "transfer": "--encoder", "detection": "--weights"}


def _stage_config(job: StageJob):
    return C.load(checks.STAGE_CONFIGS[job.stage], job.argv[job.argv.index("--config") + 1])


def collect_exports(job: StageJob, cell: Path) -> bool:
    """A pretraining job that COMPLETED while no client watched, whose encoders Snakemake deleted since: put back
    the copies the stage kept (verified against its checksum record, torch-free) instead of submitting again.
    An evaluation is collected the same way, for the encoder it is to evaluate (:func:`collect_evaluation`)."""
    if "--config" not in job.argv or job.stage not in checks.STAGE_CONFIGS:
        return False
    if job.stage in EVALUATED_ENCODER:
        return collect_evaluation(job, cell)
    restored = rerun.restore_exports(cell, _stage_config(job))
    return bool(restored) and (cell / OUTPUT[job.stage]).exists()


def collect_evaluation(job: StageJob, cell: Path) -> bool:
    """Before an evaluation runs or is submitted (torch-free): its cell brought in line with its config and the
    encoder it is to evaluate (ring.plan.rerun.collect: the run of a previous encoder kept under runs/, a kept run
    of this one restored); True when that evaluation is complete, its outputs put back from their kept copies and
    verified: then nothing runs and nothing is submitted."""
    flag = EVALUATED_ENCODER.get(job.stage)
    if flag is None or "--config" not in job.argv or flag not in job.argv:
        return False

    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if not rerun.collect(cell, job.stage, _stage_config(job), job.argv[job.argv.index(flag) + 1], log=log):
        return False
    print(
        f"ring: {cell}: the evaluation of this encoder with this config is complete ({OUTPUT[job.stage]} put back "
        "from the copy its run kept, its checksum verified); nothing to run",
        file=sys.stderr,
        flush=True,
    )
    return True


# Each stage's collector: puts back the outputs a COMPLETED job of this config wrote and Snakemake deleted since
# (it deletes a rerun rule's outputs as incomplete, even while the job that writes them still runs), from the
# copies the stage keeps where Snakemake does not look; True when the stage's output is in place again.  A stage
# without one is submitted again (it resumes from its checkpoint).
COLLECTORS = {"pretrain": collect_exports, **dict.fromkeys(EVALUATED_ENCODER, collect_evaluation)}


def collect_kept(job: StageJob, cell: Path) -> bool:
    collector = COLLECTORS.get(job.stage)
    return collector is not None and collector(job, cell)


def completed(job: StageJob, cell: Path, attached: submitit.SlurmJob) -> int:
    """The launcher's status once the job it waited on COMPLETED: 0 when the stage's output is there, or was put
    back from the job's kept copies (a client that re-attached to a running job after Snakemake's rerun had
    deleted what the job already wrote), else 1."""
    output = cell / OUTPUT[job.stage]
    note_ignored_stops(cell, attached)
    if output.exists():
        return 0
    if collect_kept(job, cell):
        print(
            f"ring: {cell}: SLURM job {attached.job_id} COMPLETED; restored {output} (deleted by Snakemake's rerun "
            "while the job ran) from the copy the job kept, its checksum verified",
            file=sys.stderr,
            flush=True,
        )
        return 0
    print(
        f"ring: {cell}: SLURM job {attached.job_id} COMPLETED without writing {output}; see {attached.paths.stderr}",
        file=sys.stderr,
        flush=True,
    )
    return 1


def accepted(job: StageJob, cell: Path, wanted: str | None, job_id: str) -> bool:
    """Whether the finished output is of the config this client runs (ring.cluster.detach.accepts)."""
    return accepts(cell, job.stage, wanted, job_id, log=lambda line: print(line, file=sys.stderr, flush=True))


def launch_slurm(job: StageJob, cell: Path, res: slurm.Resources) -> int:
    with cell_lock(cell):
        return _launch_slurm(job, cell, res)


def _launch_slurm(job: StageJob, cell: Path, res: slurm.Resources) -> int:
    output = cell / OUTPUT[job.stage]
    wanted = job_config_hash(job)  # what this client was asked to run: only a job of it makes the cell's output
    record, checked = slurm.read_record(cell), False
    attached, adopted = None, False
    if record is not None and detach(cell, wanted, res, log=lambda line: print(line, file=sys.stderr)):
        record = None  # its job ran another config and is cancelled now: the edited cell is submitted
    if collect_evaluation(job, cell):  # a finished job's evaluation, or a kept one (an edit undone): no job
        return 0
    if record is not None:
        state = slurm.retrying(
            lambda: slurm.job_states([record["job_id"]])[record["job_id"]],
            res,
            "asking about the recorded job",
            cell=cell,
        )
        action = decide(state, output.exists())
        if state in slurm.ENDED:  # nothing of this cell runs now: the file has one writer
            folder = accounting_folder(cell, record, wanted)
            if folder is not None:
                slurm.account_ended(folder, record["job_id"])
        if action == "collect" and accepted(job, cell, wanted, record["job_id"]):
            print(
                f"ring: {cell}: SLURM job {record['job_id']} COMPLETED meanwhile; collected {output}",
                file=sys.stderr,
                flush=True,
            )
            return 0
        if action == "collect":
            pass  # another config's output, superseded (accepted's sentence): the cell's own config is submitted
        elif action == "wait":
            attached, adopted = recorded_job(record), True
            print(f"ring: {cell}: re-attached to SLURM job {attached.job_id}", file=sys.stderr, flush=True)
        elif state == "COMPLETED" and collect_kept(job, cell):
            print(
                f"ring: {cell}: SLURM job {record['job_id']} COMPLETED meanwhile; restored {output} (deleted by "
                "Snakemake's rerun) from the copy the job kept, its checksum verified; nothing submitted",
                file=sys.stderr,
                flush=True,
            )
            return 0
        elif state == "COMPLETED" and record.get("config_hash") not in (None, job_config_hash(job)):
            print(
                f"ring: {cell}: SLURM job {record['job_id']} ran an earlier config of this cell (it was edited since); "
                "submitting the edited cell",
                file=sys.stderr,
                flush=True,
            )
        elif state == "COMPLETED":
            print(
                f"ring: {cell}: SLURM job {record['job_id']} COMPLETED but {output} is missing (Snakemake deletes "
                "the outputs of a job it reruns); submitting again: the stage resumes from its checkpoint where that "
                "is still this cell's",
                file=sys.stderr,
                flush=True,
            )
        else:
            print(
                f"ring: {cell}: previous job {record['job_id']} ended {state}; submitting again (it resumes)",
                file=sys.stderr,
                flush=True,
            )
    # A gone job is resubmitted; bounded like requeues, so a cluster that loses every job cannot loop.
    for _ in range(res.max_requeues + 1):
        if attached is None:
            if not checked:
                slurm.preflight(res, checkpoint_interval(job.argv), cell)
                checked = True
            attached = submit(job, cell, res)
        outcome = wait(attached, cell, res, adopted=adopted)
        adopted = False
        if outcome == "completed":
            if output.exists() and not accepted(job, cell, wanted, attached.job_id):
                attached = None  # another config's output, superseded: the cell's own config is submitted
                continue
            return completed(job, cell, attached)
        if outcome == "failed":
            return 1
        attached = None
    print(
        f"ring: {cell}: {res.max_requeues + 1} jobs were lost by SLURM (gone, or ended {', '.join(slurm.LOST)}); "
        "giving up (raise max_requeues, or check the nodes: sinfo -R)",
        file=sys.stderr,
        flush=True,
    )
    return 1


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    stage_argv = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description="Run one cell's stage locally or on SLURM.")
    parser.add_argument("stage")
    parser.add_argument("--cell", required=True, type=Path)
    parser.add_argument("--launcher", choices=["local", "slurm"], default="local")
    parser.add_argument("--resources", default="{}", help="JSON of Resources fields (slurm launcher)")
    parser.add_argument("--verbose", action="store_true", help="SLURM's own error lines beside the retry lines")
    args = parser.parse_args(own)
    slurm.VERBOSE["on"] = args.verbose
    try:
        job = StageJob(args.stage, stage_argv)
        values = None
        if "--config" in stage_argv:
            # The plan's checks (ring.plan.checks) on the cell's config, before any job starts or is queued.
            path = stage_argv[stage_argv.index("--config") + 1]
            checks.load_checked(args.stage, path)
            values = C.read_yaml(path, "Config file")
        if args.launcher == "local":
            from ring.cluster import progress  # CELL/running.json for `ring status`

            if collect_evaluation(job, args.cell):  # as on SLURM: a finished evaluation is not run again
                return 0

            with progress.running(args.cell) as run:
                run["status"] = job.run_here()
            return run["status"]
        res = slurm.Resources.from_dict(json.loads(args.resources))
        if problems := slurm.stage_problems(args.stage, res, values):  # before anything is submitted
            raise ValueError(problems[0])
        return launch_slurm(job, args.cell, res)
    except (ValueError, RuntimeError, FileNotFoundError) as err:
        print(f"ring: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
