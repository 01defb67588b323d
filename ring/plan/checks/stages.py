"""The checks of the stages after pretraining (linear evaluation, transfer, detection) and of the toy experiment."""

from __future__ import annotations

import re

from ring.core import catalog
from ring.core.config import DetectionConfig, LinclsConfig, ToyCNCEConfig, TransferConfig
from ring.core.methods import METHODS
from ring.plan.checks.checker import fail, int_at_least, number, one_of, positive
from ring.plan.checks.common import optimizer, registered, runtime, store, views
from ring.plan.checks.options import AUGMENTATIONS, DETECTION_DATASETS, KEEP_SUPERSEDED

# Detectron2 keys: dotted upper-case paths (the job checks each against Detectron2's config).
D2_KEY = re.compile(r"^[A-Z][A-Z0-9_]*(\.[A-Z][A-Z0-9_]*)+$")


def _dataset(where: str, name: str, registry: dict, kind: str) -> None:
    if name not in registry:
        fail(
            where,
            "dataset" if kind != "source" else "source",
            name,
            f"is not a {kind} dataset",
            f"choose one of {', '.join(registry)}",
        )


def check_lincls(cfg: LinclsConfig, where: str) -> None:
    if cfg.method and cfg.method not in METHODS:
        registered(where, cfg.method)
        fail(where, "method", cfg.method, "is not a method", f"choose one of {', '.join(METHODS)}")
    _dataset(where, cfg.dataset, catalog.DATASETS, "pretraining")
    spec = catalog.DATASETS[cfg.dataset]
    optimizer(where, cfg, spec.train_images, f"labelled {cfg.dataset} training images")
    views(where, cfg)
    one_of(where, cfg, "augmentation", AUGMENTATIONS)
    store(where, cfg)
    runtime(where, cfg)


def check_transfer(cfg: TransferConfig, where: str) -> None:
    if cfg.method and cfg.method not in METHODS:
        registered(where, cfg.method)
        fail(where, "method", cfg.method, "is not a method", f"choose one of {', '.join(METHODS)}")
    if cfg.dataset not in catalog.TRANSFER:
        fail(where, "dataset", cfg.dataset, "is not a transfer dataset", f"choose one of {', '.join(catalog.TRANSFER)}")
    if cfg.source not in catalog.DATASETS:
        fail(
            where,
            "source",
            cfg.source,
            "is not a pretraining dataset (Transfer source)",
            f"choose one of {', '.join(catalog.DATASETS)}",
        )
    counts = catalog.TRANSFER[cfg.dataset].publisher_counts
    # MSCOCO's crops depend on filters (no count): the job checks the batch after listing its split.
    n = counts[0] if counts else 2**62
    optimizer(where, cfg, n, f"{cfg.dataset} training images of the publisher's split")
    views(where, cfg)
    one_of(where, cfg, "augmentation", AUGMENTATIONS)
    runtime(where, cfg)


def check_detection(cfg: DetectionConfig, where: str) -> None:
    from ring.plan.detection_tasks import TASKS  # torch-free

    one_of(where, cfg, "task", tuple(TASKS))
    if cfg.method not in METHODS:
        registered(where, cfg.method)
        fail(where, "method", cfg.method, "is not a method", f"choose one of {', '.join(METHODS)}")
    if cfg.source not in catalog.DATASETS:
        fail(
            where, "source", cfg.source, "is not a pretraining dataset", f"choose one of {', '.join(catalog.DATASETS)}"
        )
    one_of(where, cfg, "datasets", DETECTION_DATASETS)
    one_of(where, cfg, "keep_superseded", KEEP_SUPERSEDED)
    int_at_least(where, cfg, "num_gpus", 0)
    int_at_least(where, cfg, "num_workers", 0)
    int_at_least(where, cfg, "threads", 0)
    if not isinstance(cfg.overrides, dict):
        fail(
            where, "overrides", cfg.overrides, "must map Detectron2 keys to values", "write e.g. {SOLVER.MAX_ITER: 100}"
        )
    for key, value in cfg.overrides.items():
        if not D2_KEY.match(str(key)):
            fail(
                where,
                f"overrides.{key}",
                value,
                "is not a Detectron2 config key (dotted upper case)",
                "write it as Detectron2 does, e.g. SOLVER.MAX_ITER",
            )
    for key in ("SOLVER.MAX_ITER", "SOLVER.IMS_PER_BATCH"):
        v = cfg.overrides.get(key, 1)
        if not isinstance(v, int) or v < 1:
            fail(where, f"overrides.{key}", v, "must be an integer of at least 1", f"set {key} to 1 or more")
    lr = cfg.overrides.get("SOLVER.BASE_LR", 1.0)
    if not number(lr) or lr <= 0:
        fail(where, "overrides.SOLVER.BASE_LR", lr, "must be a finite number above 0", "set a positive learning rate")


def check_toy(cfg: ToyCNCEConfig, where: str) -> None:
    for key in ("n_points", "epochs", "batch_size", "negatives", "eval_points", "layers", "hidden"):
        int_at_least(where, cfg, key, 1)
    if cfg.batch_size > cfg.n_points:
        fail(where, "batch_size", cfg.batch_size, f"exceeds n_points={cfg.n_points}", "lower it")
    if cfg.negatives > cfg.n_points:
        fail(where, "negatives", cfg.negatives, f"exceeds the bank of n_points={cfg.n_points}", "lower it")
    positive(where, cfg, "temperature")
    positive(where, cfg, "lr")
    for p in cfg.percentages:
        if not number(p) or not 0 <= p < 100:
            fail(where, "percentages", cfg.percentages, f"has {p}, outside [0, 100)", "use e.g. 10, 25, 50, 75, 90, 95")
    try:
        (a, b), (c, d) = (
            [x + y for x, y in zip(rz, re, strict=True)] for rz, re in zip(cfg.cov_z, cfg.cov_eps, strict=True)
        )
        ok = all(number(x) for x in (a, b, c, d)) and b == c and a > 0 and a * d - b * c > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        fail(
            where,
            "cov_z",
            cfg.cov_z,
            f"plus cov_eps={cfg.cov_eps} must be a positive-definite 2x2 matrix",
            "fix the covariances",
        )
    int_at_least(where, cfg, "threads", 0)
