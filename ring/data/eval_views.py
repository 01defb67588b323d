"""Evaluation's input made on the device from a prepared store: the kNN monitor's and linear evaluation's views.

Today's path (:func:`ring.data.datasets.linear_view`, ``eval_view``) turns every image into a PIL image in the
loader's workers, resizes, crops, flips, converts and normalises it there, one sample at a time.  On ImageNet that
bounds both evaluations by the CPU while the forward needs tens of microseconds an image.  Where the dataset is read
from its prepared store (:mod:`ring.data.store`), the workers here only read each record (raw: its uint8 pixels;
jpeg95: decoded with PIL, or its bytes handed to the GPU's decoder where the cell's decoder is the GPU's,
:mod:`ring.data.gpu_decode`) and draw each view's crop and flip (:class:`EvalParams`: the very draws of today's
transforms from the same per-sample generator, :class:`ring.data.datasets.Views`).  The device then crops, flips and
normalises the whole batch (:func:`device_views`) with the pretraining views' own resampling
(:func:`ring.data.bilinear.crop`, PIL's bilinear filter as weight matrices) and normalisation
(:func:`ring.data.augment.normalisation`), compiled where the cell compiles.

What differs from today's pixels: the centre crop of a store image is copied exactly (the same levels; the
normalisation's multiply-add moves a value by float rounding only); a random resized crop is PIL's filter in float
instead of PIL's fixed point, each pass rounded (PIL rounds a half up, torch to even), so a level on a rounding
boundary can land one or two apart (``tests/data/test_eval_views.py`` bounds both).  A dataset without a store keeps
today's path (:func:`reader_of`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import torch
from torchvision import transforms as T

from ring.data import augment, bilinear, store, views

TOP, LEFT, HEIGHT, WIDTH, FLIP = range(5)  # one view's parameter vector
N_PARAMS = 5
AUGMENTATIONS = ("crop_flip", "none")  # ring.data.datasets.linear_view's


def centre_start(resize: int, crop: int) -> int:
    """The first row (and column) of the centre box, as torchvision's ``center_crop`` places it."""
    return int(round((resize - crop) / 2.0))


class EvalParams:
    """A ``transform`` for :class:`ring.data.datasets.Views` that returns a view's box and flip instead of its pixels:
    ``crop_flip``, the draws of ``linear_view``'s RandomResizedCrop (``get_params`` on a ``resize x resize`` image) and
    RandomHorizontalFlip (``torch.rand(1)``) in their order; ``none``, CenterCrop's box (nothing drawn)."""

    def __init__(self, resize: int, crop: int, augmentation: str):
        if augmentation not in AUGMENTATIONS:
            raise ValueError(f"Unknown linear-evaluation augmentation {augmentation!r}; choose crop_flip or none.")
        if crop > resize:
            raise ValueError(f"crop={crop} exceeds resize={resize}; set a crop no larger than the resize.")
        self.random = augmentation == "crop_flip"
        self.scale, self.ratio = T.RandomResizedCrop(crop).scale, T.RandomResizedCrop(crop).ratio
        self.shape = torch.empty(1, 1, 1).expand(3, resize, resize)  # what get_params reads (C, H, W)
        start = float(centre_start(resize, crop))
        self.centre = torch.tensor([start, start, crop, crop, 0.0], dtype=torch.float64)

    def __call__(self, _img) -> torch.Tensor:
        if not self.random:
            return self.centre
        i, j, h, w = T.RandomResizedCrop.get_params(self.shape, self.scale, self.ratio)
        flip = torch.rand(1) < 0.5
        return torch.tensor([i, j, h, w, float(flip)], dtype=torch.float64)


class _Tables(NamedTuple):
    """What a view batch reads besides its images and parameters, made once per device and shapes (passed in, so
    that a compiled :func:`device_views` constructs nothing)."""

    grid: bilinear.Grid  # the crop's: bilinear.grid(crop, resize)
    resize: tuple[torch.Tensor, torch.Tensor] | None  # the whole images' resize weights, or None at the resize
    x_axis: torch.Tensor  # 1 x 2 x 1 x 1: (0, 1), the flip's axes (y never)
    shift: torch.Tensor  # the normalisation's -mean / std and 1 / std
    scale: torch.Tensor


@functools.lru_cache(maxsize=8)
def _tables(device: torch.device, size: tuple[int, int], resize: int, crop: int, mean: tuple, std: tuple) -> _Tables:
    resized = None if size == (resize, resize) else tuple(bilinear.resize_weights(n, resize, device) for n in size)
    x_axis = torch.tensor([0.0, 1.0], device=device).view(1, 2, 1, 1)
    return _Tables(bilinear.grid(crop, resize, device), resized, x_axis, *augment.normalisation(device, mean, std))


