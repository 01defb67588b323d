"""k-means in torch (on the bank's device, so on the GPU when there is one) and LA's clusterings.

Local Aggregation (Zhuang et al. 2019) clusters the memory bank several times with different
seeds (faiss there) and recomputes the clusterings every epoch; the Cave and +C_i variants of
the appendix reuse them.  :class:`Clusterings` holds the assignments as buffers, so they are part
of the objective's ``state_dict`` and a resumed run continues with exactly the same clusters.
"""

from __future__ import annotations

import torch
from torch import nn

# Distances alive at once while assigning (rows x k of the N x k matrix, never all of it).  On the CPU a tile of
# 2**18 fp32 (1 MiB) is still in the core's cache when its argmin reads it, where a 2**25 chunk (128 MiB) was written
# to memory by the GEMM and read back; on a GPU a tile must fill the device, so it stays at 2**25 there
# (benchmarks/kmeans_assign.py measures both).
ASSIGN_CHUNK_ELEMENTS = 2**25
ASSIGN_TILE_BY_DEVICE = {"cpu": 2**18}


def assign_tile(device: torch.device) -> int:
    """The distances :func:`assign` computes at once on ``device`` (rows x centroids)."""
    return ASSIGN_TILE_BY_DEVICE.get(device.type, ASSIGN_CHUNK_ELEMENTS)


@torch.no_grad()
def assign(x: torch.Tensor, centroids: torch.Tensor, chunk_elements: int | None = None) -> torch.Tensor:
    """Index of the nearest centroid (squared L2) of every row of ``x``.

    Tile by tile (``chunk_elements`` distances, by default :func:`assign_tile`): one ``addmm`` makes a tile's
    ``||c||^2 - 2 x.c`` (the GEMM adds ``||c||^2`` as it writes, where a separate pass did before) and its argmin is
    written straight into the labels.  The labels are those of the whole N x k matrix ``c_sq - 2.0 * x @ c.T`` (scaling
    by -2 is exact; argmin keeps the first of equal distances), near-ties within the GEMM's rounding aside (tested).
    """
    chunk_elements = assign_tile(x.device) if chunk_elements is None else chunk_elements
    c_sq = (centroids * centroids).sum(dim=1)
    step = max(1, chunk_elements // max(len(centroids), 1))
    labels = torch.empty(len(x), dtype=torch.long, device=x.device)
    # ||x - c||^2 = ||x||^2 - 2 x.c + ||c||^2; the first term does not change the argmin.
    for s in range(0, len(x), step):
        torch.argmin(torch.addmm(c_sq, x[s : s + step], centroids.T, alpha=-2.0), dim=1, out=labels[s : s + step])
    return labels


@torch.no_grad()
def kmeans(x: torch.Tensor, k: int, iters: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Lloyd's k-means of the rows of ``x``: ``(centroids k x D, labels N)``.

    Initial centroids are k distinct rows drawn with ``generator`` (faiss's initialisation); a
    cluster that empties keeps its previous centroid.  The final labels are the assignment to the
    final centroids.
    """
    n = len(x)
    if not 1 <= k <= n:
        raise ValueError(f"kmeans_k={k} must lie between 1 and the {n} bank entries; lower kmeans_k.")
    x = x.float()
    centroids = x[torch.randperm(n, generator=generator, device=generator.device)[:k].to(x.device)].clone()
    for _ in range(iters):
        labels = assign(x, centroids)
        sums = torch.zeros_like(centroids).index_add_(0, labels, x)
        counts = torch.bincount(labels, minlength=k).unsqueeze(1)
        centroids = torch.where(counts > 0, sums / counts.clamp(min=1), centroids)
    return centroids, assign(x, centroids)


class Clusterings(nn.Module):
    """``h`` k-means clusterings of ``n`` bank entries, recomputed at most once per epoch."""

    def __init__(self, n: int, h: int, k: int, iters: int, seed: int):
        super().__init__()
        if h < 1 or iters < 0:
            raise ValueError(f"kmeans_clusterings={h} must be at least 1 and kmeans_iters={iters} non-negative.")
        if not 1 <= k <= n:
            raise ValueError(f"kmeans_k={k} must lie between 1 and the {n} training images; lower kmeans_k.")
        self.k, self.iters, self.seed = k, iters, seed
        self.register_buffer("labels", torch.zeros(h, n, dtype=torch.long))
        self.register_buffer("epoch", torch.full((), -1, dtype=torch.long))  # epoch they were computed at

    @property
    def ready(self) -> bool:
        return int(self.epoch) >= 0

    @torch.no_grad()
    def update(self, memory: torch.Tensor, epoch: int) -> bool:
        """Recompute every clustering of ``memory`` unless this epoch's are already there (a resume)."""
        if int(self.epoch) == epoch:
            return False
        for h in range(len(self.labels)):
            # A fresh stream per (seed, epoch, clustering): independent of the training RNG, so
            # recomputing after a resume gives the same clusters.
            g = torch.Generator(device=memory.device).manual_seed(((self.seed * 1_000_003 + epoch) * 101 + h) % 2**63)
            self.labels[h] = kmeans(memory, self.k, self.iters, g)[1]
        self.epoch.fill_(epoch)
        return True

    @torch.no_grad()
    def same_cluster(self, index: torch.Tensor, others: torch.Tensor) -> torch.Tensor:
        """Boolean ``index.shape x others.shape[1:]``: ``others[b, j]`` shares a cluster with ``index[b]`` in any
        clustering."""
        mine = self.labels[:, index].unsqueeze(-1)  # h x B x 1
        return (mine == self.labels[:, others]).any(dim=0)

    @torch.no_grad()
    def cluster_mask(self, index: torch.Tensor) -> torch.Tensor:
        """B x N boolean: the bank entries in any of ``index[b]``'s clusters (``index[b]`` included)."""
        return (self.labels[:, index].unsqueeze(-1) == self.labels.unsqueeze(1)).any(dim=0)
