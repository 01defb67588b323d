"""What a grid's results folder holds beyond its live cells, and its removal: ``python -m ring.cluster.batch prune``.

Two kinds of folders hold no result the grid's tables read, and only grow:

* **superseded runs**: ``runs/<hash>/`` in a cell folder, the run an edit set aside (ring.core.cell_runs), kept so that
  an undo brings it back;
* **unnamed cell folders**: a cell folder under ``results/<grid>/`` that the grid no longer names (a seed, method,
  dataset, study variant or detection task removed from the grid file).

Torch-free: it lists folders and adds file sizes (hard links counted once: a file linked by hand).
A cell the grid names is never removed, only its ``runs/``; ``prune`` removes nothing while a run holds the folder
(ring.cluster.prune.holder, :func:`snakemake_lock`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ring.core import cell_runs
from ring.core.cell_paths import BACKBONE, SEED, cell_folder, cell_glob

# Where cell folders sit under results/<grid>/ (ring.core.cell_paths): the glob of each stage's cell folders, whose
# last part is seed<N>, and of the detection backbones'.
CELL_GLOBS = (
    *(cell_glob(stage) for stage in ("pretrain", "lincls", "transfer", "detection", "study", "toy_cnce")),
    cell_glob("detection", BACKBONE),
)


def named_cells(grid, results: Path) -> set[Path]:
    """Every cell folder the grid names: Table 1's and the grid tables' cells for pretraining and linear evaluation,
    the transfer and detection cells with the pretraining cells they read, the study cells and the toy seeds."""
    base = Path(results) / grid.name
    cells = {
        cell_folder(base, stage, dataset=d, method=m, seed=s)
        for stage in ("pretrain", "lincls")
        for d, m, s in grid.cells()
    }
    for d, m, s in grid.transfer_cells():
        cells |= {
            cell_folder(base, "transfer", dataset=d, method=m, seed=s),
            cell_folder(base, "pretrain", dataset=grid.transfer["source"], method=m, seed=s),
        }
    for source, m, task, s in grid.detection_cells():
        cells |= {
            cell_folder(base, "detection", dataset=source, method=m, task=task, seed=s),
            cell_folder(base, "detection", BACKBONE, dataset=source, method=m, seed=s),
            cell_folder(base, "pretrain", dataset=source, method=m, seed=s),
        }
    for name, study in grid.studies.items():
        cells |= {
            cell_folder(base, "study", study=name, dataset=study.dataset, method=m, variant=v, seed=s)
            for m, v, s in study.cells()
        }
    cells |= {cell_folder(base, "toy_cnce", seed=s) for s in grid.toy_cnce_seeds()}
    return cells


def cell_folders(grid, results: Path) -> list[Path]:
    """The cell folders on disk under results/<grid>/ (whatever grid made them)."""
    base = Path(results) / grid.name
    return sorted({p for pattern in CELL_GLOBS for p in base.glob(pattern) if p.is_dir() and SEED.fullmatch(p.name)})


def size(path: Path, seen: set | None = None) -> int:
    """Bytes of the files under ``path`` (symbolic links not followed), each inode once (``seen`` shared across
    calls counts a file linked from two folders once)."""
    seen = set() if seen is None else seen
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def human(n: int) -> str:
    """A size in MB below a gigabyte, in GB above (decimal units, as df -H)."""
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


@dataclass
class Prunable:
    path: Path
    kind: str  # KINDS
    bytes: int


KINDS = {
    "run": ("superseded run", "superseded runs"),
    "cell": ("cell folder the grid no longer names", "cell folders the grid no longer names"),
}


def unnamed_cells(grid, results: Path) -> list[Path]:
    named = named_cells(grid, results)
    return [cell for cell in cell_folders(grid, results) if cell not in named]


def prunable(grid, results: Path, busy: set[Path] = frozenset()) -> list[Prunable]:
    """The superseded runs of the grid's cells and its unnamed cell folders (but those in ``busy``, where a job still
    runs), with their sizes."""
    named = named_cells(grid, results)
    out, seen = [], set()
    for cell in cell_folders(grid, results):
        if cell not in named:
            if cell not in busy:
                out.append(Prunable(cell, "cell", size(cell, seen)))
            continue
        kept = cell / cell_runs.RUNS
        if kept.is_dir():
            out += [Prunable(run, "run", size(run, seen)) for run in sorted(kept.iterdir()) if run.is_dir()]
    return out


# Snakemake's lock files in the folder it runs in (snakemake.persistence): N.input.lock and N.output.lock, one path of
# the run's files a line, relative to that folder; a run holds them from its start to its end.
LOCKS = Path(".snakemake") / "locks"


def snakemake_lock(results: Path, grid_name: str) -> Path | None:
    """The lock file of a Snakemake run that holds a file under ``results/<grid_name>/``, or None.  Snakemake runs in
    the folder above ``results`` (a checkout's root), where its ``.snakemake/locks`` lies."""
    results = Path(results).resolve()
    base = results / grid_name
    for lock in sorted((results.parent / LOCKS).glob("*.lock")):
        try:
            lines = lock.read_text().splitlines()
        except OSError:
            continue
        if any((results.parent / line.strip()).resolve().is_relative_to(base) for line in lines if line.strip()):
            return lock
    return None


def summary(items: list[Prunable]) -> str:
    """'N superseded runs (X MB) and M cell folders the grid no longer names (Y MB)'."""
    parts = []
    for kind, (one, many) in KINDS.items():
        chosen = [item for item in items if item.kind == kind]
        parts.append(f"{len(chosen)} {one if len(chosen) == 1 else many} ({human(sum(i.bytes for i in chosen))})")
    return " and ".join(parts)


def remove(items: list[Prunable], base: Path) -> None:
    """Delete each item, then the folders it leaves empty below ``base`` (results/<grid>: a method folder whose seeds
    all went, a cell's empty runs/)."""
    base = Path(base).resolve()
    for item in items:
        try:
            shutil.rmtree(item.path)
        except OSError as err:
            raise ValueError(
                f"Cannot remove {item.path} ({err.strerror or err}); fix its permissions and rerun "
                "prune (what it removed before stays removed)."
            ) from None
        parent = item.path.parent.resolve()
        while parent != base and parent.is_relative_to(base):
            try:
                parent.rmdir()  # only an empty folder goes
            except OSError:
                break
            parent = parent.parent
