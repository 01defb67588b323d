"""The paper's pretraining views of JPEG image folders made by NVIDIA DALI (an optional extra: ``ring-bench[dali]``).

One DALI pipeline per stage reads a batch's files (``fn.io.file.read`` in DALI's threads), decodes
each view with ``fn.decoders.image_random_crop`` -- nvJPEG on the "mixed" device, on the hardware
JPEG decoder where the GPU has one (A100, H100), or DALI's CPU decoder -- fused with the random
resized crop (only the crop's region is decoded), then ``fn.resize`` to ``crop x crop``,
``fn.color_twist`` (colour jitter and grayscale) and ``fn.crop_mirror_normalize`` (flip,
normalisation, float32 NCHW).  :class:`DaliViews` is the entry point: called with a batch's file
indices, the epoch and the step, it returns ``n_views`` B x 3 x crop x crop tensors on the device.

Order, determinism, resume
--------------------------
DALI reads nothing on its own: the files come in through ``external_source`` in *our* batch order
(:func:`ring.engine.runtime.epoch_batches`, a pure function of (seed, epoch)), so a resumed epoch sees the
same batches from its ``step_in_epoch`` on.  Of each view:

* the colour jitter factors, the flip and the grayscale draw are a pure function of
  ``(seed, epoch, index, view)`` (a counter-based hash, :func:`draws`, computed on the host for the
  whole batch at once): the same for an image whatever batch, step, worker count or world size;
* the crop box is drawn by DALI's own Philox generator inside ``image_random_crop``, whose state is
  given per batch (DALI derives each sample's stream from it and the sample's place in the batch),
  hashed from ``(seed, epoch, step, view, rank)`` -- a pure function of the batch, not of the image:
  a resume at step ``s`` of an epoch reproduces step ``s``'s crops exactly (``tests/data/test_dali.py``),
  and another world size, which splits the batches differently, draws other crops.

The per-batch state goes through ``_random_state``, the argument input that DALI's dynamic mode
uses for its ``rng=``: pipeline mode does not document it (hence the exact pin in
``envs/requirements-dali.txt``), and the tests fail loudly if a DALI release stops honouring it.

What differs from ``augment: cpu`` / ``augment: device`` (:func:`ring.data.datasets.pretrain_view`)
----------------------------------------------------------------------------------------------
* The crop is RandomResizedCrop of the *original* image (area fraction uniform in
  ``[crop_scale_min, 1]``, aspect ratio log-uniform in [3/4, 4/3] in the original's pixels, 10
  attempts, then a centre crop), not of the ``Resize((resize, resize))`` squashed image: the
  squash is skipped (``resize`` is unused), so an image's aspect ratio is kept, and the crop is
  resampled once (DALI's antialiased linear filter) instead of twice (PIL's bilinear).
* Colour jitter in a fixed order (DALI's colour twist is one 3x3 matrix in YIQ plus an offset),
  not torchvision's random order per view; brightness, contrast and saturation factors are uniform
  in [0.6, 1.4], the hue shift uniform in [-0.4, 0.4] turns (DALI takes degrees: x 360), as
  torchvision draws them, but DALI's contrast blends with mid-grey (128), not with the image's mean
  grey level, its hue rotates the YIQ chroma plane, not the HSV hue, and it clips once, at the end,
  where PIL clips after each operation.
* Grayscale (p = 0.2) is the colour twist's saturation set to 0: the YIQ luma, PIL's ITU-R 601-2
  weights; applied with the jitter instead of after it, which gives the same image up to clipping
  (brightness and contrast act alike on every channel, and hue does not change the luma).
* Flip (p = 0.5) and normalisation with the dataset's mean and std, as before.
* ``n_views`` (2 for MoCo) independent views of the same image: the file is read once and decoded
  once per view (the decode is fused with each view's own crop).

The existing paths stay the fallback (``augment: cpu`` / ``device``), and the only path on machines
without DALI.
"""

from __future__ import annotations

import importlib
import os

import numpy as np
import torch

from ring.data.augment import FLIP_P, GRAY_P, JITTER  # the laws of augment: device, shared

