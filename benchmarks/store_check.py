"""The prepared store's check (ring.data.store_layout.verify): what a cell pays at its start, cold and from its record.

    python benchmarks/store_check.py [--tiny] [--images 3000]

Builds the ``jpeg95`` store (256 px) of photo-like originals (``benchmarks/store_loader.make_photos``: ImageNet's
~110 KB files) with the prepare stage's own code, in shards of 500 images, then times (median of 5 runs):

* ``cold_s``: the check with no ``checked.json``, every file hashed (the first check of a store built before the
  record existed, or of a store its jobs cannot write);
* ``warm_s``: the check from ``checked.json``: the counts, the folders' stats and a stat per file (a cell's start);
* ``every_image_s``: the full check (``store_check``, ``ring prepare check``): warm plus a stat per image;

and from them the hash rate and ImageNet's estimate of each (73 GB in 267 shards, 1,331,167 images: the hashing
scales with the bytes, the rest with the images, whose listing and index the check reads).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, write  # noqa: E402
from benchmarks.store_loader import make_photos  # noqa: E402
from ring import prepare  # noqa: E402
from ring.data import store_layout  # noqa: E402

RESIZE = 256
IMAGENET_IMAGES = 1_331_167
IMAGENET_BYTES = store_layout.needed_bytes(IMAGENET_IMAGES, "jpeg95", RESIZE)


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def timings(store: Path, repeats: int) -> dict[str, float]:
    """Seconds of each check of ``store`` (see the module docstring)."""

    def cold() -> None:
        (store / store_layout.CHECKED).unlink(missing_ok=True)
        store_layout.verify(store, "jpeg95", RESIZE)

    return {
        "cold_s": median_seconds(cold, repeats),
        "warm_s": median_seconds(lambda: store_layout.verify(store, "jpeg95", RESIZE), repeats),
        "every_image_s": median_seconds(
            lambda: store_layout.verify(store, "jpeg95", RESIZE, every_image=True), repeats
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=3000, help="training images (and a tenth as many val)")
    parser.add_argument("--tiny", action="store_true", help="seconds-long run for the test suite")
    args = parser.parse_args()
    train = 120 if args.tiny else args.images
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "photos"
        make_photos(folder, train, max(train // 10, 8), workers=min(4, os.cpu_count() or 1))
        manifest = prepare.build(prepare.Target.of_folder(folder, "jpeg95", RESIZE, shard_images=500), workers=1)
        built = store_layout.store_dir(folder, "jpeg95", RESIZE)
        seconds = timings(built, repeats=3 if args.tiny else 5)
    images = sum(split["images"] for split in manifest["splits"].values())
    rate = manifest["bytes"] / (seconds["cold_s"] - seconds["warm_s"])  # the hashing alone
    payload = {
        "machine": machine(),
        "images": images,
        "store_bytes": manifest["bytes"],
        "shards": sum(len(split["shards"]) for split in manifest["splits"].values()),
        "seconds": seconds,
        "hash_mb_per_s": rate / 1e6,
        "imagenet_estimate_s": {
            "cold": IMAGENET_BYTES / rate + seconds["warm_s"] / images * IMAGENET_IMAGES,
            "warm": seconds["warm_s"] / images * IMAGENET_IMAGES,
            "every_image": seconds["every_image_s"] / images * IMAGENET_IMAGES,
        },
        "warm_over_cold": seconds["warm_s"] / seconds["cold_s"],
    }
    write("store_check", payload, args.tiny)


if __name__ == "__main__":
    main()
