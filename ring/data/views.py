"""The pretraining stage's view pipeline, chosen once per cell by ``augment`` (:func:`ring.data.augment.resolve`).

Three places make a step's views: the loader's workers with PIL (``cpu``, :func:`ring.data.datasets.pretrain_view`),
the device from images held there or from the JPEG bytes the loader brings (``device``,
:class:`ring.data.augment.DeviceViews`), or DALI from image folders (``dali``, :mod:`ring.data.dali`).
:func:`train_views` picks one and :class:`TrainViews` turns each loader batch into the views on the device.  It takes a
:class:`ViewSpec`, the few values of the cell's config its views are made from, which the stage's entry point reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils.data import Dataset, default_collate

from ring.data import augment, dali, datasets, decode_place, gpu_decode, store, view_draws


@dataclass(frozen=True)
class ViewSpec:
    """What a pretraining cell's views are made from: its config's view keys (ring.core.config.PretrainConfig)."""

    augment: str  # where the views are made (ring.data.augment.resolve)
    resize: int
    crop: int
    crop_scale_min: float
    seed: int  # with the epoch and the image's index, seeds each view
    store_decode: str = "auto"  # where a store's records are decoded (decode_of)
    store_decoder: str = ""  # the decoder the cell's plan recorded (ring.data.decode_place.planned)
    view_draws: str = "sample"  # each view's random values drawn per sample, or per batch (ring.data.view_draws)


class StoreViews(datasets.DataViews):
    """``(image, params_1, ..., params_n, label, index)`` of a prepared store's split: a worker reads one record and
    decodes it (raw: none) into a uint8 H x W x 3 tensor, which the loader stacks into the batch and pins; the
    parameters are :class:`ring.data.augment.JpegViews`' (the same draws, whatever the input).  ``decoded=False``:
    the record's bytes instead, as a uint8 tensor, for the GPU's decoder (:mod:`ring.data.gpu_decode`; the loader
    packs them with :func:`ring.data.augment.collate_jpegs`)."""

    def __init__(self, reader: store.StoreReader, params, n_views: int, seed: int, decoded: bool = True):
        self.reader, self.decoded = reader, decoded
        self.views = datasets.Views(augment.Labels(reader.targets), params, n_views, seed)

    def data(self, index: int) -> torch.Tensor:
        if self.decoded:
            return torch.from_numpy(self.reader.array(index))
        return torch.frombuffer(self.reader.record(index), dtype=torch.uint8)


class TrainViews:
    """What a pretraining epoch draws its views from: the loader's ``dataset``, the device's view maker
    (``device_views``; None: the loader brings finished views), the loader's ``collate`` (None: its default) and
    ``feed``, what the epoch iterates over its loader (the loader itself, or the GPU decoder's thread over it)."""

    def __init__(
        self, dataset: Dataset, device_views, collate: Callable | None, device: torch.device, feed: Callable = iter
    ):
        self.dataset, self.device_views, self.collate, self.device = dataset, device_views, collate, device
        self.feed = feed

    def batch(self, batch, epoch: int, step: int) -> tuple[list[torch.Tensor], torch.Tensor]:
        """A loader batch as the objective takes it: the views and the images' indices, on the device; ``step``: the
        step in the epoch."""
        *views, _labels, index = batch
        if isinstance(self.device_views, dali.DaliViews):  # this step's views: a function of (seed, epoch, step)
            views = self.device_views(index, epoch, step)
        elif self.device_views is None:
            views = [v.to(self.device, non_blocking=True) for v in views]
        else:  # the loader brought each view's parameters (and, from image folders, the JPEG bytes first)
            data = views.pop(0) if self.collate is not None else None
            views = self.device_views(views, index, data)
        return views, index.to(self.device, non_blocking=True)


def train_views(
    spec: ViewSpec,
    data: datasets.Source,
    device: torch.device,
    n_views: int,
    compiled: bool,
    local_batch: int,
    rank: int,
) -> TrainViews:
    """The view pipeline ``spec`` asks for on ``data``: ``n_views`` views of each image (the method's),
    ``compiled`` (the views fused as the network is), ``local_batch`` images per step on this process, its ``rank``."""
    base = data.load("pretrain")
    stats = data.spec
    place = augment.resolve(spec.augment, device)
    if place == "dali" and spec.view_draws == "batch":
        raise ValueError(
            "view_draws: batch draws the views' parameters and DALI draws its own; use view_draws: sample."
        )
    if place == "dali":
        return _dali_views(spec, data, base, device, n_views, local_batch, rank)
    if place == "cpu":
        if spec.view_draws == "batch":
            view = view_draws.BatchPilViews(spec.resize, spec.crop, spec.crop_scale_min, data.normalize())
        else:
            view = datasets.pretrain_view(spec.resize, spec.crop, spec.crop_scale_min, data.normalize())
        return TrainViews(datasets.Views(base, view, n_views=n_views, seed=spec.seed), None, None, device)
    params = view_params(spec)
    held = augment.in_memory(base)
    if held is not None:  # the decoded images go to the device once
        images, targets = held
        maker = augment.DeviceViews(
            augment.device_images(images, device), device, spec.resize, spec.crop, stats.mean, stats.std, compiled
        )
        return TrainViews(
            datasets.Views(augment.Labels(targets), params, n_views=n_views, seed=spec.seed), maker, None, device
        )
    if isinstance(base, store.StoreImages):  # the workers read and decode records at the store's size, or the GPU
        maker = augment.DeviceViews(None, device, spec.resize, spec.crop, stats.mean, stats.std, compiled)
        place = decode_of(spec, base.reader, device)
        return store_views(base.reader, params, n_views, spec.seed, maker, local_batch, place)
    if not hasattr(base, "samples"):
        raise ValueError(f"augment=device needs {data.name} in memory or as an image folder; use augment: cpu.")
    maker = augment.DeviceViews(None, device, spec.resize, spec.crop, stats.mean, stats.std, compiled)
    return TrainViews(augment.JpegViews(base.samples, params, n_views, spec.seed), maker, augment.collate_jpegs, device)


def _dali_views(spec: ViewSpec, data, base, device, n_views: int, local_batch: int, rank: int) -> TrainViews:
    """Image folders' JPEGs decoded and cropped by DALI (ring.data.dali); the loader brings only indices."""
    if not hasattr(base, "samples"):
        raise ValueError(f"augment: dali reads image folders; {data.name} is held in memory: use augment: device.")
    stats = data.spec
    maker = dali.for_folder(
        base.samples,
        device,
        spec.crop,
        spec.crop_scale_min,
        stats.mean,
        stats.std,
        n_views,
        spec.seed,
        batch_size=local_batch,
        rank=rank,
    )
    labels = datasets.Views(augment.Labels([t for _, t in base.samples]), None, n_views=0, seed=spec.seed)
    return TrainViews(labels, maker, None, device)


def view_params(spec: ViewSpec) -> augment.ViewParams | view_draws.BatchParams:
    """What the loader's items carry for the device's views: each view's parameters, drawn per sample or per batch."""
    if spec.view_draws == "batch":
        return view_draws.BatchParams(spec.resize, spec.crop_scale_min)
    return augment.ViewParams(spec.resize, spec.crop_scale_min)


def decode_of(spec: ViewSpec, reader: store.StoreReader, device: torch.device) -> str:
    """Where the cell's store records are decoded: the decoder its plan recorded, else ``store_decode``'s own choice
    (:func:`ring.data.decode_place.run_place`; no figure is read here); one sentence when the GPU's decoder cannot
    serve it."""
    place = decode_place.run_place(spec.store_decode, spec.store_decoder)
    if place == "gpu" and device.type != "cuda":
        raise ValueError(
            f"store_decode: gpu decodes on a CUDA device and this cell runs on {device}; use auto or cpu "
            "(a cell planned with the GPU's decoder keeps its pixels only on a GPU)."
        )
    if place == "gpu" and reader.format.name != "jpeg95":
        raise ValueError(
            f"store_decode: gpu decodes the jpeg95 store, and {reader.store} is {reader.format.name}; "
            "use store: jpeg95 or store_decode: auto."
        )
    return place


def store_views(
    reader: store.StoreReader,
    params: augment.ViewParams | view_draws.BatchParams,
    n_views: int,
    seed: int,
    maker: augment.DeviceViews,
    local_batch: int,
    place: str,
) -> TrainViews:
    """The store's pipeline with its records decoded in the loader's workers (``cpu``) or by the decoder thread
    (``gpu``: :class:`ring.data.gpu_decode.StoreDecoder` on the views' device; on a CPU, torchvision's CPU decoder)."""
    if place == "cpu":
        return TrainViews(StoreViews(reader, params, n_views, seed), maker, default_collate, maker.device)
    decoder = gpu_decode.StoreDecoder(maker, maker.device, local_batch, reader.size)
    data = StoreViews(reader, params, n_views, seed, decoded=False)
    return TrainViews(data, decoder, augment.collate_jpegs, maker.device, feed=decoder.feed)
