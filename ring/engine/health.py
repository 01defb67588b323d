"""Numerical health, one contract for every stage: no non-finite number is trained on, saved or tabled.

Each training stage checks its loss at every step (it already holds it as a float for the log) and
its parameters where they are about to be saved (epoch end, export): the first non-finite value
stops the stage with :class:`NonFinite`, one sentence naming the cell, epoch, step, a likely
cause and what a rerun starts from (the checkpoint, where the folder holds one).  The stage then exits
non-zero without writing its final artefact, and its last checkpoint, if one was written before the value went
bad, stays the one a rerun resumes from.  Tables refuse a non-finite metric the same way (:func:`check_metrics`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch

from ring.core.metrics import NonFinite


def likely_cause(lr: float | None, checkpoint: Path | None = None) -> str:
    """The cause and the fix; with ``checkpoint`` (the stage's, or None where it keeps none of its own), what a rerun
    starts from, as the folder holds it now: the sentence never promises a checkpoint that was not written."""
    lr_text = f" (lr={lr:g})" if lr is not None else ""
    if checkpoint is None:
        after = ""
    elif Path(checkpoint).is_file():
        after = f" (the last good checkpoint, {checkpoint}, is kept: the rerun resumes from it)"
    else:
        after = " (no checkpoint was written before it: the rerun starts from scratch)"
    return (
        f"the learning rate{lr_text} is likely too high for this batch size or the inputs are corrupt; "
        f"lower lr and rerun{after}"
    )


def check_loss(
    value: float, where: str, epoch: int, step: int, lr: float | None = None, checkpoint: Path | None = None
) -> None:
    """Stop at the first non-finite training loss; ``epoch`` and ``step`` are 1-based, as a user counts."""
    if not math.isfinite(value):
        raise NonFinite(
            f"{where}: the training loss became {value} at epoch {epoch} step {step}; {likely_cause(lr, checkpoint)}."
        )


# A linear probe's training loss is high when the mean of its last epoch (the epoch whose classifier is reported)
# exceeds DIVERGENCE_FACTOR x ln(K), K the classes.  ln(K) is the loss of the zero classifier, which predicts every
# class equally; cross-entropy is convex in a linear classifier's weights, so an optimisation that works ends below
# it or near it, and a noisy one (a high lr, unnormalised features, loss spikes) within a few times it.  An epoch
# mean of 100 ln(K) (230 nats for 10 classes) means the true class's logit trails by about that much on the average
# image: the steps overshoot (lr x squared feature norm too large), not noise.  The smoke grid's healthy cells end at
# 0.07 to 0.1 ln(K) (digits) and, the noisiest, 1.0 to 1.3 ln(K) (IR transferred to the shapes).  Only the last
# epoch counts: a run that spikes and recovers is never flagged.
DIVERGENCE_FACTOR = 100.0

# A high loss alone hides no measurement: a probe whose steps overshoot can still rank the true class first on many
# test images (a CMC probe at loss 1.5e6 scored 26.9% top-1 on digits, chance 10%).  What the tables refuse is an
# accuracy that says nothing, one at chance: a test top-1 below 1/K + CHANCE_SE binomial standard errors,
# sqrt(p (1 - p) / n) with p = 1/K and n the test images.  A probe that learned nothing scores Binomial(n, 1/K) / n,
# so it passes 3 standard errors with probability 0.13% (normal approximation; n/K = 45 on digits' 450 test images):
# every number shown is above chance at that confidence.  On digits the bar is 10% + 3 x 1.41% = 14.2%.
CHANCE_SE = 3.0


def chance_bar(num_classes: int, test_images: int) -> float:
    """The test top-1 (percent) at or below which a probe is at chance (:data:`CHANCE_SE`)."""
    p = 1.0 / num_classes
    return 100.0 * (p + CHANCE_SE * math.sqrt(p * (1.0 - p) / max(test_images, 1)))


def high_loss(last_epoch_loss: float, num_classes: int) -> bool:
    """Whether a finite last-epoch loss exceeds :data:`DIVERGENCE_FACTOR` x ln(K) (a non-finite one: True too)."""
    return not (math.isfinite(last_epoch_loss) and last_epoch_loss <= DIVERGENCE_FACTOR * math.log(num_classes))


def _loss_text(last_epoch_loss: float | None, num_classes: int, epochs: int) -> str:
    chance = math.log(num_classes)
    value = "unknown (no log line)" if last_epoch_loss is None else f"{last_epoch_loss:.3g}"
    return (
        f"last epoch's mean training loss {value} (epoch {epochs}; {DIVERGENCE_FACTOR:g} x "
        f"ln({num_classes}) = {DIVERGENCE_FACTOR * chance:.3g}, where predicting every class equally scores ln(K))"
    )


def _chance_text(top1: float, num_classes: int, test_images: int) -> str:
    return (
        f"test top-1 {top1:.1f}% against chance {100.0 / num_classes:.1f}% + {CHANCE_SE:g} binomial standard "
        f"errors over {test_images} test images = {chance_bar(num_classes, test_images):.1f}%"
    )


def divergence(
    last_epoch_loss: float | None,
    num_classes: int,
    where: str,
    epochs: int,
    lr: float | None = None,
    top1: float | None = None,
    test_images: int = 0,
) -> str | None:
    """The one sentence saying a linear evaluation diverged, or None when it did not: a non-finite loss, or a test
    top-1 at chance (:func:`chance_bar`); without a ``top1`` to judge, a high loss (:func:`high_loss`)."""
    loss = _loss_text(last_epoch_loss, num_classes, epochs)
    if last_epoch_loss is not None and not math.isfinite(last_epoch_loss):
        why = f"its {loss} is not finite"
    elif top1 is None:
        if last_epoch_loss is None or not high_loss(last_epoch_loss, num_classes):
            return None
        why = f"its {loss} is too high and no accuracy was measured"
    elif top1 > chance_bar(num_classes, test_images):
        return None
    else:
        why = f"its {_chance_text(top1, num_classes, test_images)} is at chance ({loss})"
    lr_text = f"lr={lr:g}" if lr is not None else "the learning rate"
    return (
        f"{where}: the linear evaluation diverged: {why}, so no accuracy is reported; the features are too large "
        f"for {lr_text} or carry nothing the classes differ in (as CMC's ab trunk on grey images, whose ab view is "
        "constant): lower lr or fix the encoder."
    )


def loss_note(
    last_epoch_loss: float, num_classes: int, where: str, epochs: int, protocol: str, top1: float, test_images: int
) -> str | None:
    """The footnote of a probe whose accuracy is reported although its training loss stayed high (:func:`high_loss`,
    its top-1 above chance), or None for a probe whose loss is not high.  ``protocol`` says how it was trained."""
    if not high_loss(last_epoch_loss, num_classes):
        return None
    return (
        f"{where}: the linear probe's {_loss_text(last_epoch_loss, num_classes, epochs)} stayed high under "
        f"{protocol}: its steps overshoot, so the classifier did not converge; its "
        f"{_chance_text(top1, num_classes, test_images)} is above chance, so it is reported, marked."
    )


def probe_verdict(
    scores: Mapping[str, float],
    last_epoch_loss: float | None,
    num_classes: int,
    test_images: int,
    where: str,
    epochs: int,
    lr: float | None,
    protocol: str,
) -> dict:
    """What a linear evaluation's ``metrics.json`` reports of its last epoch: ``{"diverged": sentence}`` without the
    accuracy (:func:`divergence`), or the ``scores`` (top1, top5), with a ``loss_note`` where the loss stayed high."""
    diverged = divergence(last_epoch_loss, num_classes, where, epochs, lr, scores["top1"], test_images)
    if diverged:
        return {"diverged": diverged}
    note = last_epoch_loss is not None and loss_note(
        last_epoch_loss, num_classes, where, epochs, protocol, scores["top1"], test_images
    )
    return {**scores, **({"loss_note": note} if note else {})}


def first_non_finite(tensors: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]) -> str | None:
    """The name of the first floating-point tensor holding a NaN or an infinity, or None."""
    items = tensors.items() if isinstance(tensors, Mapping) else tensors
    for name, t in items:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(torch.isfinite(t).all()):
            return name
    return None


def check_parameters(tensors, where: str, epoch: int, lr: float | None = None, checkpoint: Path | None = None) -> None:
    """Stop when a parameter or buffer is non-finite (cheap: once per epoch, before the checkpoint)."""
    bad = first_non_finite(tensors)
    if bad is not None:
        raise NonFinite(
            f"{where}: tensor {bad} became non-finite by the end of epoch {epoch}; {likely_cause(lr, checkpoint)}."
        )


def check_export(state: Mapping[str, torch.Tensor], path) -> None:
    """An encoder (or any exported state dict) is finite before it is written to ``path``."""
    bad = first_non_finite(state)
    if bad is not None:
        raise NonFinite(
            f"Refusing to write {path}: its tensor {bad} is not finite; the training diverged, "
            "lower lr and rerun the cell."
        )
