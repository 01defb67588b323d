"""One torch-free validation per stage config, run at plan time and again by every entry point.

The workflow calls :func:`check` for every cell's full config when it loads a grid
(:func:`ring.plan.grid.validate`), before any job exists; each stage's entry point and
``ring.cluster.launch`` call it again on the cell's ``config.yaml`` before they start, so a hand-written
config gets the same checks.  Every failure is one sentence naming where (grid file, stage and
cell, or config file), the key, its value, what is allowed and the fix.

Values only the job can see (the real size of a user's ImageNet copy, a transfer split after its
filters) are bounded here by the catalog's counts; the jobs check them again after loading.
"""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from pathlib import Path

from ring.core import config as C
from ring.core.files import unwritable, unwritable_below
from ring.core.methods import METHODS, implementation_problem, missing
from ring.plan import catalog, ownership
from ring.plan.detection_tasks import missing_detectron2

# Smallest crop/resize a ResNet-18 trunk takes meaningfully: its total stride is 32 (conv1 2, max
# pool 2, layer2-4 2 each), so a 16 px view reaches layer4 as 1 x 1 after layer3's stride-2
# convolutions still combined 2 x 2 positions.  Below 16 px layer3 and layer4 both see a single
# position (their 3 x 3 kernels reduce to the centre tap on zero padding): the net trains and
# writes an encoder, but half its stages no longer see spatial structure.  16 px is also the size
# of the smoke grid's study cells.
MIN_INPUT_PX = 16
# ring_anneal names (ring.engine.anneal.ANNEAL_POLICIES builds them; it asserts the two lists agree).
ANNEAL_POLICIES = (
    "linear",
    "step",
    "exponential",
    "adaptive_val",
    "adaptive_loss",
    "none",
    "step_authors",
    "exponential_authors",
    "adaptive_loss_authors",
    "adaptive_val_authors",
)
HEADS = ("linear", "mlp")  # ring.engine.encoder builds them
LA_OWN_ENTRY_RULES = ("topk", "positive")  # ring.engine.objectives.la implements them
CMC_NEGATIVE_DRAWS = ("shared", "per_view")  # ring.engine.objectives.cmc implements them
NEGATIVES_COUNTS = ("excluding_positive", "including_positive")  # ring.engine.objectives.ir implements them
AUGMENT_PLACES = ("auto", "cpu", "device", "dali")  # ring.data.augment makes the views there
STORE_FORMATS = ("jpeg95", "raw", "none")  # ring.plan.stores.CHOICES (tests keep them equal)
STORE_DECODE = ("auto", "cpu", "gpu")  # ring.plan.decode_place.CHOICES (tests keep them equal)
COMPILE = ("auto", "on", "off")  # ring.engine.encoder.resolve_compile resolves them
PRECISIONS = ("auto", "bf16", "fp32")
CHANNELS_LAST = ("auto", "on", "off")
KEEP_SUPERSEDED = ("results", "all")  # ring.plan.rerun.KEEP_SUPERSEDED: what a superseded run keeps
KEEP_CHECKPOINT = ("last", "none")  # what a finished cell keeps of its checkpoints (ring.engine.checkpoint)
AUGMENTATIONS = ("crop_flip", "none")
DETECTION_DATASETS = ("detectron2", "embedded")
VALIDATION_POLICIES = ("adaptive_val", "adaptive_val_authors")  # the policies that read a validation accuracy
# Detectron2 keys: dotted upper-case paths (the job checks each against Detectron2's config).
D2_KEY = re.compile(r"^[A-Z][A-Z0-9_]*(\.[A-Z][A-Z0-9_]*)+$")
SNAPSHOT = re.compile(re.escape(C.SNAPSHOT_FILE).replace(r"\{epoch\}", r"(\d+)") + "$")


class ConfigError(ValueError):
    """A config value no job can use; the message is one sentence with the fix."""


def _fail(where: str, key: str, value, allowed: str, fix: str) -> None:
    raise ConfigError(f"{where}: {key}={value!r} {allowed}; {fix}.")


