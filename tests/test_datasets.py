import numpy as np
import pytest
import torch

from ring import catalog, datasets


def test_digits_split_is_fixed_and_stratified():
    images, targets, splits = datasets._digits_arrays()
    assert images.dtype == np.uint8 and images.shape == (1797, 8, 8)
    assert len(splits["train"]) == 1347 and len(splits["test"]) == 450
    assert not set(splits["train"]) & set(splits["test"])
    assert np.bincount(targets[splits["test"]]).tolist() == [45, 46, 44, 46, 45, 46, 45, 45, 43, 45]


def test_digits_catalog_statistics_match_the_training_split():
    images, _, splits = datasets._digits_arrays()
    pixels = images[splits["train"]] / 255.0
    spec = catalog.spec("digits")
    assert spec.mean[0] == pytest.approx(pixels.mean(), abs=1e-4)
    assert spec.std[0] == pytest.approx(pixels.std(), abs=1e-4)


def test_views_are_reproducible_per_sample_and_epoch():
    base = datasets.load("digits", "unused", "pretrain")
    views = datasets.Views(base, datasets.pretrain_view("digits", 32, 32, 0.2), n_views=2, seed=3)
    a1, a2, label, index = views[5]
    assert a1.shape == (3, 32, 32) and index == 5 and 0 <= label < 10
    assert not torch.equal(a1, a2)  # two different views of one image
    assert torch.equal(views[5][0], a1)  # same (seed, epoch, index) -> same view
    state = torch.get_rng_state()
    views.set_epoch(1)
    assert not torch.equal(views[5][0], a1)
    assert torch.equal(torch.get_rng_state(), state)  # the global RNG is untouched


@pytest.mark.parametrize("name", ["cifar10", "cifar100", "stl10", "imagenet"])
def test_missing_dataset_fails_with_where_to_get_it(tmp_path, name):
    with pytest.raises(catalog.DatasetMissing, match=f"Dataset {name} is missing .*; (run|download)"):
        catalog.check(name, tmp_path)


def test_missing_data_root_and_unknown_dataset(tmp_path):
    with pytest.raises(catalog.DatasetMissing, match="Data root .* does not exist"):
        catalog.check("cifar10", tmp_path / "nope")
    with pytest.raises(ValueError, match="Unknown dataset 'mnist_m'"):
        catalog.check("mnist_m", tmp_path)


def test_corrupt_cifar10_files_fail_with_one_sentence(tmp_path):
    # Files in the right places whose contents do not match torchvision's checksums.
    folder = tmp_path / "cifar10" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]:
        (folder / name).write_bytes(b"not a pickle")
    catalog.check("cifar10", tmp_path)  # the layout is complete ...
    with pytest.raises(catalog.DatasetMissing, match=r"Dataset cifar10 under .* is incomplete or corrupted .*; run"):
        datasets.load("cifar10", tmp_path, "pretrain")  # ... but the contents are not CIFAR-10
