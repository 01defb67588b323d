"""What a method's objective is built from: the shared values and the method's own keys (torch-free).

The pretraining stage's entry point (:func:`ring.pretrain.objective_settings`) reads them from the cell's config once
and hands them to the objective's class (``build_encoder(settings)``, ``from_settings(settings, model, n_train,
max_chunk_elements)``: :data:`ring.core.methods.IMPLEMENTATION_CALLS`); the objective never sees the config.  The own
keys are those of :data:`ring.core.methods.METHOD_KEYS` the method's objective declares it reads
(:attr:`ring.core.methods.Objective.own_keys`, the Ring keys for a Ring method): reading another is one sentence, since
a key the method does not declare is hashed at its default (:func:`ring.core.config.hashed_values`) and a value set
for it would train under another cell's hash.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass


class OwnKeys(Mapping):
    """A method's own keys -> the cell's values; a key it does not declare is a ``KeyError`` that says so."""

    def __init__(self, method: str, values: Mapping[str, object]):
        self._method, self._values = method, dict(values)

    def __getitem__(self, key: str) -> object:
        if key not in self._values:
            raise KeyError(
                f"{self._method} reads {key!r}, which its objective does not declare (own_keys: "
                f"{', '.join(self._values) or 'none'}); add it to its own_keys (docs/adding-a-method.md)"
            )
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"OwnKeys({self._method}, {self._values!r})"


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
    keys: OwnKeys  # the method's own keys -> values (ring.core.method_keys declares each)
