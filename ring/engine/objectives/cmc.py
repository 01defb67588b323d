"""Contrastive Multiview Coding (CMC, Tian et al. 2019) and its Ring, Cave and +C_i variants.

An image is split into its L and ab channels of Lab colour (:class:`ring.engine.encoder.LabEncoder`: two
ResNet-18 encoders, twice the parameters); the model returns ``[z_L, z_ab]`` side by side.  CMC is
the sum of two IR losses whose memory banks are swapped between views (the paper, Sec. 2):
``L_IR(z_L; M_ab) + L_IR(z_ab; M_L)``, each bank then moving towards its own view's embedding.
Negatives of the L query are drawn from ``M_ab`` (uniformly, in the L query's Ring window, or in
the instance's clusters) and vice versa.  k-means (Cave, +C_i) clusters the instances once, on
both banks' entries side by side.
"""

from __future__ import annotations

import torch

from ring.engine import CMC_NEGATIVE_DRAWS, distributed
from ring.engine.encoder import LabEncoder
from ring.engine.objectives.ir import InstanceDiscrimination, MemoryBank

# How the two views' negatives are drawn (cmc_negatives): "shared", CMC's code (HobbitLong/CMC,
# NCE/NCEAverage.py: one multinomial draw of K indices per query indexes both memory_l and memory_ab,
# the code behind CMC's published numbers); "per_view", an independent draw for each view (ours
# before the switch).  With the same uniforms, uniform and Cave draws give the same indices in both
# banks; Ring windows differ per view, so there the draws share their positions in each window.
NEGATIVE_DRAWS = CMC_NEGATIVE_DRAWS


class MultiviewContrast(InstanceDiscrimination):
    """CMC's two swapped banks on top of :class:`InstanceDiscrimination`'s per-bank contrast."""

    @staticmethod
    def build_encoder(settings) -> torch.nn.Module:
        """An L and an ab ResNet-18 over views normalised with the statistics of the cell's dataset (its catalog entry,
        resolved by the stage's entry point: :class:`ring.core.objective_settings.ObjectiveSettings`)."""
        return LabEncoder(settings.head, settings.out_dim, settings.dataset.mean, settings.dataset.std)

    @staticmethod
    def own_options(keys) -> dict:
        return {"negative_draw": keys.cmc.cmc_negatives}

    def __init__(
        self,
        n: int,
        dim: int,
        negatives: int,
        temperature: float,
        bank_momentum: float,
        ring: bool,
        max_chunk_elements: int,
        negative_draw: str = "per_view",
        **kwargs,
    ):
        super().__init__(n, dim, negatives, temperature, bank_momentum, ring, max_chunk_elements, **kwargs)
        if negative_draw not in NEGATIVE_DRAWS:
            raise ValueError(
                f"cmc_negatives={negative_draw!r} is not a draw; choose one of {', '.join(NEGATIVE_DRAWS)}."
            )
        self.negative_draw = negative_draw
        self.dim = dim
        self.bank_ab = MemoryBank(n, dim, bank_momentum)

    def memories(self) -> list[torch.Tensor]:
        return [self.bank.memory, self.bank_ab.memory]

    def forward(self, model, views, index: torch.Tensor, window=None, generator=None):
        z = model(views[0])
        if z.shape[1] != 2 * self.dim:
            raise ValueError(f"CMC expects [z_L, z_ab] of 2 x {self.dim} features, got {z.shape[1]}.")
        z_l, z_ab = z[:, : self.dim], z[:, self.dim :]
        if self.negative_draw == "shared":  # CMC's code: one index set per query, for both views
            u_l = u_ab = self.draws(z_l, generator)  # drawn for the global batch, this rank's rows
        else:
            # One draw per (view, query) of the global batch, laid out view by view, so that each rank
            # takes its own queries' rows of each view: N processes draw what one process draws.
            global_rows = len(z_l) * distributed.world_size()
            u = torch.rand((2, global_rows, self.negatives), generator=generator, device=z.device)
            u_l, u_ab = distributed.local_rows(u[0]), distributed.local_rows(u[1])
        loss = self.contrast(z_l, self.bank_ab.memory, index, window, u_l) + self.contrast(
            z_ab, self.bank.memory, index, window, u_ab
        )
        all_index = distributed.all_gather(index)
        self.bank.update(all_index, distributed.all_gather(z_l.detach()))
        self.bank_ab.update(all_index, distributed.all_gather(z_ab.detach()))
        return loss
