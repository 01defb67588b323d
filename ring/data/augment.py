"""The paper's pretraining views drawn on the training device, in batches (``augment: device``).

:func:`ring.data.datasets.pretrain_view` makes each view on the CPU with PIL, one sample at a time, in
the loader's workers.  Here the loader's workers only *draw the parameters* of each view, with
torchvision's own ``get_params`` of the same transforms, in the same order, from the same per-sample
generator seeded by ``(seed, epoch, index)`` (:class:`ring.data.datasets.Views`): a view's parameters are
therefore exactly the PIL path's, bit for bit, on any number of workers and after any resume.  The
pixels are then made on the device for the whole batch at once (:func:`apply`) from uint8 images
that live there (in-memory datasets, :func:`device_images`) or that were just decoded there
(ImageNet's JPEGs, :func:`decode_jpegs`):

* resize to ``resize x resize`` when the images are not that size, and the random resized crop of
  every sample: PIL's bilinear resampling (a triangle filter, widened when shrinking) written as
  per-sample B x out x in weight matrices, applied by two batched matmuls (ring.data.bilinear);
* colour jitter with per-sample factors and per-sample order of brightness, contrast, saturation and
  hue (PIL's formulas: blends with black, the mean grey level and the grey image; hue in PIL's uint8
  HSV, through two lookup tables: ring.data.hsv), run as the same six slots for every sample whatever its order
  (``_SCHEDULE``), so that the batch never splits by op;
* horizontal flip, grayscale (PIL's ITU-R 601-2 luma), normalisation.

A view batch costs the same few dozen torch calls whatever its size and parameters, and none of them
waits for the device (``tests/data/test_augment.py`` holds them to a budget): on a GPU the host launching
work, not the device, would otherwise bound the views.  Compiled (``compile: auto`` on CUDA, see
:class:`DeviceViews`), the elementwise ones fuse into a few kernels beside the matmuls.

Each step rounds to the 256 levels of a uint8 image, as PIL does between its operations.  What
differs from PIL: float instead of PIL's fixed-point filter weights (a rounding tie can go the
other way), and the hue rotation (PIL's C converts between RGB and HSV in its own arithmetic; the
tables hold this module's float rendering of it).  ``tests/data/test_augment.py`` bounds the difference.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
from torchvision import transforms as T

from ring.data import AUGMENT_PLACES, bilinear, hsv
from ring.data.datasets import DataViews, Views

# Layout of one view's parameter vector (float64: crop boxes and factors exactly as torchvision drew them).
TOP, LEFT, HEIGHT, WIDTH, FLIP, GRAY, BRIGHT, CONTRAST, SAT, HUE = range(10)
ORDER = slice(10, 14)
N_PARAMS = 14

JITTER = 0.4  # the paper's colour jitter strength (brightness, contrast, saturation, hue)
FLIP_P = 0.5
GRAY_P = 0.2
LUMA = (0.299, 0.587, 0.114)  # PIL's convert("L") weights (ITU-R 601-2)
JITTER_OPS = ("brightness", "contrast", "saturation", "hue")  # ColorJitter's fn_idx numbering of its ops


AUGMENT = AUGMENT_PLACES  # declared torch-free in ring.data (the plan's checks read it there)


def resolve(augment: str, device: torch.device) -> str:
    """ "auto" -> "device" on CUDA, "cpu" elsewhere.  On this project's CPU
    (ring/resources/figures/throughput_*-cpu.json, 32-px views) training images/s were the same with either path
    within the machine's noise (device ahead for IR and LA, PIL for MoCo and CMC, by 3-12%): a CPU step dwarfs its
    views, so CPUs keep today's path.  On a GPU the loader's workers are the bottleneck the device path removes."""
    if augment not in AUGMENT:
        raise ValueError(f"Unknown augment {augment!r}; choose auto, cpu, device or dali.")
    if augment == "auto":
        return "device" if device.type == "cuda" else "cpu"
    return augment


class ViewParams:
    """A ``transform`` for :class:`ring.data.datasets.Views` that returns a view's parameters instead of its pixels.

    The draws are those of ``pretrain_view``'s transforms in their order: RandomResizedCrop's
    ``get_params`` on a ``resize x resize`` image, ColorJitter's ``get_params``, then the flip's and
    the grayscale's ``torch.rand(1)``.  The image is not read (it may be ``None``, or JPEG bytes).
    """

    def __init__(self, resize: int, crop_scale_min: float):
        self.crop = T.RandomResizedCrop(resize, scale=(crop_scale_min, 1.0))
        self.jitter = T.ColorJitter(JITTER, JITTER, JITTER, JITTER)
        # Zero-sized storage with the shape get_params reads (C, H, W).
        self.shape = torch.empty(1, 1, 1).expand(3, resize, resize)

    def __call__(self, _img) -> torch.Tensor:
        i, j, h, w = T.RandomResizedCrop.get_params(self.shape, self.crop.scale, self.crop.ratio)
        order, b, c, s, hue = T.ColorJitter.get_params(
            self.jitter.brightness, self.jitter.contrast, self.jitter.saturation, self.jitter.hue
        )
        flip = torch.rand(1) < FLIP_P
        gray = torch.rand(1) < GRAY_P
        return torch.tensor([i, j, h, w, float(flip), float(gray), b, c, s, hue, *order.tolist()], dtype=torch.float64)


def device_images(images, device: torch.device) -> torch.Tensor:
    """A decoded uint8 array (N x H x W grey, N x H x W x 3 or N x 3 x H x W) as one N x C x H x W tensor on
    ``device``."""
    x = torch.as_tensor(images)
    if x.dtype != torch.uint8:
        raise ValueError(f"In-memory images must be uint8, not {x.dtype}; use augment: cpu for this dataset.")
    if x.ndim == 3:
        x = x[:, None]
    elif x.ndim == 4 and x.shape[-1] in (1, 3) and x.shape[1] not in (1, 3):
        x = x.permute(0, 3, 1, 2)
    return x.contiguous().to(device)


fallback_batches = 0  # batches decode_jpegs decoded one image at a time on the CPU (benchmarks report it)


def decode_jpegs(data: list[torch.Tensor], device: torch.device, resize: int) -> torch.Tensor:
    """JPEG files' bytes -> one uint8 B x 3 x resize x resize tensor, decoded on ``device`` (batched on CUDA)."""
    from torchvision.io import ImageReadMode, decode_image, decode_jpeg

    if device.type == "cuda":
        # torchvision's batched nvJPEG decode does not order itself after the kernels already queued on the
        # current stream: on an H200 (torch 2.11, torchvision 0.26) the views of the batch before were read as
        # garbage (a device-side assert in the hue table's take) unless this stream had finished first; with
        # the wait, 4,440 views/s (ring/resources/figures/jpeg_decode-NVIDIA_H200.json).
        torch.cuda.current_stream(device).synchronize()
    try:
        images = decode_jpeg(data, mode=ImageReadMode.RGB, device=device)
    except RuntimeError:
        # A file the batched decoder refuses (ImageNet holds a few CMYK JPEGs and a PNG named .JPEG):
        # each image through torchvision's general CPU decoder instead, this batch only.
        global fallback_batches
        fallback_batches += 1
        images = [decode_image(d, mode=ImageReadMode.RGB).to(device) for d in data]
    return bilinear.resize_each(images, resize)


