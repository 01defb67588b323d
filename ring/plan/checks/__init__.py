"""One torch-free validation per stage config, run at plan time and again by every entry point.

The workflow calls :func:`check` for every cell's full config when it loads a grid
(:func:`ring.plan.grid.validate`), before any job exists; each stage's entry point and
``ring.cluster.launch`` call it again on the cell's ``config.yaml`` before they start, so a hand-written
config gets the same checks.  Every failure is one sentence naming where (grid file, stage and
cell, or config file), the key, its value, what is allowed and the fix.

Values only the job can see (the real size of a user's ImageNet copy, a transfer split after its
filters) are bounded here by the catalog's counts; the jobs check them again after loading.

One idea per module: :mod:`.checker` (the sentence and the checks of one value), :mod:`.options` (the words a key
takes), :mod:`.common` (what the stages share), :mod:`.pretrain`, :mod:`.stages` (the other stages), :mod:`.allowed`
(the checks in words, for the reference), :mod:`.environment` (this machine) and :mod:`.grid` (a grid's names, blocks
and cells, run by :func:`ring.plan.grid.from_dict`). This module runs them by config class;
the names other modules use are importable from it.
"""

from __future__ import annotations

from ring.core import config
from ring.core.refs import resolve
from ring.core.stages import STAGES, configured
from ring.plan.checks.checker import YAML_BOOLEAN_WORDS, Checker, ConfigError
from ring.plan.checks.environment import detection_environment, environment
from ring.plan.checks.options import (
    ANNEAL_POLICIES,
    AUGMENT_PLACES,
    AUGMENTATIONS,
    CHANNELS_LAST,
    CMC_NEGATIVE_DRAWS,
    COMPILE,
    DETECTION_DATASETS,
    HEADS,
    KEEP_CHECKPOINT,
    KEEP_SUPERSEDED,
    LA_OWN_ENTRY_RULES,
    MIN_INPUT_PX,
    NEGATIVES_COUNTS,
    PRECISIONS,
    PRETRAIN_PRECISIONS,
    STORE_FORMATS,
    VALIDATION_POLICIES,
)
from ring.plan.checks.pretrain import SNAPSHOT, grey_cmc_warning, pretrain_images, warn_grey_cmc

__all__ = [
    "ALLOWED",
    "ANNEAL_POLICIES",
    "AUGMENTATIONS",
    "AUGMENT_PLACES",
    "CHANNELS_LAST",
    "CMC_NEGATIVE_DRAWS",
    "COMPILE",
    "DETECTION_DATASETS",
    "HEADS",
    "KEEP_CHECKPOINT",
    "KEEP_SUPERSEDED",
    "LA_OWN_ENTRY_RULES",
    "MIN_INPUT_PX",
    "NEGATIVES_COUNTS",
    "PRECISIONS",
    "PRETRAIN_PRECISIONS",
    "REFERENCE_HINT",
    "SNAPSHOT",
    "STORE_FORMATS",
    "VALIDATION_POLICIES",
    "YAML_BOOLEAN_WORDS",
    "Checker",
    "ConfigError",
    "check",
    "detection_environment",
    "environment",
    "grey_cmc_warning",
    "load_checked",
    "pretrain_images",
    "warn_grey_cmc",
]


def check(cfg, where: str) -> None:
    """Raise :class:`ConfigError` (one sentence) if ``cfg`` cannot run; ``where`` starts the sentence."""
    declared = configured(type(cfg))
    if declared is None:
        raise KeyError(f"No stage checks a {type(cfg).__name__} (ring.core.stages declares each stage's check).")
    resolve(declared.check)(cfg, where)


def load_checked(stage: str, path) -> object:
    """A stage's config file, loaded and checked: what every entry point runs before anything else."""
    cfg = config.load(STAGES[stage].config, path)
    check(cfg, f"Config {path} ({stage})")
    return cfg


# Last: ALLOWED lists the registry's methods, whose first read loads the plug-ins, and a plug-in may import this package
# (Checker): every name above is bound by then.
from ring.plan.checks.allowed import ALLOWED, REFERENCE_HINT  # noqa: E402
