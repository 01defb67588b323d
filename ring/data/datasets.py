"""Dataset loaders, the embedded default, and the views the stages train on.

The catalog (names, statistics, where each dataset goes) is :mod:`ring.plan.catalog`.

The embedded default, ``digits``, is scikit-learn's copy of the UCI optical digits (1797 real
8x8 grey images, 10 classes).  Its fixed split is ``train_test_split(test_size=0.25,
stratify=labels, random_state=0)``: 1347 training and 450 test images.

Its colour variant, ``digits_colour`` (the smoke grid's, README command (1)), is the same images and split, each
tinted by one hue drawn per image (:func:`tint`: ``numpy.random.default_rng(0)``, uniform in [0, 1), in
``load_digits`` order; saturation 0.5, value 1): a digit's strokes take the colour, the background stays black.  The
hue is independent of the label, so it gives no class away; what it gives is Lab ab channels that draw the digit's
shape, which CMC's ab view needs (on grey images that view is a constant image).

Augmentation is seeded per sample from ``(seed, epoch, index)``, so a run's views do not depend
on the number of loader workers or on where an interrupted run was resumed.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset
from torchvision import datasets as tvd
from torchvision import transforms as T

from ring.plan.catalog import DATASETS, DatasetMissing, DatasetSpec, check, folder, hint, spec

# The embedded digits are read from scikit-learn's own file, found without importing scikit-learn: its import (SciPy
# and the rest) cost every digits job ~2 s on a quiet 2-core machine, more than its data and split take.
DIGITS_FILE = ("datasets", "data", "digits.csv.gz")
DIGITS_TEST_FRACTION = 0.25
DIGITS_SPLIT_SEED = 0


def _digits_file() -> Path:
    spec = importlib.util.find_spec("sklearn")  # finds the package; its __init__ is not run
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "The embedded digits dataset needs scikit-learn installed (its copy of the UCI digits)."
        )
    return Path(next(iter(spec.submodule_search_locations)), *DIGITS_FILE)


def _approximate_mode(class_counts: np.ndarray, n_draws: int, rng: np.random.RandomState) -> np.ndarray:
    """How many of ``n_draws`` each class gets: its share floored, the rest to the largest remainders (ties drawn
    from ``rng``).  scikit-learn's ``utils.extmath._approximate_mode``, step for step (the same draws)."""
    continuous = class_counts / class_counts.sum() * n_draws
    floored = np.floor(continuous)
    need_to_add = int(n_draws - floored.sum())
    if need_to_add > 0:
        remainder = continuous - floored
        for value in np.sort(np.unique(remainder))[::-1]:
            (inds,) = np.where(remainder == value)
            add_now = min(len(inds), need_to_add)
            floored[rng.choice(inds, size=add_now, replace=False)] += 1
            need_to_add -= add_now
            if need_to_add == 0:
                break
    return floored.astype(int)


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int) -> dict[str, np.ndarray]:
    """Sorted train and test indices of ``train_test_split(test_size=test_fraction, stratify=labels,
    random_state=seed)``: scikit-learn's StratifiedShuffleSplit, its random draws in its order
    (tests/data/test_datasets.py checks it against scikit-learn); its final shuffles of each side are left out, as the
    indices are sorted."""
    classes, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    n_test = int(np.ceil(test_fraction * len(labels)))
    n_train = len(labels) - n_test
    per_class = np.split(np.argsort(inverse, kind="stable"), np.cumsum(counts)[:-1])
    rng = np.random.RandomState(seed)
    n_i = _approximate_mode(counts, n_train, rng)
    t_i = _approximate_mode(counts - n_i, n_test, rng)
    train, test = [], []
    for i in range(len(classes)):
        members = per_class[i].take(rng.permutation(counts[i]), mode="clip")
        train.extend(members[: n_i[i]])
        test.extend(members[n_i[i] : n_i[i] + t_i[i]])
    return {"train": np.sort(np.array(train, dtype=np.int64)), "test": np.sort(np.array(test, dtype=np.int64))}