def device_views(images: torch.Tensor, params: torch.Tensor, t: _Tables) -> torch.Tensor:
    """Normalised float32 B x 3 x crop x crop views of uint8 B x 3 x H x W ``images`` with ``params`` (B x
    :data:`N_PARAMS` from :class:`EvalParams`), on the images' device."""
    x = images.float()
    if t.resize is not None:
        x = bilinear.resample(x, *t.resize)
    p = params.float().view(len(params), N_PARAMS, 1, 1)
    x = bilinear.crop(x, p[:, TOP : LEFT + 1], p[:, HEIGHT : WIDTH + 1], p[:, FLIP : FLIP + 1] * t.x_axis, t.grid)
    return torch.addcmul(t.shift, t.scale, x)


def centre_views(images: torch.Tensor, start: int, crop: int, t: _Tables) -> torch.Tensor:
    """:func:`device_views` of every image's centre box, from images at the resize: the box's levels copied, which is
    what :func:`ring.data.bilinear.crop`'s one-hot weights make of them, without the two matmuls (about 40 GFLOP a
    batch of 256 at 224 px: on a CPU they cost more than the workers' PIL crop)."""
    x = images[:, :, start : start + crop, start : start + crop].float()
    return torch.addcmul(t.shift, t.scale, x)


@functools.cache
def _compiled_views():
    """:func:`device_views` under torch.compile, made on first use; static shapes, as the pretraining views'
    (:func:`ring.data.augment._compiled_views`)."""
    return torch.compile(device_views, dynamic=False)


class EvalViews:
    """Turns a loader batch (the store's uint8 B x H x W x 3 images and each view's parameters) into the views on
    ``device``: the call of :class:`ring.data.augment.DeviceViews`, so that :mod:`ring.data.gpu_decode`'s decoder
    serves it alike."""

    def __init__(
        self, device: torch.device, resize: int, crop: int, mean, std, compiled: bool = False, centre: bool = False
    ):
        """``centre``: every view is the centre box (``augmentation: none``, the kNN monitor), copied by
        :func:`centre_views` from images at the resize."""
        self.device, self.compiled, self.centre = torch.device(device), compiled, centre
        self.resize, self.crop, self.mean, self.std = resize, crop, tuple(mean), tuple(std)

    def __call__(self, params: list[torch.Tensor], index: torch.Tensor, data: torch.Tensor) -> list[torch.Tensor]:
        images = data.to(self.device, non_blocking=True).permute(0, 3, 1, 2)  # pinned by the loader: no wait
        t = _tables(images.device, tuple(images.shape[-2:]), self.resize, self.crop, self.mean, self.std)
        if self.centre and t.resize is None:
            start = centre_start(self.resize, self.crop)
            return [centre_views(images, start, self.crop, t) for _ in params]
        run = _compiled_views() if self.compiled else device_views
        return [run(images, p.to(images.device, non_blocking=True), t) for p in params]


def reader_of(dataset) -> store.StoreReader | None:
    """The store split ``dataset`` reads (:class:`ring.data.store.StoreImages`), or None: today's path."""
    return dataset.reader if isinstance(dataset, store.StoreImages) else None


class EvalInput:
    """One store split's evaluation input: ``dataset`` and ``collate`` make the caller's loader (the stage's
    :func:`ring.engine.runtime.make_loader`), :meth:`batches` turns its batches into ``(views, labels, index)`` with
    the views on the device.  ``place``: where the records are decoded (:func:`ring.data.views.decode_of`)."""

    def __init__(
        self,
        reader: store.StoreReader,
        params: EvalParams,
        seed: int,
        maker: EvalViews,
        batch_size: int,
        place: str = "cpu",
    ):
        self.pipe = views.store_views(reader, params, 1, seed, maker, batch_size, place)  # type: ignore[arg-type]
        self.dataset, self.collate = self.pipe.dataset, self.pipe.collate

    def __len__(self) -> int:
        return len(self.dataset)

    def set_epoch(self, epoch: int) -> None:
        self.dataset.set_epoch(epoch)

    def batches(self, loader: Iterable) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        for batch in self.pipe.feed(loader):  # the loader, or the GPU decoder's thread over it
            (x,), _ = self.pipe.batch(batch, 0, 0)
            yield x, batch[-2], batch[-1]


def for_store(
    base,
    augmentation: str,
    resize: int,
    crop: int,
    norm: T.Normalize,
    seed: int,
    device: torch.device,
    batch_size: int,
    compiled: bool = False,
    place: Callable[[store.StoreReader], str] = lambda reader: "cpu",
) -> EvalInput | None:
    """The device input of ``base`` (a stage's loaded split) with ``augmentation``'s views, or None where ``base``
    reads no store (today's path: :func:`ring.data.datasets.linear_view`).  ``place``: the cell's decoder of the
    store's records (:func:`ring.data.views.decode_of`; linear evaluation's workers: ``cpu``)."""
    reader = reader_of(base)
    if reader is None:
        return None
    maker = EvalViews(device, resize, crop, norm.mean, norm.std, compiled, centre=augmentation == "none")
    return EvalInput(reader, EvalParams(resize, crop, augmentation), seed, maker, batch_size, place(reader))
