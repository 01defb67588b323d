"""LA's k-means assignment: tile by tile with its argmin (issue 48) against the 2**25-distance chunks before it.

    python benchmarks/kmeans_assign.py           # a 200,000-entry bank on the CPU (ImageNet's 1.28M on a GPU)
    python benchmarks/kmeans_assign.py --tiny    # what the test suite runs

One assignment of the bank (128-d, unit rows) to LA's default ``kmeans_k`` centroids is what each of the
``kmeans_iters`` Lloyd steps of each of the ``kmeans_clusterings`` clusterings costs, every epoch.  Timed: the
assignment as it was (chunks of 2**25 distances: the GEMM writes them, ``c_sq - ...`` rewrites them, argmin reads
them) and :func:`ring.engine.objectives.kmeans.assign` as it is (tiles of :func:`assign_tile` distances, ``addmm``
then argmin into the labels), interleaved, after asserting the same labels (rows whose two nearest centroids lie
within fp32 rounding aside).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, timeit, write  # noqa: E402
from ring.core.config import PretrainConfig  # noqa: E402
from ring.engine.objectives.kmeans import ASSIGN_CHUNK_ELEMENTS, assign, assign_tile  # noqa: E402

NEAR_TIE = 1e-5  # fp32 distances of unit vectors round at ~128 * 2**-24: closer pairs may fall either way


@torch.no_grad()
def assign_before(x: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """The assignment before issue 48, as it was written."""
    c_sq = (centroids * centroids).sum(dim=1)
    step = max(1, ASSIGN_CHUNK_ELEMENTS // max(len(centroids), 1))
    return torch.cat([(c_sq - 2.0 * x[s : s + step] @ centroids.T).argmin(dim=1) for s in range(0, len(x), step)])


def near_ties(x: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """Rows whose two nearest centroids are within :data:`NEAR_TIE` (computed in chunks, like the assignment)."""
    c_sq = (centroids * centroids).sum(dim=1)
    step = max(1, ASSIGN_CHUNK_ELEMENTS // max(len(centroids), 1))
    gaps = [
        (c_sq - 2.0 * x[s : s + step] @ centroids.T).topk(2, dim=1, largest=False).values.diff(dim=1).squeeze(1)
        for s in range(0, len(x), step)
    ]
    return torch.cat(gaps) <= NEAR_TIE


def bench(n: int, k: int, device: torch.device, repeats: int) -> dict:
    g = torch.Generator().manual_seed(0)
    x = F.normalize(torch.randn(n, 128, generator=g), dim=1).to(device)
    centroids = x[torch.randperm(n, generator=g)[:k].to(device)] + 0.05 * torch.randn(k, 128, generator=g).to(device)
    before, now = assign_before(x, centroids), assign(x, centroids)
    differ = before != now
    if (differ & ~near_ties(x, centroids)).any():
        raise AssertionError("the tiled assignment differs from the chunked one beyond near-ties")
    before_s = timeit(lambda: assign_before(x, centroids), device, repeats)
    now_s = timeit(lambda: assign(x, centroids), device, repeats)
    before_again_s = timeit(lambda: assign_before(x, centroids), device, repeats)  # interleaved: drift shows here
    return {
        "n": n,
        "k": k,
        "dim": 128,
        "chunk_before_elements": ASSIGN_CHUNK_ELEMENTS,
        "tile_elements": assign_tile(device),
        "labels_differing": int(differ.sum()),
        "same_labels_beyond_near_ties": True,
        "before_s": before_s,
        "tiled_s": now_s,
        "before_again_s": before_again_s,
        "speedup": min(before_s, before_again_s) / now_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="seconds-long run for the test suite")
    tiny = parser.parse_args().tiny
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    # ImageNet's bank on a GPU, a 200,000-entry one on the CPU; LA's default clusters (an eighth of a tiny bank).
    n, repeats = (20_000, 2) if tiny else (1_281_167, 10) if device.type == "cuda" else (200_000, 3)
    write(
        "kmeans_assign", {"machine": machine(), **bench(n, min(PretrainConfig.kmeans_k, n // 8), device, repeats)}, tiny
    )


if __name__ == "__main__":
    main()
