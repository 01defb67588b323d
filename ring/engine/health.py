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

from ring.core.metrics import NonFinite, check_metrics, non_finite_values  # noqa: F401  (torch-free; re-exported)


def likely_cause(lr: float | None) -> str:
    lr_text = f" (lr={lr:g})" if lr is not None else ""
    return (f"the learning rate{lr_text} is likely too high for this batch size or the inputs are corrupt; "
            "lower lr and rerun (the last good checkpoint is kept)")


def check_loss(value: float, where: str, epoch: int, step: int, lr: float | None = None) -> None:
    """Stop at the first non-finite training loss; ``epoch`` and ``step`` are 1-based, as a user counts."""
    if not math.isfinite(value):
        raise NonFinite(f"{where}: the training loss became {value} at epoch {epoch} step {step}; {likely_cause(lr)}.")


# A linear evaluation has diverged when the mean training loss of its last epoch (the epoch whose classifier is
# reported) exceeds DIVERGENCE_FACTOR x ln(K), K the classes.  ln(K) is the loss of the zero classifier, which
# predicts every class equally; cross-entropy is convex in a linear classifier's weights, so an optimisation that
# works ends below it or near it, and a noisy one (a high lr, unnormalised features, loss spikes) within a few times it.
# An epoch mean of 100 ln(K) (230 nats for 10 classes) means the true class's logit trails by about that much on
# the average image: the steps overshoot (lr x squared feature norm too large), not noise.  The CMC-on-grey-digits
# cells that prompted it ended at 6e4 to 3e6 (1e8 to 2e9 in transfer); the smoke grid's healthy cells at 0.07 to
# 0.1 ln(K) (digits) and, the noisiest, 1.0 to 1.3 ln(K) (IR transferred to the shapes, loss jumping epoch to
# epoch).  Only the last epoch counts: a run that spikes and recovers is never refused.
DIVERGENCE_FACTOR = 100.0


def divergence(last_epoch_loss: float, num_classes: int, where: str, epochs: int, lr: float | None = None) -> str | None:
    """The one sentence saying a linear evaluation diverged (:data:`DIVERGENCE_FACTOR`), or None when it did not."""
    chance = math.log(num_classes)
    if math.isfinite(last_epoch_loss) and last_epoch_loss <= DIVERGENCE_FACTOR * chance:
        return None
    lr_text = f"lr={lr:g}" if lr is not None else "the learning rate"
    return (f"{where}: the linear evaluation diverged: its last epoch's mean training loss {last_epoch_loss:.3g} (epoch "
            f"{epochs}) exceeds {DIVERGENCE_FACTOR:g} x ln({num_classes}) = {DIVERGENCE_FACTOR * chance:.3g}, where "
            f"predicting every class equally scores ln(K), so no accuracy is reported; the features are too large for "
            f"{lr_text} (as CMC's ab trunk gives on grey images, whose ab view is constant), lower lr or fix the encoder.")


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
