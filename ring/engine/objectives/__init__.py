"""Objectives: builds the loss module of each method of :data:`ring.methods.METHODS`."""

from __future__ import annotations

import torch
from torch import nn

from ring.core.methods import method
from ring.engine.objectives.cmc import MultiviewContrast
from ring.engine.objectives.ir import InstanceDiscrimination
from ring.engine.objectives.kmeans import Clusterings
from ring.engine.objectives.moco import MomentumContrast
from ring.engine.objectives.ring import chunk_elements

BANK_OBJECTIVES = {"ir": InstanceDiscrimination, "cmc": MultiviewContrast}


OBJECTIVES = {**BANK_OBJECTIVES, "moco": MomentumContrast}


def views_per_image(name: str) -> int:
    """How many views of each image method ``name``'s objective takes (its class says)."""
    return OBJECTIVES[method(name).objective].n_views


def build_objective(name: str, cfg, encoder: nn.Module, n_train: int, device: torch.device | None = None) -> nn.Module:
    """The objective module for method ``name`` with a pretraining config ``cfg``, to train on ``device``."""
    m = method(name)
    max_chunk_elements = chunk_elements(cfg.max_chunk_elements, device or torch.device("cpu"))
    if m.objective in BANK_OBJECTIVES:
        clusterings = None
        if m.uses_kmeans:
            clusterings = Clusterings(n_train, cfg.kmeans_clusterings, cfg.kmeans_k, cfg.kmeans_iters, cfg.seed)
        return BANK_OBJECTIVES[m.objective](
            n=n_train, dim=cfg.out_dim, negatives=cfg.bank_negatives, temperature=cfg.temperature,
            bank_momentum=cfg.bank_momentum, ring=m.ring, max_chunk_elements=max_chunk_elements,
            sampler=m.sampler, close_positives=m.close_positives, clusterings=clusterings,
            warmup_epochs=cfg.kmeans_warmup_epochs, la_own_entry=cfg.la_own_entry, negatives_count=cfg.negatives_count,
            **({"negative_draw": cfg.cmc_negatives} if m.objective == "cmc" else {}),
        )
    if m.objective == "moco":
        if cfg.queue_size < cfg.batch_size:
            raise ValueError(f"queue_size={cfg.queue_size} is smaller than batch_size={cfg.batch_size}; raise queue_size.")
        return MomentumContrast(
            encoder, dim=cfg.out_dim, queue_size=cfg.queue_size, key_momentum=cfg.key_momentum,
            temperature=cfg.temperature, ring=m.ring,
        )
    raise AssertionError(f"objective {m.objective!r} has no builder")