@functools.lru_cache(maxsize=1)
def _digits_arrays():
    with gzip.open(_digits_file(), "rt") as fh:
        data = np.loadtxt(fh, delimiter=",")  # scikit-learn's load_digits: 64 pixels, then the label
    images, targets = data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(np.int64)
    # 0..16 grey levels -> 0..255 uint8, decoded once.
    images = np.round(images * (255.0 / 16.0)).astype(np.uint8)
    return images, targets, stratified_split(targets, DIGITS_TEST_FRACTION, DIGITS_SPLIT_SEED)


# The colour variant's tint (module docstring): its generator's seed and the colours' HSV saturation.  Saturation 0.5
# keeps every tint's luma (Rec. 601) at 0.55 or more of the grey digit's (blue, the darkest, 0.5 + 0.5 x 0.114), so
# the strokes stay bright for the methods that see RGB, while the ab channels span tens of Lab units.
TINT_SEED = 0
TINT_SATURATION = 0.5


def tint(images: np.ndarray, seed: int = TINT_SEED, saturation: float = TINT_SATURATION) -> np.ndarray:
    """N x H x W uint8 grey images -> N x H x W x 3 uint8, each image times one colour of a hue drawn from ``seed``."""
    import colorsys

    hues = np.random.default_rng(seed).random(len(images))
    colours = np.array([colorsys.hsv_to_rgb(h, saturation, 1.0) for h in hues])
    return np.round(images[..., None] * colours[:, None, None, :]).astype(np.uint8)


@functools.lru_cache(maxsize=1)
def _digits_colour_arrays():
    images, targets, splits = _digits_arrays()
    return tint(images), targets, splits


class ArrayImages(Dataset):
    """Images decoded once into a uint8 array (N x H x W or N x H x W x 3)."""

    def __init__(self, images: np.ndarray, targets: np.ndarray):
        self.images = images
        self.targets = [int(t) for t in targets]

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i):
        img = Image.fromarray(self.images[i])
        return img.convert("RGB"), self.targets[i]


def _build_digits(_folder: Path, split: str) -> Dataset:
    images, targets, splits = _digits_arrays()
    sel = splits[split]
    return ArrayImages(images[sel], targets[sel])


def _build_digits_colour(_folder: Path, split: str) -> Dataset:
    images, targets, splits = _digits_colour_arrays()
    sel = splits[split]
    return ArrayImages(images[sel], targets[sel])


def _build_cifar(cls):
    def build(folder: Path, split: str) -> Dataset:
        return cls(str(folder), train=(split == "train"), download=False)

    return build


def _build_stl10(folder: Path, split: str) -> Dataset:
    # Pretraining uses the 100k unlabeled images too, as IR, CMC and LA do on STL10.
    name = {"pretrain": "train+unlabeled"}.get(split, split)
    return tvd.STL10(str(folder), split=name, download=False)


def _build_imagenet(folder: Path, split: str) -> Dataset:
    return tvd.ImageFolder(str(folder / ("val" if split == "test" else "train")))


BUILDERS: dict[str, Callable[[Path, str], Dataset]] = {
    "digits": _build_digits,
    "digits_colour": _build_digits_colour,
    "cifar10": _build_cifar(tvd.CIFAR10),
    "cifar100": _build_cifar(tvd.CIFAR100),
    "stl10": _build_stl10,
    "imagenet": _build_imagenet,
}
assert BUILDERS.keys() == DATASETS.keys()


