"""View parameters drawn a whole batch at a time from a counter-based generator (``view_draws: batch``).

Under ``view_draws: sample`` (the default, every cell before the key) a loader worker seeds torch's global generator
per sample from ``(seed, epoch, index)`` and draws each view's crop, colour jitter, flip and grayscale with
torchvision's ``get_params`` (:class:`ring.data.augment.ViewParams`): a few dozen Python and torch calls per view,
which bound the workers that must feed a GPU thousands of images a second.  Here the same laws are drawn for a whole
batch in a few dozen numpy calls: every random number is a word of Philox4x32-10 (Salmon et al., "Parallel random
numbers: as easy as 1, 2, 3", SC 2011; the generator torch's CUDA kernels use), keyed by the cell's seed, at the
counter (block of the view, index, epoch).  A view's parameters are therefore a function of (seed, epoch, index,
view) alone, whatever the batch, the worker that drew them, the number of workers or where a run was resumed.

The laws, word by word (32 words, 8 Philox blocks, a view), are torchvision's: ten tries of RandomResizedCrop's area
scale (uniform in [crop_scale_min, 1]) and log aspect ratio (uniform in [log 3/4, log 4/3]), the first try that fits
taken, else the whole image (its fallback for a square image); its position uniform over the places the crop fits;
ColorJitter's order a uniform permutation (the ranks of four words) and its factors uniform in [0.6, 1.4] (hue
[-0.4, 0.4]); a flip with p 0.5, grayscale with p 0.2.  A word u becomes the uniform ``(u + 0.5) / 2^32`` (finer than
torch's float32 draws) and a uniform integer below n as ``(u * n) >> 32`` (off uniform by at most n / 2^32).  The
draws differ from the sample path's, value by value: hence a key of its own, hashed when set.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torchvision import transforms as T
from torchvision.transforms import functional as F

from ring.data import augment

# Philox4x32-10's multipliers and key increments (Random123's).
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_LOW = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)
ROUNDS = 10

BLOCKS = 8  # Philox blocks of four words per view: the 32 words below
TRIES = 10  # RandomResizedCrop's tries before its fallback
_SCALE, _RATIO, _POSITION, _ORDER, _FACTORS, _FLIP, _GRAY = (
    slice(0, 2 * TRIES, 2),
    slice(1, 2 * TRIES, 2),
    slice(20, 22),
    slice(22, 26),
    slice(26, 30),
    30,
    31,
)
_LOG_RATIO = (math.log(3 / 4), math.log(4 / 3))


def philox(counter: np.ndarray, key: tuple[int, int]) -> np.ndarray:
    """Philox4x32-10 of each counter: ``counter`` 4 x ... 32-bit words (any unsigned dtype), ``key`` two 32-bit
    words; returns 4 x ... uint64 holding 32-bit words.  A product of two 32-bit words fits in uint64: exact."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in counter)
    k0, k1 = key
    for _ in range(ROUNDS):
        p0, p1 = c0 * _M0, c2 * _M1
        c0, c1, c2, c3 = (p1 >> _32) ^ c1 ^ np.uint64(k0), p1 & _LOW, (p0 >> _32) ^ c3 ^ np.uint64(k1), p0 & _LOW
        k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
    return np.stack((c0, c1, c2, c3))


def words(seed: int, epoch: int, index: np.ndarray, n_views: int) -> np.ndarray:
    """The 32 words of each view of each image: B x n_views x 32 (uint64 holding 32-bit words)."""
    index = np.asarray(index, dtype=np.uint64).reshape(-1, 1, 1)
    block = np.arange(n_views * BLOCKS, dtype=np.uint64).reshape(1, n_views, BLOCKS)
    shape = np.broadcast_shapes(index.shape, block.shape)
    counter = (np.broadcast_to(block, shape), np.broadcast_to(index, shape), np.full(shape, epoch, np.uint64), 0)
    key = (seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF)
    out = philox(np.broadcast_arrays(*counter), key)  # 4 x B x n_views x BLOCKS
    return out.transpose(1, 2, 3, 0).reshape(*shape[:2], BLOCKS * 4)


def _uniform(w: np.ndarray, lo: float = 0.0, hi: float = 1.0) -> np.ndarray:
    return lo + (hi - lo) * ((w.astype(np.float64) + 0.5) * 2.0**-32)


def _below(w: np.ndarray, n: np.ndarray) -> np.ndarray:
    return (w * n.astype(np.uint64)) >> _32


