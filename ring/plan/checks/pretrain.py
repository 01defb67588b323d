"""The pretraining config's checks, by concern: what the cell is, how it optimises, its views and encoder, its
method's own keys (declared in ring.core.method_keys), its monitors and snapshots, and where its views are made."""

from __future__ import annotations

import re
import sys

from ring.core import catalog
from ring.core.config import SNAPSHOT_FILE, PretrainConfig
from ring.core.method_keys import KEYS
from ring.core.methods import METHODS, Method
from ring.plan.checks.checker import Checker, fail, int_at_least, number, one_of, positive
from ring.plan.checks.common import implementation, optimizer, registered, runtime, store, views
from ring.plan.checks.options import (
    AUGMENT_PLACES,
    COMPILE,
    HEADS,
    KNN_SCHEDULES,
    PRETRAIN_PRECISIONS,
    STORE_DECODE,
    STORE_DECODERS,
    VIEW_DRAWS,
)

SNAPSHOT = re.compile(re.escape(SNAPSHOT_FILE).replace(r"\{epoch\}", r"(\d+)") + "$")


def pretrain_images(dataset: str) -> int:
    """Images a pretraining cell of ``dataset`` trains on (its memory bank's size)."""
    spec = catalog.DATASETS[dataset]
    return spec.pretrain_images or spec.train_images


def check_pretrain(cfg: PretrainConfig, where: str) -> None:
    m = _cell(where, cfg)
    n = pretrain_images(cfg.dataset)
    _optimisation(where, cfg, n)
    _views_and_encoder(where, cfg)
    _method_keys(Checker(where, cfg), n, m)
    _monitors_and_snapshots(where, cfg)
    _views_place(where, cfg)
    _faults_and_runtime(where, cfg)
    warn_grey_cmc(cfg, where)


def _cell(where: str, cfg) -> Method:
    """What the cell is: a registered method (a plug-in's implementation in place), a catalog dataset, and the values
    that define its method."""
    if cfg.method not in METHODS:
        registered(where, cfg.method)
        fail(where, "method", cfg.method, "is not a method (Unknown method)", f"choose one of {', '.join(METHODS)}")
    m = METHODS[cfg.method]
    implementation(where, cfg.method)
    if cfg.dataset not in catalog.DATASETS:
        fail(
            where,
            "dataset",
            cfg.dataset,
            "is not a pretraining dataset (Unknown dataset)",
            f"choose one of {', '.join(catalog.DATASETS)}",
        )
    for key, value in m.fixed:
        if getattr(cfg, key) != value:
            fail(
                where,
                key,
                getattr(cfg, key),
                f"contradicts method {cfg.method}, which is defined by {key}={value!r}",
                "remove that override or use another method",
            )
    return m


def _optimisation(where: str, cfg, n: int) -> None:
    optimizer(where, cfg, n, f"{cfg.dataset} training images")
    if not all(isinstance(e, int) and e >= 0 for e in cfg.lr_milestones):
        fail(
            where, "lr_milestones", cfg.lr_milestones, "must be epochs (integers >= 0)", "list epochs, e.g. [200, 250]"
        )
    positive(where, cfg, "lr_gamma")


def _views_and_encoder(where: str, cfg) -> None:
    views(where, cfg)
    if not number(cfg.crop_scale_min) or not 0 < cfg.crop_scale_min <= 1:
        fail(where, "crop_scale_min", cfg.crop_scale_min, "must lie in (0, 1]", "choose e.g. 0.2")
    one_of(where, cfg, "head", HEADS)
    int_at_least(where, cfg, "out_dim", 1)
    positive(where, cfg, "temperature")
    int_at_least(where, cfg, "bn_groups", 1)
    if cfg.batch_size % cfg.bn_groups:
        fail(
            where,
            "bn_groups",
            cfg.bn_groups,
            f"does not split batch_size={cfg.batch_size} into equal groups",
            "choose a divisor of batch_size",
        )


def _method_keys(c: Checker, n: int, m: Method) -> None:
    """The keys only some methods read, as ring.core.method_keys declares them: each one's value on every cell (a
    typo is one wherever it is written), each group against the cell where the method reads it, then the objective's
    own checks."""
    for key in KEYS.values():
        if key.check:
            key.check(c)
    for group in m.key_groups:
        if group.check:
            group.check(c, n, m)
    m.objective.check(c, n, m)


def _monitors_and_snapshots(where: str, cfg) -> None:
    int_at_least(where, cfg, "knn_every", 0)
    one_of(where, cfg, "knn_schedule", KNN_SCHEDULES)
    int_at_least(where, cfg, "knn_k", 1)
    positive(where, cfg, "knn_temperature")
    if not all(isinstance(e, int) and 0 <= e <= cfg.epochs for e in cfg.snapshot_epochs):
        fail(
            where,
            "snapshot_epochs",
            cfg.snapshot_epochs,
            f"must be epochs in 0..epochs={cfg.epochs}",
            "drop the later ones or raise epochs",
        )
    if not cfg.init_from:
        return
    match = SNAPSHOT.search(str(cfg.init_from))
    if not match:
        fail(
            where,
            "init_from",
            cfg.init_from,
            f"does not name a snapshot file ({SNAPSHOT_FILE})",
            "point it at a snapshot another cell writes through its snapshot_epochs, or set it to ''",
        )
    if int(match.group(1)) >= cfg.epochs:
        fail(
            where,
            "init_from",
            cfg.init_from,
            f"starts at epoch {match.group(1)}, not before epochs={cfg.epochs}",
            "raise epochs or start from an earlier snapshot",
        )


