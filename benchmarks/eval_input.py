"""The evaluation passes' input from ImageNet's prepared store: today's PIL views against the device's.

    python benchmarks/eval_input.py [--tiny] [--workers 2]

Builds the ``jpeg95`` and ``raw`` stores of photo-like originals at 256 px (``benchmarks/store_loader.py``'s
:func:`make_photos` and :func:`build_stores`, the prepare stage's own code), then measures, in images/s, what the kNN
monitor and linear evaluation read per batch of 256 on ``--workers`` loader processes, up to a normalised
224-pixel view on the evaluation's device:

* ``before``: today's path, a PIL image per record in the workers, resized, cropped (the centre, ``none``; or a random
  resized crop and flip, ``crop_flip``), converted and normalised there (:func:`ring.data.datasets.linear_view`);
* ``after``: the workers read (raw) or PIL-decode (jpeg95) each record into a uint8 batch and draw each view's box and
  flip; the device crops, flips and normalises the batch (:mod:`ring.data.eval_views`), eager.

Each rate is timed after a warm-up batch and past the loader's prefetch (2 batches a worker: at least 3x that
depth is timed), the same batches for both paths.  The network's forward is left out: it is the same on both paths,
and on a CPU it would hide the input (``ring.plan.estimate`` prices the forward from the throughput figures).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import items_per_second, loader_header, loader_run, write  # noqa: E402
from benchmarks.store_loader import build_stores, make_photos  # noqa: E402
from ring.core.catalog import spec  # noqa: E402
from ring.data import datasets, eval_views, store, store_layout  # noqa: E402
from ring.engine.runtime import epoch_batches, make_loader  # noqa: E402

RESIZE, CROP, BATCH = 256, 224, 256
AUGMENTATIONS = ("none", "crop_flip")  # the kNN monitor's and the test split's view; linear evaluation's training


def rates(folder: Path, fmt: str, augmentation: str, order, workers: int, device: torch.device) -> dict[str, float]:
    """Images/s of today's input and of the device input, over the same batches of one store split."""
    norm = datasets.normalize(spec("imagenet"))
    base = store.StoreImages(store_layout.store_dir(folder, fmt, RESIZE), "train")
    today = datasets.Views(base, datasets.linear_view(RESIZE, CROP, augmentation, norm), seed=0)
    images = lambda b: len(b[-1])  # noqa: E731  (a batch's images: its indices)
    before = items_per_second(
        make_loader(today, order, workers, device), lambda b: b[0].to(device, non_blocking=True), device, 1, images
    )
    device_input = eval_views.for_store(base, augmentation, RESIZE, CROP, norm, 0, device, len(order[0]))
    loader = make_loader(device_input.dataset, order, workers, device, device_input.collate)
    after = items_per_second(device_input.batches(loader), lambda b: None, device, 1, images)
    return {"before": before, "after": after, "speedup": after / before}


def main() -> None:
    args, device, batches = loader_run(__doc__.splitlines()[0])
    batch = 16 if args.tiny else BATCH
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "photos"
        make_photos(folder, batch * batches, 4, args.workers)
        build_stores(folder, args.workers, shard_images=1000)
        order = epoch_batches(batch * batches, batch, 0, 0)[:batches]
        measured = {
            f"{fmt}_{augmentation}": rates(folder, fmt, augmentation, order, args.workers, device)
            for fmt in store.FORMATS
            for augmentation in AUGMENTATIONS
        }
    payload = {
        **loader_header(args.workers, batch, batches, RESIZE, CROP),
        "measured": "loader images/s up to normalised views on the device, past a warm-up batch and the prefetch; "
        "before: PIL views in the workers (ring.data.datasets.linear_view); after: the store's records read or "
        "decoded in the workers, views made on the device (ring.data.eval_views), eager; no forward",
        "images_per_s": measured,
    }
    for name, row in measured.items():
        print(f"eval_input: {name} {row['before']:,.0f} -> {row['after']:,.0f} images/s", file=sys.stderr)
    write("eval_input", payload, tiny=args.tiny)


if __name__ == "__main__":
    main()
