"""ring.data.views: the pretraining stage's view pipeline, chosen by ``augment``, and a loader batch made into views.

The device path builds its colour tables once per process (ring.data.augment._constants): seconds on a CPU, shared
with tests/data/test_augment.py in one run."""

import dataclasses
from types import SimpleNamespace

import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from ring.core import catalog
from ring.core import config as C
from ring.data import augment, datasets, views
from tests.helpers import TINY_PRETRAIN

CPU = torch.device("cpu")


def _cfg(augment_place: str) -> views.ViewSpec:
    """The views of the tiny pretraining cell, ``crop`` 24, made at ``augment_place``."""
    cfg = C.PretrainConfig(method="IR", **{**TINY_PRETRAIN, "augment": augment_place, "crop": 24})
    return views.ViewSpec(cfg.augment, cfg.resize, cfg.crop, cfg.crop_scale_min, cfg.seed, cfg.store_decode)


@pytest.fixture
def digits(tmp_path):
    """The digits source holding 8 random 8x8 images in memory, as digits does (its 1,347 would take seconds)."""
    images = torch.randint(0, 256, (8, 8, 8), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)).numpy()
    small = datasets.ArrayImages(images, [i % 3 for i in range(8)])
    return dataclasses.replace(datasets.source(catalog.spec("digits"), tmp_path), build=lambda root, split: small)


def _views_of_one_batch(tv: views.TrainViews, size: int = 4):
    loader = DataLoader(tv.dataset, batch_size=size, collate_fn=tv.collate)
    return tv.batch(next(iter(loader)), epoch=0, step=0)


@pytest.mark.parametrize("place", ["cpu", "device"])
def test_in_memory_images_give_the_methods_views_on_the_device(digits, place):
    tv = views.train_views(_cfg(place), digits, CPU, n_views=2, compiled=False, local_batch=4, rank=0)
    # cpu: the loader's workers make the pixels; device: the loader brings parameters, the device the pixels.
    assert (tv.device_views is None) == (place == "cpu") and tv.collate is None
    if place == "device":
        assert isinstance(tv.device_views, augment.DeviceViews)
    made, index = _views_of_one_batch(tv)
    assert len(made) == 2 and [tuple(v.shape) for v in made] == [(4, 3, 24, 24)] * 2
    assert index.tolist() == [0, 1, 2, 3] and all(v.device == CPU for v in made)
    assert not torch.equal(made[0], made[1])  # two different views of each image


def test_auto_keeps_the_views_on_the_cpus_workers_on_a_cpu(digits):
    tv = views.train_views(_cfg("auto"), digits, CPU, 1, False, 4, 0)
    assert tv.device_views is None and isinstance(tv.dataset, datasets.Views)


def test_image_folders_bring_their_jpeg_bytes_to_the_device(digits, tmp_path):
    samples = []
    for i, colour in enumerate(["red", "blue", "green"]):
        path = tmp_path / f"{i}.jpg"
        Image.new("RGB", (40, 30), colour).save(path)
        samples.append((str(path), i % 2))
    folder = dataclasses.replace(digits, build=lambda root, split: SimpleNamespace(samples=samples))
    tv = views.train_views(_cfg("device"), folder, CPU, n_views=2, compiled=False, local_batch=3, rank=0)
    assert isinstance(tv.dataset, augment.JpegViews) and tv.collate is augment.collate_jpegs
    made, index = _views_of_one_batch(tv, size=3)
    assert [tuple(v.shape) for v in made] == [(3, 3, 24, 24)] * 2 and index.tolist() == [0, 1, 2]


def test_a_placement_the_dataset_cannot_take_is_one_sentence(digits):
    with pytest.raises(
        ValueError, match=r"^augment: dali reads image folders; digits is held in memory: use augment: "
    ):
        views.train_views(_cfg("dali"), digits, CPU, 2, False, 4, 0)
    neither = dataclasses.replace(digits, build=lambda root, split: torch.utils.data.TensorDataset(torch.zeros(2)))
    with pytest.raises(ValueError, match=r"^augment=device needs digits in memory or as an image folder; use augment"):
        views.train_views(_cfg("device"), neither, CPU, 2, False, 4, 0)
    with pytest.raises(ValueError, match=r"^Unknown augment 'gpu'; choose auto, cpu, device or dali\.$"):
        views.train_views(_cfg("gpu"), digits, CPU, 2, False, 4, 0)
