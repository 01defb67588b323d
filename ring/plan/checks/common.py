"""The checks the stages share: the views a ResNet-18 trunk takes, the optimiser, the runtime knobs, and a method
name that a plug-in registers."""

from __future__ import annotations

from ring.core import catalog
from ring.core.methods import METHODS, implementation_problem, missing
from ring.plan.checks.checker import ConfigError, fail, in_range, int_at_least, number, one_of, positive
from ring.plan.checks.options import (
    CHANNELS_LAST,
    KEEP_CHECKPOINT,
    KEEP_SUPERSEDED,
    MIN_INPUT_PX,
    PRECISIONS,
    STORE_FORMATS,
)


def views(where: str, cfg) -> None:
    for key in ("resize", "crop"):
        v = getattr(cfg, key)
        if not isinstance(v, int) or v < MIN_INPUT_PX:
            fail(
                where,
                key,
                v,
                f"is below {MIN_INPUT_PX} px, the smallest view a ResNet-18 trunk (total stride 32) "
                "still sees spatially",
                f"set {key} to at least {MIN_INPUT_PX}",
            )
    if cfg.crop > cfg.resize:
        fail(
            where,
            "crop",
            cfg.crop,
            f"exceeds resize={cfg.resize} (the crop is taken from the resized image)",
            "lower crop or raise resize",
        )


def optimizer(where: str, cfg, n_train: int, what: str) -> None:
    int_at_least(where, cfg, "epochs", 1, "train at least one epoch (epochs: 1 or more)")
    int_at_least(where, cfg, "batch_size", 1)
    if cfg.batch_size > n_train:
        fail(
            where, "batch_size", cfg.batch_size, f"exceeds the {n_train} {what}", f"set batch_size to at most {n_train}"
        )
    positive(where, cfg, "lr")
    if hasattr(cfg, "momentum"):
        in_range(where, cfg, "momentum", 0.0, 1.0)
    if not number(cfg.weight_decay) or cfg.weight_decay < 0:
        fail(where, "weight_decay", cfg.weight_decay, "must be a finite number of at least 0", "set weight_decay >= 0")


def registered(where: str, name) -> None:
    """A name the registry lacks while a plug-in failed to load: that plug-in's sentence, not "not a method"."""
    if isinstance(name, str) and (broken := missing(name)):
        raise ConfigError(f"{where}: {broken}")


def implementation(where: str, name: str) -> None:
    """A plug-in's torch class checked here, at plan time, from its source (never imported: no torch on the login
    node), instead of in the training job (after submission)."""
    if problem := implementation_problem(name):
        fail(
            where,
            "method",
            name,
            f"is registered by the {METHODS.plugins[name]} plug-in, whose implementation "
            f"{METHODS[name].objective.implementation!r} {problem}",
            "fix that package or choose another method",
        )


def runtime(where: str, cfg, precisions: tuple[str, ...] = PRECISIONS) -> None:
    """``precisions``: the words the stage's ``precision`` takes (pretraining's also fp64)."""
    one_of(where, cfg, "precision", precisions)
    one_of(where, cfg, "channels_last", CHANNELS_LAST)
    one_of(where, cfg, "keep_superseded", KEEP_SUPERSEDED)
    one_of(where, cfg, "keep_checkpoint", KEEP_CHECKPOINT)
    int_at_least(where, cfg, "num_workers", 0)
    int_at_least(where, cfg, "threads", 0)


def store(where: str, cfg) -> None:
    """``store`` is one of its words, and set only for a dataset that has a prepared store (the catalog's
    ``store_size``): elsewhere it would change the cell's hash (it is hashed when set) and nothing it reads."""
    one_of(where, cfg, "store", STORE_FORMATS)
    default = type(cfg).__dataclass_fields__["store"].default
    spec = catalog.DATASETS.get(cfg.dataset)
    if cfg.store != default and not (spec and spec.store_size):
        stored = ", ".join(name for name, entry in catalog.DATASETS.items() if entry.store_size)
        fail(
            where,
            "store",
            cfg.store,
            f"is set for {cfg.dataset}, which has no prepared store (the datasets with one: {stored})",
            "remove the key for it (set store under by_dataset: for the datasets that have one)",
        )