def _crop(w: np.ndarray, size: int, scale_min: float) -> tuple[np.ndarray, ...]:
    """RandomResizedCrop.get_params on a ``size`` x ``size`` image for every view at once: (top, left, h, w)."""
    area = size * size * _uniform(w[..., _SCALE], scale_min, 1.0)
    aspect = np.exp(_uniform(w[..., _RATIO], *_LOG_RATIO))
    width, height = np.rint(np.sqrt(area * aspect)), np.rint(np.sqrt(area / aspect))  # round half to even: Python's
    fits = (width > 0) & (width <= size) & (height > 0) & (height <= size)
    first = fits.argmax(-1)[..., None]
    found = fits.any(-1)
    height = np.where(found, np.take_along_axis(height, first, -1)[..., 0], size).astype(np.int64)
    width = np.where(found, np.take_along_axis(width, first, -1)[..., 0], size).astype(np.int64)
    top = _below(w[..., _POSITION.start], size - height + 1)
    left = _below(w[..., _POSITION.start + 1], size - width + 1)
    return top, left, height, width


def draw(seed: int, epoch: int, index, n_views: int, size: int, scale_min: float) -> list[torch.Tensor]:
    """Each view's parameters of the images ``index`` (ring.data.augment's layout): ``n_views`` B x N_PARAMS float64
    tensors, the crops on a ``size`` x ``size`` image."""
    w = words(seed, epoch, index, n_views)
    p = np.empty((*w.shape[:2], augment.N_PARAMS))
    p[..., augment.TOP], p[..., augment.LEFT], p[..., augment.HEIGHT], p[..., augment.WIDTH] = _crop(w, size, scale_min)
    p[..., augment.FLIP] = _uniform(w[..., _FLIP]) < augment.FLIP_P
    p[..., augment.GRAY] = _uniform(w[..., _GRAY]) < augment.GRAY_P
    jitter = augment.JITTER
    factors = _uniform(w[..., _FACTORS])
    p[..., augment.BRIGHT : augment.HUE] = (1 - jitter) + 2 * jitter * factors[..., :3]
    p[..., augment.HUE] = -jitter + 2 * jitter * factors[..., 3]
    p[..., augment.ORDER] = np.argsort(w[..., _ORDER], axis=-1, kind="stable")  # ranks of iid words: a uniform order
    return list(torch.from_numpy(p).unbind(1))


class BatchParams:
    """A ``transform`` for :class:`ring.data.datasets.Views` that draws a whole batch's view parameters at once
    (:func:`draw`): what :class:`ring.data.augment.ViewParams` returns per sample, for the device's views."""

    def __init__(self, resize: int, crop_scale_min: float):
        self.resize, self.crop_scale_min = resize, crop_scale_min

    def draw(self, seed: int, epoch: int, index, n_views: int) -> list[torch.Tensor]:
        return draw(seed, epoch, index, n_views, self.resize, self.crop_scale_min)

    def view(self, _img, params: torch.Tensor):
        return params


class BatchPilViews(BatchParams):
    """The PIL path's views (``augment: cpu``) from the batch's parameters: ``pretrain_view``'s transforms applied
    with the drawn values, in its order (:func:`pil_view`)."""

    def __init__(self, resize: int, crop: int, crop_scale_min: float, norm: T.Normalize):
        super().__init__(resize, crop_scale_min)
        self.crop, self.norm = crop, norm

    def view(self, img, params: torch.Tensor) -> torch.Tensor:
        return pil_view(img, params, self.resize, self.crop, self.norm)


def pil_view(img, params: torch.Tensor, resize: int, crop: int, norm: T.Normalize) -> torch.Tensor:
    """:func:`ring.data.datasets.pretrain_view` of a PIL image with its random values given (``params``, one view's
    row): the same torchvision functions its transforms call, in the same order, so the same pixels."""
    p = params.tolist()
    img = F.resize(img, [resize, resize])
    top, left, height, width = (int(v) for v in p[augment.TOP : augment.WIDTH + 1])
    img = F.resized_crop(img, top, left, height, width, [crop, crop], T.InterpolationMode.BILINEAR, antialias=True)
    adjust = (F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue)
    for op in p[augment.ORDER]:
        img = adjust[int(op)](img, p[augment.BRIGHT + int(op)])
    if p[augment.FLIP]:
        img = F.hflip(img)
    if p[augment.GRAY]:
        img = F.rgb_to_grayscale(img, num_output_channels=3)
    return norm(F.to_tensor(img))