ASPECT = (3 / 4, 4 / 3)  # RandomResizedCrop's default ratio range, as pretrain_view uses
CROP_ATTEMPTS = 10  # torchvision's RandomResizedCrop tries 10 boxes before its centre-crop fallback

MISSING = (
    "augment: dali needs NVIDIA DALI, which is not installed: pip install 'ring-bench[dali]' "
    "(the nvidia-dali-cuda130 pin of envs/requirements-dali.txt), or choose augment: cpu or device."
)

# The columns of draws(): jitter factors (brightness, contrast, saturation), hue in turns, flip, gray.
BRIGHT, CONTRAST, SAT, HUE, FLIP, GRAY = range(6)
N_DRAWS = 6


class DaliMissing(ImportError):
    """``nvidia.dali`` is not importable (the ``dali`` extra is not installed)."""


def require():
    """The ``nvidia.dali`` modules this path uses, or :class:`DaliMissing` with the one sentence that says what to
    do."""
    try:
        dali = importlib.import_module("nvidia.dali")
        fn = importlib.import_module("nvidia.dali.fn")
        types = importlib.import_module("nvidia.dali.types")
        pytorch = importlib.import_module("nvidia.dali.plugin.pytorch")
    except ImportError as err:
        raise DaliMissing(MISSING) from err
    return dali, fn, types, pytorch


def available() -> bool:
    try:
        require()
    except DaliMissing:
        return False
    return True


_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 arrays (wrapping arithmetic): a bijection that scatters nearby counters."""
    x = x.astype(np.uint64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _hash(*keys) -> np.ndarray:
    """One uint64 per element of the broadcast integer ``keys``, chained so that (a, b) and (b, a) differ."""
    h = np.zeros(np.broadcast_shapes(*(np.shape(k) for k in keys)), dtype=np.uint64)
    for k in keys:
        # Negative seeds are two's-complement wrapped, not refused: any int a config holds is a seed.
        h = _mix(h ^ (np.asarray(k, dtype=np.int64).astype(np.uint64) & _M64))
    return h


def draws(seed: int, epoch: int, index, view: int) -> np.ndarray:
    """B x 6 float64 parameters of view ``view`` of images ``index``, a pure function of (seed, epoch, index, view).

    Columns BRIGHT, CONTRAST, SAT: factors uniform in [1 - 0.4, 1 + 0.4]; HUE: uniform in [-0.4, 0.4]
    turns; FLIP, GRAY: 1.0 with probability 0.5 and 0.2, else 0.0 (ColorJitter(0.4, 0.4, 0.4, 0.4),
    RandomHorizontalFlip(), RandomGrayscale(0.2)).
    """
    index = np.asarray(index, dtype=np.int64).reshape(-1, 1)
    u = (_hash(seed, epoch, view, index, np.arange(N_DRAWS)) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    out = np.empty_like(u)
    out[:, BRIGHT : SAT + 1] = 1.0 - JITTER + 2.0 * JITTER * u[:, BRIGHT : SAT + 1]
    out[:, HUE] = -JITTER + 2.0 * JITTER * u[:, HUE]
    out[:, FLIP] = u[:, FLIP] < FLIP_P
    out[:, GRAY] = u[:, GRAY] < GRAY_P
    return out


def crop_state(seed: int, epoch: int, step: int, view: int, rank: int = 0) -> np.ndarray:
    """The 7 uint32 words of DALI's Philox state for one batch's crops, a pure function of its arguments."""
    # A second domain word keeps these streams apart from draws()' even for equal small integers.
    words = _hash(0x5EED_C209, seed, epoch, step, view, rank, np.arange(4))
    return np.concatenate([words & np.uint64(0xFFFFFFFF), words >> np.uint64(32)]).astype(np.uint32)[:7]


def view_graph(
    fn, types, jpegs, view: int, devices: tuple[str, str], crop: int, crop_scale_min: float, scale, sizes: bool
):
    """One view in DALI's graph: the file's random-area crop decoded (nvJPEG on the "mixed" device of a GPU: the
    ``devices`` of the decoder and of the other ops), resized, colour-twisted, flipped and normalised, each draw fed
    from :func:`draws` (``state{view}``, ``draws{view}``); with ``sizes``, the decoded crop's shape before it."""
    decoder, ops = devices
    state = fn.external_source(name=f"state{view}", dtype=types.UINT32)
    p = fn.external_source(name=f"draws{view}", dtype=types.FLOAT)
    image = fn.decoders.image_random_crop(
        jpegs,
        device=decoder,
        output_type=types.RGB,
        random_area=[crop_scale_min, 1.0],
        random_aspect_ratio=list(ASPECT),
        num_attempts=CROP_ATTEMPTS,
        _random_state=state,
    )
    outputs = [image.shape(device="cpu")] if sizes else []  # the decoded crop's H x W, for the tests of the crop's law
    image = fn.resize(image, device=ops, resize_x=crop, resize_y=crop)
    image = fn.color_twist(image, device=ops, brightness=p[BRIGHT], contrast=p[CONTRAST], saturation=p[SAT], hue=p[HUE])
    normalised = fn.crop_mirror_normalize(
        image,
        device=ops,
        dtype=types.FLOAT,
        output_layout="CHW",
        mean=scale[0],
        std=scale[1],
        mirror=fn.cast(p[FLIP], dtype=types.INT32),
    )
    return [*outputs, normalised]


