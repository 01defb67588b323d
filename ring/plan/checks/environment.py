"""What stops a grid's jobs on this machine before any of them runs, beyond its configs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ring.core.files import unwritable, unwritable_below
from ring.plan import ownership
from ring.plan.detection_tasks import missing_detectron2


def environment(grid, results: str | Path = "results") -> str | None:
    """What stops a grid's jobs on this machine before any of them runs (one sentence), or None: Table 4
    without Detectron2 in this interpreter (the jobs run it too), a results folder, or a cell folder in it, that
    cannot be written, or a results folder that another grid file of the same name made (ring.plan.ownership)."""
    if grid.detection and importlib.util.find_spec("detectron2") is None:
        return missing_detectron2(ModuleNotFoundError(name="detectron2"))

    folder = Path(results) / grid.name
    return (
        unwritable(folder)
        or unwritable_below(folder)
        or (ownership.conflict(grid.source, folder) if grid.source else None)
    )
