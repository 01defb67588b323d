"""An edited cell lets go of its previous config's SLURM job before anything of that job moves.

    python -m ring.cluster.detach CELL --stage pretrain    # the workflow's config rule, when CELL/slurm/job.json exists

A cell's config rule (workflow/rules/common.smk, ``write_cell_config``) rewrites ``config.yaml``, and then
:func:`ring.plan.rerun.prepare` moves the previous config's files to ``runs/<old hash>/``.  A job of that previous
config may still be queued or running there (its client was killed, the grid edited before the rerun): it would go on
writing into the cell after its files moved (a crash on its moved step log, or an encoder of the old config in the
edited cell), and a launcher re-attached to it would take that encoder for the edited cell's.  So, first:

* :func:`detach`: the job that ``CELL/slurm/job.json`` records, when it runs another config hash than ``config.yaml``'s
  and is still queued or running, is cancelled (``scancel``) and waited for until SLURM no longer lists it (its
  processes are gone); its runs that wrote no segment go to the cell's provenance, which then moves to
  ``runs/<old hash>/`` with the rest of that run (an undo of the edit resumes it from there), and its record is
  retired as ``slurm/job-<id>.json``, so that no client re-attaches to it or counts it in the edited cell;
* then the cell is brought in line with its config (``ring.plan.rerun.prepare``), as before.

The launcher (ring.cluster.launch) detaches the same way from a record it finds (a config written by hand), and
accepts a finished output only when the config hash the stage recorded in it (``export.json`` of a pretraining
cell, ``metrics.json`` of an evaluation) is the one it was asked to run (:func:`accepts`): a mismatch is one sentence,
the output is superseded (moved to ``runs/<its hash>/``) and the cell's own config is submitted.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ring.cluster import launch
from ring.cluster.jobs import OUTPUT
from ring.core import config as C
from ring.core.files import CHECKSUMS, FileError, read_record
from ring.plan import checks, rerun

# How often a cancelled job is looked for until SLURM lets it go (KillWait after its SIGTERM, 30 s by default).
CANCEL_POLL_S = 1.0


def made_with(cell: Path, stage: str) -> str | None:
    """The config hash a stage recorded in its finished output: ``export.json``'s for pretraining (the checksum
    record of the encoder files), ``metrics.json``'s for an evaluation; None when there is none."""
    value = read_record(Path(cell) / (CHECKSUMS if stage == "pretrain" else OUTPUT[stage])).get("config_hash")
    return value if isinstance(value, str) else None


def other_config(record: dict | None, wanted: str | None) -> bool:
    """Whether a launcher's record names a job of another config than ``wanted`` (a record or a job without a hash,
    from before hashes were recorded, is nobody's other config)."""
    return record is not None and wanted is not None and record.get("config_hash") not in (None, wanted)


def listed(job_id: str) -> bool:
    """Whether squeue still lists the job (queued, running, or completing: its processes may still write)."""
    out = launch.slurm_call(["squeue", "-h", "-j", job_id, "-o", "%T"], timeout=30)
    if out.returncode != 0:
        if "Invalid job id" in out.stderr:
            return False  # gone from the controller's memory: ended long enough ago
        raise launch.ControllerUnreachable(" ".join(out.stderr.split()) or f"squeue exited {out.returncode}")
    return bool(out.stdout.strip())


def cancel_and_wait(cell: Path, job_id: str, res: launch.Resources) -> None:
    """scancel the job, then wait until SLURM lists it no more and accounting calls it ended."""

    def cancel() -> None:
        out = launch.slurm_call(["scancel", job_id], timeout=60)
        if out.returncode != 0 and "already completing or completed" not in out.stderr:
            raise RuntimeError(f"{cell}: scancel {job_id} failed ({' '.join(out.stderr.split())})")

    launch.retrying(cancel, res, f"cancelling job {job_id}")
    while launch.retrying(lambda: listed(job_id), res, f"waiting for job {job_id} to end"):
        time.sleep(CANCEL_POLL_S)
    # Accounting may record the end a moment after squeue drops the job: its killed runs are read from it.
    while launch.retrying(lambda: launch.job_states([job_id])[job_id], res, f"asking about job {job_id}") in launch.ALIVE:
        time.sleep(CANCEL_POLL_S)


def retire_record(cell: Path, job_id: str) -> Path:
    """``slurm/job.json`` kept as ``slurm/job-<id>.json``: the job is no client's to follow any more."""
    record = Path(cell) / "slurm" / launch.RECORD
    kept = record.with_name(f"job-{job_id}.json")
    os.replace(record, kept)
    return kept


def detach(cell: Path, wanted: str | None, res: launch.Resources, log=print) -> bool:
    """Cancel the cell's recorded job when it runs another config than ``wanted`` and is still queued or running
    (see the module docstring); True when it did.  Called before any of the cell's files move."""
    cell = Path(cell)
    record = launch.read_record(cell)
    if not other_config(record, wanted):
        return False
    job_id = record["job_id"]
    state = launch.retrying(lambda: launch.job_states([job_id])[job_id], res, "asking about the recorded job")
    if state is not None and state not in launch.ALIVE:
        return False  # it ended: nothing of it writes here any more (the launcher tells an earlier config's output)
    log(f"ring: {cell}: its config changed while SLURM job {job_id} of the previous config was {state or 'queued'}; "
        "cancelling it first, so that nothing of it writes into the edited cell")
    cancel_and_wait(cell, job_id, res)
    launch.account_ended(cell, job_id)  # into the previous run's provenance, which moves aside with it
    retire_record(cell, job_id)
    return True


def supersede(cell: Path, stage: str, log=print) -> Path | None:
    """Move a stage's output that another config made to ``runs/<its hash>/``, so that the workflow, ``batch status``
    and ``batch submit`` all see it missing and its cell's own config runs (nothing is deleted)."""
    aside = rerun.set_aside(Path(cell), made_with(cell, stage) or "unrecorded", (OUTPUT[stage],))
    if aside is not None:
        log(f"ring: {cell}: its {OUTPUT[stage]} is superseded (another config made it); kept in {aside}")
    return aside


def accepts(cell: Path, stage: str, wanted: str | None, job_id: str, log=print) -> bool:
    """Whether a finished output is the cell's: the config hash its stage recorded is ``wanted``.  Otherwise one
    sentence, the output superseded, and False (the caller submits the cell's own config)."""
    made = made_with(cell, stage)
    if wanted is None or made == wanted:
        return True
    log(f"ring: {cell}: SLURM job {job_id} wrote {OUTPUT[stage]} with config {made}, not this cell's {wanted} "
        "(the cell was edited while it ran); not accepted, submitting the cell's own config")
    supersede(cell, stage, log=lambda line: None)
    return False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cell", type=Path, help="the cell folder, whose config.yaml holds the config it is to run")
    parser.add_argument("--stage", required=True, choices=sorted(rerun.RUN_FILES))
    args = parser.parse_args(argv)
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    try:
        cfg = C.load(checks.STAGE_CONFIGS[args.stage], args.cell / "config.yaml")
        # The workflow's config rule has no resources: SLURM's defaults, polled every second (the rule waits).
        detach(args.cell, C.config_hash(cfg), launch.Resources(poll_s=CANCEL_POLL_S), log=say)
        rerun.prepare(args.cell, args.stage, cfg, log=say)
    except (OSError, ValueError, RuntimeError, FileError) as err:
        print(f"ring: {args.cell}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
