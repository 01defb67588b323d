"""PIL's bilinear resampling on the device, for whole batches: weight matrices applied by two matmuls.

PIL's ``Resize`` and the random resized crop resample with a triangle filter, widened by the reduction factor when
shrinking (its antialiasing): here an axis's filter is an out x in matrix of weights (:func:`weights`), the crop's
per sample, and an image is resampled horizontally then vertically, each pass rounded to uint8 levels as PIL stores
them (:func:`resample`).  Whole images of one size (:func:`resize`) or of many (:func:`resize_each`: a batch of
decoded JPEGs).  ring.data.augment draws the views with it.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch


def to_device(host: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A small host tensor on ``device`` without waiting for it: a blocking copy to a GPU first waits for
    every kernel queued before it (the training step in flight), so it goes from pinned memory, asynchronously."""
    if device.type == "cuda":
        return host.pin_memory().to(device, non_blocking=True)
    return host.to(device)


def resize_each(images: list[torch.Tensor], size: int) -> torch.Tensor:
    """PIL's Resize((size, size)) of uint8 C x H x W images of any sizes -> one B x C x size x size float tensor.

    Each image still takes its own two matmuls (batching them would pad every image to the batch's largest,
    and ImageNet holds some very large ones): five calls an image.  The weights of every side length in the
    batch are made together, in one batch padded to the longest side (zero past each length), where making
    each length's on its own cost about 40 calls an image and bound a GPU's JPEG path by its host
    (1,982 views/s on an H200, ``ring/resources/figures/jpeg_decode-NVIDIA_H200.json``).
    """
    device = images[0].device
    sides = sorted({side for img in images for side in img.shape[-2:]})
    lengths = to_device(torch.tensor(sides, dtype=torch.float32).view(-1, 1, 1), device)
    padded = weights(torch.zeros_like(lengths), lengths, grid(size, sides[-1], device))  # U x size x longest side
    rows, columns = padded.unbind(0), padded.mT.unbind(0)
    index = {side: u for u, side in enumerate(sides)}
    wy = {h: rows[index[h]].narrow(-1, 0, h) for h in {img.shape[-2] for img in images}}  # size x h
    wx_t = {w: columns[index[w]].narrow(0, 0, w) for w in {img.shape[-1] for img in images}}  # w x size
    # PIL's order and storage: horizontal, then vertical, each rounded to uint8 levels (see resample).
    return torch.stack(
        [
            torch.matmul(wy[img.shape[-2]], torch.matmul(img.float(), wx_t[img.shape[-1]]).round_()).round_()
            for img in images
        ]
    )


class Grid(NamedTuple):
    out_centres: torch.Tensor  # out x 1: i + 0.5
    mirrored: torch.Tensor  # out x 1: out - (i + 0.5), the same centres in mirror order
    in_centres: torch.Tensor  # size: j + 0.5
    zero: torch.Tensor


@functools.lru_cache(maxsize=64)
def grid(out: int, size: int, device: torch.device) -> Grid:
    out_centres = torch.arange(out, device=device, dtype=torch.float32).view(-1, 1) + 0.5
    in_centres = torch.arange(size, device=device, dtype=torch.float32) + 0.5
    return Grid(out_centres, out - out_centres, in_centres, torch.zeros((), device=device))


def weights(
    start: torch.Tensor, length: torch.Tensor, grid: Grid, out_centres: torch.Tensor | None = None
) -> torch.Tensor:
    """PIL's bilinear resampling of the pixels [start, start + length) of an axis of ``size`` to ``out`` pixels
    (``grid``: ``grid(out, size, device)``).

    ``start`` and ``length``: ``(..., 1, 1)``; returns ``(..., out, size)`` matrices: a triangle filter centred on
    each output pixel's centre, widened by the reduction factor when shrinking (PIL's antialiasing), restricted
    to the crop and normalised.  ``out_centres`` (``(..., out, 1)``; ``i + 0.5`` by default) mirrors the output
    axis where a caller passes ``out - (i + 0.5)``.
    """
    scale = length / len(grid.out_centres)
    support = scale.clamp_min(1.0)
    centre = (grid.out_centres if out_centres is None else out_centres) * scale
    v = grid.in_centres - start  # input pixel centres, from the crop's edge
    w = 1.0 - ((v - centre) / support).abs()
    # 1 inside the crop (0 < v < length), 0 outside: at a pixel centre v * (length - v) is never 0.
    inside = torch.heaviside(v * (length - v), grid.zero)
    w = w.clamp(grid.zero, inside)  # the triangle's positive part (w <= 1) inside the crop, 0 outside
    return w / w.sum(-1, keepdim=True)


@functools.lru_cache(maxsize=64)
def resize_weights(size: int, out: int, device: torch.device) -> torch.Tensor:
    """The out x size matrix of PIL's resize of a whole axis, made once per sizes and device (bounded: JPEGs
    come in many sizes, most of them in a few)."""
    start = torch.zeros(1, 1, device=device)
    return weights(start, start + size, grid(out, size, device))


def resample(x: torch.Tensor, wy: torch.Tensor, wx: torch.Tensor) -> torch.Tensor:
    """``wy @ x @ wx^T`` in two passes, horizontal then vertical, each rounded to uint8 levels (PIL's order and
    storage).  The weights are non-negative and sum to 1, so the levels stay in 0..255 without a clamp."""
    return torch.matmul(wy, torch.matmul(x, wx.mT).round_()).round_()


def crop(x: torch.Tensor, start: torch.Tensor, length: torch.Tensor, flip: torch.Tensor, grid: Grid) -> torch.Tensor:
    """Each image's box ``[start, start + length)`` resampled to ``grid``'s out x out pixels, mirrored along an axis
    where ``flip`` is 1: the random resized crop and flip of PIL's path (B x C x H x W, 0..255).  ``start``,
    ``length`` and ``flip``: B x 2 x 1 x 1, the (y, x) axes'; a box of ``out`` pixels at an integer start copies its
    pixels exactly (one weight of 1 a row): a centre crop."""
    centres = torch.lerp(grid.out_centres, grid.mirrored, flip)  # a weight of 0 or 1 selects exactly
    wy, wx = weights(start, length, grid, centres).unsqueeze(2).unbind(1)
    return resample(x, wy, wx)


def resize(x: torch.Tensor, size: int) -> torch.Tensor:
    """PIL's Resize((size, size)) of whole images (B x C x H x W, 0..255)."""
    return resample(x, resize_weights(x.shape[-2], size, x.device), resize_weights(x.shape[-1], size, x.device))
