"""Instance discrimination (IR, Wu et al. 2018) and IRing: a memory bank of N x 128 embeddings.

Loss (the paper's Eq. 3, non-parametric softmax): for query ``q_i = g(t(x_i))`` the positive is
the bank entry ``M[i]`` and the k negatives are bank entries drawn uniformly (IR) or from the
query's Ring window (IRing, :func:`ring.objectives.ring.sample_in_window`).  After the loss the
bank entry moves towards the new embedding: ``M[i] <- normalise(m M[i] + (1 - m) q_i)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ring import distributed
from ring.objectives.ring import sample_in_window, sample_uniform


def nce_softmax_loss(q: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean of ``-log softmax`` of the positive among ``[pos, neg_1..neg_k]``.

    ``q``, ``pos``: B x D; ``neg``: B x k x D.  The paper's 1/(k+1) factor is a constant and omitted.
    """
    l_pos = (q * pos).sum(dim=1, keepdim=True)
    l_neg = torch.bmm(neg, q.unsqueeze(2)).squeeze(2)
    logits = torch.cat([l_pos, l_neg], dim=1) / temperature
    return F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long, device=q.device))


def random_unit_rows(n: int, dim: int, generator: torch.Generator | None = None) -> torch.Tensor:
    return F.normalize(torch.randn(n, dim, generator=generator), dim=1)


class MemoryBank(nn.Module):
    """N x D bank of L2-normalised embeddings, one row per training image."""

    def __init__(self, n: int, dim: int, momentum: float):
        super().__init__()
        self.momentum = momentum
        self.register_buffer("memory", random_unit_rows(n, dim))

    def __len__(self) -> int:
        return self.memory.shape[0]

    @torch.no_grad()
    def update(self, index: torch.Tensor, embeddings: torch.Tensor) -> None:
        mixed = self.momentum * self.memory[index] + (1.0 - self.momentum) * embeddings.detach()
        self.memory[index] = F.normalize(mixed, dim=1)


class InstanceDiscrimination(nn.Module):
    """IR, or IRing when ``ring`` is set.  One view per image."""

    n_views = 1

    def __init__(self, n: int, dim: int, negatives: int, temperature: float, bank_momentum: float,
                 ring: bool, max_chunk_elements: int):
        super().__init__()
        if negatives > n:
            raise ValueError(
                f"bank_negatives={negatives} is larger than the memory bank ({n} training images); set it to at most {n}."
            )
        self.bank = MemoryBank(n, dim, bank_momentum)
        self.negatives = negatives
        self.temperature = temperature
        self.ring = ring
        self.max_chunk_elements = max_chunk_elements

    @torch.no_grad()
    def negative_indices(self, q: torch.Tensor, window: tuple[float, float] | None, u: torch.Tensor) -> torch.Tensor:
        memory = self.bank.memory
        if not self.ring:
            return sample_uniform(len(memory), u)
        w_l, w_u = window
        return sample_in_window(q.detach(), memory, w_l, w_u, u, self.max_chunk_elements)

    def forward(self, model: nn.Module, views, index: torch.Tensor, window=None, generator=None):
        q = model(views[0])
        # One draw for the global batch; each data-parallel rank takes its rows.
        u = torch.rand((len(q) * distributed.world_size(), self.negatives), generator=generator, device=q.device)
        neg_idx = self.negative_indices(q, window, distributed.local_rows(u))
        memory = self.bank.memory
        loss = nce_softmax_loss(q, memory[index], memory[neg_idx], self.temperature)
        # Every rank applies the whole global batch's update, so the banks stay identical.
        self.bank.update(distributed.all_gather(index), distributed.all_gather(q.detach()))
        return loss
