"""What stops a grid's jobs on this machine before any of them runs, beyond its configs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ring.core.files import unwritable, unwritable_below
from ring.plan import ownership
from ring.plan.detection_tasks import missing_detectron2

# The rules whose jobs import Detectron2 where Snakemake runs them: the embedded dataset (its COCO categories) and the
# conversion (its numerical check against Detectron2's backbone) run on this machine whatever the launcher; a detection
# cell only under the local launcher (on SLURM its job checks its own environment: ring.detection.runner).
DETECTION_HERE = ("detection_embedded", "detection_convert")
DETECTION_LOCAL = ("detection",)


def environment(grid, results: str | Path = "results") -> str | None:
    """What stops a grid's jobs on this machine before any of them runs (one sentence), or None: a results folder, or
    a cell folder in it, that cannot be written, or a results folder that another grid file of the same name made
    (ring.plan.ownership).  Detectron2 is not asked for here: a plan (a dry run, a login node's) needs none
    (:func:`detection_environment` checks the jobs a run will start)."""
    folder = Path(results) / grid.name
    return (
        unwritable(folder)
        or unwritable_below(folder)
        or (ownership.conflict(grid.source, folder) if grid.source else None)
    )


def detection_environment(rules: list[str], launcher: str) -> str | None:
    """The sentence installing Detectron2 when a job of ``rules`` (the rules of the jobs a run is about to start)
    imports it on this machine under ``launcher`` and this interpreter lacks it, else None.  Looks the package up
    without importing it."""
    here = DETECTION_HERE + (DETECTION_LOCAL if launcher == "local" else ())
    if any(rule in here for rule in rules) and importlib.util.find_spec("detectron2") is None:
        return missing_detectron2(ModuleNotFoundError(name="detectron2"))
    return None