class Checker:
    """One config's checks at ``where``, handed to an objective's own checks (:meth:`ring.core.methods.Objective.check`)
    so that every failure reads the same."""

    def __init__(self, where: str, cfg):
        self.where, self.cfg = where, cfg

    def fail(self, key: str, allowed: str, fix: str) -> None:
        _fail(self.where, key, getattr(self.cfg, key), allowed, fix)

    def int_at_least(self, key: str, low: int, fix: str = "") -> None:
        _int_at_least(self.where, self.cfg, key, low, fix)

    def positive(self, key: str, fix: str = "") -> None:
        _positive(self.where, self.cfg, key, fix)

    def in_range(self, key: str, low: float, high: float, high_open: bool = True) -> None:
        _in_range(self.where, self.cfg, key, low, high, high_open)

    def one_of(self, key: str, names) -> None:
        _one_of(self.where, self.cfg, key, names)


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _int_at_least(where: str, cfg, key: str, low: int, fix: str = "") -> None:
    v = getattr(cfg, key)
    if not isinstance(v, int) or isinstance(v, bool) or v < low:
        _fail(where, key, v, f"must be an integer of at least {low}", fix or f"set {key} to {low} or more")


def _positive(where: str, cfg, key: str, fix: str = "") -> None:
    v = getattr(cfg, key)
    if not _number(v) or v <= 0:
        _fail(where, key, v, "must be a finite number above 0", fix or f"set a positive {key}")


def _in_range(where: str, cfg, key: str, low: float, high: float, high_open: bool = True) -> None:
    v = getattr(cfg, key)
    ok = _number(v) and low <= v and (v < high if high_open else v <= high)
    if not ok:
        _fail(where, key, v, f"must lie in [{low}, {high}{')' if high_open else ']'}", f"choose {key} in that range")


# The words YAML 1.1 (PyYAML) reads as booleans when unquoted, by the boolean they become.
YAML_BOOLEAN_WORDS = {True: ("on", "yes", "true"), False: ("off", "no", "false")}


def _one_of(where: str, cfg, key: str, names) -> None:
    v = getattr(cfg, key)
    if isinstance(v, bool):  # `compile: on` unquoted: YAML hands over True, not the word the user wrote
        words = [w for w in YAML_BOOLEAN_WORDS[v] if w in names]
        fix = f"write {key}: '{words[0]}' (quoted)" if words else f"write one of {', '.join(names)}"
        _fail(
            where,
            key,
            v,
            f"is a YAML boolean: YAML reads an unquoted {'/'.join(YAML_BOOLEAN_WORDS[v])} as {v}, "
            "and this key takes a word",
            fix,
        )
    if v not in names:
        _fail(where, key, v, f"is not one of {', '.join(names)}", "choose one of them")


def _dataset(where: str, name: str, registry: dict, kind: str) -> None:
    if name not in registry:
        _fail(
            where,
            "dataset" if kind != "source" else "source",
            name,
            f"is not a {kind} dataset",
            f"choose one of {', '.join(registry)}",
        )


def pretrain_images(dataset: str) -> int:
    """Images a pretraining cell of ``dataset`` trains on (its memory bank's size)."""
    s = catalog.DATASETS[dataset]
    return s.pretrain_images or s.train_images


def _views(where: str, cfg) -> None:
    for key in ("resize", "crop"):
        v = getattr(cfg, key)
        if not isinstance(v, int) or v < MIN_INPUT_PX:
            _fail(
                where,
                key,
                v,
                f"is below {MIN_INPUT_PX} px, the smallest view a ResNet-18 trunk (total stride 32) "
                "still sees spatially",
                f"set {key} to at least {MIN_INPUT_PX}",
            )
    if cfg.crop > cfg.resize:
        _fail(
            where,
            "crop",
            cfg.crop,
            f"exceeds resize={cfg.resize} (the crop is taken from the resized image)",
            "lower crop or raise resize",
        )


def _optimizer(where: str, cfg, n_train: int, what: str) -> None:
    _int_at_least(where, cfg, "epochs", 1, "train at least one epoch (epochs: 1 or more)")
    _int_at_least(where, cfg, "batch_size", 1)
    if cfg.batch_size > n_train:
        _fail(
            where, "batch_size", cfg.batch_size, f"exceeds the {n_train} {what}", f"set batch_size to at most {n_train}"
        )
    _positive(where, cfg, "lr")
    if hasattr(cfg, "momentum"):
        _in_range(where, cfg, "momentum", 0.0, 1.0)
    if not _number(cfg.weight_decay) or cfg.weight_decay < 0:
        _fail(where, "weight_decay", cfg.weight_decay, "must be a finite number of at least 0", "set weight_decay >= 0")


