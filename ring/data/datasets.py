"""Dataset loaders, the embedded default, and the views the stages train on.

The catalog (names, statistics, where each dataset goes) is :mod:`ring.core.catalog`.

The embedded default, ``digits``, is scikit-learn's copy of the UCI optical digits (1797 real
8x8 grey images, 10 classes).  Its fixed split is ``train_test_split(test_size=0.25,
stratify=labels, random_state=0)``: 1347 training and 450 test images.

Its colour variant, ``digits_colour`` (the smoke grid's, README command (1)), is the same images and split, each
tinted by one hue drawn per image (:func:`tint`: ``numpy.random.default_rng(0)``, uniform in [0, 1), in
``load_digits`` order; saturation 0.5, value 1): a digit's strokes take the colour, the background stays black.  The
hue is independent of the label, so it gives no class away; what it gives is Lab ab channels that draw the digit's
shape, which CMC's ab view needs (on grey images that view is a constant image).

Augmentation is seeded per sample from ``(seed, epoch, index)``, or drawn a batch at a time from a counter-based
generator at that key (``view_draws: batch``, ring.data.view_draws), so a run's views do not depend on the number of
loader workers or on where an interrupted run was resumed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset
from torchvision import datasets as tvd
from torchvision import transforms as T

from ring.core.catalog import DatasetMissing, DatasetSpec, folder, hint, spec
from ring.core.refs import resolve
from ring.data import store, store_layout
from ring.data.digits import _digits_arrays, _digits_colour_arrays
from ring.data.folders import check


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


def _build_image_folder(folder: Path, split: str) -> Dataset:
    return tvd.ImageFolder(str(folder / store_layout.SPLIT_FOLDERS[split]))


_build_cifar10 = _build_cifar(tvd.CIFAR10)  # named: the catalog names each dataset's loader
_build_cifar100 = _build_cifar(tvd.CIFAR100)


@dataclass(frozen=True)
class Source:
    """A catalog dataset as a stage holds it: looked up by name once, at the stage's entry point (:func:`source`),
    then handed down, so that nothing below looks the name up again."""

    name: str
    spec: DatasetSpec  # the catalog's entry: statistics, classes, ...
    root: Path  # the data root
    build: Callable[[Path, str], Dataset] | None  # the loader its catalog entry names
    store: Path | None = (
        None  # the prepared store the cell reads instead of the files (ring.data.store_layout.cell_store)
    )
    how_to_get: str = ""  # the catalog's hint for this dataset under this root, said if its files prove damaged

    def check(self) -> None:
        """Raise :class:`DatasetMissing` with one sentence if the dataset, or the store the cell reads, is not usable:
        a store is verified whole before any of it is read (ring.data.store_layout.verify: its counts, its folder's
        times, every file's SHA-256, each hashed again only after its size or time changed since the last check)."""
        check(self.name, self.root)
        if self.store is not None:
            fmt, size = self.store.name.rsplit("-", 1)  # ring.data.store_layout.store_dir's name
            try:
                store_layout.verify(self.store, fmt, int(size))
            except store_layout.StoreError as err:
                raise DatasetMissing(str(err)) from None

    def load(self, split: str) -> Dataset:
        """``split``: "pretrain" (the images pretraining sees), "train" or "test" (labelled)."""
        # A dataset whose pretraining sees more images than its labelled split (STL10's unlabeled) has a split for it.
        build_split = split if self.spec.pretrain_images else ("train" if split == "pretrain" else split)
        if self.store is not None:
            return store.StoreImages(self.store, build_split)
        try:
            return self.build(folder(self.name, self.root), build_split)
        except (RuntimeError, OSError) as err:  # torchvision's checksum and integrity errors
            raise DatasetMissing(
                f"Dataset {self.name} under {folder(self.name, self.root)} is incomplete or corrupted "
                f"({str(err).splitlines()[0]}); {self.how_to_get}."
            ) from None

    def normalize(self) -> T.Normalize:
        return normalize(self.spec)


def source(entry: DatasetSpec, data_root: str | Path, store_format: str = store_layout.NONE, resize: int = 0) -> Source:
    """Catalog dataset ``entry`` (what its stage's entry point looked its name up to: :func:`ring.core.catalog.spec`)
    under ``data_root``, read from its prepared store in ``store_format`` when a cell of that ``resize`` reads one
    (:func:`ring.data.store_layout.cell_store`): missing files fail in :meth:`Source.check`."""
    # A transfer dataset has no builder here (ring.data.metadataset loads it); the plan's checks refuse it for
    # pretraining.
    name = entry.name
    prepared = store_layout.cell_store(folder(name, data_root), getattr(entry, "store_size", 0), store_format, resize)
    build = resolve(entry.loader) if isinstance(entry, DatasetSpec) and entry.loader else None
    return Source(name, entry, Path(data_root), build, prepared, hint(name, data_root))


def load(
    name: str, data_root: str | Path, split: str, store_format: str = store_layout.NONE, resize: int = 0
) -> Dataset:
    """Catalog dataset ``name``'s ``split``: "pretrain" (the images pretraining sees), "train" or "test" (labelled);
    from the prepared store in ``store_format`` where a cell of that ``resize`` reads one.  An unknown name fails
    here."""
    data = source(spec(name), data_root, store_format, resize)
    data.check()
    return data.load(split)


def normalize(stats: DatasetSpec) -> T.Normalize:
    """The input normalisation with a dataset's statistics (its catalog entry's mean and std)."""
    return T.Normalize(stats.mean, stats.std)


def pretrain_view(resize: int, crop: int, crop_scale_min: float, norm: T.Normalize) -> T.Compose:
    """One random view from the paper's family: resize, random crop, colour jitter, flip, grayscale; ``norm``: the
    input normalisation (:func:`normalize`, or a transfer dataset's own)."""
    return T.Compose(
        [
            T.Resize((resize, resize)),
            T.RandomResizedCrop(crop, scale=(crop_scale_min, 1.0)),
            T.ColorJitter(0.4, 0.4, 0.4, 0.4),
            T.RandomHorizontalFlip(),
            T.RandomGrayscale(p=0.2),
            T.ToTensor(),
            norm,
        ]
    )


def linear_view(resize: int, crop: int, augmentation: str, norm: T.Normalize) -> T.Compose:
    """``norm``: the input normalisation (:func:`normalize`, or a transfer dataset's own)."""
    if augmentation == "crop_flip":
        ops = [T.Resize((resize, resize)), T.RandomResizedCrop(crop), T.RandomHorizontalFlip()]
    elif augmentation == "none":
        ops = [T.Resize((resize, resize)), T.CenterCrop(crop)]
    else:
        raise ValueError(f"Unknown linear-evaluation augmentation {augmentation!r}; choose crop_flip or none.")
    return T.Compose([*ops, T.ToTensor(), norm])


def eval_view(resize: int, crop: int, norm: T.Normalize) -> T.Compose:
    return linear_view(resize, crop, "none", norm)


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
        if hasattr(self.transform, "draw"):
            return self.__getitems__([index])[0]
        img, label = self.base[index]
        with torch.random.fork_rng(devices=[]):
            # A distinct, reproducible stream per (seed, epoch, sample).
            # The CPU generator alone (what the transforms draw from): torch.manual_seed would also
            # queue a lazy seeding of every accelerator, with a stack trace each, ~1 ms per image.
            torch.default_generator.manual_seed((self.seed * 1_000_003 + self.epoch) * 10_000_019 + index)
            views = [self.transform(img) for _ in range(self.n_views)]
        return (*views, label, index)

    def __getitems__(self, indices: list[int]) -> list[tuple]:
        """A loader batch's items (the loader calls this with a batch's indices): a transform with a ``draw``
        (ring.data.view_draws) draws the whole batch's parameters at once, then makes each view from its row."""
        if not hasattr(self.transform, "draw"):
            return [self[i] for i in indices]
        drawn = [p.unbind(0) for p in self.transform.draw(self.seed, self.epoch, indices, self.n_views)]
        items = []
        for k, index in enumerate(indices):
            img, label = self.base[index]
            items.append((*(self.transform.view(img, rows[k]) for rows in drawn), label, index))
        return items


class DataViews(Dataset):
    """``(data, view_1, ..., view_n, label, index)``: what :meth:`data` reads of each image (its bytes, its record)
    beside the views of :attr:`views` (a :class:`Views`), a batch's views drawn together where it draws them so."""

    views: Views

    def data(self, index: int):
        raise NotImplementedError

    def set_epoch(self, epoch: int) -> None:
        self.views.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.views)

    def __getitem__(self, index: int):
        return (self.data(index), *self.views[index])

    def __getitems__(self, indices: list[int]) -> list[tuple]:
        return [(self.data(i), *item) for i, item in zip(indices, self.views.__getitems__(indices), strict=True)]