class DaliViews:
    """``n_views`` views of a batch of image files, made by one DALI pipeline on ``device``.

    ``files``: every image's path, in the dataset's order (``ImageFolder.samples``' paths); a batch
    names its images by index into it.  ``device``: a CUDA device decodes on the "mixed" device
    (nvJPEG, the hardware decoder where there is one) and runs the rest on that GPU; the CPU runs
    DALI's CPU pipeline (``device_id=None``).  ``rank``: this process's rank, whose share of every
    global batch it makes (part of the crop's seed).  ``num_threads``: DALI's CPU threads (file reads,
    and the decode's host side), up to 8 by default.  ``crop_sizes``: also return each view's decoded
    crop shape (the tests of the crop's law).
    """

    def __init__(
        self,
        files,
        device,
        crop: int,
        crop_scale_min: float,
        mean,
        std,
        n_views: int = 1,
        seed: int = 0,
        batch_size: int = 256,
        num_threads: int | None = None,
        rank: int = 0,
        crop_sizes: bool = False,
    ):
        if crop < 1:
            raise ValueError(f"crop must be a positive number of pixels, not {crop}.")
        if not 0.0 < crop_scale_min <= 1.0:
            raise ValueError(f"crop_scale_min must lie in (0, 1], not {crop_scale_min}.")
        if n_views < 1:
            raise ValueError(f"n_views must be at least 1, not {n_views}.")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}.")
        if len(mean) != 3 or len(std) != 3 or min(std) <= 0:
            raise ValueError(f"mean and std must hold 3 channels, std positive; got mean={mean}, std={std}.")
        dali, fn, types, pytorch = require()
        self._feed_ndarray = pytorch.feed_ndarray
        self.device = torch.device(device)
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"augment: dali runs on cuda or cpu devices, not {self.device.type}.")
        self.files = [np.frombuffer(str(f).encode("utf-8"), dtype=np.uint8) for f in files]
        if not self.files:
            raise ValueError("augment: dali was given no image files.")
        self.crop, self.n_views, self.seed, self.rank = crop, n_views, seed, rank
        self.batch_size, self.crop_sizes = batch_size, crop_sizes
        self.pipe = self._pipeline(dali, fn, types, crop_scale_min, mean, std, num_threads)
        self.pipe.build()

    def _pipeline(self, dali, fn, types, crop_scale_min: float, mean, std, num_threads: int | None):
        """DALI's graph of the views (:func:`view_graph`), the files read once for all of them."""
        gpu = self.device.type == "cuda"
        device_id = (
            (self.device.index if self.device.index is not None else torch.cuda.current_device()) if gpu else None
        )
        decoder, ops = ("mixed", "gpu") if gpu else ("cpu", "cpu")
        scale = [255.0 * m for m in mean], [255.0 * s for s in std]

        @dali.pipeline_def(
            batch_size=self.batch_size,
            num_threads=num_threads or min(8, os.cpu_count() or 1),
            device_id=device_id,
            seed=self.seed & 0x7FFFFFFF,
            # Run on demand, one batch per call: the batch fed is the batch returned,
            # so nothing is decoded ahead of a resume or past the epoch's end.
            exec_pipelined=False,
            exec_async=False,
            prefetch_queue_depth=1,
        )
        def graph():
            jpegs = fn.io.file.read(fn.external_source(name="files", dtype=types.UINT8))
            outputs = []
            for v in range(self.n_views):
                outputs += view_graph(
                    fn, types, jpegs, v, (decoder, ops), self.crop, crop_scale_min, scale, self.crop_sizes
                )
            return tuple(outputs)

        return graph()

    def draws(self, index, epoch: int, view: int) -> np.ndarray:
        """:func:`draws` under this pipeline's seed."""
        return draws(self.seed, epoch, index, view)

    def __call__(self, index, epoch: int, step: int) -> list[torch.Tensor]:
        """Views of the images ``index`` (a batch of ``epoch_batches(..., seed, epoch)[step]``, this rank's share).

        Returns ``n_views`` float32 B x 3 x crop x crop tensors on the device (and, built with
        ``crop_sizes=True``, each view's B x 3 (H, W, C) decoded crop shapes before its tensor).
        """
        index = np.asarray(index.cpu() if isinstance(index, torch.Tensor) else index, dtype=np.int64).reshape(-1)
        if not 0 < len(index) <= self.batch_size:
            raise ValueError(
                f"A batch holds 1 to {self.batch_size} images (the pipeline's batch_size), not {len(index)}."
            )
        if index.min() < 0 or index.max() >= len(self.files):
            raise ValueError(
                f"Image indices must lie in [0, {len(self.files)}); this batch has {index.min()}..{index.max()}."
            )
        self.pipe.feed_input("files", [self.files[i] for i in index])
        for v in range(self.n_views):
            p = self.draws(index, epoch, v)
            p[:, SAT] *= 1.0 - p[:, GRAY]  # grayscale: the colour twist's saturation 0 (see the module's docstring)
            p[:, HUE] *= 360.0  # turns -> DALI's degrees
            self.pipe.feed_input(f"draws{v}", p.astype(np.float32))
            # One state per batch (DALI reads the first sample's); fed to every sample to keep the batch uniform.
            state = crop_state(self.seed, epoch, step, v, self.rank)
            self.pipe.feed_input(f"state{v}", np.broadcast_to(state, (len(index), len(state))).copy())
        outputs = self.pipe.run()
        if self.crop_sizes:  # (shapes, view) pairs
            return [
                t
                for i in range(0, len(outputs), 2)
                for t in (torch.from_numpy(np.array(outputs[i].as_tensor())), self._torch(outputs[i + 1]))
            ]
        return [self._torch(out) for out in outputs]

    def _torch(self, batch) -> torch.Tensor:
        """A DALI output batch copied into a new torch tensor on the device (DALI reuses its buffers)."""
        tensor = batch.as_tensor()
        out = torch.empty(tensor.shape(), dtype=torch.float32, device=self.device)
        stream = torch.cuda.current_stream(self.device) if self.device.type == "cuda" else None
        self._feed_ndarray(tensor, out, cuda_stream=stream)  # stream-ordered: no host synchronisation
        return out


def for_folder(
    samples,
    device,
    crop: int,
    crop_scale_min: float,
    mean,
    std,
    n_views: int,
    seed: int,
    batch_size: int,
    rank: int = 0,
) -> DaliViews:
    """The :class:`DaliViews` of an ``ImageFolder``'s ``samples`` ((path, label) pairs), as pretraining builds it."""
    return DaliViews(
        [path for path, _ in samples],
        device,
        crop,
        crop_scale_min,
        mean,
        std,
        n_views=n_views,
        seed=seed,
        batch_size=batch_size,
        rank=rank,
    )
