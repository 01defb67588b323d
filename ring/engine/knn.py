"""Nearest-neighbour monitors of an embedding: IR's weighted kNN (k=200, tau=0.07) and 1-NN."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


@torch.no_grad()
def embed(encoder: nn.Module, loader, device) -> tuple[torch.Tensor, torch.Tensor]:
    """L2-normalised embeddings and labels of every image of ``loader`` (first view only)."""
    was_training = encoder.training
    encoder.eval()
    feats, labels = [], []
    for batch in loader:
        feats.append(F.normalize(encoder(batch[0].to(device, non_blocking=True)), dim=1).float())
        labels.append(batch[-2].to(device))
    encoder.train(was_training)
    return torch.cat(feats), torch.cat(labels)


@torch.no_grad()
def knn_accuracy(
    train_f: torch.Tensor,
    train_y: torch.Tensor,
    test_f: torch.Tensor,
    test_y: torch.Tensor,
    num_classes: int,
    k: int = 200,
    temperature: float = 0.07,
    chunk: int = 256,
) -> dict[str, float]:
    """Top-1 accuracy (percent) of the weighted kNN vote and of the single nearest neighbour."""
    k = min(k, len(train_f))
    correct_knn = correct_nn = 0
    for start in range(0, len(test_f), chunk):
        sims = test_f[start : start + chunk] @ train_f.T
        top_sims, top_idx = sims.topk(k, dim=1)
        top_labels = train_y[top_idx]
        weights = (top_sims / temperature).exp()
        votes = torch.zeros(len(sims), num_classes, device=sims.device)
        votes.scatter_add_(1, top_labels, weights)
        y = test_y[start : start + chunk]
        correct_knn += (votes.argmax(dim=1) == y).sum().item()
        correct_nn += (top_labels[:, 0] == y).sum().item()
    n = len(test_f)
    return {"knn_top1": 100.0 * correct_knn / n, "nn1_top1": 100.0 * correct_nn / n}


def holdout_split(n: int, fraction: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices ``(memory, validation)`` of a training split of ``n`` images: a fixed random ``fraction`` held out.

    The permutation is seeded with 0, independently of the run's seed and RNG state, so every cell of
    a dataset holds out the same images and drawing it never shifts the training's random stream.
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"ring_val_fraction={fraction} must lie strictly between 0 and 1.")
    n_val = max(1, round(fraction * n))
    if n_val >= n:
        raise ValueError(f"ring_val_fraction={fraction} of {n} training images leaves no kNN memory; lower it.")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    return order[n_val:].sort().values, order[:n_val].sort().values


@torch.no_grad()
def holdout_accuracy(
    train_f: torch.Tensor,
    train_y: torch.Tensor,
    fraction: float,
    num_classes: int,
    k: int = 200,
    temperature: float = 0.07,
) -> float:
    """Weighted kNN top-1 (percent) of the held-out training images against the rest of the training split."""
    memory, val = (i.to(train_f.device) for i in holdout_split(len(train_f), fraction))
    return knn_accuracy(train_f[memory], train_y[memory], train_f[val], train_y[val], num_classes, k, temperature)[
        "knn_top1"
    ]


@torch.no_grad()
def window_same_class(
    features: torch.Tensor, labels: torch.Tensor, w_l: float, w_u: float, max_chunk_elements: int
) -> float:
    """Percent of same-class entries among the Ring window's entries, averaged over queries.

    Every training embedding is a query against all training embeddings (IRing's bank, of which
    MoCoRing's queue is a recent random subset), its window ``[w_l, w_u]`` selected as the
    objective selects it (:func:`ring.engine.objectives.ring.window_mask`).  Labels are only read here,
    never trained on: the share of the window's negatives that are really positives (chance: about
    100 / classes for the full window).
    """
    from ring.engine.objectives.ring import window_mask  # the objective's own selection

    n = len(features)
    total, step = 0.0, max(1, min(n, max_chunk_elements // max(n, 1)))
    for start in range(0, n, step):
        mask = window_mask(features[start : start + step] @ features.T, w_l, w_u)
        same = labels[start : start + step, None] == labels[None, :]
        total += ((mask & same).sum(1).float() / mask.sum(1).clamp(min=1).float()).sum().item()
    return 100.0 * total / n
