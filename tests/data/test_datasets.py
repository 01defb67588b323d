import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ring.core import catalog
from ring.data import datasets, folders
from ring.data.digits import _digits_arrays, _digits_colour_arrays, stratified_split, tint

ROOT = Path(__file__).resolve().parents[1]


def test_digits_split_is_fixed_and_stratified():
    images, targets, splits = _digits_arrays()
    assert images.dtype == np.uint8 and images.shape == (1797, 8, 8)
    assert len(splits["train"]) == 1347 and len(splits["test"]) == 450
    assert not set(splits["train"]) & set(splits["test"])
    assert np.bincount(targets[splits["test"]]).tolist() == [45, 46, 44, 46, 45, 46, 45, 45, 43, 45]


def test_the_digits_are_scikit_learns_images_and_split_read_without_importing_it():
    """ring.data.datasets reads scikit-learn's digits file and draws its stratified split itself (scikit-learn's import
    cost every digits job seconds): the same images, labels and indices as ``load_digits`` and ``train_test_split``."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    images, targets, splits = _digits_arrays()
    digits = load_digits()
    assert np.array_equal(images, np.round(digits.images * (255.0 / 16.0)).astype(np.uint8))
    assert np.array_equal(targets, digits.target)
    train, test = train_test_split(np.arange(len(targets)), test_size=0.25, stratify=digits.target, random_state=0)
    assert np.array_equal(splits["train"], np.sort(train)) and np.array_equal(splits["test"], np.sort(test))
    # Other labels, fractions and seeds: uneven classes, ties among the remainders, labels that are not 0..k-1.
    rng = np.random.default_rng(0)
    for labels, fraction, seed in [
        (rng.integers(0, 7, 301), 0.25, 1),
        (np.repeat([3, 8, 20], [5, 5, 11]), 0.3, 2),
        (rng.integers(0, 3, 50) * 5, 0.5, 42),
    ]:
        train, test = train_test_split(np.arange(len(labels)), test_size=fraction, stratify=labels, random_state=seed)
        split = stratified_split(labels, fraction, seed)
        assert np.array_equal(split["train"], np.sort(train)) and np.array_equal(split["test"], np.sort(test)), seed
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from ring.data.digits import _digits_arrays; "
            "_digits_arrays(); print('sklearn' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert loaded.stdout.strip() == "False"


def test_digits_catalog_statistics_match_the_training_split():
    images, _, splits = _digits_arrays()
    pixels = images[splits["train"]] / 255.0
    spec = catalog.spec("digits")
    assert spec.mean[0] == pytest.approx(pixels.mean(), abs=1e-4)
    assert spec.std[0] == pytest.approx(pixels.std(), abs=1e-4)


def test_colour_digits_statistics_match_the_training_split():
    images, _, splits = _digits_colour_arrays()
    pixels = images[splits["train"]].reshape(-1, 3) / 255.0
    spec = catalog.spec("digits_colour")
    assert spec.mean == pytest.approx(tuple(pixels.mean(axis=0)), abs=1e-4)
    assert spec.std == pytest.approx(tuple(pixels.std(axis=0)), abs=1e-4)
    assert not spec.grey


def test_colour_digits_are_the_digits_tinted_deterministically_with_ab_channels_that_draw_the_digit():
    from ring.engine.encoder import lab_views

    grey, targets, splits = _digits_arrays()
    colour, colour_targets, colour_splits = _digits_colour_arrays()
    assert colour.shape == (*grey.shape, 3) and (colour_targets == targets).all()
    assert all((colour_splits[k] == splits[k]).all() for k in splits)
    # Deterministic for a seed (a fresh generator each call), another seed another tint; the background stays black.
    assert (tint(grey, seed=0) == colour).all() and not (tint(grey, seed=1) == colour).all()
    assert (colour[grey == 0] == 0).all()
    # CMC's views, as it computes them (kornia's Lab of the normalised batch): the ab view varies within an image
    # and between images, where on the grey digits it is one constant (the test's guard against a vacuous pass).
    for name, threshold in (("digits_colour", 0.05), ("digits", None)):
        base = datasets.load(name, "unused", "test")
        view = datasets.eval_view(32, 32, datasets.normalize(catalog.spec(name)))
        batch = torch.stack([view(base[i][0]) for i in range(64)])
        _, ab = lab_views(batch, catalog.spec(name).mean, catalog.spec(name).std)
        if threshold is None:
            # Grey: a = b = 0 up to float32 rounding in kornia (2e-5 measured); colour: 0.14 and more (measured).
            assert float(ab.transpose(0, 1).flatten(1).std(dim=1).max()) < 1e-3
        else:
            # Every image: its strokes apart from its background in a or b (a hue near yellow-green moves a little).
            assert float(ab.flatten(2).std(dim=2).sum(dim=1).min()) > threshold
            assert float(ab.mean(dim=(2, 3)).std(dim=0).min()) > threshold  # and the hues differ between images


def test_views_are_reproducible_per_sample_and_epoch():
    base = datasets.load("digits", "unused", "pretrain")
    views = datasets.Views(
        base, datasets.pretrain_view(32, 32, 0.2, datasets.normalize(catalog.spec("digits"))), n_views=2, seed=3
    )
    a1, a2, label, index = views[5]
    assert a1.shape == (3, 32, 32) and index == 5 and 0 <= label < 10
    assert not torch.equal(a1, a2)  # two different views of one image
    assert torch.equal(views[5][0], a1)  # same (seed, epoch, index) -> same view
    state = torch.get_rng_state()
    views.set_epoch(1)
    assert not torch.equal(views[5][0], a1)
    assert torch.equal(torch.get_rng_state(), state)  # the global RNG is untouched


def test_corrupt_cifar10_files_fail_with_one_sentence(tmp_path):
    # Files in the right places whose contents do not match torchvision's checksums.
    folder = tmp_path / "cifar10" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]:
        (folder / name).write_bytes(b"not a pickle")
    folders.check("cifar10", tmp_path)  # the layout is complete ...
    with pytest.raises(
        catalog.DatasetMissing, match=r"Dataset cifar10 under .* is incomplete or corrupted .*; fetch it with"
    ):
        datasets.load("cifar10", tmp_path, "pretrain")  # ... but the contents are not CIFAR-10
