"""The GPU decoder's pixels against the loader workers' (PIL's) on a jpeg95 store's records, held to a stated bound.

    python benchmarks/decode_pixels.py [--tiny] [--store DIR] [--device auto|cuda|cpu] [--batches 6] [--workers N]

Runs ``store_decode: gpu``'s pipeline (the workers read the records' bytes, the decoder thread decodes each batch into
the ring of device buffers, ``ring.data.gpu_decode``) and compares every image it hands over with PIL's decode of
the same record, the workers' pixels under ``store_decode: cpu``.  On CUDA the decoder is nvJPEG
(``torchvision.io.decode_jpeg(device="cuda")``) and each comparison is queued on the training stream behind a
20-ms kernel while the decoder fills the ring ahead, so that a buffer rewritten before its reads ran shows as
another photo (differences of up to 255 levels); on a CPU it is torchvision's CPU decoder (libjpeg-turbo, as PIL),
which must match exactly.  Without ``--store`` it generates photo-like originals and builds their 256-px jpeg95 store
with the prepare stage's code (``benchmarks/store_loader.py``'s photos).

The bound (:data:`BOUND`, 8-bit levels, every channel of every pixel).  Both decoders follow ITU-T T.81, whose
compliance tests (ISO/IEC 10918-2) hold the inverse DCT to the accuracy of IEEE 1180-1990 (ISO/IEC 23002-1): against
the exact transform rounded, a peak error of 1 per sample and an overall mean square error of 0.02, so at most 2% of
the Y, Cb and Cr samples are off, by one.  Two compliant decoders therefore differ by at most 2 in a sample, and in
at most 4% of them (mean absolute difference <= 0.04).  The store's records are 4:4:4 (no chroma upsampling, whose
filters differ between decoders), so what remains is JFIF's conversion to RGB, in which B = Y + 1.772 (Cb - 128) is
the steepest channel: at most 2 + 1.772 x 2 = 5.5 levels before each decoder rounds its own result (one more),
hence ``max_abs_diff <= 6``; and a mean of at most 0.04 x 2.8 = 0.11 from the transform plus conversions that round
a level apart where the exact value sits near a half, which ``mean_abs_diff <= 0.5`` bounds with room.  A wrong
colour matrix (BT.709's, video range) moves the mean by levels and a rewritten buffer by tens: both fail.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, write  # noqa: E402
from ring import prepare  # noqa: E402
from ring.data import augment, store, store_layout  # noqa: E402
from ring.data.views import store_views  # noqa: E402
from ring.engine.runtime import epoch_batches, make_loader  # noqa: E402

RESIZE = 256
DELAY_CYCLES = 40_000_000  # about 20 ms of a ~2 GHz clock: the decoder fills its three buffers meanwhile


class Bound(NamedTuple):
    max_abs_diff: int
    mean_abs_diff: float


BOUND = Bound(max_abs_diff=6, mean_abs_diff=0.5)  # the module's docstring derives both


def compare(
    store_dir: Path,
    device: torch.device,
    batch: int,
    batches: int,
    workers: int,
    reference: Callable[[store.StoreReader, int], np.ndarray] | None = None,
) -> dict:
    """The decoder pipeline's images of the training split's first ``batches`` batches against ``reference``'s
    (PIL's decode of each record, the workers' pixels), in 8-bit levels."""
    reader = store.StoreReader(store_dir, "train")
    reference = reference or (lambda r, i: r.array(i))
    make = augment.DeviceViews(None, device, reader.size, reader.size, (0.5,) * 3, (0.25,) * 3)
    tv = store_views(reader, augment.ViewParams(reader.size, 0.2), 1, 0, make, batch, "gpu")
    order = epoch_batches(len(reader), batch, 0, 0)[:batches]
    largest, total, differing, levels = 0, 0, 0, 0
    for handed, *_rest, index in tv.feed(make_loader(tv.dataset, order, workers, device, collate_fn=tv.collate)):
        pil = torch.from_numpy(np.stack([reference(reader, i) for i in index.tolist()])).to(device)
        if device.type == "cuda":
            torch.cuda._sleep(DELAY_CYCLES)  # queued ahead of the reads on the training stream
        diff = (handed.images.int() - pil.int()).abs()
        tv.device_views.ring.release(handed.slot)
        largest = max(largest, int(diff.max()))
        total += int(diff.sum())
        differing += int((diff > 0).sum())
        levels += diff.numel()
    return {
        "images": sum(len(b) for b in order),
        "decoder": "nvJPEG" if device.type == "cuda" else "torchvision's CPU decoder (libjpeg-turbo)",
        "max_abs_diff": largest,
        "mean_abs_diff": total / levels,
        "differing_fraction": differing / levels,
    }


def failures(stats: dict, bound: Bound | None = None) -> list[str]:
    """One sentence for each bound (:data:`BOUND` unless given) the comparison broke; none when it passed."""
    bound, broken = bound or BOUND, []
    if stats["max_abs_diff"] > bound.max_abs_diff:
        broken.append(
            f"the GPU decoder's pixels differ from PIL's by up to {stats['max_abs_diff']} levels, over the "
            f"{bound.max_abs_diff} two IEEE 1180-compliant decoders can differ by: a buffer rewritten before its reads "
            "ran, or a decoder that is not JPEG-compliant; do not use store_decode: gpu on this machine."
        )
    if stats["mean_abs_diff"] > bound.mean_abs_diff:
        broken.append(
            f"the GPU decoder's pixels differ from PIL's by {stats['mean_abs_diff']:.3g} levels on average, over the "
            f"{bound.mean_abs_diff:g} rounding allows: another colour conversion or a rewritten buffer; do not use "
            "store_decode: gpu on this machine."
        )
    return broken


def _generated_store(folder: Path, images: int, workers: int) -> Path:
    from benchmarks.store_loader import make_photos

    make_photos(folder, images, 4, workers)
    prepare.build(prepare.Target.of_folder(folder, "jpeg95", RESIZE, shard_images=1000), workers)
    return store_layout.store_dir(folder, "jpeg95", RESIZE)


def parse(argv=None) -> tuple[argparse.Namespace, torch.device]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="a jpeg95 store's folder (default: a generated one)")
    parser.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--tiny", action="store_true", help="seconds-long run for the test suite")
    args = parser.parse_args(argv)
    if args.batches < 1:
        parser.error(f"--batches {args.batches}: compare at least one batch.")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: this machine has no CUDA device; run on a GPU or pass --device cpu.")
    name = args.device if args.device != "auto" else "cuda" if torch.cuda.is_available() else "cpu"
    return args, torch.device(name)


def main(argv=None) -> int:
    args, device = parse(argv)
    batch = 8 if args.tiny else 256
    batches = min(args.batches, 2) if args.tiny else args.batches
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.store or _generated_store(Path(tmp) / "photos", batch * batches, args.workers)
        stats = compare(folder, device, batch, batches, args.workers)
    broken = failures(stats)
    payload = {
        "machine": machine(),
        "store": "generated photo-like originals (benchmarks/store_loader.py), jpeg95 at 256 px"
        if args.store is None
        else str(args.store),
        "batch": batch,
        "bound": BOUND._asdict(),
        **stats,
        "status": "fail" if broken else "pass",
        "failures": broken,
    }
    write("decode_pixels", payload, tiny=args.tiny)
    for sentence in broken:
        print(f"decode_pixels: {sentence}", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
