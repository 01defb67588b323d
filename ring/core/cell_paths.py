"""Where a cell lives: results/<grid>/<stage>/, then one folder per wildcard its stage declares
(:attr:`ring.core.stages.Stage.cell`), the last seed<N>.  The one spelling of that layout: the workflow's rule files
build their path patterns with :func:`cell_file`, the library its cell folders with :func:`cell_folder` and their
globs with :func:`cell_glob`.  Torch-free: the workflow imports it while it plans.
"""

from __future__ import annotations

import re
from pathlib import Path

from ring.core.stages import stage

RESULTS = "results"  # the workflow's results folder, relative to its working directory
# A Table 4 cell's converted backbone: one per source, method and seed, in the detection folder above its task cells
# (they train on it).
BACKBONE = ("dataset", "method", "seed")


def _levels(name: str, cell: tuple[str, ...] | None) -> tuple[str, ...]:
    """The folder levels of a cell of stage ``name`` under results/<grid>/, as patterns ({dataset}, seed{seed})."""
    wildcards = stage(name).cell if cell is None else cell
    if not wildcards:
        raise ValueError(f"Stage {name!r} declares no cell folders (ring.core.stages).")
    return (name, *(f"seed{{{w}}}" if w == "seed" else f"{{{w}}}" for w in wildcards))


def cell_file(name: str, file: str = "", cell: tuple[str, ...] | None = None) -> str:
    """The pattern of ``file`` in a cell of stage ``name`` (of the cell's folder without one), its wildcards in braces:
    results/{grid}/pretrain/{dataset}/{method}/seed{seed}/encoder.pt; ``cell``: other wildcards than the stage's
    (:data:`BACKBONE`)."""
    return "/".join((RESULTS, "{grid}", *_levels(name, cell), *([file] if file else [])))


def cell_folder(grid_dir: str | Path, name: str, cell: tuple[str, ...] | None = None, **values) -> Path:
    """The folder of one cell of stage ``name`` under ``grid_dir`` (results/<grid>), its wildcards' ``values``."""
    return Path(grid_dir, *(level.format(**values) for level in _levels(name, cell)))


def cell_glob(name: str, cell: tuple[str, ...] | None = None) -> str:
    """The glob of every cell folder of stage ``name`` under results/<grid>/: pretrain/*/*/seed*."""
    return "/".join(re.sub(r"\{\w+\}", "*", level) for level in _levels(name, cell))
