"""An edited cell lets go of its previous config's SLURM job before anything of that job moves.

    python -m ring.cluster.detach CELL --stage pretrain    # the workflow's config rule, when CELL/slurm/job.json exists

A cell's config rule (workflow/rules/common.smk, ``write_cell_config``) rewrites ``config.yaml``, and then
:func:`ring.core.cell_runs.prepare` moves the previous config's files to ``runs/<old hash>/``.  A job of that previous
config may still be queued or running there (its client was killed, the grid edited before the rerun): it would go on
writing into the cell after its files moved (a crash on its moved step log, or an encoder of the old config in the
edited cell), and a launcher re-attached to it would take that encoder for the edited cell's.  So, first:

* :func:`detach`: the job that ``CELL/slurm/job.json`` records, when it runs another config hash than
  ``config.yaml``'s and is still queued or running, is cancelled (``scancel``) and waited for until SLURM no longer
  lists it (its processes are gone); its runs that wrote no segment go to the cell's provenance, which then moves to
  ``runs/<old hash>/`` with the rest of that run (an undo of the edit resumes it from there), and its record is
  retired as ``slurm/job-<id>.json``, so that no client re-attaches to it or counts it in the edited cell;
* then the cell is brought in line with its config (``ring.core.cell_runs.prepare``), as before.

The launcher (ring.cluster.launch) detaches the same way from a record it finds (a config written by hand), and
accepts a finished output only when the config hash the stage recorded in it (``export.json`` of a pretraining
cell, ``metrics.json`` of an evaluation) is the one it was asked to run (:func:`accepts`): a mismatch is one
sentence, the output is superseded (:func:`supersede`: moved to ``runs/<its hash>/``) and the cell's own config is
submitted.  ``ring.cluster.batch`` supersedes the same way.  SLURM itself is asked through ring.cluster.slurm.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ring.cluster import slurm
from ring.core import cell_runs, config
from ring.core.files import CHECKSUMS, FileError
from ring.core.files import read_record as read_json_record
from ring.core.stages import STAGES, stages_with


def made_with(cell: Path, stage: str) -> str | None:
    """The config hash a stage recorded in its finished output: ``export.json``'s for pretraining (the checksum
    record of the encoder files), ``metrics.json``'s for an evaluation; None when there is none."""
    value = read_json_record(Path(cell) / (CHECKSUMS if stage == "pretrain" else STAGES[stage].output)).get(
        "config_hash"
    )
    return value if isinstance(value, str) else None


def other_config(record: dict | None, wanted: str | None) -> bool:
    """Whether a launcher's record names a job of another config than ``wanted`` (a record or a job without a hash,
    from before hashes were recorded, is nobody's other config)."""
    return record is not None and wanted is not None and record.get("config_hash") not in (None, wanted)


def detach(cell: Path, wanted: str | None, res: slurm.Resources, log=print) -> bool:
    """Cancel the cell's recorded job when it runs another config than ``wanted`` and is still queued or running
    (see the module docstring); True when it did.  Called before any of the cell's files move."""
    cell = Path(cell)
    record = slurm.read_record(cell)
    if not other_config(record, wanted):
        return False
    job_id = record["job_id"]
    state = slurm.retrying(lambda: slurm.job_states([job_id])[job_id], res, "asking about the recorded job")
    if state is not None and state not in slurm.ALIVE:
        return False  # it ended: nothing of it writes here any more (the launcher tells an earlier config's output)
    log(
        f"ring: {cell}: its config changed while SLURM job {job_id} of the previous config was {state or 'queued'}; "
        "cancelling it first, so that nothing of it writes into the edited cell"
    )
    slurm.cancel_and_wait(cell, job_id, res)
    slurm.account_ended(cell, job_id)  # into the previous run's provenance, which moves aside with it
    slurm.retire_record(cell, job_id)
    return True


def supersede(cell: Path, stage: str, log=print) -> Path | None:
    """Move a stage's output that another config made to ``runs/<its hash>/``, so that the workflow, ``batch status``
    and ``batch submit`` all see it missing and its cell's own config runs (nothing is deleted)."""
    aside = cell_runs.set_aside(Path(cell), made_with(cell, stage) or "unrecorded", (STAGES[stage].output,))
    if aside is not None:
        log(f"ring: {cell}: its {STAGES[stage].output} is superseded (another config made it); kept in {aside}")
    return aside


def accepts(cell: Path, stage: str, wanted: str | None, job_id: str, log=print) -> bool:
    """Whether a finished output is the cell's: the config hash its stage recorded is ``wanted``.  Otherwise one
    sentence, the output superseded, and False (the caller submits the cell's own config)."""
    made = made_with(cell, stage)
    if wanted is None or made == wanted:
        return True
    log(
        f"ring: {cell}: SLURM job {job_id} wrote {STAGES[stage].output} with config {made}, not this cell's {wanted} "
        "(the cell was edited while it ran); not accepted, submitting the cell's own config"
    )
    supersede(cell, stage, log=lambda line: None)
    return False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cell", type=Path, help="the cell folder, whose config.yaml holds the config it is to run")
    parser.add_argument("--stage", required=True, choices=sorted(stages_with("run_files")))
    args = parser.parse_args(argv)
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    try:
        cfg = config.load(stages_with("run_files")[args.stage].config, args.cell / "config.yaml")
        # The workflow's config rule has no resources: SLURM's defaults, polled every second (the rule waits).
        detach(args.cell, config.config_hash(cfg), slurm.Resources(poll_s=slurm.CANCEL_POLL_S), log=say)
        cell_runs.prepare(args.cell, args.stage, cfg, log=say)
    except (OSError, ValueError, RuntimeError, FileError) as err:
        print(f"ring: {args.cell}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
