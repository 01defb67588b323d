"""The authors' annealing policies: the parameterisations of ``mhw32/contrastive-ring-public``
(``src/utils/policy.py`` with the settings of ``src/systems/systems.py``), which made the appendix's figure.

They are named variants beside ours (:mod:`ring.engine.anneal_policies`; the paper grid's ``anneal_policies``
study runs both sets).  Their thresholds live in [0.1, 1]; here ``w_l = 100 - 100 * threshold``, so a threshold
move of 0.01 is one point of ``w_l``:

* ``step_authors``: 10 levels (threshold 100%, 90%, ..., 10%), each held for a tenth of the
  annealing steps, so the last level starts at 90% of them (epoch 90 of the paper's 100);
* ``exponential_authors``: ``threshold = 10% + 90% exp(-0.1 step)`` during the annealing steps,
  then 10%: the decay is per *step*, so the window is at its end within ~50 steps;
* ``adaptive_loss_authors``: every step, threshold +-0.01 (1 point of ``w_l``) against the mean
  of the last 10 losses (up, i.e. easier, when the loss is above it; unchanged when equal);
* ``adaptive_val_authors``: every epoch, threshold +-0.05 (5 points) against the mean of the last 5
  validation accuracies (harder when the accuracy is above it).

The authors' adaptive policies do not scale with ``ring_anneal_epochs``; all of them stay within
``ring_w_l`` and start at its first value, as the authors' start at threshold 100%.  The untrained
network's accuracy that the authors' trainer gave ``adaptive_val_authors`` first is
:meth:`ring.engine.anneal.RingSchedule.before_training`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ring.core.method_keys import RingKeys
from ring.engine.anneal_policies import LinearPolicy, StepCounted

# The authors' constants (src/utils/policy.py and src/systems/systems.py of contrastive-ring-public).
AUTHORS_STEP_LEVELS = 10  # np.arange(0.1, 1.1, 0.1): thresholds 1.0, 0.9, ..., 0.1
AUTHORS_EXP_DECAY = 0.1  # exp(-0.1 * step)
AUTHORS_LOSS_DELTA, AUTHORS_LOSS_WINDOW = 1.0, 10  # threshold 0.01 per step, mean of the last 10 losses
AUTHORS_VAL_DELTA, AUTHORS_VAL_WINDOW = 5.0, 5  # threshold 0.05 per epoch, mean of the last 5 accuracies


@dataclass
class AuthorsStepPolicy(LinearPolicy):
    """``levels`` equally spaced values from ``start`` to ``end``, each held ``steps // levels`` steps, then ``end``."""

    levels: int = AUTHORS_STEP_LEVELS

    def value(self) -> float:
        period = self.steps // self.levels  # the authors' int(max_anneal_step / len(schedule))
        if period <= 0 or self.step_count >= period * self.levels:
            level = self.levels - 1
        else:
            level = self.step_count // period
        return self.start + (self.end - self.start) * level / (self.levels - 1)


@dataclass
class AuthorsExponentialPolicy(LinearPolicy):
    """``end + (start - end) exp(-decay * step)`` for the first ``steps`` steps, then ``end``."""

    decay: float = AUTHORS_EXP_DECAY

    def value(self) -> float:
        if self.step_count >= self.steps:
            return self.end
        return self.end + (self.start - self.end) * math.exp(-self.decay * self.step_count)


@dataclass
class _AuthorsAdaptive(StepCounted):
    """The authors' ``AdaptiveThresholdPolicy``: each new metric is compared with the mean of the last
    ``window`` ones; w_l moves ``delta`` points towards ``end`` (harder) or ``start`` (easier), clamped."""

    start: float
    end: float
    delta: float
    window: int
    lower_is_better: bool
    w_l: float | None = None
    history: list[float] = field(default_factory=list)  # the last ``window`` metrics
    step_count: int = 0

    def value(self) -> float:
        return self.start if self.w_l is None else self.w_l

    def record(self, metric: float) -> None:
        metric = float(metric)
        if self.history:  # the authors' np.mean of an empty window is NaN: no move on the first metric
            reference = float(np.mean(self.history))  # np.mean, so the comparison is the authors' to the bit
            if metric != reference:
                harder = (metric < reference) if self.lower_is_better else (metric > reference)
                lo, hi = min(self.start, self.end), max(self.start, self.end)
                direction = 1.0 if self.end >= self.start else -1.0
                moved = self.value() + direction * (self.delta if harder else -self.delta)
                self.w_l = min(max(moved, lo), hi)
        self.history = (self.history + [metric])[-self.window :]

    def state_dict(self) -> dict:
        return {**super().state_dict(), "w_l": self.w_l, "history": list(self.history)}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.w_l, self.history = state["w_l"], [float(v) for v in state["history"]]


@dataclass
class AuthorsLossAdaptivePolicy(_AuthorsAdaptive):
    """Every step, on the training loss (lower is better)."""

    needs_loss = True

    def step(self, loss: float | None = None, **_signals) -> None:
        super().step()
        if loss is None:
            raise ValueError("The adaptive_loss_authors annealing policy needs the training loss of every step.")
        self.record(loss)


@dataclass
class AuthorsValidationAdaptivePolicy(_AuthorsAdaptive):
    """Every epoch, on the validation kNN accuracy (higher is better)."""

    needs_validation = True

    def epoch_end(self, val_accuracy: float | None = None, **_signals) -> None:
        if val_accuracy is None:
            raise ValueError("The adaptive_val_authors annealing policy needs a validation accuracy after every epoch.")
        self.record(val_accuracy)

    def before_training(self, val_accuracy: float) -> None:
        """Lightning's sanity check: the untrained network's accuracy enters the history (no move: it is the first)."""
        self.record(val_accuracy)


def step(ring: RingKeys, steps_per_epoch: int):
    start, end = ring.ring_w_l
    return AuthorsStepPolicy(start=start, end=end, steps=ring.ring_anneal_epochs * steps_per_epoch)


def exponential(ring: RingKeys, steps_per_epoch: int):
    start, end = ring.ring_w_l
    return AuthorsExponentialPolicy(start=start, end=end, steps=ring.ring_anneal_epochs * steps_per_epoch)


def adaptive_loss(ring: RingKeys, steps_per_epoch: int):
    start, end = ring.ring_w_l
    return AuthorsLossAdaptivePolicy(
        start=start, end=end, delta=AUTHORS_LOSS_DELTA, window=AUTHORS_LOSS_WINDOW, lower_is_better=True
    )


def adaptive_val(ring: RingKeys, steps_per_epoch: int):
    start, end = ring.ring_w_l
    return AuthorsValidationAdaptivePolicy(
        start=start, end=end, delta=AUTHORS_VAL_DELTA, window=AUTHORS_VAL_WINDOW, lower_is_better=False
    )
