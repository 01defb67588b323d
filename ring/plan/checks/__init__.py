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
(the checks in words, for the reference) and :mod:`.environment` (this machine). This module runs them by config class;
the names other modules use are importable from it.
"""

from __future__ import annotations

from ring.core import config as C
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
    STORE_FORMATS,
    VALIDATION_POLICIES,
)
from ring.plan.checks.pretrain import SNAPSHOT, check_pretrain, grey_cmc_warning, pretrain_images, warn_grey_cmc
from ring.plan.checks.stages import check_detection, check_lincls, check_toy, check_transfer

__all__ = [
    "ALLOWED",
    "ANNEAL_POLICIES",
    "AUGMENTATIONS",
    "AUGMENT_PLACES",
    "CHANNELS_LAST",
    "CHECKS",
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
    "REFERENCE_HINT",
    "SNAPSHOT",
    "STAGE_CONFIGS",
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

CHECKS = {
    C.PretrainConfig: check_pretrain,
    C.LinclsConfig: check_lincls,
    C.TransferConfig: check_transfer,
    C.DetectionConfig: check_detection,
    C.ToyCNCEConfig: check_toy,
}
# Stage name (ring.cluster.jobs.STAGES and the workflow's) -> config class its --config holds.
STAGE_CONFIGS = {
    "pretrain": C.PretrainConfig,
    "lincls": C.LinclsConfig,
    "transfer": C.TransferConfig,
    "detection": C.DetectionConfig,
    "toy_cnce": C.ToyCNCEConfig,
}


def check(cfg, where: str) -> None:
    """Raise :class:`ConfigError` (one sentence) if ``cfg`` cannot run; ``where`` starts the sentence."""
    CHECKS[type(cfg)](cfg, where)


def load_checked(stage: str, path) -> object:
    """A stage's config file, loaded and checked: what every entry point runs before anything else."""
    cfg = C.load(STAGE_CONFIGS[stage], path)
    check(cfg, f"Config {path} ({stage})")
    return cfg


# Last: ALLOWED lists the registry's methods, whose first read loads the plug-ins, and a plug-in may import this package
# (Checker): every name above is bound by then.
from ring.plan.checks.allowed import ALLOWED, REFERENCE_HINT  # noqa: E402
