"""Stage configurations: the paper's defaults, loading from YAML, validation and hashing.

Every field has the paper's value as its default (Sec. 5 "Training Details" and the authors'
configs); a grid file overrides some of them per cell.  A config is validated before any data
is read or any step is taken, and every failure is one sentence naming the bad value and the fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ring.core.key_declaration import with_method_keys
from ring.core.method_keys import BANK, CMC, GROUPS, KEYS, KMEANS, LA, QUEUE, RING
from ring.core.methods import METHODS, apply_fixed
from ring.core.yaml_reading import read_yaml


@dataclass
@with_method_keys({"temperature": (BANK, QUEUE), "bn_groups": (RING,), "max_chunk_elements": (KMEANS, LA, CMC)})
class PretrainConfig:
    method: str  # the method (ring.core.methods.METHODS); the workflow sets it from the cell
    dataset: str  # the pretraining dataset (ring.core.catalog); the workflow sets it from the cell
    seed: int = 0  # seeds initialisation, sampling and augmentation; the workflow sets it from the cell
    data_root: str = "data"  # folder holding <dataset>/ (the workflow's data_root)

    # Optimisation (paper, Sec. 5).
    epochs: int = 300  # training epochs
    batch_size: int = 256  # images per step, over all GPUs
    lr: float = 0.03  # SGD learning rate
    momentum: float = 0.9  # SGD momentum
    weight_decay: float = 1e-4  # SGD weight decay
    lr_milestones: list[int] = field(default_factory=lambda: [200, 250])  # epochs at which lr is multiplied by lr_gamma
    lr_gamma: float = 0.1  # lr factor at each milestone

    # Views: resize to resize x resize, then a random crop of `crop` pixels.  The crop is a
    # RandomResizedCrop with area scale (crop_scale_min, 1), the crop IR, MoCo and the authors use.
    resize: int = 256
    crop: int = 224
    crop_scale_min: float = 0.2

    # Encoder: ResNet-18 with a linear 128-d head.  Linear is IR's, CMC's and MoCo v1's head and
    # the paper calls its linear-eval setup "equivalent to using a linear projection head"; "mlp"
    # (MoCo v2's 2-layer head) is available for studies.
    head: str = "linear"
    out_dim: int = 128
    temperature: float = 0.07
    # Here: a memory bank's keys and MoCo's queue's (ring.core.method_keys BANK, QUEUE).

    # BatchNorm statistics per group of the batch, as on this many GPUs (MoCo's shuffled BN needs
    # more than one: the paper grid uses MoCo's 8).  A data-parallel run uses bn_groups / GPUs
    # groups per GPU, or spreads each group over GPUs / bn_groups consecutive GPUs (IR on 4 GPUs:
    # one group over all 4): one process's arithmetic with bn_groups groups, its sums in another order (in
    # float64 a two-epoch run agrees to 1e-6; fp32 runs part as one process's on two thread counts do: docs/cluster.md).
    bn_groups: int = 1
    # Here: the Ring window's keys (ring.core.method_keys RING).

    # Largest similarity block materialised at once while selecting (elements; 2**25 = 128 MiB in fp32);
    # 0: sized by the GPU's memory (ring.engine.objectives.ring.chunk_elements), 2**25 on CPUs.
    max_chunk_elements: int = 0
    # Here: the k-means methods' keys, LA's and CMC's (ring.core.method_keys KMEANS, LA, CMC).

    # Monitoring: weighted kNN (k=200, tau=0.07, as IR) and 1-NN on the test split.
    knn_every: int = 1
    knn_k: int = 200
    knn_temperature: float = 0.07
    # When the monitor runs (ring.engine.knn_schedule): "auto" keeps it within 5% of the cell (image-folder datasets
    # such as ImageNet at the last epoch only, the others every 10 epochs and the last; never with knn_every 0);
    # "every", every knn_every epochs and the last (the earlier schedule); "last"; "never".  The monitor never
    # changes the trained encoder, so this is not hashed; knn_every stays in the hash (every cell hashed it).
    knn_schedule: str = "auto"
    # Log after every epoch the percent of same-class images among the Ring window's entries
    # (ring.engine.knn.window_same_class; the full window for base methods): a monitor, results unchanged.
    log_window_classes: bool = False

    # Studies (appendix): save a full training state at the start of these epochs (0: before any
    # step) as SNAPSHOT_FILE in the cell, and start this cell from such a snapshot instead of from
    # scratch (its encoder, bank or queue, optimizer, lr schedule and epoch; a path, "" for none).
    snapshot_epochs: list[int] = field(default_factory=list)
    init_from: str = ""

    # Faults: a checkpoint at the end of each epoch and at least every this many minutes (0: after every step).
    checkpoint_interval_min: float = 10.0
    # Read the training loss (health check, logs, progress) every this many steps: reading waits for
    # the device, so a read per step would stall the GPU's queue of work.  Loss-adaptive annealing reads every step.
    loss_read_every: int = 50

    # Speed on GPUs: bf16 autocast for the network (embeddings, similarities and Ring's selection
    # stay fp32) and channels-last tensors; "auto" turns both on for CUDA devices, off on CPUs.
    # "fp64" (a verification setting, hashed like every precision): the whole cell in float64, network, views, bank
    # or queue and the samplers' draws, so that a run on several processes or nodes can be compared with one process's
    # over whole runs (docs/cluster.md, "What it computes"); fp32 runs part by rounding there.
    precision: str = "auto"
    channels_last: str = "auto"
    # Where the views are made (ring.data.augment): "cpu", PIL per sample in the loader's workers;
    # "device", in batches on the training device from images held there (in-memory datasets) or
    # decoded there (image folders' JPEGs), with the same parameters; "auto": device on CUDA, cpu on
    # CPUs, as measured (ring/resources/figures/throughput_*).  Pixels differ by interpolation rounding.
    augment: str = "auto"
    # How each view's random values (crop, flip, colour jitter's order and strengths, grayscale) are drawn: "sample",
    # torchvision's draws per sample from a generator seeded by (seed, epoch, index), in the loader's workers (every
    # cell before this key); "batch", a whole batch's at once from Philox keyed by the seed at (epoch, index)
    # (ring.data.view_draws): the same laws, other values, a fraction of the workers' time.  Both are functions of
    # (seed, epoch, index) alone: neither the number of workers nor a resume changes a view.  DALI draws its own.
    view_draws: str = "sample"
    # What image-folder datasets (ImageNet) are read from when resize is the catalog's store size (256): the prepared
    # store (ring.data.store, built once by the prepare stage), "jpeg95" (quality 95, 4:4:4; about 73 GB for ImageNet,
    # 38-39 dB PSNR against the resize on photo-like samples: docs/fidelity.md) or "raw" (bit-exact, 262 GB), or
    # "none", the original JPEGs decoded and resized on every pass.  In-memory datasets ignore it.
    store: str = "jpeg95"
    # Where the jpeg95 store's records are decoded: "cpu", PIL in the loader's workers; "gpu", the GPU's hardware
    # decoder in a thread of its own (ring.data.gpu_decode: nvJPEG's pixels, the same batches and view parameters);
    # "auto", what this device's committed figures measured faster for the method (ring.data.decode_place), else cpu.
    store_decode: str = "auto"
    # The decoder the cell's store records are decoded with, store_decode resolved once, when the workflow first plans
    # the cell (ring.data.decode_place.planned), and kept at every later plan: a figure committed afterwards never
    # changes an existing or resumed cell's pixels.  "" (a config written by hand): store_decode's own choice, auto
    # being the workers' decode.  Hashed only as "gpu": "" and "cpu" are the workers' decode, which every cell before
    # this key used (no committed figure had measured the GPU's decoder faster), so their hashes stay.
    store_decoder: str = ""

    # Execution (do not change results, so they are left out of the config hash).
    num_workers: int = 4
    threads: int = 0  # 0: torch's default
    device: str = "auto"
    # torch.compile of the encoder and of the device views (augment: device): "auto" compiles on CUDA devices,
    # where a step measured 1.17-1.42x faster (ring/resources/figures/throughput_*_compile-*.json) and where BatchNorm
    # groups and a view batch then cost almost no host calls (tests/test_pretrain_step_budget.py,
    # tests/data/test_augment.py), for about 100 s of compilation per process start; not on CPUs, where short jobs
    # would pay it.  "auto" falls back to eager with a warning if compilation fails, "on" fails.
    compile: str = "auto"
    # What a superseded run of this cell keeps in runs/<its hash>/ (an edit set it aside, or a longer schedule
    # continued past it): "results" its encoders, checksum record, log, provenance, metrics and run.json, and not its
    # checkpoints and snapshots (5x the encoder on digits; with the 1.28M-entry memory bank on ImageNet), which an
    # undo does not need for a finished run; "all" keeps the checkpoints too (an unfinished run's undo resumes them).
    keep_superseded: str = "results"
    # What a finished cell keeps of its checkpoints once its encoder is exported and verified (the previous checkpoint,
    # a crash-during-save fallback, always goes): "last" its final checkpoint, from which a longer epochs continues
    # (README, "Editing a finished cell"), 2x its encoder on digits and with the 1.28M-entry memory bank on ImageNet;
    # "none" not even that, for runs that are final (a longer epochs then trains from scratch; the encoder is the
    # result).  "last" by default: an ML user extends schedules, and retraining 200 epochs to reach 300 costs more
    # than the disk.
    keep_checkpoint: str = "last"

    RUNTIME_FIELDS = (
        "data_root",
        "num_workers",
        "threads",
        "device",
        "checkpoint_interval_min",
        "max_chunk_elements",
        "log_window_classes",
        "knn_schedule",
        "loss_read_every",
        "compile",
        "keep_superseded",
        "keep_checkpoint",
    )
    # Fields added after cells were first trained: hashed only when they differ from their
    # default, so an existing cell's checkpoint keeps its hash (and resumes) across the upgrade.  The method keys
    # declare theirs (ring.core.key_declaration.Key.hashed_when_set).
    HASHED_WHEN_SET = ("augment", "store", "store_decode", "view_draws")
    # Values that hash as the field's absence: the same run as the cells hashed before the field existed.
    HASHED_AS_ABSENT = {"store_decoder": ("", "cpu")}


# The snapshot a pretraining cell writes for each of its ``snapshot_epochs`` (torch-free, so the workflow reads it).
SNAPSHOT_FILE = "snapshot_epoch{epoch}.pt"


@dataclass
class LinclsConfig:
    dataset: str  # the dataset evaluated on (the cell's); a transfer dataset for transfer cells
    method: str = ""  # the pretraining method whose encoder is evaluated (recorded in metrics.json)
    seed: int = 0  # seeds the classifier's initialisation and augmentation (the cell's)
    data_root: str = "data"  # folder holding <dataset>/ (the workflow's data_root)
    # Paper, Sec. 5: SGD lr 0.01, momentum 0.9, no weight decay, 100 epochs, no lr drops.
    epochs: int = 100  # training epochs of the linear classifier
    batch_size: int = 256  # images per step
    lr: float = 0.01  # SGD learning rate
    momentum: float = 0.9  # SGD momentum
    weight_decay: float = 0.0  # SGD weight decay
    resize: int = 256  # images resized to resize x resize
    crop: int = 224  # then cropped to crop x crop
    # "crop_flip": a random resized crop and flip per epoch (IR's and MoCo's linear protocol);
    # "none": the centre view only, whose features are then computed once and cached in memory.
    augmentation: str = "crop_flip"
    store: str = "jpeg95"  # image folders at the store's size read its prepared store (PretrainConfig.store)
    precision: str = "auto"  # bf16 features on GPUs, as in pretraining
    channels_last: str = "auto"
    num_workers: int = 4
    threads: int = 0
    device: str = "auto"
    # What a superseded evaluation run keeps in runs/<its hash>/: "results" drops its checkpoints, "all" keeps them.
    keep_superseded: str = "results"
    # What a finished evaluation keeps of its checkpoints once metrics.json is written and kept with its checksum
    # record (the previous checkpoint always goes): "last" the final probe (classifier and optimizer; 201 MB on
    # ImageNet), "none" not even that (metrics.json comes back from its verified copy; nothing continues a probe).
    keep_checkpoint: str = "last"

    RUNTIME_FIELDS = ("data_root", "num_workers", "threads", "device", "keep_superseded", "keep_checkpoint")
    HASHED_WHEN_SET = ("store",)  # added after cells were evaluated: their hashes stay (PretrainConfig's)


@dataclass
class ToyCNCEConfig:
    """The appendix's toy experiment (ring.toy_cnce): one seed's NCE and CNCE critics."""

    seed: int = 0  # seeds data, critics and negatives (the grid's toy_cnce seeds)
    # Data: (X, Y) = Z + eps with the appendix's covariances; 2000 training points, whose Y
    # embeddings form the memory bank the negatives come from.
    n_points: int = 2000
    cov_z: list[list[float]] = field(default_factory=lambda: [[1.0, -0.5], [-0.5, 1.0]])
    cov_eps: list[list[float]] = field(default_factory=lambda: [[1.0, 0.9], [0.9, 1.0]])
    # Encoders: 5 linear layers, 10 hidden units, ReLU between them (appendix); 10-d output.
    layers: int = 5
    hidden: int = 10
    # The critic is f(x, y) = <g(x), h(y)> / temperature on L2-normalised embeddings, so
    # |f| <= 1/temperature: unnormalised critics diverged at lr 0.03 (estimates near -4000 nats).
    # 0.5 bounds f to [-2, 2], wider than the true pointwise MI of all but the 0.1% tails.
    temperature: float = 0.5
    # Optimisation (appendix): Adam lr 0.03, batch 128, no weight decay, 100 epochs.
    epochs: int = 100
    batch_size: int = 128
    lr: float = 0.03
    weight_decay: float = 0.0
    # 100 negatives per positive (appendix); CNCE draws them from the closest (100 - p)% of the
    # bank by critic value, for each percentile p (see ring.toy_cnce on the paper's wording).
    negatives: int = 100
    percentages: list[float] = field(default_factory=lambda: [10.0, 25.0, 50.0, 75.0, 90.0, 95.0])
    # Held-out evaluation: fresh pairs from the same Gaussian and a fresh bank of n_points Ys, so
    # each number is an unbiased Monte-Carlo estimate of its bound (standard error ~1e-3 nats).
    eval_points: int = 20000
    # False: one critic per seed, trained with NCE (the appendix: "optimize the NCE objective"),
    # every bound evaluated on it.  True: each CNCE estimator also trains its own critic with its
    # own bound (6 more critics per seed, ~10x the time: per-query selections of the bank).
    own_critics: bool = False
    # Tensors of a few thousand floats: one thread wastes least; 0 is torch's default.
    threads: int = 1

    RUNTIME_FIELDS = ("threads",)


@dataclass
class TransferConfig(LinclsConfig):
    """Linear evaluation of a ``source``-pretrained encoder on transfer dataset ``dataset`` (Table 3).

    The protocol's defaults are linear evaluation's: the paper evaluates transfer "with the same
    linear protocol".  The input normalisation is the transfer dataset's own (its training split's
    mean and std), never the source's.
    """

    source: str = "cifar10"  # the pretraining dataset whose encoders are transferred
    # Folder caching the normalisation statistics of `dataset`, shared by its cells (empty: the
    # cell's folder).  Entries are keyed by the split manifest's checksum, so it never changes results.
    stats_cache: str = ""

    RUNTIME_FIELDS = (*LinclsConfig.RUNTIME_FIELDS, "stats_cache")


@dataclass
class DetectionConfig:
    """One Table 4 cell: a converted encoder trained frozen in one Detectron2 model (ring.detection)."""

    task: str  # ring.plan.detection_tasks.TASKS: coco_det_seg, coco_kp, voc_det
    method: str  # the pretraining method whose encoder is the backbone
    source: str  # the dataset it was pretrained on (imagenet in the paper)
    seed: int = 0  # Detectron2's SEED: sampling, augmentation and head initialisation
    # "detectron2": COCO / VOC in Detectron2's layout under datasets_root ($DETECTRON2_DATASETS);
    # "embedded": the generated dataset in the same layout (ring.detection.embedded).
    datasets: str = "detectron2"
    datasets_root: str = "datasets"
    # Detectron2 config keys (e.g. "SOLVER.MAX_ITER") applied after the task's base config and the
    # paper's overrides; an unknown key fails before training.
    overrides: dict = field(default_factory=dict)
    # Processes on this node through Detectron2's launch (one per GPU); 0 trains on the CPU.
    num_gpus: int = 1
    num_workers: int = 4
    threads: int = 0
    device: str = "auto"
    # What a superseded run keeps in runs/<its hash>/: "results" drops its checkpoints (model_*.pth), "all" keeps them.
    keep_superseded: str = "results"

    RUNTIME_FIELDS = ("datasets_root", "num_gpus", "num_workers", "threads", "device", "keep_superseded")


def _field_names(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def check_key(cls, key: str, context: str = "") -> None:
    """Reject a key that is not a field of ``cls``, suggesting the closest one."""
    names = _field_names(cls)
    if key not in names:
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
        hint = f" Did you mean {close[0]!r}?" if close else f" Known keys: {', '.join(names)}."
        raise ValueError(f"{context}Unknown {cls.__name__} key {key!r}.{hint}")


def from_dict(cls, values: dict):
    """Build a config, rejecting unknown keys with a suggestion."""
    for key in values:
        check_key(cls, key)
    return cls(**values)


def load(cls, path: str | Path):
    """A stage config file.  A pretraining config takes its method's values (ring.core.methods.apply_fixed, as a
    grid's cells do) for the keys the file leaves unset; a key the file sets keeps its value.  The workflow
    writes every key, so its cells' configs (and hashes) are the grid's."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Config file {path} does not exist; the workflow writes it, or pass an existing file.")
    values = read_yaml(path, "Config file")
    if values is None:
        raise ValueError(
            f"Config file {path} is empty (no keys, at most comments); write its {cls.__name__} keys, one "
            "key: value per line."
        )
    if not isinstance(values, dict):
        raise ValueError(f"Config file {path} holds no mapping of {cls.__name__} keys; write one key: value per line.")
    required = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing := [name for name in required if name not in values]:
        raise ValueError(
            f"Config file {path} does not set {' and '.join(missing)}, which {cls.__name__} needs; add "
            f"{'them' if len(missing) > 1 else 'it'} (the workflow writes every key of a cell)."
        )
    if cls is PretrainConfig and isinstance(values.get("method"), str) and values["method"] in METHODS:
        values = apply_fixed(values["method"], values, source=f"the config file {path}")  # unknown: the checks say so
    return from_dict(cls, values)


