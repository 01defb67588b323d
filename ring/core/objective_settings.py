"""What a method's objective is built from: the shared values and the method's own frozen config (torch-free).

The pretraining stage's entry point (:func:`ring.pretrain.objective_settings`) reads them from the cell's config once
and hands them to the objective's class (``build_encoder(settings)``, ``from_settings(settings, model, n_train,
max_chunk_elements)``: :data:`ring.core.methods.IMPLEMENTATION_CALLS`); the objective never sees the config.  Its own
config holds one frozen config per key group the method reads (:attr:`ring.core.methods.Method.key_groups`: a memory
bank's, MoCo's queue's, the Ring window's, ...), so ``settings.keys.queue.queue_size`` is MoCo's queue size and a
method that reads no queue has no ``queue`` to read: a key it does not declare would be hashed at its default
(:func:`ring.core.config.hashed_values`), and a value set for it would train under another cell's hash.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache

from ring.core.key_declaration import KeyGroup


@cache
def _own_config_class(groups: tuple[KeyGroup, ...]) -> type:
    # Named by its groups, so that reading another group says which it has: 'OwnKeys[queue, ring]' has no 'bank'.
    fields = [(g.name, g.config) for g in groups]
    return dataclasses.make_dataclass(f"OwnKeys[{', '.join(g.name for g in groups)}]", fields, frozen=True)


def own_config(groups: tuple[KeyGroup, ...], configs: tuple) -> object:
    """A method's own frozen config: one field per group of ``groups`` (the groups it reads), named as the group,
    holding that group's frozen config of ``configs`` (the entry point read each from the cell's config:
    :meth:`ring.core.key_declaration.KeyGroup.read`)."""
    return _own_config_class(groups)(*configs)


@dataclass(frozen=True)
class ObjectiveSettings:
    """A cell's objective's inputs: its resolved method and dataset, the values every objective shares, its own keys."""

    method: object  # the ring.core.methods.Method the entry point resolved (its ring, sampler, uses_kmeans, ...)
    dataset: object  # the dataset's ring.core.catalog entry: statistics, classes (CMC's Lab encoder normalises by it)
    head: str  # the projection head ("linear" or "mlp") on the 512-d trunk
    out_dim: int  # the embedding's size
    temperature: float  # the softmax temperature of the contrast
    batch_size: int  # images per step over all GPUs (the global batch)
    seed: int  # the cell's seed (the k-means streams are drawn from it)
    keys: object  # the method's own frozen config (own_config): settings.keys.bank, .queue, .ring, ...
