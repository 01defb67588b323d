"""The embedded digits, torch-free: scikit-learn's copy of the UCI optical digits, its fixed split, the colour
variant's tint (:mod:`ring.data.datasets` explains both) and ``digits_folder``, the colour digits written as an
image folder (:func:`generate_folder`): the smallest dataset that takes ImageNet's path, files and prepared store
included, on a CPU in seconds.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
from pathlib import Path

import numpy as np

from ring.core.files import write_json

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


# -- digits_folder: the colour digits as an image folder -------------------------------------------------------------
# Each colour digit upscaled (nearest neighbour, so its pixels keep their values) to a width and height drawn per
# image from [24, 40], one PNG per image under <train|val>/<digit>/, from the fixed split: files of varied sizes in
# class folders, as ImageNet's, that the prepare stage resizes to the catalog's 32 pixels.
FOLDER_SIDES = (24, 41)
FOLDER_SEED = 0
FOLDER_SPLITS = {"train": "train", "test": "val"}


def generate_folder(base: Path, seed: int = FOLDER_SEED) -> None:
    """Write ``digits_folder`` under ``base`` (its marker, written last, makes a second call a no-op)."""
    from PIL import Image

    from ring.data.listings import GENERATED  # here: the generated datasets' marker, used by this generator alone

    base = Path(base)
    if (base / GENERATED).exists():
        return
    images, targets, splits = _digits_colour_arrays()
    rng = np.random.default_rng(seed)
    for split, folder in FOLDER_SPLITS.items():
        for i in splits[split]:
            w, h = (int(side) for side in rng.integers(*FOLDER_SIDES, 2))
            target = base / folder / str(int(targets[i]))
            target.mkdir(parents=True, exist_ok=True)
            Image.fromarray(images[i]).resize((w, h), Image.NEAREST).save(target / f"{int(i):04d}.png")
    marker = {"generator": "ring.data.digits.generate_folder", "seed": seed, "sides": list(FOLDER_SIDES)}
    write_json(base / GENERATED, marker)
