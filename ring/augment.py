"""The paper's pretraining views drawn on the training device, in batches (``augment: device``).

:func:`ring.datasets.pretrain_view` makes each view on the CPU with PIL, one sample at a time, in
the loader's workers.  Here the loader's workers only *draw the parameters* of each view, with
torchvision's own ``get_params`` of the same transforms, in the same order, from the same per-sample
generator seeded by ``(seed, epoch, index)`` (:class:`ring.datasets.Views`): a view's parameters are
therefore exactly the PIL path's, bit for bit, on any number of workers and after any resume.  The
pixels are then made on the device for the whole batch at once (:func:`apply`) from uint8 images
that live there (in-memory datasets, :func:`device_images`) or that were just decoded there
(ImageNet's JPEGs, :func:`decode_jpegs`):

* resize to ``resize x resize`` when the images are not that size, and the random resized crop of
  every sample: PIL's bilinear resampling (a triangle filter, widened when shrinking) written as
  per-sample B x out x in weight matrices, applied by two batched matmuls;
* colour jitter with per-sample factors and per-sample order of brightness, contrast, saturation and
  hue (PIL's formulas: blends with black, the mean grey level and the grey image; hue in HSV);
* horizontal flip, grayscale (PIL's ITU-R 601-2 luma), normalisation.

Each step rounds to the 256 levels of a uint8 image, as PIL does between its operations.  What
differs from PIL: float instead of PIL's fixed-point filter weights (a rounding tie can go the
other way), and the hue rotation (PIL rotates a uint8 HSV image, here a float one).  ``tests/test_augment.py`` bounds the difference.
"""

from __future__ import annotations

import torch
from torchvision import transforms as T

# Layout of one view's parameter vector (float64: crop boxes and factors exactly as torchvision drew them).
TOP, LEFT, HEIGHT, WIDTH, FLIP, GRAY, BRIGHT, CONTRAST, SAT, HUE = range(10)
ORDER = slice(10, 14)
N_PARAMS = 14

JITTER = 0.4  # the paper's colour jitter strength (brightness, contrast, saturation, hue)
FLIP_P = 0.5
GRAY_P = 0.2
LUMA = (0.299, 0.587, 0.114)  # PIL's convert("L") weights (ITU-R 601-2)


AUGMENT = ("auto", "cpu", "device")  # ring.checks.AUGMENT_PLACES (torch-free) lists the same; tests keep them equal


def resolve(augment: str, device: torch.device) -> str:
    """"auto" -> "device" on CUDA, "cpu" elsewhere.  On this project's CPU (benchmarks/results/throughput_*-cpu.json,
    32-px views) training images/s were the same with either path within the machine's noise (device ahead for IR
    and LA, PIL for MoCo and CMC, by 3-12%): a CPU step dwarfs its views, so CPUs keep today's path.  On a GPU the loader's
    workers are the bottleneck the device path removes."""
    if augment not in AUGMENT:
        raise ValueError(f"Unknown augment {augment!r}; choose auto, cpu or device.")
    if augment == "auto":
        return "device" if device.type == "cuda" else "cpu"
    return augment