# Colour jitter.  ColorJitter applies its four ops in an order drawn per sample, and a batch cannot run
# "each sample's op k" without splitting by op (a gather, a host-side count and a scatter per group).  Every
# sample runs the same six slots instead: blend, hue, blend, blend, hue, blend.  A blend slot blends the image
# with black (brightness), with its grey image's mean level (contrast), with its grey image (saturation), or
# leaves it as it is (factor 1); a hue slot rotates the hue or leaves the image as it is; per-sample tensors
# choose.  Every order fits in the six slots.  For hue at position h of the order: the order's position each
# blend slot runs (None: unchanged), and whether each hue slot rotates.
_SCHEDULE = {
    0: ((None, 1, 2, 3), (True, False)),
    1: ((0, 2, 3, None), (True, False)),
    2: ((0, 1, None, 3), (False, True)),
    3: ((0, 1, 2, None), (False, True)),
}
# The per-sample tensors come from one gather of the columns [params | 0, 1, LUMA] by the row of _plan() of the
# sample's order, split into these pieces: crop start (top, left) and length (height, width); the flip of
# each axis (y: never); gray; the hue factor; per blend slot the grey weights (0 for black), "contrast?"
# and the factor; per hue slot "rotate?".
_ZERO, _ONE, _LUMA_COLUMNS = N_PARAMS, N_PARAMS + 1, [N_PARAMS + 2, N_PARAMS + 3, N_PARAMS + 4]
_PIECES = (2, 2, 2, 1, 1) + (3, 1, 1) * 4 + (1, 1)