def _views_place(where: str, cfg) -> None:
    """Where the views are made and what they are read from."""
    one_of(where, cfg, "augment", AUGMENT_PLACES)
    one_of(where, cfg, "view_draws", VIEW_DRAWS)
    if cfg.augment == "dali" and cfg.view_draws == "batch":
        fail(
            where,
            "view_draws",
            "batch",
            "draws the views' parameters for PIL and the device, and DALI draws its own",
            "set view_draws: sample for augment: dali, or augment: device (or auto)",
        )
    store(where, cfg)
    spec = catalog.DATASETS.get(cfg.dataset)
    if cfg.augment == "dali" and cfg.store != "none" and spec and spec.store_size == cfg.resize:
        # DALI decodes the original files itself (ring.data.dali); the store's records are the device path's.
        fail(
            where,
            "augment",
            "dali",
            "reads the original files, and this cell reads the prepared store",
            ("set store: none for it, or augment: device (or auto) to read the store"),
        )
    one_of(where, cfg, "store_decode", STORE_DECODE)
    one_of(where, cfg, "store_decoder", STORE_DECODERS)
    if cfg.store_decode != "auto" and cfg.store_decoder not in ("", cfg.store_decode):
        fail(
            where,
            "store_decoder",
            cfg.store_decoder,
            f"is not the decoder store_decode: {cfg.store_decode} chooses",
            "remove store_decoder (the plan records it) or set store_decode: auto",
        )
    if "gpu" in (cfg.store_decode, cfg.store_decoder):
        _gpu_decode(where, cfg, spec)


def _gpu_decode(where: str, cfg, spec) -> None:
    """``store_decode: gpu`` decodes the jpeg95 store's records on a CUDA device, into the device views."""
    reads_jpeg95 = cfg.store == "jpeg95" and spec is not None and spec.store_size and spec.store_size == cfg.resize
    problem = (
        "decodes the jpeg95 store on a CUDA device, and this cell does not read that store"
        if not reads_jpeg95
        else f"decodes on a CUDA device, and this cell runs on device: {cfg.device}"
        if cfg.device == "cpu"
        else f"hands the device views the decoded batch, and this cell makes its views with augment: {cfg.augment}"
        if cfg.augment in ("cpu", "dali")
        else None
    )
    if problem:
        fix = "set store_decode: auto (the measured choice) or cpu, or read the jpeg95 store on a GPU"
        fail(where, "store_decode", "gpu", problem, fix)


def _faults_and_runtime(where: str, cfg) -> None:
    one_of(where, cfg, "compile", COMPILE)
    v = cfg.checkpoint_interval_min  # 0 checkpoints after every step (the kill/resume tests use it)
    if not number(v) or v < 0:
        fail(
            where,
            "checkpoint_interval_min",
            v,
            "must be a finite number of at least 0 (0: after every step)",
            "set checkpoint_interval_min >= 0",
        )
    int_at_least(where, cfg, "max_chunk_elements", 0)
    int_at_least(where, cfg, "loss_read_every", 1)
    runtime(where, cfg, PRETRAIN_PRECISIONS)


# Datasets already warned about by warn_grey_cmc in this process: the plan checks every cell, one line says it.
_GREY_CMC_WARNED: set[str] = set()


def grey_cmc_warning(cfg, where: str) -> str | None:
    """One sentence when ``cfg`` pretrains a CMC-based method on a grey dataset (``catalog.DatasetSpec.grey``), else
    None.

    A warning, not a refusal: a grid may run CMC's methods on the grey digits to exercise their code path (the smoke
    grid, README command (1), runs them on digits_colour instead).  There the ab view is a constant image, the ab trunk
    learns nothing and its large constant features can make the linear probe's loss explode; ring.lincls reports
    "diverged" where the probe's accuracy is at chance and the number, marked, where it is above."""
    spec = catalog.DATASETS.get(cfg.dataset)
    method = METHODS.get(cfg.method)
    if spec is None or not spec.grey or method is None or not method.objective.grey_blind:
        return None
    return (
        f"{where}: warning: {cfg.dataset} holds grey images, so CMC's ab view is a constant image and the ab trunk of "
        f"{cfg.method} (and of every CMC-based cell on {cfg.dataset}) learns nothing; its linear evaluation is "
        f"expected "
        "to diverge (a huge loss, an accuracy at or near chance), so pretrain CMC on a colour dataset "
        "(digits_colour) for a result."
    )


def warn_grey_cmc(cfg, where: str) -> None:
    """Print :func:`grey_cmc_warning` on stderr, once per dataset and process."""
    text = grey_cmc_warning(cfg, where)
    if text and cfg.dataset not in _GREY_CMC_WARNED:
        _GREY_CMC_WARNED.add(cfg.dataset)
        print(f"ring: {text}", file=sys.stderr)