def to_dict(cfg) -> dict:
    return dataclasses.asdict(cfg)


# libyaml's emitter where PyYAML has it: the same text as the pure-Python one (checked on every grid's
# cells by tests/core/test_config.py), ~10x faster, and the workflow dumps one config per cell when it plans.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump(cfg) -> str:
    """The YAML text of a config, as ``save`` writes it and ``load`` reads it."""
    return yaml.dump(to_dict(cfg), Dumper=_DUMPER, sort_keys=False)


def save(cfg, path: str | Path) -> None:
    with open(path, "w") as fh:
        fh.write(dump(cfg))


def hashed_values(cfg) -> dict:
    """The values that change results (runtime knobs left out), as plain data: what config_hash covers.

    The keys of a group the cell's method never reads (ring.core.methods.Method.key_groups: MoCo's memory bank, IR's
    queue) are taken at their defaults: a value there changes nothing the method trains, so it must not restart a
    finished cell.  At the default, not left out, so that every cell that never set one keeps the hash it had."""
    values = {k: v for k, v in to_dict(cfg).items() if k not in cfg.RUNTIME_FIELDS}
    if isinstance(cfg, PretrainConfig):
        for group in unread_groups(cfg.method):
            values.update(group.defaults())
    return values


def unread_groups(method: str) -> tuple:
    """The key groups method ``method`` does not read (none for a name the registry does not hold: the checks refuse
    it).  The hash's identity rule, computed from the config alone wherever a hash is needed."""
    read = METHODS[method].key_groups if isinstance(method, str) and method in METHODS else GROUPS
    return tuple(g for g in GROUPS if g not in read)


def config_hash(cfg) -> str:
    """Hash of everything that changes results (runtime knobs excluded)."""
    defaults = {f.name: f.default for f in dataclasses.fields(cfg) if f.default is not dataclasses.MISSING}
    late = {*getattr(cfg, "HASHED_WHEN_SET", ())}
    if isinstance(cfg, PretrainConfig):
        late.update(k.name for k in KEYS.values() if k.hashed_when_set)
    absent = getattr(cfg, "HASHED_AS_ABSENT", {})
    values = {
        k: v
        for k, v in hashed_values(cfg).items()
        if not (k in late and v == defaults.get(k)) and not (k in absent and v in absent[k])
    }
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]
