"""Numerical health, one contract for every stage: no non-finite number is trained on, saved or tabled.

Each training stage checks its loss at every step (it already holds it as a float for the log) and
its parameters where they are about to be saved (epoch end, export): the first non-finite value
stops the stage with :class:`NonFinite`, one sentence naming the cell, epoch, step and a likely
cause.  The stage then exits non-zero without writing its final artefact, and its last checkpoint,
written before the value went bad, stays the one a rerun resumes from.  Tables refuse a
non-finite metric the same way (:func:`check_metrics`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch


class NonFinite(ValueError):
    """A loss, parameter or metric is NaN or infinite."""


def likely_cause(lr: float | None) -> str:
    lr_text = f" (lr={lr:g})" if lr is not None else ""
    return (f"the learning rate{lr_text} is likely too high for this batch size or the inputs are corrupt; "
            "lower lr and rerun (the last good checkpoint is kept)")


def check_loss(value: float, where: str, epoch: int, step: int, lr: float | None = None) -> None:
    """Stop at the first non-finite training loss; ``epoch`` and ``step`` are 1-based, as a user counts."""
    if not math.isfinite(value):
        raise NonFinite(f"{where}: the training loss became {value} at epoch {epoch} step {step}; {likely_cause(lr)}.")


def first_non_finite(tensors: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]) -> str | None:
    """The name of the first floating-point tensor holding a NaN or an infinity, or None."""
    items = tensors.items() if isinstance(tensors, Mapping) else tensors
    for name, t in items:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(torch.isfinite(t).all()):
            return name
    return None


def check_parameters(tensors, where: str, epoch: int, lr: float | None = None) -> None:
    """Stop when a parameter or buffer is non-finite (cheap: once per epoch, before the checkpoint)."""
    bad = first_non_finite(tensors)
    if bad is not None:
        raise NonFinite(f"{where}: tensor {bad} became non-finite by the end of epoch {epoch}; {likely_cause(lr)}.")


def check_export(state: Mapping[str, torch.Tensor], path) -> None:
    """An encoder (or any exported state dict) is finite before it is written to ``path``."""
    bad = first_non_finite(state)
    if bad is not None:
        raise NonFinite(f"Refusing to write {path}: its tensor {bad} is not finite; the training diverged, "
                        "lower lr and rerun the cell.")


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
        raise NonFinite(f"{path} holds a non-finite metric ({', '.join(bad[:3])}); the cell that wrote it diverged: "
                        "rerun it with a lower lr.")
