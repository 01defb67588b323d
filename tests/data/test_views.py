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
from ring.core.config import PretrainConfig
from ring.data import augment, datasets, view_draws, views
from ring.engine.runtime import epoch_batches
from tests.helpers import TINY_PRETRAIN

CPU = torch.device("cpu")


def _cfg(augment_place: str, view_draws: str = "sample") -> views.ViewSpec:
    """The views of the tiny pretraining cell, ``crop`` 24, made at ``augment_place``."""
    cfg = PretrainConfig(method="IR", **{**TINY_PRETRAIN, "augment": augment_place, "crop": 24})
    return views.ViewSpec(
        cfg.augment, cfg.resize, cfg.crop, cfg.crop_scale_min, cfg.seed, cfg.store_decode, view_draws=view_draws
    )


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


def _epoch_views(tv: views.TrainViews, workers: int, start: int = 0) -> dict[int, torch.Tensor]:
    """Each image's two views over an epoch (epoch 1) of batches of 3, from its ``start``-th batch on."""
    tv.dataset.set_epoch(1)
    batches = epoch_batches(len(tv.dataset), 3, 0, 1)[start:]
    out = {}
    for batch in DataLoader(tv.dataset, batch_sampler=batches, num_workers=workers, collate_fn=tv.collate):
        (a, b), index = tv.batch(batch, epoch=1, step=0)
        out.update({int(i): torch.stack((x, y)) for i, x, y in zip(index, a, b, strict=True)})
    return out


@pytest.mark.parametrize("place", ["cpu", "device"])
def test_batch_view_draws_make_the_same_views_on_any_workers_and_after_a_restart(digits, place):
    """view_draws: batch, through the stage's pipeline: the workers draw each batch's values (PIL makes the pixels
    there, or the device here), the same views whatever the workers, and a restart's fresh pipeline from the third
    batch of the epoch makes that batch's views again."""
    spec = _cfg(place, "batch")
    tv = views.train_views(spec, digits, CPU, n_views=2, compiled=False, local_batch=3, rank=0)
    drawer = view_draws.BatchPilViews if place == "cpu" else view_draws.BatchParams
    assert isinstance(tv.dataset.transform, drawer)
    whole = _epoch_views(tv, 0)
    assert len(whole) == 6 and all(v.shape == (2, 3, 24, 24) for v in whole.values())
    assert all(torch.equal(v, whole[i]) for i, v in _epoch_views(tv, 2).items())
    restarted = views.train_views(spec, digits, CPU, n_views=2, compiled=False, local_batch=3, rank=0)
    resumed = _epoch_views(restarted, 1, start=1)
    assert len(resumed) == 3 and all(torch.equal(v, whole[i]) for i, v in resumed.items())
    sample = _epoch_views(views.train_views(_cfg(place), digits, CPU, 2, False, 3, 0), 0)
    assert sample.keys() == whole.keys() and not any(torch.equal(sample[i], whole[i]) for i in whole)  # other draws


def test_batch_view_draws_under_dali_are_one_sentence(digits):
    with pytest.raises(ValueError, match=r"^view_draws: batch draws the views' parameters and DALI draws its own;"):
        views.train_views(_cfg("dali", "batch"), digits, CPU, 2, False, 4, 0)
