"""Objectives: builds the loss module of each method of :data:`ring.methods.METHODS`."""

from __future__ import annotations

from torch import nn

from ring.methods import method
from ring.objectives.ir import InstanceDiscrimination
from ring.objectives.moco import MomentumContrast


def build_objective(name: str, cfg, encoder: nn.Module, n_train: int) -> nn.Module:
    """The objective module for method ``name`` with a pretraining config ``cfg``."""
    m = method(name)
    if m.objective == "ir":
        return InstanceDiscrimination(
            n=n_train, dim=cfg.out_dim, negatives=cfg.bank_negatives, temperature=cfg.temperature,
            bank_momentum=cfg.bank_momentum, ring=m.ring, max_chunk_elements=cfg.max_chunk_elements,
        )
    if m.objective == "moco":
        if cfg.queue_size < cfg.batch_size:
            raise ValueError(f"queue_size={cfg.queue_size} is smaller than batch_size={cfg.batch_size}; raise queue_size.")
        return MomentumContrast(
            encoder, dim=cfg.out_dim, queue_size=cfg.queue_size, key_momentum=cfg.key_momentum,
            temperature=cfg.temperature, ring=m.ring,
        )
    raise AssertionError(f"objective {m.objective!r} has no builder")
