"""k-means in torch (on the bank's device, so on the GPU when there is one) and LA's clusterings.

Local Aggregation (Zhuang et al. 2019) clusters the memory bank several times with different
seeds (faiss there) and recomputes the clusterings every epoch; the Cave and +C_i variants of
the appendix reuse them.  :class:`Clusterings` holds the assignments as buffers, so they are part
of the objective's ``state_dict`` and a resumed run continues with exactly the same clusters.
"""

from __future__ import annotations

import torch
from torch import nn

# Rows of the N x k distance block computed at once (bounded memory for a 1.28M bank).
ASSIGN_CHUNK_ELEMENTS = 2**25


@torch.no_grad()
def assign(x: torch.Tensor, centroids: torch.Tensor, chunk_elements: int = ASSIGN_CHUNK_ELEMENTS) -> torch.Tensor:
    """Index of the nearest centroid (squared L2) of every row of ``x``."""
    c_sq = (centroids * centroids).sum(dim=1)
    step = max(1, chunk_elements // max(len(centroids), 1))
    # ||x - c||^2 = ||x||^2 - 2 x.c + ||c||^2; the first term does not change the argmin.
    return torch.cat([(c_sq - 2.0 * x[s : s + step] @ centroids.T).argmin(dim=1) for s in range(0, len(x), step)])


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
