"""Instance discrimination (IR, Wu et al. 2018) and its family on a memory bank of N x 128 embeddings.

Loss (the paper's Eq. 3, non-parametric softmax): for query ``q_i = g(t(x_i))`` the positive is
the bank entry ``M[i]`` and the k negatives are bank entries drawn uniformly (IR) or from the
query's Ring window (IRing, :func:`ring.engine.objectives.ring.sample_in_window`).  After the loss the
bank entry moves towards the new embedding: ``M[i] <- normalise(m M[i] + (1 - m) q_i)``.

The same bank objective carries the k-means methods (:mod:`ring.engine.objectives.kmeans`): LA's
background negatives and close-neighbour positives (:mod:`ring.engine.objectives.la`), Cave's
cluster-restricted negatives (:mod:`ring.engine.objectives.cave`) and Ring's +C_i; CMC
(:mod:`ring.engine.objectives.cmc`) is two of its contrasts with swapped banks.

How many negatives ``bank_negatives = k`` means (``negatives_count``): ``"excluding_positive"`` (ours, IR's and
CMC's code): k drawn negatives, a softmax over k + 1 entries with the positive; ``"including_positive"`` (the
authors' ``NCE``/``NCERing`` in contrastive-ring-public ``src/objectives/instdisc.py``, k = 4096): k counts the
positive, k - 1 negatives are drawn, a softmax over k entries.  LA's background neighbours (the k closest entries)
are no draw and keep their count either way (LA's code: k = 4096 neighbours).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ring.engine import LA_OWN_ENTRY_RULES, NEGATIVES_COUNTS, distributed  # negatives_count: see the module docstring
from ring.engine.encoder import Encoder
from ring.engine.objectives import samplers
from ring.engine.objectives.kmeans import Clusterings
from ring.engine.objectives.la import background_neighbours, local_aggregation_loss, local_aggregation_loss_topk


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
    """IR, IRing and the k-means variants (LA, IRCave, IRing +C_i) on one memory bank.

    ``sampler`` names what draws the negatives (a key of :data:`ring.engine.objectives.samplers.SAMPLERS`; by
    default ``"ring"`` when ``ring`` is set, else ``"uniform"``), resolved once here; ``close_positives`` adds LA's
    close neighbours as positives.  The k-means parts need ``clusterings`` and stay off for the
    first ``warmup_epochs`` epochs (the method then is IR, or IRing for +C_i).
    """

    @staticmethod
    def build_encoder(settings) -> nn.Module:
        """The network it trains: one ResNet-18 with its head."""
        return Encoder(settings.head, settings.out_dim)

    @classmethod
    def from_settings(cls, settings, model: nn.Module, n_train: int, max_chunk_elements: int) -> InstanceDiscrimination:
        """The loss module of the method of ``settings`` (:class:`ring.core.objective_settings.ObjectiveSettings`);
        ``model`` is unused (the bank holds the keys).  The k-means group is read by the methods that cluster alone,
        LA's own-entry rule by the background sampler alone (what :meth:`ring.core.methods.BankObjective.groups`
        declares)."""
        m, keys = settings.method, settings.keys
        bank, clusterings = keys.bank, None
        if m.uses_kmeans:
            kmeans = keys.kmeans
            clusterings = Clusterings(
                n_train, kmeans.kmeans_clusterings, kmeans.kmeans_k, kmeans.kmeans_iters, settings.seed
            )
        return cls(
            n=n_train,
            dim=settings.out_dim,
            negatives=bank.bank_negatives,
            temperature=settings.temperature,
            bank_momentum=bank.bank_momentum,
            ring=m.ring,
            max_chunk_elements=max_chunk_elements,
            sampler=m.sampler,
            close_positives=m.close_positives,
            clusterings=clusterings,
            warmup_epochs=keys.kmeans.kmeans_warmup_epochs if m.uses_kmeans else 0,
            la_own_entry=keys.la.la_own_entry if m.sampler == "background" else "positive",
            negatives_count=bank.negatives_count,
            **cls.own_options(keys),
        )

    @staticmethod
    def own_options(keys) -> dict:
        """Keyword arguments a subclass takes from its own key groups (``keys``: ObjectiveSettings.keys) beyond the
        bank's."""
        return {}

    def __init__(
        self,
        n: int,
        dim: int,
        negatives: int,
        temperature: float,
        bank_momentum: float,
        ring: bool,
        max_chunk_elements: int,
        *,
        sampler: str | None = None,
        close_positives: bool = False,
        clusterings: Clusterings | None = None,
        warmup_epochs: int = 0,
        la_own_entry: str = "positive",
        negatives_count: str = "excluding_positive",
    ):
        super().__init__()
        if negatives_count not in NEGATIVES_COUNTS:
            raise ValueError(
                f"negatives_count={negatives_count!r} is not a count; choose one of {', '.join(NEGATIVES_COUNTS)}."
            )
        if negatives_count == "including_positive" and negatives < 2:
            raise ValueError(
                f"bank_negatives={negatives} counts the positive (negatives_count: including_positive), "
                "so no negative is left; set it to at least 2."
            )
        if la_own_entry not in LA_OWN_ENTRY_RULES:
            raise ValueError(
                f"la_own_entry={la_own_entry!r} is not a rule; choose one of {', '.join(LA_OWN_ENTRY_RULES)}."
            )
        # LA's own-entry rule (ring.engine.objectives.la); only the background sampler (LA) reads it.
        self.la_own_entry = la_own_entry
        if negatives > n:
            raise ValueError(
                f"bank_negatives={negatives} is larger than the memory bank ({n} training images); set it to at most "
                f"{n}."
            )
        self.sampler = sampler or ("ring" if ring else "uniform")
        self.strategy = samplers.resolve(self.sampler)
        self.warmup_strategy = samplers.warmup(self.strategy)
        self.close_positives = close_positives
        if (self.strategy.needs_clusters or close_positives) and clusterings is None:
            raise ValueError(f"Negatives {self.sampler!r} / close positives need k-means clusterings.")
        self.bank = MemoryBank(n, dim, bank_momentum)
        self.clusterings = clusterings
        self.warmup_epochs = warmup_epochs
        self.kmeans_on = False
        # Negatives drawn per query (uniform, Ring and Cave samplers, CMC's per-view draws): the authors' k - 1 when
        # bank_negatives counts the positive; LA's background neighbours are bank_negatives either way.
        self.negatives = negatives - 1 if negatives_count == "including_positive" else negatives
        self.background_size = negatives
        self.temperature = temperature
        self.ring = ring
        self.max_chunk_elements = max_chunk_elements

    def memories(self) -> list[torch.Tensor]:
        return [self.bank.memory]

    # -- k-means ------------------------------------------------------------------------------
    def start_epoch(self, epoch: int) -> None:
        """Called by pretraining before every epoch (and again on resume): k-means on the bank(s)."""
        if self.clusterings is None:
            return
        self.kmeans_on = epoch >= self.warmup_epochs
        if self.kmeans_on:
            # CMC clusters its instances once, on both modalities' entries side by side.
            self.clusterings.update(torch.cat(self.memories(), dim=1), epoch)

    # -- one query set against one bank ---------------------------------------------------------
    @torch.no_grad()
    def negative_indices(
        self,
        q: torch.Tensor,
        window: tuple[float, float] | None,
        u: torch.Tensor,
        memory: torch.Tensor | None = None,
        index: torch.Tensor | None = None,
    ) -> torch.Tensor:
        memory = self.bank.memory if memory is None else memory
        return self.active_strategy().draw(self, q, memory, index, window, u)

    def active_strategy(self) -> samplers.Sampler:
        """The sampler drawing now: during the k-means warm-up a clustered one's stand-in, the base method's."""
        return self.strategy if self.kmeans_on else self.warmup_strategy

    def active_sampler(self) -> str:
        return self.active_strategy().name

    def contrast(
        self, q: torch.Tensor, memory: torch.Tensor, index: torch.Tensor, window, u: torch.Tensor
    ) -> torch.Tensor:
        """The loss of queries ``q`` whose positives are ``memory[index]``."""
        neg_idx = self.negative_indices(q, window, u, memory, index)
        if not (self.close_positives and self.kmeans_on):
            return nce_softmax_loss(q, memory[index], memory[neg_idx], self.temperature)
        l_pos = (q * memory[index]).sum(dim=1, keepdim=True)
        l_neg = torch.bmm(memory[neg_idx], q.unsqueeze(2)).squeeze(2)
        if self.active_strategy().negatives_are_background:  # LA: close neighbours are part of the background
            close = self.clusterings.same_cluster(index, neg_idx)
            if self.la_own_entry == "topk":  # LA's code: the own entry counts only as one of the k (a close one)
                return local_aggregation_loss_topk(l_neg, close, self.temperature)
            return local_aggregation_loss(l_pos, l_neg, close, l_neg, ~close, self.temperature)
        background = background_neighbours(q.detach(), memory, index, self.background_size, self.max_chunk_elements)
        l_background = torch.bmm(memory[background], q.unsqueeze(2)).squeeze(2)
        close = self.clusterings.same_cluster(index, background)
        return local_aggregation_loss(l_pos, l_background, close, l_neg, None, self.temperature)

    def draws(self, q: torch.Tensor, generator=None) -> torch.Tensor:
        # One draw for the global batch; each data-parallel rank takes its rows.
        u = torch.rand((len(q) * distributed.world_size(), self.negatives), generator=generator, device=q.device)
        return distributed.local_rows(u)

    def forward(self, model: nn.Module, views, index: torch.Tensor, window=None, generator=None):
        q = model(views[0])
        loss = self.contrast(q, self.bank.memory, index, window, self.draws(q, generator))
        # Every rank applies the whole global batch's update, so the banks stay identical.
        self.bank.update(distributed.all_gather(index), distributed.all_gather(q.detach()))
        return loss
