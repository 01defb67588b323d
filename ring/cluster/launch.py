"""Launchers: run one cell's stage here, or on SLURM through submitit and wait for it.

    python -m ring.cluster.launch pretrain --cell CELL [--launcher slurm --resources JSON] -- --config ... --out CELL

The workflow's rules call this for every GPU stage.  ``local`` runs the stage in this process.
``slurm`` is the light client of a login node (torch is never imported here):

* it submits the stage as a submitit job with the stage's resources, after ``sbatch --test-only``
  has accepted them, and records the job id in ``CELL/slurm/job.json``;
* a restarted client (Ctrl-C, lost session, crashed Snakemake) finds that record and re-attaches
  to the queued or running job instead of submitting a second one; a job that COMPLETED (before the
  client started, or after it re-attached) is collected when the stage's output (``Stage.output``, ring.core.stages)
  is present or its stage's collector (``Stage.collector``) puts back the copies the job kept (Snakemake deletes
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
import os
import sys
from contextlib import contextmanager
from pathlib import Path

import submitit

from ring.cluster import admission, slurm
from ring.cluster.detach import accepts, detach, made_with
from ring.cluster.jobs import IGNORED_STOP, StageJob
from ring.cluster.watch import never_started, never_started_sentence, say, wait
from ring.core import accounting, cell_runs, config
from ring.core.refs import resolve
from ring.core.stages import STAGES
from ring.core.yaml_reading import read_yaml
from ring.plan import checks

LOCK = "launch.lock"  # held by the one client attached to a cell (cell_lock)


def job_config_hash(job: StageJob) -> str | None:
    """The hash of the cell config a job runs (None when its argv names none)."""
    if "--config" not in job.argv or STAGES[job.stage].config is None:
        return None
    return config.config_hash(config.load(STAGES[job.stage].config, job.argv[job.argv.index("--config") + 1]))


def decide(state: str | None, output_present: bool) -> str:
    """What a restarted client does with a cell's recorded job in ``state`` (None: SLURM does not
    know it): "collect" its outputs, "wait" for it, or "resubmit" (the stage resumes)."""
    if state == "COMPLETED":
        return "collect" if output_present else "resubmit"
    if state is None or state in slurm.ALIVE:
        return "wait"  # an unknown job is waited on for unknown_grace_s, then resubmitted
    return "resubmit"


def checkpoint_interval(argv: list[str]) -> float | None:
    if "--config" not in argv:
        return None
    return (read_yaml(argv[argv.index("--config") + 1], "Config file") or {}).get("checkpoint_interval_min")


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
    """Where the recorded job's runs are accounted: the folder whose provenance already holds a segment of the job
    (ring.core.accounting.holder: the cell, whose run continued to a longer schedule keeps its earlier config's jobs;
    or a run an edit or a retrained encoder set aside under ``runs/`` with its jobs: an evaluation's run is kept per
    config *and* encoder, so its record's config hash alone cannot tell), else the cell when the job ran its current
    config (or a record that names none), else the run of the job's own config kept under ``runs/<its hash>/``, or
    None when nothing of it was kept.  A job is in one provenance only: added to a second it would be counted
    twice."""
    from ring.core.cell_runs import RUNS  # torch-free

    if (holder := accounting.holder(cell, RUNS, record["job_id"])) is not None:
        return holder
    recorded = record.get("config_hash")
    if recorded is None or config_hash is None or recorded == config_hash:
        return cell
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


@contextmanager
def folder_lock(cell: Path):
    """One local launcher per cell: an exclusive lock on the cell folder itself (no file is written into it), held by
    the launcher's process for as long as it runs, whatever becomes of the Snakemake that started it (a killed
    Snakemake, ``--unlock`` and a rerun leave the first launcher training).  A second launcher waits here; True is
    yielded to one that waited."""
    cell.mkdir(parents=True, exist_ok=True)
    fd = os.open(cell, os.O_RDONLY)
    waited = False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            waited = True
            from ring.cluster import progress  # the holder's pid and progress, from its running.json

            state, detail = progress.local_state(cell)
            holder = f" ({detail})" if state == "running" and detail else ""
            print(
                f"ring: {cell}: another launcher runs this cell{holder}; waiting for it to end, so that no two "
                "train it side by side",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield waited
    finally:
        os.close(fd)


def launch_local(job: StageJob, cell: Path) -> int:
    """Run the stage here, holding the cell's lock (:func:`folder_lock`); a launcher that waited for another takes
    the output that one finished with this config as it is, and otherwise runs (the stage resumes from the
    checkpoint the other wrote)."""
    from ring.cluster import progress  # CELL/running.json for `ring status`

    with folder_lock(cell) as waited:
        if collect_evaluation(job, cell):  # as on SLURM: a finished evaluation is not run again
            return 0
        wanted = job_config_hash(job)
        output = STAGES[job.stage].output
        if waited and (cell / output).exists() and wanted and made_with(cell, job.stage) == wanted:
            print(
                f"ring: {cell}: {output} of this config is there (finished by the launcher this one waited "
                "for); nothing to run",
                file=sys.stderr,
                flush=True,
            )
            return 0
        with progress.running(cell) as run:
            run["status"] = job.run_here()
        return run["status"]


def _stage_config(job: StageJob):
    return config.load(STAGES[job.stage].config, job.argv[job.argv.index("--config") + 1])


def collect_exports(job: StageJob, cell: Path) -> bool:
    """A pretraining job that COMPLETED while no client watched, whose encoders Snakemake deleted since: put back
    the copies the stage kept (verified against its checksum record, torch-free) instead of submitting again.
    An evaluation is collected the same way, for the encoder it is to evaluate (:func:`collect_evaluation`)."""
    if "--config" not in job.argv or STAGES[job.stage].config is None:
        return False
    if STAGES[job.stage].encoder_flag:
        return collect_evaluation(job, cell)
    restored = cell_runs.restore_exports(cell, _stage_config(job))
    return bool(restored) and (cell / STAGES[job.stage].output).exists()


def collect_evaluation(job: StageJob, cell: Path) -> bool:
    """Before an evaluation runs or is submitted (torch-free): its cell brought in line with its config and the
    encoder it is to evaluate (ring.core.cell_runs.collect: the run of a previous encoder kept under runs/, a kept run
    of this one restored); True when that evaluation is complete, its outputs put back from their kept copies and
    verified: then nothing runs and nothing is submitted."""
    flag = STAGES[job.stage].encoder_flag  # the argument naming the encoder it evaluates
    if flag is None or "--config" not in job.argv or flag not in job.argv:
        return False

    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if not cell_runs.collect(cell, job.stage, _stage_config(job), job.argv[job.argv.index(flag) + 1], log=log):
        return False
    print(
        f"ring: {cell}: the evaluation of this encoder with this config is complete "
        f"({STAGES[job.stage].output} put back from the copy its run kept, its checksum verified); nothing to run",
        file=sys.stderr,
        flush=True,
    )
    return True


def collect_kept(job: StageJob, cell: Path) -> bool:
    """The stage's collector (ring.core.stages.Stage.collector) puts back the outputs a COMPLETED job of this config
    wrote and Snakemake deleted since (it deletes a rerun rule's outputs as incomplete, even while the job that writes
    them still runs), from the copies the stage keeps where Snakemake does not look; True when the stage's output is
    in place again.  A stage without one is submitted again (it resumes from its checkpoint)."""
    collector = STAGES[job.stage].collector
    return collector is not None and resolve(collector)(job, cell)


def completed(job: StageJob, cell: Path, attached: submitit.SlurmJob) -> int:
    """The launcher's status once the job it waited on COMPLETED: 0 when the stage's output is there, or was put
    back from the job's kept copies (a client that re-attached to a running job after Snakemake's rerun had
    deleted what the job already wrote), else 1."""
    output = cell / STAGES[job.stage].output
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
    wanted = job_config_hash(job)  # what this client was asked to run: only a job of it makes the cell's output
    record = slurm.read_record(cell)
    if record is not None and detach(cell, wanted, res, log=lambda line: print(line, file=sys.stderr)):
        record = None  # its job ran another config and is cancelled now: the edited cell is submitted
    if collect_evaluation(job, cell):  # a finished job's evaluation, or a kept one (an edit undone): no job
        return 0
    done, attached = reattach(job, cell, res, record, wanted) if record is not None else (False, None)
    return 0 if done else follow(job, cell, res, attached, wanted)


def reattach(
    job: StageJob, cell: Path, res: slurm.Resources, record: dict, wanted: str | None
) -> tuple[bool, submitit.SlurmJob | None]:
    """What a client does with the cell's recorded job (:func:`decide`): (True, None) when the cell's output is
    there now (collected, or put back from the job's kept copies), (False, the job) to wait on it, (False, None)
    to submit the cell again."""
    output = cell / STAGES[job.stage].output
    state = slurm.retrying(
        lambda: slurm.job_states([record["job_id"]])[record["job_id"]], res, "asking about the recorded job", cell=cell
    )
    action = decide(state, output.exists())
    folder = accounting_folder(cell, record, wanted) if state in slurm.ENDED else cell
    if state in slurm.ENDED and folder is not None:  # nothing of this cell runs now: the file has one writer
        slurm.account_ended(folder, record["job_id"])
    if action == "collect" and accepted(job, cell, wanted, record["job_id"]):
        say(f"ring: {cell}: SLURM job {record['job_id']} COMPLETED meanwhile; collected {output}")
        return True, None
    if action == "collect":
        return False, None  # another config's output, superseded (accepted's sentence): the cell's own is submitted
    if action == "wait":
        attached = recorded_job(record)
        say(f"ring: {cell}: re-attached to SLURM job {attached.job_id}")
        return False, attached
    if state == "COMPLETED" and collect_kept(job, cell):
        say(
            f"ring: {cell}: SLURM job {record['job_id']} COMPLETED meanwhile; restored {output} (deleted by "
            "Snakemake's rerun) from the copy the job kept, its checksum verified; nothing submitted"
        )
        return True, None
    if state == "COMPLETED" and record.get("config_hash") not in (None, wanted):
        say(
            f"ring: {cell}: SLURM job {record['job_id']} ran an earlier config of this cell (it was edited since); "
            "submitting the edited cell"
        )
    elif state == "COMPLETED" and folder != cell:
        say(
            f"ring: {cell}: SLURM job {record['job_id']} made a run of this cell that an edit or a retrained encoder "
            f"set aside since (kept in {folder}); running this cell's own"
        )
    elif state == "COMPLETED":
        say(
            f"ring: {cell}: SLURM job {record['job_id']} COMPLETED but {output} is missing (Snakemake deletes "
            "the outputs of a job it reruns); submitting again: the stage resumes from its checkpoint where that "
            "is still this cell's"
        )
    elif state == "FAILED" and never_started(recorded_job(record)):
        say(never_started_sentence(cell, record["job_id"]))
    else:
        say(f"ring: {cell}: previous job {record['job_id']} ended {state}; submitting again (it resumes)")
    return False, None


def follow(
    job: StageJob, cell: Path, res: slurm.Resources, attached: submitit.SlurmJob | None, wanted: str | None
) -> int:
    """Wait on the ``attached`` job (re-attached from the cell's record), or submit the cell and wait; a gone job
    is resubmitted, bounded like requeues, so a cluster that loses every job cannot loop."""
    output, checked, adopted = cell / STAGES[job.stage].output, False, attached is not None
    for _ in range(res.max_requeues + 1):
        if attached is None:
            if not checked:
                admission.preflight(res, checkpoint_interval(job.argv), cell)
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
    say(
        f"ring: {cell}: {res.max_requeues + 1} jobs were lost by SLURM (gone, or ended {', '.join(slurm.LOST)}); "
        "giving up (raise max_requeues, or check the nodes: sinfo -R)"
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
            values = read_yaml(path, "Config file")
        if args.launcher == "local":
            return launch_local(job, args.cell)
        res = slurm.Resources.from_dict(json.loads(args.resources))
        if problems := admission.stage_problems(args.stage, res, values):  # before anything is submitted
            raise ValueError(problems[0])
        return launch_slurm(job, args.cell, res)
    except (ValueError, RuntimeError, FileNotFoundError) as err:
        print(f"ring: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
