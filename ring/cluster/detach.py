"""An edited cell lets go of its previous config's SLURM job before anything of that job moves.

    python -m ring.cluster.detach CELL --stage pretrain    # the workflow's config rule, when CELL/slurm/job.json exists

A cell's config rule (workflow/rules/common.smk, ``write_cell_config``) rewrites ``config.yaml``, and then
:func:`ring.plan.rerun.prepare` moves the previous config's files to ``runs/<old hash>/``.  A job of that previous
config may still be queued or running there (its client was killed, the grid edited before the rerun): it would go on
writing into the cell after its files moved (a crash on its moved step log, or an encoder of the old config in the
edited cell), and a launcher re-attached to it would take that encoder for the edited cell's.  So, first:

* :func:`ring.cluster.launch.detach`: the job that ``CELL/slurm/job.json`` records, when it runs another config hash
than ``config.yaml``'s
  and is still queued or running, is cancelled (``scancel``) and waited for until SLURM no longer lists it (its
  processes are gone); its runs that wrote no segment go to the cell's provenance, which then moves to
  ``runs/<old hash>/`` with the rest of that run (an undo of the edit resumes it from there), and its record is
  retired as ``slurm/job-<id>.json``, so that no client re-attaches to it or counts it in the edited cell;
* then the cell is brought in line with its config (``ring.plan.rerun.prepare``), as before.

The launcher (ring.cluster.launch) detaches the same way from a record it finds (a config written by hand), and
accepts a finished output only when the config hash the stage recorded in it (``export.json`` of a pretraining
cell, ``metrics.json`` of an evaluation) is the one it was asked to run (:func:`ring.cluster.launch.accepts`): a
mismatch is one sentence,
the output is superseded (moved to ``runs/<its hash>/``) and the cell's own config is submitted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ring.cluster import launch
from ring.core import config as C
from ring.core.files import FileError
from ring.plan import checks, rerun


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cell", type=Path, help="the cell folder, whose config.yaml holds the config it is to run")
    parser.add_argument("--stage", required=True, choices=sorted(rerun.RUN_FILES))
    args = parser.parse_args(argv)
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    try:
        cfg = C.load(checks.STAGE_CONFIGS[args.stage], args.cell / "config.yaml")
        # The workflow's config rule has no resources: SLURM's defaults, polled every second (the rule waits).
        launch.detach(args.cell, C.config_hash(cfg), launch.Resources(poll_s=launch.CANCEL_POLL_S), log=say)
        rerun.prepare(args.cell, args.stage, cfg, log=say)
    except (OSError, ValueError, RuntimeError, FileError) as err:
        print(f"ring: {args.cell}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
