"""Momentum contrast (MoCo, He et al. 2019) and MoCoRing: a FIFO queue of keys from a momentum encoder.

Loss (the paper's Eq. 4): for query ``q = g(t(x))`` and key ``k = g'(t'(x))`` the positive logit
is ``q.k`` and the negatives are every queue entry (MoCo) or every queue entry inside the query's
Ring window (MoCoRing, :func:`ring.engine.objectives.ring.window_mask`), all divided by the temperature.

Shuffled BatchNorm: MoCo computes BN statistics per GPU and shuffles the key batch across GPUs,
so a query and its key never share statistics.  The model it receives computes BN per group of
the batch (:class:`ring.engine.grouped_bn.Grouped`: ``bn_groups`` groups, as many GPUs); the key batch is
permuted before the momentum encoder and restored after, within one process or across
data-parallel ranks (gathered, permuted with one shared permutation, sliced, gathered back).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from ring.engine import distributed
from ring.engine.encoder import Encoder
from ring.engine.objectives.ir import random_unit_rows
from ring.engine.objectives.ring import window_mask


def moco_loss(
    q: torch.Tensor, k: torch.Tensor, queue: torch.Tensor, temperature: float, window: tuple[float, float] | None = None
) -> torch.Tensor:
    """Cross-entropy of the positive among ``[q.k, q.queue_j ...]``; ``window`` masks the queue."""
    l_pos = (q * k).sum(dim=1, keepdim=True)
    l_neg = q @ queue.T
    if window is not None:
        keep = window_mask(l_neg, *window)
        l_neg = l_neg.masked_fill(~keep, float("-inf"))
    logits = torch.cat([l_pos, l_neg], dim=1) / temperature
    return F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long, device=q.device))


class MomentumContrast(nn.Module):
    """MoCo, or MoCoRing when ``ring`` is set.  Two views per image."""

    @staticmethod
    def build_encoder(settings) -> nn.Module:
        """The query network: one ResNet-18 with its head (the key encoder is its copy)."""
        return Encoder(settings.head, settings.out_dim)

    @classmethod
    def from_settings(cls, settings, model: nn.Module, n_train: int, max_chunk_elements: int) -> MomentumContrast:
        """The loss module of the method of ``settings`` (:class:`ring.core.objective_settings.ObjectiveSettings`); the
        key encoder starts as a copy of ``model`` (BatchNorm groups included)."""
        queue_size = settings.keys.queue.queue_size
        if queue_size < settings.batch_size:
            raise ValueError(
                f"queue_size={queue_size} is smaller than batch_size={settings.batch_size}; raise queue_size."
            )
        return cls(
            model,
            dim=settings.out_dim,
            queue_size=queue_size,
            key_momentum=settings.keys.queue.key_momentum,
            temperature=settings.temperature,
            ring=settings.method.ring,
        )

    def __init__(
        self, encoder: nn.Module, dim: int, queue_size: int, key_momentum: float, temperature: float, ring: bool
    ):
        super().__init__()
        if queue_size < 1:
            raise ValueError(f"queue_size={queue_size} must be at least the batch size.")
        self.key_encoder = copy.deepcopy(encoder)
        for p in self.key_encoder.parameters():
            p.requires_grad_(False)
        self.register_buffer("queue", random_unit_rows(queue_size, dim))
        self.register_buffer("queue_ptr", torch.zeros((), dtype=torch.long))
        self.key_momentum = key_momentum
        self.temperature = temperature
        self.ring = ring

    @torch.no_grad()
    def _momentum_update(self, encoder: nn.Module) -> None:
        """``k <- m k + (1 - m) q`` for every parameter: the same two roundings per element as a loop of
        ``mul_``/``add_`` (bit-identical to it), in two multi-tensor calls instead of two per parameter."""
        m = self.key_momentum
        keys = list(self.key_encoder.parameters())
        torch._foreach_mul_(keys, m)
        torch._foreach_add_(keys, list(encoder.parameters()), alpha=1.0 - m)  # no_grad: no detach needed

    @torch.no_grad()
    def _keys(self, x: torch.Tensor, generator=None) -> torch.Tensor:
        x_all = distributed.all_gather(x)
        perm = torch.randperm(len(x_all), generator=generator, device=x.device)
        keys = distributed.all_gather(self.key_encoder(distributed.local_rows(x_all[perm])))
        return distributed.local_rows(keys[torch.argsort(perm)])

    @torch.no_grad()
    def _enqueue(self, keys: torch.Tensor) -> None:
        # The pointer stays on the device: reading it would wait for the whole step to finish.
        n = self.queue.shape[0]
        rows = (self.queue_ptr + torch.arange(len(keys), device=keys.device)) % n
        self.queue.index_copy_(0, rows, keys)
        self.queue_ptr.add_(len(keys)).remainder_(n)

    def forward(self, model: nn.Module, views, index: torch.Tensor, window=None, generator=None):
        q = model(views[0])
        self._momentum_update(model)
        k = self._keys(views[1], generator)
        loss = moco_loss(q, k, self.queue.clone(), self.temperature, window if self.ring else None)
        self._enqueue(distributed.all_gather(k))
        return loss