def _plan_row(order: list[int]) -> list[int]:
    row = [TOP, LEFT, HEIGHT, WIDTH, _ZERO, FLIP, GRAY, HUE]
    positions, rotates = _SCHEDULE[order.index(3)]
    for position in positions:
        op = None if position is None else order[position]  # ColorJitter's numbering: see JITTER_OPS
        row += _LUMA_COLUMNS if op in (1, 2) else [_ZERO] * 3
        row += [_ONE if op == 1 else _ZERO, _ONE if op is None else BRIGHT + op]
    return row + [_ONE if rotate else _ZERO for rotate in rotates]


def _plan() -> list[list[int]]:
    """Rows numbered by the order read as a base-4 number; numbers that are no permutation never occur."""
    orders = [[n // 4 ** (3 - k) % 4 for k in range(4)] for n in range(4**4)]
    return [_plan_row(order if sorted(order) == [0, 1, 2, 3] else [0, 1, 2, 3]) for order in orders]


class _Constants(NamedTuple):
    order_number: torch.Tensor  # N_PARAMS: p @ order_number is the order as a base-4 number (exact: small integers)
    extra_columns: torch.Tensor  # 1 x 5: 0, 1, LUMA
    plan: torch.Tensor  # 256 x sum(_PIECES), long
    luma: torch.Tensor  # 1 x 3 x 1 x 1
    colour_number: torch.Tensor  # 1 x 3 x 1 x 1: 65536, 256, 1
    channels: torch.Tensor  # 1 x 3 x 1 x 1, long: 0, 1, 2
    rgb_to_hsv: torch.Tensor  # see hsv.hue_tables (flat)
    hsv_to_rgb: torch.Tensor


@functools.cache
def _constants(device: torch.device) -> _Constants:
    """What apply reads besides the batch, made once per device."""
    order_number = torch.zeros(N_PARAMS)
    order_number[ORDER] = torch.tensor([64.0, 16.0, 4.0, 1.0])
    channel = (1, 3, 1, 1)
    return _Constants(
        order_number.to(device),
        torch.tensor([[0.0, 1.0, *LUMA]], device=device),
        torch.tensor(_plan(), device=device),
        torch.tensor(LUMA, device=device).view(channel),
        torch.tensor([65536.0, 256.0, 1.0], device=device).view(channel),
        torch.arange(3, device=device).view(channel),
        *hsv.hue_tables(device),
    )


@functools.lru_cache(maxsize=8)
def _extra_columns(batch: int, device: torch.device) -> torch.Tensor:
    return _constants(device).extra_columns.expand(batch, -1)  # a view, kept: the budget counts every call


@functools.lru_cache(maxsize=8)
def normalisation(device: torch.device, mean: tuple, std: tuple) -> tuple[torch.Tensor, torch.Tensor]:
    """(-mean / std, 1 / std) for 0..255 levels: (x - mean) / std as one multiply-add."""
    m, s = (torch.tensor(v, device=device, dtype=torch.float32).view(1, 3, 1, 1) * 255.0 for v in (mean, std))
    return -m / s, 1.0 / s


def _luma(x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """PIL's convert("L"), rounded (the weights are non-negative and sum to 1: no clamp needed)."""
    return (x * weights).sum(1, keepdim=True).round_()


def _blend(x: torch.Tensor, grey_weights: torch.Tensor, contrast: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """A blend slot: PIL's Image.blend(other, x, factor) per sample, clipped to the uint8 range and truncated as
    PIL's C does.  ``other``: the grey image (``grey_weights`` LUMA), its mean level rounded to an integer (and
    ``contrast`` 1), or black (``grey_weights`` 0: brightness, and no change with ``factor`` 1)."""
    grey = _luma(x, grey_weights)
    mean = grey.mean(dim=(1, 2, 3), keepdim=True).round_()
    other = torch.lerp(grey, mean, contrast)  # a weight of exactly 0 or 1 selects exactly
    return torch.floor((other + factor * (x - other)).clamp_(0, 255))


def _rotate_hue(x: torch.Tensor, c: _Constants, shift: torch.Tensor, rotate: torch.Tensor) -> torch.Tensor:
    """A hue slot: PIL's hue rotation where ``rotate`` is 1, through :func:`ring.data.hsv.hue_tables`; ``shift``:
    B x 3 x 1 x 1, ``3 * int(factor * 255) + channel``."""
    colour = (x * c.colour_number).sum(1, keepdim=True, dtype=torch.long)  # exact: integers below 2^24
    rotated = torch.take(c.hsv_to_rgb, torch.take(c.rgb_to_hsv, colour) + shift)
    return torch.lerp(x, rotated.float(), rotate)


class _Tables(NamedTuple):
    """What a view batch reads besides its images and parameters, made once per device and shapes.

    Passed to :func:`_views` as tensors, so that a compiled :func:`_views` holds no construction of its own:
    traced into the graph, the lookups' constructions (the hue tables' 160 MB among them) ran in every call."""

    constants: _Constants
    grid: bilinear.Grid  # the crop's: bilinear.grid(crop, resize)
    extra_columns: torch.Tensor  # B x 5: _extra_columns
    resize: tuple[torch.Tensor, torch.Tensor] | None  # the whole images' resize weights (rows, columns), or None
    shift: torch.Tensor  # the normalisation's -mean / std and 1 / std
    scale: torch.Tensor


@functools.lru_cache(maxsize=8)
def _tables(
    device: torch.device, batch: int, size: tuple[int, int], resize: int, crop: int, mean: tuple, std: tuple
) -> _Tables:
    resized = None if size == (resize, resize) else tuple(bilinear.resize_weights(n, resize, device) for n in size)
    return _Tables(
        _constants(device),
        bilinear.grid(crop, resize, device),
        _extra_columns(batch, device),
        resized,
        *normalisation(device, mean, std),
    )


def _views(images: torch.Tensor, params: torch.Tensor, t: _Tables) -> torch.Tensor:
    """:func:`apply` on the images' device, every table passed in (compiled as it is: see :func:`_compiled_views`)."""
    c = t.constants
    x = images.float()
    if x.shape[1] == 1:  # grey images are converted to RGB first, as ArrayImages does
        x = x.expand(-1, 3, -1, -1)
    if t.resize is not None:
        x = bilinear.resample(x, *t.resize)
    p = params.float()
    columns = torch.cat((p, t.extra_columns), 1).gather(1, c.plan[(p @ c.order_number).long()])
    start, length, flip, gray, hue, *slots = columns.view(*columns.shape, 1, 1).split(_PIECES, 1)
    # The flip mirrors the x-axis weights' rows.  Flipping before the jitter is flipping after it: the jitter
    # works per pixel, and the contrast's mean level is a sum of integers, exact in any order (below 2^24
    # for crops up to 256 pixels).
    x = bilinear.crop(x, start, length, flip, t.grid)
    shift = torch.add(c.channels, (hue * 255.0).long(), alpha=3)  # int(factor * 255): PIL's path truncates it
    blends, rotates = [slots[k : k + 3] for k in range(0, 12, 3)], slots[12:]
    x = _blend(x, *blends[0])
    x = _rotate_hue(x, c, shift, rotates[0])
    x = _blend(_blend(x, *blends[1]), *blends[2])
    x = _rotate_hue(x, c, shift, rotates[1])
    x = _blend(x, *blends[3])
    x = torch.lerp(x, _luma(x, c.luma), gray)
    return torch.addcmul(t.shift, t.scale, x)


@functools.cache
def _compiled_views():
    """:func:`_views` under torch.compile, made on first use (importing this module compiles nothing).

    Shapes are static: a run's batches all have its batch size, image size and crop, and each graph is then
    specialised to them (a batch of another shape compiles its own, up to dynamo's recompile limit)."""
    return torch.compile(_views, dynamic=False)


def apply(
    images: torch.Tensor, params: torch.Tensor, resize: int, crop: int, mean, std, compiled: bool = False
) -> torch.Tensor:
    """Views of uint8 ``images`` (B x C x H x W, C = 1 or 3) with ``params`` (B x N_PARAMS from :class:`ViewParams`).

    Returns normalised float32 B x 3 x crop x crop views on the images' device.  The same torch calls whatever
    the batch and its parameters, and none waits for the device (tests/data/test_augment.py holds them to a budget).
    ``compiled``: fused by torch.compile into a few kernels (see :class:`DeviceViews`), the same pixels.
    """
    device = images.device
    tables = _tables(device, len(params), tuple(images.shape[-2:]), resize, crop, tuple(mean), tuple(std))
    p = params.to(device, non_blocking=True)  # pinned by the loader: no wait for the step in flight
    return (_compiled_views() if compiled else _views)(images, p, tables)


class DeviceViews:
    """Turns a loader batch of view parameters into the views, on the device that holds the images.

    ``images``: the whole in-memory dataset as uint8 N x C x H x W on the device
    (:func:`device_images`), or ``None`` when each batch brings its JPEG bytes (:class:`JpegViews`).

    ``compiled`` (``ring.engine.encoder.resolve_compile``: ``compile: auto`` on CUDA) runs :func:`apply` compiled:
    about 100 calls a view batch become 10 (5 fused kernels, 4 matmuls and the parameters' copy, counted on the
    CPU by tests/data/test_augment.py), the same pixels.  A JPEG batch's resize to ``resize`` stays eager: each image
    has its own size (a graph each), and its five calls (conversion, two matmuls, two roundings) would stay five.
    """

    def __init__(
        self,
        images: torch.Tensor | None,
        device: torch.device,
        resize: int,
        crop: int,
        mean,
        std,
        compiled: bool = False,
    ):
        self.images, self.device, self.compiled = images, torch.device(device), compiled
        self.resize, self.crop, self.mean, self.std = resize, crop, tuple(mean), tuple(std)
        # The constants and hue tables now, not in the first batch; keyed as apply looks them up, by the
        # device its tensors report ("cuda" -> "cuda:0").
        _constants(torch.empty(0, device=self.device).device)

    def __call__(
        self, params: list[torch.Tensor], index: torch.Tensor, data: tuple[torch.Tensor, torch.Tensor] | None = None
    ):
        """``data``: a batch's JPEG files as :func:`collate_jpegs` packs them, a prepared store's decoded uint8
        B x H x W x 3 batch (:class:`ring.data.views.StoreViews`, pinned by the loader), or None for in-memory
        images."""
        if isinstance(data, torch.Tensor):
            # Already at the store's size: one asynchronous copy, no resize, no wait on the training stream.
            images = data.to(self.device, non_blocking=True).permute(0, 3, 1, 2)
        elif data is not None:
            images = decode_jpegs(unpack_jpegs(data), self.device, self.resize)
        else:
            images = self.images[index.to(self.images.device, non_blocking=True)]
        return [apply(images, p, self.resize, self.crop, self.mean, self.std, self.compiled) for p in params]


class Labels(torch.utils.data.Dataset):
    """The labels of an in-memory dataset whose images already live on the device: the image is ``None``."""

    def __init__(self, targets):
        self.targets = [int(t) for t in targets]

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i):
        return None, self.targets[i]


class JpegViews(DataViews):
    """``(jpeg_bytes, params_1, ..., params_n, label, index)`` of image files: the workers read bytes, nothing else.

    The parameters come from :class:`ViewParams` under the same per-sample seeding as
    :class:`ring.data.datasets.Views` (a pure function of (seed, epoch, index)), or from a batch's draw
    (ring.data.view_draws).
    """

    def __init__(self, samples: list[tuple[str, int]], params, n_views: int = 1, seed: int = 0):
        self.samples = samples
        self.views = Views(Labels([t for _, t in samples]), params, n_views, seed)

    def data(self, index: int) -> torch.Tensor:
        from torchvision.io import read_file

        return read_file(self.samples[index][0])


def collate_jpegs(items):
    """A batch's files packed as ``(bytes, lengths)``: one flat uint8 tensor and each file's length
    (:func:`unpack_jpegs` splits it); the rest is stacked as usual.

    Packed because a loader worker hands every tensor of a batch to the main process through its own
    shared-memory file descriptor: a list of 256 files is 256 descriptors per batch, times the
    batches in flight (8 workers x prefetch 2), which exceeds the usual limit of 1,024 open files and
    kills the workers with EBADF (as it did on the H100 benchmark).  Packed, a batch is two.
    """
    data = [item[0] for item in items]
    packed = (torch.cat(data), torch.tensor([len(d) for d in data], dtype=torch.int64))
    return (packed, *torch.utils.data.default_collate([item[1:] for item in items]))


def unpack_jpegs(packed: tuple[torch.Tensor, torch.Tensor]) -> list[torch.Tensor]:
    """The files of :func:`collate_jpegs`' ``(bytes, lengths)``: views into the flat tensor, no copy."""
    flat, lengths = packed
    return list(torch.split(flat, lengths.tolist()))


def in_memory(dataset) -> tuple[object, list[int]] | None:
    """The decoded uint8 images and labels of a dataset that holds them in memory, or None (image folders)."""
    for images, labels in (("images", "targets"), ("data", "targets"), ("data", "labels")):
        if hasattr(dataset, images) and hasattr(dataset, labels):
            return getattr(dataset, images), [int(t) for t in getattr(dataset, labels)]
    return None