@dataclass(frozen=True)
class Source:
    """A catalog dataset as a stage holds it: looked up by name once, at the stage's entry point (:func:`source`),
    then handed down, so that nothing below looks the name up again."""

    name: str
    spec: DatasetSpec  # the catalog's entry: statistics, classes, ...
    root: Path  # the data root
    build: Callable[[Path, str], Dataset] | None  # the loader (BUILDERS)

    def check(self) -> None:
        """Raise :class:`DatasetMissing` with one sentence if the dataset is not usable under its data root."""
        check(self.name, self.root)

    def load(self, split: str) -> Dataset:
        """``split``: "pretrain" (the images pretraining sees), "train" or "test" (labelled)."""
        build_split = split if self.name == "stl10" else ("train" if split == "pretrain" else split)
        try:
            return self.build(folder(self.name, self.root), build_split)
        except (RuntimeError, OSError) as err:  # torchvision's checksum and integrity errors
            raise DatasetMissing(
                f"Dataset {self.name} under {folder(self.name, self.root)} is incomplete or corrupted "
                f"({str(err).splitlines()[0]}); {hint(self.name, self.root)}."
            ) from None

    def normalize(self) -> T.Normalize:
        return T.Normalize(self.spec.mean, self.spec.std)


def source(name: str, data_root: str | Path) -> Source:
    """Catalog dataset ``name`` under ``data_root``: an unknown name fails here, missing files in
    :meth:`Source.check`."""
    # A transfer dataset has no builder here (ring.data.metadataset loads it); the plan's checks refuse it for
    # pretraining.
    return Source(name, spec(name), Path(data_root), BUILDERS.get(name))


def load(name: str, data_root: str | Path, split: str) -> Dataset:
    """``split``: "pretrain" (the images pretraining sees), "train" or "test" (labelled)."""
    data = source(name, data_root)
    data.check()
    return data.load(split)


def normalize(name: str) -> T.Normalize:
    s = spec(name)
    return T.Normalize(s.mean, s.std)


def pretrain_view(
    name: str, resize: int, crop: int, crop_scale_min: float, norm: T.Normalize | None = None
) -> T.Compose:
    """One random view from the paper's family: resize, random crop, colour jitter, flip, grayscale; ``norm``: the
    input normalisation, the catalog's statistics of ``name`` unless given."""
    return T.Compose(
        [
            T.Resize((resize, resize)),
            T.RandomResizedCrop(crop, scale=(crop_scale_min, 1.0)),
            T.ColorJitter(0.4, 0.4, 0.4, 0.4),
            T.RandomHorizontalFlip(),
            T.RandomGrayscale(p=0.2),
            T.ToTensor(),
            norm or normalize(name),
        ]
    )


def linear_view(name: str, resize: int, crop: int, augmentation: str, norm: T.Normalize | None = None) -> T.Compose:
    """``norm``: the input normalisation, the catalog's statistics of ``name`` unless given (a transfer's own)."""
    if augmentation == "crop_flip":
        ops = [T.Resize((resize, resize)), T.RandomResizedCrop(crop), T.RandomHorizontalFlip()]
    elif augmentation == "none":
        ops = [T.Resize((resize, resize)), T.CenterCrop(crop)]
    else:
        raise ValueError(f"Unknown linear-evaluation augmentation {augmentation!r}; choose crop_flip or none.")
    return T.Compose([*ops, T.ToTensor(), norm or normalize(name)])


def eval_view(name: str, resize: int, crop: int, norm: T.Normalize | None = None) -> T.Compose:
    return linear_view(name, resize, crop, "none", norm)


class Views(Dataset):
    """``(view_1, ..., view_n, label, index)`` with augmentation seeded by (seed, epoch, index)."""

    def __init__(self, base: Dataset, transform, n_views: int = 1, seed: int = 0):
        self.base = base
        self.transform = transform
        self.n_views = n_views
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, index: int):
        img, label = self.base[index]
        with torch.random.fork_rng(devices=[]):
            # A distinct, reproducible stream per (seed, epoch, sample).
            # The CPU generator alone (what the transforms draw from): torch.manual_seed would also
            # queue a lazy seeding of every accelerator, with a stack trace each, ~1 ms per image.
            torch.default_generator.manual_seed((self.seed * 1_000_003 + self.epoch) * 10_000_019 + index)
            views = [self.transform(img) for _ in range(self.n_views)]
        return (*views, label, index)