def _ring(where: str, cfg) -> None:
    """The Ring window's keys, checked on every cell (a non-Ring cell ignores them, but a typo there is still one)."""
    w = cfg.ring_w_l
    if not isinstance(w, (list, tuple)) or len(w) != 2 or not all(_number(x) for x in w):
        _fail(where, "ring_w_l", w, "must be a [start, final] pair of percentiles", "write e.g. ring_w_l: [0.0, 90.0]")
    start, final = w
    if not (0 <= start <= final < 100):
        _fail(
            where,
            "ring_w_l",
            list(w),
            "must satisfy 0 <= start <= final < 100 (w_l only rises: the window gets harder)",
            "order the pair [start, final] and keep final below 100",
        )
    if (cfg.ring_inner is None) == (cfg.ring_w_u is None):
        _fail(
            where,
            "ring_w_u",
            cfg.ring_w_u,
            f"and ring_inner={cfg.ring_inner!r} must have exactly one set "
            "(ring_inner: a fraction of the eligible slice excluded; ring_w_u: a fixed upper percentile)",
            "set the other one to null",
        )
    if cfg.ring_inner is not None:
        _in_range(where, cfg, "ring_inner", 0.0, 1.0)
    else:
        w_u = cfg.ring_w_u
        if not _number(w_u) or not 0 < w_u <= 100:
            _fail(where, "ring_w_u", w_u, "must lie in (0, 100]", "choose a percentile, 100 for a ball")
        if final >= w_u:
            _fail(
                where,
                "ring_w_l",
                list(w),
                f"ends at w_l={final} >= w_u={w_u} (ring_w_u), a window that selects nothing",
                "keep ring_w_l below ring_w_u",
            )
    _one_of(where, cfg, "ring_anneal", ANNEAL_POLICIES)
    _int_at_least(where, cfg, "ring_anneal_epochs", 1)
    _int_at_least(where, cfg, "ring_anneal_stages", 1)
    _in_range(where, cfg, "ring_loss_ema", 0.0, 1.0)
    v = cfg.ring_val_fraction
    if not _number(v) or not 0 < v < 1:
        _fail(where, "ring_val_fraction", v, "must lie strictly between 0 and 1", "choose e.g. 0.1")
    v = cfg.ring_val_before_training
    if not isinstance(v, bool):
        _fail(where, "ring_val_before_training", v, "must be true or false", "write true or false")
    if v and cfg.ring_anneal not in VALIDATION_POLICIES:
        _fail(
            where,
            "ring_val_before_training",
            v,
            f"is read only by the validation-adaptive annealing policies "
            f"({', '.join(VALIDATION_POLICIES)}), not ring_anneal={cfg.ring_anneal!r}",
            "set it to false or use one of them",
        )


def _registered(where: str, name) -> None:
    """A name the registry lacks while a plug-in failed to load: that plug-in's sentence, not "not a method"."""
    if isinstance(name, str) and (broken := missing(name)):
        raise ConfigError(f"{where}: {broken}")


def _implementation(where: str, name: str) -> None:
    """A plug-in's torch class checked here, at plan time, from its source (never imported: no torch on the login
    node), instead of in the training job (after submission)."""
    if problem := implementation_problem(name):
        _fail(
            where,
            "method",
            name,
            f"is registered by the {METHODS.plugins[name]} plug-in, whose implementation "
            f"{METHODS[name].objective.implementation!r} {problem}",
            "fix that package or choose another method",
        )


def bn_layout(bn_groups: int, world: int) -> tuple[int, int]:
    """How ``world`` processes hold ``bn_groups`` BatchNorm groups: (groups within each process, consecutive processes
    that share one group).  One of the two is 1; a layout that nests neither way fails (:func:`world_problem`)."""
    if bn_groups % world == 0:
        return bn_groups // world, 1
    return 1, world // bn_groups


