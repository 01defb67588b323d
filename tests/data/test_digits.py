"""ring.data.digits: digits_folder, the colour digits as an image folder, is what the catalog says it is."""

import json

import numpy as np
import pytest
from torchvision import datasets as tvd
from torchvision import transforms as T

from ring.core import catalog
from ring.data import digits


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    base = tmp_path_factory.mktemp("data") / "digits_folder"
    digits.generate_folder(base)
    return base


def test_digits_folder_holds_the_fixed_split_as_png_files_of_varied_sizes(folder):
    spec = catalog.DATASETS["digits_folder"]
    train, val = (tvd.ImageFolder(str(folder / split)) for split in ("train", "val"))
    assert (len(train), len(val)) == spec.publisher_counts and train.classes == [str(d) for d in range(10)]
    _, targets, splits = digits._digits_colour_arrays()
    assert sorted(train.targets) == sorted(targets[splits["train"]].tolist())
    sides = {train[i][0].size for i in range(0, len(train), 50)}
    low, high = digits.FOLDER_SIDES
    assert len(sides) > 10 and all(low <= w < high and low <= h < high for w, h in sides)
    assert json.loads((folder / "generated.json").read_text())["generator"] == "ring.data.digits.generate_folder"
    digits.generate_folder(folder)  # a second call is a no-op: the marker is there


def test_the_catalogs_statistics_are_the_training_splits_at_its_store_size(folder):
    """catalog.MEAN_FOLDER / STD_FOLDER, rounded to 4 places as written: the training split after Resize((32, 32))."""
    size = catalog.DATASETS["digits_folder"].store_size
    train = tvd.ImageFolder(str(folder / "train"), transform=T.Compose([T.Resize((size, size)), T.ToTensor()]))
    pixels = np.stack([train[i][0].numpy() for i in range(len(train))])
    assert np.allclose(pixels.mean(axis=(0, 2, 3)), catalog.MEAN_FOLDER, atol=5e-5)
    assert np.allclose(pixels.std(axis=(0, 2, 3), ddof=1), catalog.STD_FOLDER, atol=5e-5)
