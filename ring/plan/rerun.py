"""``ring rerun``: what an edited cell config does to the cell's finished files (:func:`ring.core.cell_runs.prepare`),
run by hand on one cell folder, after its grid passed the gate every command that reads a grid passes.

    ring rerun CELL --stage pretrain      # after the workflow wrote CELL/config.yaml anew
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ring.core import config
from ring.core.cell_runs import prepare
from ring.core.files import FileError
from ring.core.stages import stages_with
from ring.plan import gate, ownership


def grid_problem(cell: Path) -> str | None:
    """Run by hand, ``ring rerun`` opens the grid that owns the cell's results folder through the gate every command
    that reads a grid passes (ring.plan.gate), and refuses, in its sentence, when that grid would not plan; None
    when it passes, when no grid file is recorded or left, and under the workflow, which opened it already (it sets
    $RING_GRID_FILE for its jobs)."""
    if os.environ.get("RING_GRID_FILE"):
        return None
    folder = next((p for p in Path(cell).resolve().parents if (p / ownership.MARKER).is_file()), None)
    owner = ownership.recorded_owner(folder) if folder else None
    if owner is None or not Path(owner["path"]).is_file():
        return None
    grid = Path(owner["path"])
    try:
        gate.open_grid(grid, grid.parent, folder.parent)
    except ValueError as err:
        return str(err)
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].replace("``", ""))
    parser.add_argument("cell", type=Path, help="the cell folder, whose config.yaml holds the config it is to run")
    parser.add_argument("--stage", required=True, choices=sorted(stages_with("run_files")))
    args = parser.parse_args(argv)
    try:
        if problem := grid_problem(args.cell):
            raise ValueError(problem)
        cfg = config.load(stages_with("run_files")[args.stage].config, args.cell / "config.yaml")
        prepare(args.cell, args.stage, cfg, log=lambda line: print(line, file=sys.stderr))
    except (OSError, ValueError, FileError) as err:
        print(f"ring: {args.cell}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