def world_problem(batch_size: int, bn_groups: int, world: int) -> str | None:
    """Why ``world`` processes (nodes x gpus_per_node) cannot train a global batch of ``batch_size`` images in
    ``bn_groups`` BatchNorm groups, as one process computes it (one sentence), or None.  Each process takes an equal
    share of the batch; a group lies either within one process (``bn_groups`` a multiple of ``world``) or across
    ``world / bn_groups`` whole consecutive processes (``world`` a multiple of ``bn_groups``)."""
    if batch_size % world:
        return (
            f"batch_size={batch_size} does not split evenly over the {world} processes (nodes x gpus_per_node); "
            f"choose a batch_size that is a multiple of {world}, or other resources"
        )
    if bn_groups % world and world % bn_groups:
        return (
            f"bn_groups={bn_groups} and the {world} processes (nodes x gpus_per_node) do not nest (a BatchNorm group "
            f"lies within one process or spans whole processes); choose a divisor or a multiple of {world} for "
            "bn_groups, or other resources"
        )
    groups, _ = bn_layout(bn_groups, world)
    if (batch_size // world) % groups:
        return (
            f"the {batch_size // world} images of each of the {world} processes do not split into its {groups} "
            "BatchNorm groups; choose a batch_size that is a multiple of bn_groups"
        )
    return None


def check_pretrain(cfg: C.PretrainConfig, where: str) -> None:
    if cfg.method not in METHODS:
        _registered(where, cfg.method)
        _fail(where, "method", cfg.method, "is not a method (Unknown method)", f"choose one of {', '.join(METHODS)}")
    m = METHODS[cfg.method]
    _implementation(where, cfg.method)
    if cfg.dataset not in catalog.DATASETS:
        _fail(
            where,
            "dataset",
            cfg.dataset,
            "is not a pretraining dataset (Unknown dataset)",
            f"choose one of {', '.join(catalog.DATASETS)}",
        )
    for key, value in m.fixed:
        if getattr(cfg, key) != value:
            _fail(
                where,
                key,
                getattr(cfg, key),
                f"contradicts method {cfg.method}, which is defined by {key}={value!r}",
                "remove that override or use another method",
            )
    n = pretrain_images(cfg.dataset)
    _optimizer(where, cfg, n, f"{cfg.dataset} training images")
    if not all(isinstance(e, int) and e >= 0 for e in cfg.lr_milestones):
        _fail(
            where, "lr_milestones", cfg.lr_milestones, "must be epochs (integers >= 0)", "list epochs, e.g. [200, 250]"
        )
    _positive(where, cfg, "lr_gamma")
    _views(where, cfg)
    if not _number(cfg.crop_scale_min) or not 0 < cfg.crop_scale_min <= 1:
        _fail(where, "crop_scale_min", cfg.crop_scale_min, "must lie in (0, 1]", "choose e.g. 0.2")
    _one_of(where, cfg, "head", HEADS)
    _int_at_least(where, cfg, "out_dim", 1)
    _positive(where, cfg, "temperature")
    _int_at_least(where, cfg, "bn_groups", 1)
    if cfg.batch_size % cfg.bn_groups:
        _fail(
            where,
            "bn_groups",
            cfg.bn_groups,
            f"does not split batch_size={cfg.batch_size} into equal groups",
            "choose a divisor of batch_size",
        )
    m.objective.check(Checker(where, cfg), n, m)
    _ring(where, cfg)
    if m.uses_kmeans:
        if not isinstance(cfg.kmeans_k, int) or not 1 <= cfg.kmeans_k <= n:
            _fail(
                where,
                "kmeans_k",
                cfg.kmeans_k,
                f"must lie between 1 and the {n} training images of {cfg.dataset}",
                "lower kmeans_k",
            )
        _int_at_least(where, cfg, "kmeans_clusterings", 1)
        _int_at_least(where, cfg, "kmeans_iters", 1)
        _int_at_least(where, cfg, "kmeans_warmup_epochs", 0)
        if cfg.kmeans_warmup_epochs >= cfg.epochs:
            _fail(
                where,
                "kmeans_warmup_epochs",
                cfg.kmeans_warmup_epochs,
                f"is not below epochs={cfg.epochs}, so k-means never runs and {cfg.method} trains as its base method",
                "lower it or raise epochs",
            )
    _int_at_least(where, cfg, "knn_every", 0)
    _int_at_least(where, cfg, "knn_k", 1)
    _positive(where, cfg, "knn_temperature")
    if not all(isinstance(e, int) and 0 <= e <= cfg.epochs for e in cfg.snapshot_epochs):
        _fail(
            where,
            "snapshot_epochs",
            cfg.snapshot_epochs,
            f"must be epochs in 0..epochs={cfg.epochs}",
            "drop the later ones or raise epochs",
        )
    if cfg.init_from:
        match = SNAPSHOT.search(str(cfg.init_from))
        if not match:
            _fail(
                where,
                "init_from",
                cfg.init_from,
                f"does not name a snapshot file ({C.SNAPSHOT_FILE})",
                "point it at a snapshot another cell writes through its snapshot_epochs, or set it to ''",
            )
        if int(match.group(1)) >= cfg.epochs:
            _fail(
                where,
                "init_from",
                cfg.init_from,
                f"starts at epoch {match.group(1)}, not before epochs={cfg.epochs}",
                "raise epochs or start from an earlier snapshot",
            )
    _one_of(where, cfg, "la_own_entry", LA_OWN_ENTRY_RULES)
    _one_of(where, cfg, "cmc_negatives", CMC_NEGATIVE_DRAWS)
    _one_of(where, cfg, "negatives_count", NEGATIVES_COUNTS)
    _one_of(where, cfg, "augment", AUGMENT_PLACES)
    _one_of(where, cfg, "store", STORE_FORMATS)
    spec = catalog.DATASETS.get(cfg.dataset)
    if cfg.augment == "dali" and cfg.store != "none" and spec and spec.store_size == cfg.resize:
        # DALI decodes the original files itself (ring.data.dali); the store's records are the device path's.
        _fail(
            where,
            "augment",
            "dali",
            "reads the original files, and this cell reads the prepared store",
            ("set store: none for it, or augment: device (or auto) to read the store"),
        )
    _one_of(where, cfg, "store_decode", STORE_DECODE)
    if cfg.store_decode == "gpu":
        _gpu_decode(where, cfg, spec)
    _one_of(where, cfg, "compile", COMPILE)
    v = cfg.checkpoint_interval_min  # 0 checkpoints after every step (the kill/resume tests use it)
    if not _number(v) or v < 0:
        _fail(
            where,
            "checkpoint_interval_min",
            v,
            "must be a finite number of at least 0 (0: after every step)",
            "set checkpoint_interval_min >= 0",
        )
    _int_at_least(where, cfg, "max_chunk_elements", 0)
    _int_at_least(where, cfg, "loss_read_every", 1)
    _runtime(where, cfg)
    warn_grey_cmc(cfg, where)


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
        _fail(where, "store_decode", "gpu", problem, fix)


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


def _runtime(where: str, cfg) -> None:
    _one_of(where, cfg, "precision", PRECISIONS)
    _one_of(where, cfg, "channels_last", CHANNELS_LAST)
    _one_of(where, cfg, "keep_superseded", KEEP_SUPERSEDED)
    _one_of(where, cfg, "keep_checkpoint", KEEP_CHECKPOINT)
    _int_at_least(where, cfg, "num_workers", 0)
    _int_at_least(where, cfg, "threads", 0)


def check_lincls(cfg: C.LinclsConfig, where: str) -> None:
    if cfg.method and cfg.method not in METHODS:
        _registered(where, cfg.method)
        _fail(where, "method", cfg.method, "is not a method", f"choose one of {', '.join(METHODS)}")
    _dataset(where, cfg.dataset, catalog.DATASETS, "pretraining")
    spec = catalog.DATASETS[cfg.dataset]
    _optimizer(where, cfg, spec.train_images, f"labelled {cfg.dataset} training images")
    _views(where, cfg)
    _one_of(where, cfg, "augmentation", AUGMENTATIONS)
    _one_of(where, cfg, "store", STORE_FORMATS)
    _runtime(where, cfg)


def check_transfer(cfg: C.TransferConfig, where: str) -> None:
    if cfg.method and cfg.method not in METHODS:
        _registered(where, cfg.method)
        _fail(where, "method", cfg.method, "is not a method", f"choose one of {', '.join(METHODS)}")
    if cfg.dataset not in catalog.TRANSFER:
        _fail(
            where, "dataset", cfg.dataset, "is not a transfer dataset", f"choose one of {', '.join(catalog.TRANSFER)}"
        )
    if cfg.source not in catalog.DATASETS:
        _fail(
            where,
            "source",
            cfg.source,
            "is not a pretraining dataset (Transfer source)",
            f"choose one of {', '.join(catalog.DATASETS)}",
        )
    counts = catalog.TRANSFER[cfg.dataset].publisher_counts
    # MSCOCO's crops depend on filters (no count): the job checks the batch after listing its split.
    n = counts[0] if counts else 2**62
    _optimizer(where, cfg, n, f"{cfg.dataset} training images of the publisher's split")
    _views(where, cfg)
    _one_of(where, cfg, "augmentation", AUGMENTATIONS)
    _runtime(where, cfg)


def check_detection(cfg: C.DetectionConfig, where: str) -> None:
    from ring.plan.detection_tasks import TASKS  # torch-free

    _one_of(where, cfg, "task", tuple(TASKS))
    if cfg.method not in METHODS:
        _registered(where, cfg.method)
        _fail(where, "method", cfg.method, "is not a method", f"choose one of {', '.join(METHODS)}")
    if cfg.source not in catalog.DATASETS:
        _fail(
            where, "source", cfg.source, "is not a pretraining dataset", f"choose one of {', '.join(catalog.DATASETS)}"
        )
    _one_of(where, cfg, "datasets", DETECTION_DATASETS)
    _int_at_least(where, cfg, "num_gpus", 0)
    _int_at_least(where, cfg, "num_workers", 0)
    _int_at_least(where, cfg, "threads", 0)
    if not isinstance(cfg.overrides, dict):
        _fail(
            where, "overrides", cfg.overrides, "must map Detectron2 keys to values", "write e.g. {SOLVER.MAX_ITER: 100}"
        )
    for key, value in cfg.overrides.items():
        if not D2_KEY.match(str(key)):
            _fail(
                where,
                f"overrides.{key}",
                value,
                "is not a Detectron2 config key (dotted upper case)",
                "write it as Detectron2 does, e.g. SOLVER.MAX_ITER",
            )
    for key in ("SOLVER.MAX_ITER", "SOLVER.IMS_PER_BATCH"):
        v = cfg.overrides.get(key, 1)
        if not isinstance(v, int) or v < 1:
            _fail(where, f"overrides.{key}", v, "must be an integer of at least 1", f"set {key} to 1 or more")
    lr = cfg.overrides.get("SOLVER.BASE_LR", 1.0)
    if not _number(lr) or lr <= 0:
        _fail(where, "overrides.SOLVER.BASE_LR", lr, "must be a finite number above 0", "set a positive learning rate")


def check_toy(cfg: C.ToyCNCEConfig, where: str) -> None:
    for key in ("n_points", "epochs", "batch_size", "negatives", "eval_points", "layers", "hidden"):
        _int_at_least(where, cfg, key, 1)
    if cfg.batch_size > cfg.n_points:
        _fail(where, "batch_size", cfg.batch_size, f"exceeds n_points={cfg.n_points}", "lower it")
    if cfg.negatives > cfg.n_points:
        _fail(where, "negatives", cfg.negatives, f"exceeds the bank of n_points={cfg.n_points}", "lower it")
    _positive(where, cfg, "temperature")
    _positive(where, cfg, "lr")
    for p in cfg.percentages:
        if not _number(p) or not 0 <= p < 100:
            _fail(
                where, "percentages", cfg.percentages, f"has {p}, outside [0, 100)", "use e.g. 10, 25, 50, 75, 90, 95"
            )
    try:
        (a, b), (c, d) = (
            [x + y for x, y in zip(rz, re, strict=True)] for rz, re in zip(cfg.cov_z, cfg.cov_eps, strict=True)
        )
        ok = all(_number(x) for x in (a, b, c, d)) and b == c and a > 0 and a * d - b * c > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        _fail(
            where,
            "cov_z",
            cfg.cov_z,
            f"plus cov_eps={cfg.cov_eps} must be a positive-definite 2x2 matrix",
            "fix the covariances",
        )
    _int_at_least(where, cfg, "threads", 0)


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


# Every stage's --help points here: the generated reference of every key (ring describe).
REFERENCE_HINT = "every key is described in docs/configuration.md and by `ring describe`"

# What the checks above allow, per key, for the configuration reference (ring.plan.reference); a key
# not listed takes any value of its type.  tests/plan/test_reference.py keeps each entry a real field.
ALLOWED = {
    "method": f"one of {', '.join(METHODS)}",
    "dataset": "a catalog dataset (pretraining: "
    + ", ".join(catalog.DATASETS)
    + "; transfer: "
    + ", ".join(catalog.TRANSFER)
    + ")",
    "source": "a pretraining dataset: " + ", ".join(catalog.DATASETS),
    "epochs": ">= 1",
    "batch_size": ">= 1, at most the training set (catalog count)",
    "lr": "> 0",
    "momentum": "[0, 1)",
    "weight_decay": ">= 0",
    "lr_milestones": "epochs >= 0",
    "lr_gamma": "> 0",
    "resize": f">= {MIN_INPUT_PX} (px)",
    "crop": f">= {MIN_INPUT_PX} (px), <= resize",
    "crop_scale_min": "(0, 1]",
    "head": ", ".join(HEADS),
    "out_dim": ">= 1",
    "temperature": "> 0",
    "bank_negatives": "1 .. the bank (training images; LA: one fewer)",
    "bank_momentum": "[0, 1)",
    "queue_size": ">= batch_size, <= the training images",
    "key_momentum": "[0, 1)",
    "bn_groups": ">= 1, divides batch_size; a divisor or a multiple of the processes (nodes x gpus_per_node)",
    "ring_w_l": "[start, final] with 0 <= start <= final < 100 (and final < ring_w_u)",
    "ring_anneal": ", ".join(ANNEAL_POLICIES),
    "la_own_entry": ", ".join(LA_OWN_ENTRY_RULES),
    "cmc_negatives": ", ".join(CMC_NEGATIVE_DRAWS),
    "negatives_count": ", ".join(NEGATIVES_COUNTS) + " (including_positive: bank_negatives >= 2)",
    "augment": ", ".join(AUGMENT_PLACES),
    "store": ", ".join(STORE_FORMATS) + " (image folders at the catalog's store size; none: the original files)",
    "store_decode": ", ".join(STORE_DECODE) + " (gpu: the jpeg95 store on a CUDA device with augment: device or auto)",
    "compile": ", ".join(COMPILE),
    "ring_anneal_epochs": ">= 1",
    "ring_inner": "[0, 1), or null with ring_w_u set",
    "ring_w_u": "(0, 100], or null with ring_inner set",
    "ring_anneal_stages": ">= 1",
    "ring_loss_ema": "[0, 1)",
    "ring_val_fraction": "(0, 1)",
    "ring_val_before_training": "true, false (true only with ring_anneal " + " or ".join(VALIDATION_POLICIES) + ")",
    "max_chunk_elements": ">= 0 (0: sized by the GPU's memory)",
    "kmeans_k": "1 .. the training images",
    "kmeans_clusterings": ">= 1",
    "kmeans_iters": ">= 1",
    "kmeans_warmup_epochs": ">= 0, < epochs",
    "knn_every": ">= 0 (0: never)",
    "knn_k": ">= 1",
    "knn_temperature": "> 0",
    "snapshot_epochs": "epochs in 0 .. epochs",
    "init_from": f"'' or a {C.SNAPSHOT_FILE} path whose epoch is < epochs",
    "checkpoint_interval_min": ">= 0 (0: after every step)",
    "loss_read_every": ">= 1",
    "precision": ", ".join(PRECISIONS),
    "channels_last": ", ".join(CHANNELS_LAST),
    "keep_superseded": ", ".join(KEEP_SUPERSEDED) + " (results: checkpoints dropped)",
    "keep_checkpoint": ", ".join(KEEP_CHECKPOINT) + " (the previous checkpoint goes either way)",
    "num_workers": ">= 0",
    "threads": ">= 0 (0: torch's default)",
    "augmentation": ", ".join(AUGMENTATIONS),
    "task": "coco_det_seg, coco_kp, voc_det",
    "datasets": ", ".join(DETECTION_DATASETS),
    "overrides": "Detectron2 keys (dotted upper case); SOLVER.MAX_ITER, SOLVER.IMS_PER_BATCH >= 1, SOLVER.BASE_LR > 0",
    "num_gpus": ">= 0 (0: CPU)",
    "n_points": ">= 1",
    "negatives": ">= 1, <= n_points",
    "eval_points": ">= 1",
    "layers": ">= 1",
    "hidden": ">= 1",
    "percentages": "each in [0, 100)",
    "cov_z": "cov_z + cov_eps positive definite (2 x 2)",
}


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
