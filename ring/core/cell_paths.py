"""Where a cell lives: results/<grid>/<stage>/, then one folder per wildcard its stage declares
(:attr:`ring.core.stages.Stage.cell`), the last seed<N>.  The one spelling of that layout: the workflow's rule files
build their path patterns with :func:`cell_file`, the library its cell folders with :func:`cell_folder` and their
globs with :func:`cell_glob`, and reads a path back with :func:`cell_values`.  Torch-free: the workflow imports it
while it plans.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ring.core.stages import STAGES, stage

RESULTS = "results"  # the workflow's results folder, relative to its working directory
# A Table 4 cell's converted backbone: one per source, method and seed, in the detection folder above its task cells
# (they train on it).
BACKBONE = ("dataset", "method", "seed")
SEED = re.compile(r"seed(\d+)")  # a seed's folder, the last level of every cell folder


def _wildcards(name: str, cell: tuple[str, ...] | None) -> tuple[str, ...]:
    return stage(name).cell if cell is None else cell


def _levels(name: str, cell: tuple[str, ...] | None) -> tuple[str, ...]:
    """The folder levels of a cell of stage ``name`` under results/<grid>/, as patterns ({dataset}, seed{seed})."""
    wildcards = _wildcards(name, cell)
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


@dataclass(frozen=True)
class CellPath:
    """A cell folder, or a file in one, read back (:func:`cell_values`); its wildcards' values are attributes too
    (``.dataset``, ``.method``, ``.seed``, an int)."""

    root: Path  # the folder holding the grids' folders (results/)
    grid: str
    stage: str
    values: tuple[tuple[str, str | int], ...]  # (wildcard, value) of each folder level, in the declared order
    file: str = ""  # the file's name in the cell folder; "" for the folder itself
    cell: tuple[str, ...] | None = None  # other wildcards than the stage's (:data:`BACKBONE`), as it was read with

    def __getattr__(self, name: str):
        # self.__dict__, not self.values: copy and pickle ask for attributes before the fields are set.
        for wildcard, value in self.__dict__.get("values", ()):
            if wildcard == name:
                return value
        raise AttributeError(f"{type(self).__name__} of a {self.__dict__.get('stage')} cell has no {name!r}")

    @property
    def grid_dir(self) -> Path:
        return self.root / self.grid

    @property
    def folder(self) -> Path:
        return cell_folder(self.grid_dir, self.stage, self.cell, **dict(self.values))

    def related(self, name: str, cell: tuple[str, ...] | None = None, **values) -> Path:
        """The folder of the cell of stage ``name`` (its ``cell`` wildcards) in this grid that shares this cell's
        values, but ``values``: the pretraining cell an evaluation reads, the backbone a detection cell trains on."""
        own = dict(self.values)
        shared = {w: own[w] for w in _wildcards(name, cell) if w in own}
        return cell_folder(self.grid_dir, name, cell, **{**shared, **values})


def cell_values(path: str | Path, cell: tuple[str, ...] | None = None) -> CellPath | None:
    """A cell folder (results/<grid>/<stage>/.../seed<N>), or a file directly in one, read back by its stage's declared
    layout (``cell``: that layout instead, :data:`BACKBONE`); None for any other path."""
    parts = Path(path).parts
    first = 1 if Path(path).anchor else 0  # the grid's folder is a name, never the root of the file system
    for name, declared in STAGES.items():
        wildcards = _wildcards(name, cell)
        for file in (0, 1) if declared.cell else ():  # a stage without cell folders has no cell to read
            at = len(parts) - file - len(wildcards) - 1  # the stage's folder
            if at - 1 < first or parts[at] != name:
                continue
            folders = parts[at + 1 : at + 1 + len(wildcards)]
            values = [(w, _value(w, folder)) for w, folder in zip(wildcards, folders, strict=True)]
            if all(value is not None for _, value in values):
                return CellPath(
                    Path(*parts[: at - 1]), parts[at - 1], name, tuple(values), parts[-1] if file else "", cell
                )
    return None


def _value(wildcard: str, folder: str) -> str | int | None:
    """A wildcard's value from its folder's name: seed<N>'s N, or the name; None for a seed folder misnamed."""
    if wildcard != "seed":
        return folder
    seed = SEED.fullmatch(folder)
    return int(seed.group(1)) if seed else None
