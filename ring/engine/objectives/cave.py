"""Cave discrimination (appendix, "Variants of Ring"): negatives only from the instance's k-means clusters.

IRCave / CMCCave draw their k negatives uniformly, with replacement, from the bank entries that
share a cluster with the current instance in any of the clusterings (the support ``S_B`` of a
CNCE distribution, so Theorem 1's bound holds).  The instance's own entry is in its cluster and
stays eligible, as IR's uniform draw may pick it, so the support is never empty.
"""

from __future__ import annotations

import torch

from ring.engine.objectives.kmeans import Clusterings
from ring.engine.objectives.ring import sample_from_mask


@torch.no_grad()
def sample_in_clusters(
    clusterings: Clusterings, index: torch.Tensor, u: torch.Tensor, max_chunk_elements: int
) -> torch.Tensor:
    """B x k bank indices drawn uniformly from the clusters of each ``index`` (``u``: B x k uniform draws)."""
    h, n = clusterings.labels.shape
    out = torch.empty(u.shape, dtype=torch.long, device=u.device)
    step = max(1, min(len(index), max_chunk_elements // max(n * h, 1)))
    for start in range(0, len(index), step):
        mask = clusterings.cluster_mask(index[start : start + step])
        out[start : start + step] = sample_from_mask(mask, u[start : start + step])
    return out
