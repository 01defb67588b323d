"""The torch-free half of the numerical-health contract (:mod:`ring.engine.health`): a metrics
document holds finite numbers only, or :class:`NonFinite` names the file (the tables read this on a
login node).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping


class NonFinite(ValueError):
    """A loss, parameter or metric is NaN or infinite."""


def non_finite_values(doc, prefix: str = "") -> list[str]:
    """Dotted names of every non-finite float in a nested metrics document."""
    if isinstance(doc, Mapping):
        return [name for key, value in doc.items() for name in non_finite_values(value, f"{prefix}{key}.")]
    if isinstance(doc, (list, tuple)):
        return [name for i, value in enumerate(doc) for name in non_finite_values(value, f"{prefix}{i}.")]
    if isinstance(doc, float) and not math.isfinite(doc):
        return [prefix.rstrip(".")]
    return []


def check_metrics(doc: Mapping, path, keys: Iterable[str] | None = None) -> None:
    """A metrics document (or its ``keys``) holds finite numbers only; one sentence naming ``path`` otherwise."""
    part = doc if keys is None else {k: doc[k] for k in keys if k in doc}
    bad = non_finite_values(part)
    if bad:
        raise NonFinite(
            f"{path} holds a non-finite metric ({', '.join(bad[:3])}); the cell that wrote it diverged: "
            "rerun it with a lower lr."
        )
