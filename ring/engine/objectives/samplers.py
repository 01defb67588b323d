"""The negative samplers of a memory bank objective (:class:`ring.engine.objectives.ir.InstanceDiscrimination`).

A sampler is one small stateless class: its ``name`` (the one :data:`ring.core.methods.NEGATIVES` lists and a method
declares), whether it needs the k-means clusterings (``needs_clusters``; before k-means is on it acts as the base
method, :class:`Uniform`), and ``draw(objective, q, memory, index, window, u)``: the B x k bank indices of the
negatives of queries ``q`` against ``memory``, their positives ``memory[index]``, for ``u`` (B x k uniform draws).
The objective resolves its sampler once, when it is built (:func:`resolve`); :data:`SAMPLERS` is the registry.
"""

from __future__ import annotations

import torch

from ring.engine.objectives.cave import sample_in_clusters
from ring.engine.objectives.la import background_neighbours
from ring.engine.objectives.ring import sample_in_window, sample_uniform


class Sampler:
    """What the objective asks of a sampler; the objective lends its settings (``max_chunk_elements``,
    ``clusterings``, ``background_size``, ``la_own_entry``)."""

    name = ""
    needs_clusters = False  # it reads the objective's k-means clusterings
    # Its negatives are LA's background: close neighbours among them are LA's positives (ring.engine.objectives.la).
    negatives_are_background = False

    def draw(self, objective, q: torch.Tensor, memory: torch.Tensor, index: torch.Tensor, window, u: torch.Tensor):
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Uniform(Sampler):
    """IR's negatives: uniform over the whole bank."""

    name = "uniform"

    def draw(self, objective, q, memory, index, window, u):
        return sample_uniform(len(memory), u)


class RingWindow(Sampler):
    """Ring's negatives (Sec. 4): uniform within each query's window ``(w_l, w_u)`` of the bank."""

    name = "ring"

    def draw(self, objective, q, memory, index, window, u):
        w_l, w_u = window
        return sample_in_window(q.detach(), memory, w_l, w_u, u, objective.max_chunk_elements)


class Cave(Sampler):
    """Cave's negatives: uniform within the instance's k-means clusters."""

    name = "cave"
    needs_clusters = True

    def draw(self, objective, q, memory, index, window, u):
        return sample_in_clusters(objective.clusterings, index, u, objective.max_chunk_elements)


class Background(Sampler):
    """LA's background: the ``background_size`` bank entries closest to each query, no draw."""

    name = "background"
    needs_clusters = True
    negatives_are_background = True

    def draw(self, objective, q, memory, index, window, u):
        return background_neighbours(
            q.detach(),
            memory,
            index,
            objective.background_size,
            objective.max_chunk_elements,
            include_own=objective.la_own_entry == "topk",
        )


SAMPLERS: dict[str, type[Sampler]] = {cls.name: cls for cls in (Uniform, RingWindow, Cave, Background)}


def resolve(name: str) -> Sampler:
    """The sampler registered as ``name``."""
    if name not in SAMPLERS:
        raise ValueError(f"Negatives {name!r} is not a sampler; choose one of {', '.join(SAMPLERS)}.")
    return SAMPLERS[name]()


def warmup(sampler: Sampler) -> Sampler:
    """What ``sampler`` acts as before k-means is on: the base method's uniform draw where it needs clusters."""
    return Uniform() if sampler.needs_clusters else sampler
