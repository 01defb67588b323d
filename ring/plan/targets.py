"""What a workflow run was asked to build, checked when the workflow loads, before any plan: each target is one of
the workflow's rules or a file, and a file in a cell folder is in a cell the grid names.

Snakemake answers a misspelt rule (``tabel1``) with its MissingRuleException and no list of targets, and plans a cell
path the grid does not name (``.../IR/seed9/encoder.pt``: the rules' wildcards match any seed) as a new cell.  Both are
refused here in one sentence (:func:`problem`), the targets read from Snakemake's command line (:func:`requested`).
Torch-free: the Snakefile passes its rules.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath

from ring.core.cell_paths import SEED
from ring.plan.disk import named_cells


def requested(argv: list[str]) -> list[str]:
    """The targets on ``argv``, the command line of the Snakemake parsing the workflow: none where it was started
    otherwise (from Python, whose argv is another program's)."""
    # Snakemake's own parser, imported here: only the workflow calls this, in Snakemake's process.
    from snakemake.cli import get_argument_parser

    program = Path(argv[0])
    if program.name != "snakemake" and (program.name, program.parent.name) != ("__main__.py", "snakemake"):
        return []
    args, _ = get_argument_parser().parse_known_args(argv[1:])
    return list(args.targets or [])


def rule_targets(rules: dict[str, bool]) -> list[str]:
    """The rules a user asks for by name: those (name -> whether it has wildcards) without wildcards, but the
    per-table rules make_<name> the table targets run."""
    return [name for name, wildcards in rules.items() if not wildcards and not name.startswith("make_")]


def cell_folder(target: PurePath) -> PurePath | None:
    """The cell folder a path lies in (its parts up to the first seed<N>), or None outside any cell."""
    for i, part in enumerate(target.parts):
        if SEED.fullmatch(part):
            return PurePath(*target.parts[: i + 1])
    return None


def problem(targets: list[str], rules: dict[str, bool], grid, results: Path, cwd: Path) -> str | None:
    """Why the run cannot build ``targets`` (one sentence), or None: a word that is no rule, or a path in a cell folder
    under ``results/<grid>/`` that the grid does not name.  ``rules`` maps each rule's name to whether it has
    wildcards; paths are relative to ``cwd``, the folder Snakemake works in."""
    cells = {Path(os.path.normpath(cwd / cell)) for cell in named_cells(grid, results)}
    base = Path(os.path.normpath(cwd / results / grid.name))
    for target in targets:
        if target in rules:
            continue
        path = Path(os.path.normpath(cwd / target))
        if len(PurePath(target).parts) == 1 and not Path(target).suffix:
            return (
                f"{target!r} is no target of the workflow; choose one of {', '.join(rule_targets(rules))} (or a file "
                f"under {results / grid.name}/)."
            )
        cell = cell_folder(path)
        if cell is not None and base in cell.parents and Path(cell) not in cells:
            return (
                f"{target} lies in {cell.relative_to(base)}, a cell grid {grid.name} does not name; fix the path "
                f"(the grid's datasets {', '.join(grid.datasets)}, methods {', '.join(grid.methods)}, seeds "
                f"{', '.join(map(str, grid.seeds))}) or add the cell to {grid.file}."
            )
    return None
