"""ImageNet's input pipeline: views/s from JPEG files, decoded by PIL in the workers or in batches on the device.

    python benchmarks/jpeg_decode.py [--tiny]

Generates photo-like JPEGs in a temporary image folder, then measures views/s (no training step) of:

* ``pil``: today's path -- ``torchvision.datasets.ImageFolder`` and ``ring.data.datasets.pretrain_view``
  in the loader's workers (decode, resize 256, crop 224, jitter, ... per sample);
* ``device``: ``augment: device`` -- the workers read the files' bytes and draw the views'
  parameters (``ring.data.augment.JpegViews``), ``torchvision.io.decode_jpeg`` decodes the batch on the
  device (on CUDA: nvJPEG, batched) and ``ring.data.augment`` makes the views there;
* ``dali``: ``ring.data.dali.DaliViews`` -- NVIDIA DALI reads the files, decodes each view fused with its
  random resized crop (nvJPEG on the "mixed" device, the hardware decoder where there is one; DALI's
  CPU decoder on a CPU) and makes the view on the device; skipped, with the reason recorded, when
  ``nvidia.dali`` is not installed (the ``dali`` extra).  ``dali_deterministic``: step 0's views made
  again after the timed batches are the same tensors (the resume contract, on this machine's decoder);
* ``decode_only``: ``decode_jpeg`` of the batch on the device, nothing else.

``RING_BENCH_STEPS`` batches are timed after ``RING_BENCH_WARMUP`` (defaults 10 and 2).

The files (:func:`make_jpegs`) are about 110 KB each, as ImageNet's are on average (at about 400 x 350 px): 300-500 x
250-450 px, quality 90, a smooth colour field with edges at two scales under film-grain noise (mostly luminance).
Until issue 39 they were smooth fields of 24.5 KB at 500 x 375 px, which flattered decoding (a photo-like file of
that size costs 1.4-4x more to decode).  The result records their mean size (``mean_file_kb``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import items_per_second, machine, write  # noqa: E402
from ring.core.catalog import spec  # noqa: E402
from ring.data import augment, dali, datasets  # noqa: E402
from ring.engine.runtime import epoch_batches, make_loader  # noqa: E402

# Film grain (grey levels, standard deviation) over the colour field: what brings a file to ImageNet's ~110 KB.
GRAIN = 45.0
JPEG_SIZES = "300-500 x 250-450 px, quality 90, photo-like (about 110 KB)"


def photo_like(rng: np.random.Generator, width: int, height: int) -> Image.Image:
    """A photo-like RGB image: coarse colour regions, finer edges, and luminance grain with a little chroma."""
    coarse = Image.fromarray(rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)).resize((width, height), Image.BICUBIC)
    fine = Image.fromarray(rng.integers(0, 256, (128, 128, 3), dtype=np.uint8)).resize((width, height), Image.BILINEAR)
    field = 0.5 * np.asarray(coarse, dtype=np.float32) + 0.5 * np.asarray(fine, dtype=np.float32)
    grain = rng.normal(0, GRAIN, (height, width, 1)) + rng.normal(0, GRAIN / 3, (height, width, 3))
    return Image.fromarray(np.clip(field + grain, 0, 255).astype(np.uint8))


def make_jpegs(root: Path, n: int, seed: int = 0) -> float:
    """``n`` photo-like JPEGs in ``root/class0``; returns their mean size in KB."""
    rng = np.random.default_rng(seed)
    (root / "class0").mkdir(parents=True)
    total = 0
    for i in range(n):
        path = root / "class0" / f"{i:05d}.jpg"
        photo_like(rng, int(rng.integers(300, 501)), int(rng.integers(250, 451))).save(path, quality=90)
        total += path.stat().st_size
    return total / n / 1e3


def timed(batches, make, warmup: int, device) -> float:
    """Views per second of ``make(batch)`` (which returns the batch's views)."""
    made = []
    return items_per_second(batches, lambda b: made.append(len(make(b))), device, warmup, count=lambda b: made[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=None, help="loader processes (default: 0 on CPU, 8 on GPU)")
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gpu = device.type == "cuda"
    workers = args.workers if args.workers is not None else (min(8, os.cpu_count() or 1) if gpu else 0)
    warmup = int(os.environ.get("RING_BENCH_WARMUP", 1 if args.tiny else 2))
    steps = int(os.environ.get("RING_BENCH_STEPS", 2 if args.tiny else 10))
    batch, resize, crop = (8, 64, 56) if args.tiny else (256, 256, 224)
    n = batch * (warmup + steps)
    s = spec("imagenet")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        mean_kb = make_jpegs(root, n)
        print(
            f"jpeg_decode: {n} JPEGs of {mean_kb:.0f} KB written in {time.perf_counter() - start:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        folder = datasets.tvd.ImageFolder(str(root))
        order = epoch_batches(n, batch, 0, 0)
        rates, errors = {}, {}

        pil = datasets.Views(folder, datasets.pretrain_view(resize, crop, 0.2, datasets.normalize(spec("imagenet"))))
        rates["pil"] = timed(
            make_loader(pil, order, workers, device), lambda b: b[0].to(device, non_blocking=True), warmup, device
        )
        print(f"jpeg_decode: pil {rates['pil']:.1f} views/s", file=sys.stderr, flush=True)

        jpegs = augment.JpegViews(folder.samples, augment.ViewParams(resize, 0.2))
        make = augment.DeviceViews(None, device, resize, crop, s.mean, s.std)
        loader = make_loader(jpegs, order, workers, device, collate_fn=augment.collate_jpegs)
        rates["device"] = timed(loader, lambda b: make([b[1]], b[-1], data=b[0])[0], warmup, device)
        print(f"jpeg_decode: device {rates['device']:.1f} views/s", file=sys.stderr, flush=True)

        skipped, dali_deterministic = {}, None
        if not dali.available():
            skipped["dali"] = dali.MISSING
        else:
            try:
                make_dali = dali.DaliViews(
                    [path for path, _ in folder.samples], device, crop, 0.2, s.mean, s.std, seed=0, batch_size=batch
                )
                first = make_dali(order[0], 0, 0)[0]
                rates["dali"] = timed(enumerate(order), lambda sb: make_dali(sb[1], 0, sb[0])[0], warmup, device)
                dali_deterministic = torch.equal(first, make_dali(order[0], 0, 0)[0])
                print(f"jpeg_decode: dali {rates['dali']:.1f} views/s", file=sys.stderr, flush=True)
            except RuntimeError as err:  # a DALI failure on this machine must not cost the suite the other numbers
                errors["dali"] = str(err).splitlines()[0]

        from torchvision.io import ImageReadMode, decode_jpeg, read_file

        data = [read_file(path) for path, _ in folder.samples[:batch]]
        try:
            rates["decode_only"] = timed(
                (data for _ in range(warmup + steps)),
                lambda d: decode_jpeg(d, mode=ImageReadMode.RGB, device=device),
                warmup,
                device,
            )
            print(f"jpeg_decode: decode_only {rates['decode_only']:.1f} images/s", file=sys.stderr, flush=True)
        except RuntimeError as err:
            errors["decode_only"] = str(err).splitlines()[0]
    write(
        "jpeg_decode",
        {
            "machine": machine(),
            "files": n,
            "jpeg_sizes": JPEG_SIZES,
            "mean_file_kb": round(mean_kb, 1),
            "batch": batch,
            "resize": resize,
            "image_size": crop,
            "workers": workers,
            "warmup_batches": warmup,
            "timed_batches": steps,
            "views_per_s": rates,
            # Batches the device path decoded image by image on the CPU (0: all batched on the device).
            "device_fallback_batches": augment.fallback_batches,
            # The dali mode crops the original images: resize is not applied there (ring/data/dali.py).
            "dali_deterministic": dali_deterministic,
            "skipped": skipped,
            "errors": errors,
        },
        tiny=args.tiny,
    )


if __name__ == "__main__":
    main()
