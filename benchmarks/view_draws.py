"""The loader's workers with view parameters drawn per sample (``view_draws: sample``) or per batch (``batch``).

    python benchmarks/view_draws.py [--tiny] [--workers 1 2]

Measures, for MoCo's two views of each image at ImageNet's sizes (256 px images, 224 px crops, batches of 256):

* ``draw_ms_per_batch``: one process, one thread, drawing one batch's parameters: torchvision's ``get_params`` per
  sample under its per-sample seeding (``sample``: ``ring.data.augment.ViewParams`` in ``ring.data.datasets.Views``)
  against the batch's Philox draw (``batch``, ``ring.data.view_draws``);
* ``loader_images_per_s_per_worker``: a pretraining loader (``ring.engine.runtime.make_loader``, the stage's) on each
  of ``--workers``, divided by the workers, for the two device-view inputs: ``in_memory`` (CIFAR's and STL's path: the
  workers only draw the parameters) and ``store_jpeg95`` (ImageNet's: the workers decode each record of the prepared
  store, photo-like JPEGs built by ``benchmarks/store_loader.py``'s code, and draw the parameters).

The loader runs ahead by two batches a worker: each rate is timed only after the first ``2 x workers + 1`` batches
(the prefetch queue spent), over the batches after them, and is the best of a few runs.  On a shared machine a rate is
a lower bound; the load average during the runs is recorded beside them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import items_per_second, machine, timeit, write  # noqa: E402
from benchmarks.store_loader import build_stores, make_photos  # noqa: E402
from ring.data import augment, datasets, store, store_layout, view_draws  # noqa: E402
from ring.data.views import StoreViews  # noqa: E402
from ring.engine.runtime import epoch_batches, make_loader  # noqa: E402

RESIZE, CROP, BATCH, VIEWS = 256, 224, 256, 2
DRAWS = ("sample", "batch")


def _params(draws: str):
    return augment.ViewParams(RESIZE, 0.2) if draws == "sample" else view_draws.BatchParams(RESIZE, 0.2)


def draw_ms(batch: int, repeats: int) -> dict[str, float]:
    """Milliseconds of one batch's parameters, one process on one thread."""
    torch.set_num_threads(1)
    out = {}
    for draws in DRAWS:
        views = datasets.Views(augment.Labels(np.zeros(batch)), _params(draws), n_views=VIEWS, seed=0)
        out[draws] = 1e3 * timeit(lambda v=views: v.__getitems__(list(range(batch))), torch.device("cpu"), repeats)
    torch.set_num_threads(os.cpu_count() or 1)
    return out


def loader_rate(dataset, n: int, batch: int, workers: int, timed: int) -> float:
    """Images/s of the stage's loader over ``dataset`` per worker, timed after the prefetch queue is spent."""
    warmup = 2 * workers + 1
    order = epoch_batches(n, batch, 0, 0)[: warmup + timed]
    loader = make_loader(dataset, order, workers, torch.device("cpu"))
    rate = items_per_second(loader, lambda b: None, torch.device("cpu"), warmup, count=lambda b: len(b[-1]))
    return rate / workers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--tiny", action="store_true", help="seconds-long run for the test suite")
    args = parser.parse_args()
    batch, timed, repeats = (16, 2, 1) if args.tiny else (BATCH, 6, 3)
    n = batch * (2 * max(args.workers) + 1 + timed)
    loads, rates = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "photos"
        mean_bytes = make_photos(folder, n, 16, max(args.workers))
        build_stores(folder, max(args.workers), shard_images=1000)
        reader = store.StoreReader(store_layout.store_dir(folder, "jpeg95", RESIZE), "train")
        draws_ms = draw_ms(batch, 2 * repeats + 1)
        # Each rate the best of ``repeats`` runs, the two draws alternating: on a shared machine the other jobs only
        # ever slow a run down, and alternating spreads their load over both draws alike.
        for _ in range(repeats):
            for workers in args.workers:
                for draws in DRAWS:
                    inputs = {
                        "in_memory": datasets.Views(augment.Labels(np.zeros(n)), _params(draws), VIEWS, seed=0),
                        "store_jpeg95": StoreViews(reader, _params(draws), VIEWS, seed=0),
                    }
                    for name, data in inputs.items():
                        row = rates.setdefault(name, {}).setdefault(f"{workers}_workers", {})
                        row[draws] = max(row.get(draws, 0.0), loader_rate(data, n, batch, workers, timed))
                        loads.append(os.getloadavg()[0])
    payload = {
        "machine": machine(),
        "resize": RESIZE,
        "crop": CROP,
        "batch": batch,
        "views_per_image": VIEWS,
        "workers": args.workers,
        "timed_batches": timed,
        "runs_per_rate": f"{repeats}, the best kept",
        "untimed_batches": "2 x workers + 1 (the loader's prefetch queue)",
        "store": f"jpeg95 at {RESIZE} px of photo-like JPEGs ({mean_bytes / 1e3:.0f} KB originals: store_loader.py's)",
        "load_average_1min": {"min": min(loads), "max": max(loads)},
        "draw_ms_per_batch": draws_ms,
        "draw_speedup": draws_ms["sample"] / draws_ms["batch"],
        "loader_images_per_s_per_worker": rates,
        "loader_speedup": {
            name: {w: r["batch"] / r["sample"] for w, r in per_workers.items()} for name, per_workers in rates.items()
        },
    }
    print(f"view_draws: draw ms per batch {draws_ms}; loader per worker {rates}", file=sys.stderr)
    write("view_draws", payload, tiny=args.tiny)


if __name__ == "__main__":
    main()