class ViewParams:
    """A ``transform`` for :class:`ring.datasets.Views` that returns a view's parameters instead of its pixels.

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
        order, b, c, s, hue = T.ColorJitter.get_params(self.jitter.brightness, self.jitter.contrast,
                                                       self.jitter.saturation, self.jitter.hue)
        flip = torch.rand(1) < FLIP_P
        gray = torch.rand(1) < GRAY_P
        return torch.tensor([i, j, h, w, float(flip), float(gray), b, c, s, hue, *order.tolist()], dtype=torch.float64)


def device_images(images, device: torch.device) -> torch.Tensor:
    """A decoded uint8 array (N x H x W grey, N x H x W x 3 or N x 3 x H x W) as one N x C x H x W tensor on ``device``."""
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

    try:
        images = decode_jpeg(data, mode=ImageReadMode.RGB, device=device)
    except RuntimeError:
        # A file the batched decoder refuses (ImageNet holds a few CMYK JPEGs and a PNG named .JPEG):
        # each image through torchvision's general CPU decoder instead, this batch only.
        global fallback_batches
        fallback_batches += 1
        images = [decode_image(d, mode=ImageReadMode.RGB).to(device) for d in data]
    # Sizes differ per image: each is resized to the common size PIL's Resize((resize, resize)) gives.
    return torch.stack([_resize(img[None].float(), resize)[0] for img in images])


def _weights(start: torch.Tensor, length: torch.Tensor, out: int, size: int) -> torch.Tensor:
    """PIL's bilinear resampling of the pixels [start, start + length) of an axis of ``size`` to ``out`` pixels.

    B x out x size matrices: a triangle filter centred on each output pixel's centre, widened by the
    reduction factor when shrinking (PIL's antialiasing), restricted to the crop and normalised.
    """
    scale = (length / out).view(-1, 1, 1)
    support = scale.clamp_min(1.0)
    centre = (torch.arange(out, device=start.device, dtype=torch.float32).view(1, -1, 1) + 0.5) * scale
    u = torch.arange(size, device=start.device, dtype=torch.float32).view(1, 1, -1) - start.view(-1, 1, 1)
    w = (1.0 - ((u + 0.5 - centre) / support).abs()).clamp_min(0.0)
    w = w * ((u >= 0) & (u < length.view(-1, 1, 1)))
    return w / w.sum(-1, keepdim=True)


def resample(x: torch.Tensor, top, left, height, width, out_h: int, out_w: int) -> torch.Tensor:
    """Crop box (top, left, height, width) of every image of ``x`` (B x C x H x W, 0..255) resized as PIL does.

    Two passes, horizontal then vertical, each rounded to uint8 levels (PIL's order and storage).
    """
    wx = _weights(left, width, out_w, x.shape[-1])
    wy = _weights(top, height, out_h, x.shape[-2])
    x = _quantize(torch.matmul(x, wx.transpose(1, 2)[:, None]))
    return _quantize(torch.matmul(wy[:, None], x))


def _resize(x: torch.Tensor, size: int) -> torch.Tensor:
    """PIL's Resize((size, size)) of whole images."""
    b, _, h, w = x.shape
    full = lambda n: torch.full((b,), float(n), device=x.device)  # noqa: E731
    return resample(x, full(0), full(0), full(h), full(w), size, size)


def _quantize(x: torch.Tensor) -> torch.Tensor:
    """Round to uint8 levels (values in 0..255), as PIL stores every intermediate image."""
    return x.round_().clamp_(0, 255)


def _blend(x: torch.Tensor, other: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """PIL's Image.blend(other, x, factor) per sample: clipped to the uint8 range and truncated, as PIL's C does."""
    return torch.floor((other + factor.view(-1, 1, 1, 1) * (x - other)).clamp_(0, 255))


def _luma(x: torch.Tensor) -> torch.Tensor:
    w = torch.tensor(LUMA, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return _quantize((x * w).sum(1, keepdim=True))


def _brightness(x, f):
    return _blend(x, torch.zeros_like(x), f)


def _contrast(x, f):
    # PIL: a solid image of the grey image's mean level, rounded to an integer.
    mean = _luma(x).mean(dim=(1, 2, 3), keepdim=True).round()
    return _blend(x, mean.expand_as(x), f)


def _saturation(x, f):
    return _blend(x, _luma(x).expand_as(x), f)


def _hue(x, f):
    """PIL's hue rotation as torchvision's PIL path does it: RGB -> PIL's uint8 HSV, the hue channel
    shifted by ``int(f * 255)`` modulo 256, back to RGB, in PIL's arithmetic (libImaging/Convert.c)."""
    r, g, b = x.unbind(1)
    maxc, minc = x.amax(1), x.amin(1)
    cr = (maxc - minc).clamp_min(1.0)
    rc, gc, bc = (maxc - r) / cr, (maxc - g) / cr, (maxc - b) / cr
    h = torch.where(r == maxc, bc - gc, torch.where(g == maxc, 2.0 + rc - bc, 4.0 + gc - rc))
    h = torch.remainder(h / 6.0 + 1.0, 1.0)
    grey = maxc == minc
    zero = torch.zeros_like(h)
    uh = torch.where(grey, zero, torch.floor(h * 255.0).clamp(0, 255))
    us = torch.where(grey, zero, torch.floor((maxc - minc) / maxc.clamp_min(1.0) * 255.0).clamp(0, 255))
    uh = torch.remainder(uh + torch.remainder(torch.trunc(f * 255.0), 256.0).view(-1, 1, 1), 256.0)
    i = torch.floor(uh * 6.0 / 255.0)
    frac = uh * 6.0 / 255.0 - i
    fs = us / 255.0
    v = maxc
    p = torch.floor(v * (1.0 - fs) + 0.5).clamp(0, 255)
    q = torch.floor(v * (1.0 - fs * frac) + 0.5).clamp(0, 255)
    t = torch.floor(v * (1.0 - fs * (1.0 - frac)) + 0.5).clamp(0, 255)
    table = torch.stack([torch.stack(c, 1) for c in ((v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q))])
    # table: 6 x B x 3 x H x W; pick the sextant of each pixel.
    rgb = table.gather(0, (i.long() % 6)[None, :, None].expand(1, -1, 3, -1, -1)).squeeze(0)
    return torch.where((us == 0)[:, None], v[:, None].expand_as(x), rgb)


JITTER_OPS = (_brightness, _contrast, _saturation, _hue)  # ColorJitter's fn_idx numbering


def apply(images: torch.Tensor, params: torch.Tensor, resize: int, crop: int, mean, std) -> torch.Tensor:
    """Views of uint8 ``images`` (B x C x H x W, C = 1 or 3) with ``params`` (B x N_PARAMS from :class:`ViewParams`).

    Returns normalised float32 B x 3 x crop x crop views on the images' device.
    """
    device = images.device
    x = images.float()
    if x.shape[1] == 1:  # grey images are converted to RGB first, as ArrayImages does
        x = x.expand(-1, 3, -1, -1).contiguous()
    if tuple(x.shape[-2:]) != (resize, resize):
        x = _resize(x, resize)
    p = params.to(device=device, dtype=torch.float32)
    x = resample(x, p[:, TOP], p[:, LEFT], p[:, HEIGHT], p[:, WIDTH], crop, crop)
    # The order is read from the CPU copy of the parameters: no device synchronisation per op.
    order = params[:, ORDER].cpu().long()
    factors = p[:, BRIGHT:HUE + 1]
    for k in range(4):
        for op_index, op in enumerate(JITTER_OPS):
            chosen = (order[:, k] == op_index).nonzero().squeeze(1)
            if len(chosen):
                chosen = chosen.to(device)
                x[chosen] = op(x[chosen], factors[chosen, op_index])
    x = torch.where(p[:, FLIP].bool().view(-1, 1, 1, 1), x.flip(-1), x)
    x = torch.where(p[:, GRAY].bool().view(-1, 1, 1, 1), _luma(x).expand_as(x), x)
    m = torch.tensor(mean, device=device, dtype=torch.float32).view(1, 3, 1, 1) * 255.0
    s = torch.tensor(std, device=device, dtype=torch.float32).view(1, 3, 1, 1) * 255.0
    return (x - m) / s


class DeviceViews:
    """Turns a loader batch of view parameters into the views, on the device that holds the images.

    ``images``: the whole in-memory dataset as uint8 N x C x H x W on the device
    (:func:`device_images`), or ``None`` when each batch brings its JPEG bytes (:class:`JpegViews`).
    """

    def __init__(self, images: torch.Tensor | None, device: torch.device, resize: int, crop: int, mean, std):
        self.images, self.device = images, torch.device(device)
        self.resize, self.crop, self.mean, self.std = resize, crop, tuple(mean), tuple(std)

    def __call__(self, params: list[torch.Tensor], index: torch.Tensor,
                 data: tuple[torch.Tensor, torch.Tensor] | None = None):
        """``data``: a batch's JPEG files as :func:`collate_jpegs` packs them, or None for in-memory images."""
        if data is not None:
            images = decode_jpegs(unpack_jpegs(data), self.device, self.resize)
        else:
            images = self.images[index.to(self.images.device, non_blocking=True)]
        return [apply(images, p, self.resize, self.crop, self.mean, self.std) for p in params]


class Labels(torch.utils.data.Dataset):
    """The labels of an in-memory dataset whose images already live on the device: the image is ``None``."""

    def __init__(self, targets):
        self.targets = [int(t) for t in targets]

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i):
        return None, self.targets[i]


class JpegViews(torch.utils.data.Dataset):
    """``(jpeg_bytes, params_1, ..., params_n, label, index)`` of image files: the workers read bytes, nothing else.

    The parameters come from :class:`ViewParams` under the same per-sample seeding as
    :class:`ring.datasets.Views` (a pure function of (seed, epoch, index)).
    """

    def __init__(self, samples: list[tuple[str, int]], params: ViewParams, n_views: int = 1, seed: int = 0):
        from ring.datasets import Views

        self.samples = samples
        self.views = Views(Labels([t for _, t in samples]), params, n_views, seed)

    def set_epoch(self, epoch: int) -> None:
        self.views.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int):
        from torchvision.io import read_file

        return (read_file(self.samples[index][0]), *self.views[index])


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
