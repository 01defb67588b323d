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


@dataclass
class PretrainConfig:
    method: str
    dataset: str
    seed: int = 0
    data_root: str = "data"

    # Optimisation (paper, Sec. 5).
    epochs: int = 300
    batch_size: int = 256
    lr: float = 0.03
    momentum: float = 0.9
    weight_decay: float = 1e-4
    lr_milestones: list[int] = field(default_factory=lambda: [200, 250])
    lr_gamma: float = 0.1

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

    # Memory bank (IR, IRing): k negatives per query; bank entries move with momentum 0.5 (IR).
    bank_negatives: int = 4096
    bank_momentum: float = 0.5

    # MoCo queue.  4096 matches IR's k, so both objectives see as many negatives, and is the top of
    # the appendix's MoCo sweep; ImageNet cells use MoCo's 65536 (set in the paper grid).
    queue_size: int = 4096
    key_momentum: float = 0.999

    # BatchNorm statistics per group of the batch, as on this many GPUs (MoCo's shuffled BN needs
    # more than one: the paper grid uses MoCo's 8).  A data-parallel run uses bn_groups / GPUs
    # groups per GPU, so it computes exactly what one process with bn_groups groups computes.
    bn_groups: int = 1

    # Ring window (see ring.objectives.ring and ring.anneal).  w_l goes 0 -> 90 ("threshold 100% ->
    # 10% in 100 epochs"), the closest 10% of the eligible slice is excluded (authors' code).
    ring_w_l: list[float] = field(default_factory=lambda: [0.0, 90.0])
    ring_anneal: str = "linear"
    ring_anneal_epochs: int = 100
    ring_inner: float | None = 0.1
    ring_w_u: float | None = None
    # Annealing policies of the appendix's study (ring.anneal): the step policy's number of equal
    # jumps (4: one every 25 epochs of the paper's 100); the loss-adaptive policy's moving-average
    # momentum (0.99: about 100 steps, a fraction of a CIFAR10 epoch's 195, so a single noisy batch
    # cannot flip its direction); the share of the training split held out as the validation set of
    # the validation-adaptive policy (10%: 5,000 CIFAR10 images, a kNN pass of seconds).
    ring_anneal_stages: int = 4
    ring_loss_ema: float = 0.99
    ring_val_fraction: float = 0.1
    # Largest similarity block materialised at once while selecting (elements; 2**25 = 128 MiB).
    max_chunk_elements: int = 2**25

    # Monitoring: weighted kNN (k=200, tau=0.07, as IR) and 1-NN on the test split.
    knn_every: int = 1
    knn_k: int = 200
    knn_temperature: float = 0.07

    # Studies (appendix): save a full training state at the start of these epochs (0: before any
    # step) as SNAPSHOT_FILE in the cell, and start this cell from such a snapshot instead of from
    # scratch (its encoder, bank or queue, optimizer, lr schedule and epoch; a path, "" for none).
    snapshot_epochs: list[int] = field(default_factory=list)
    init_from: str = ""

    # Faults: a checkpoint at the end of each epoch and at least every this many minutes.
    checkpoint_interval_min: float = 10.0

    # Speed on GPUs: bf16 autocast for the network (embeddings, similarities and Ring's selection
    # stay fp32) and channels-last tensors; "auto" turns both on for CUDA devices, off on CPUs.
    precision: str = "auto"
    channels_last: str = "auto"

    # Execution (do not change results, so they are left out of the config hash).
    num_workers: int = 4
    threads: int = 0  # 0: torch's default
    device: str = "auto"

    RUNTIME_FIELDS = ("data_root", "num_workers", "threads", "device", "checkpoint_interval_min", "max_chunk_elements")


# The snapshot a pretraining cell writes for each of its ``snapshot_epochs`` (torch-free, so the workflow reads it).
SNAPSHOT_FILE = "snapshot_epoch{epoch}.pt"


@dataclass
class LinclsConfig:
    dataset: str
    method: str = ""  # the pretraining method whose encoder is evaluated (recorded in metrics.json)
    seed: int = 0
    data_root: str = "data"
    # Paper, Sec. 5: SGD lr 0.01, momentum 0.9, no weight decay, 100 epochs, no lr drops.
    epochs: int = 100
    batch_size: int = 256
    lr: float = 0.01
    momentum: float = 0.9
    weight_decay: float = 0.0
    resize: int = 256
    crop: int = 224
    # "crop_flip": a random resized crop and flip per epoch (IR's and MoCo's linear protocol);
    # "none": the centre view only, whose features are then computed once and cached in memory.
    augmentation: str = "crop_flip"
    precision: str = "auto"  # bf16 features on GPUs, as in pretraining
    channels_last: str = "auto"
    num_workers: int = 4
    threads: int = 0
    device: str = "auto"

    RUNTIME_FIELDS = ("data_root", "num_workers", "threads", "device")


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
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Config file {path} does not exist; the workflow writes it, or pass an existing file.")
    with open(path) as fh:
        values = yaml.safe_load(fh) or {}
    return from_dict(cls, values)


def to_dict(cfg) -> dict:
    return dataclasses.asdict(cfg)


def save(cfg, path: str | Path) -> None:
    with open(path, "w") as fh:
        yaml.safe_dump(to_dict(cfg), fh, sort_keys=False)


def config_hash(cfg) -> str:
    """Hash of everything that changes results (runtime knobs excluded)."""
    values = {k: v for k, v in to_dict(cfg).items() if k not in cfg.RUNTIME_FIELDS}
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]
