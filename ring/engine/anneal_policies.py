"""Annealing of the Ring window over training, with state that survives a resume.

The schedule owns the lower percentile ``w_l`` (see :mod:`ring.engine.objectives.ring` for how it
maps onto the appendix's "threshold annealed from 100% to 10%": ``w_l = 100 - threshold``).
The upper percentile ``w_u`` is either fixed or, as in the authors' code, a constant fraction
``inner`` of the eligible closest slice: ``w_u = 100 - inner * (100 - w_l)``.

Policies advance once per optimisation step, as the authors' ``LinearThresholdPolicy`` does,
so a resumed run reproduces the window of an uninterrupted one step for step.  Every policy
keeps all it needs in ``state_dict()`` (step count, and for the adaptive ones the current
``w_l`` and the reference they compare against), which the pretraining checkpoint stores.

The policies of the appendix ("Exploring annealing policies"), all moving ``w_l`` between
``start`` (0: threshold 100%) and ``end`` (90: threshold 10%, the lowest allowed):

* ``linear``: the paper's choice, 100% -> 10% in ``ring_anneal_epochs`` epochs, then constant;
* ``step``: the same span in ``ring_anneal_stages`` equal jumps, the last at ``ring_anneal_epochs``;
* ``exponential``: the threshold ``100 - w_l`` shrinks by a constant factor per step, from 100%
  to 10% in ``ring_anneal_epochs`` epochs (fast early, slow late);
* ``adaptive_val``: once per epoch, harder negatives (``w_l`` up) when a validation kNN accuracy
  improved on the previous epoch's, easier ones (``w_l`` down) otherwise.  The appendix's
  sentence ("lowers the threshold ... if the performance on a validation set increases,
  otherwise decreasing the threshold") names the same direction twice; we read the second as
  raising it.  The validation split is held out of the *training* split (never the test split),
  see :func:`ring.engine.knn.holdout_split`;
* ``adaptive_loss``: the same rule every step on the training loss: harder when the step's loss
  is below its exponential moving average (training is getting easier), easier otherwise;
* ``none``: no annealing, the window stays at its final value (Table 2 lesion).

Both adaptive policies move by the linear policy's rate, ``(end - start) / ring_anneal_epochs``
per epoch (``adaptive_val``) or per epoch's worth of steps (``adaptive_loss``), so a run that
always improves anneals exactly as fast as the linear one.

The authors' parameterisations (``mhw32/contrastive-ring-public``, ``src/utils/policy.py`` with the
settings of ``src/systems/systems.py``), which made the appendix's figure, are named variants beside
ours (the paper grid's ``anneal_policies`` study runs both sets).  Their thresholds live in [0.1, 1];
here ``w_l = 100 - 100 * threshold``, so a threshold move of 0.01 is one point of ``w_l``:

* ``step_authors``: 10 levels (threshold 100%, 90%, ..., 10%), each held for a tenth of the
  annealing steps, so the last level starts at 90% of them (epoch 90 of the paper's 100);
* ``exponential_authors``: ``threshold = 10% + 90% exp(-0.1 step)`` during the annealing steps,
  then 10%: the decay is per *step*, so the window is at its end within ~50 steps;
* ``adaptive_loss_authors``: every step, threshold +-0.01 (1 point of ``w_l``) against the mean
  of the last 10 losses (up, i.e. easier, when the loss is above it; unchanged when equal);
* ``adaptive_val_authors``: every epoch, threshold +-0.05 (5 points) against the mean of the last 5
  validation accuracies (harder when the accuracy is above it).

The authors' adaptive policies do not scale with ``ring_anneal_epochs``; all of them stay within
``ring_w_l`` and start at its first value, as the authors' start at threshold 100%.

The authors trained with PyTorch Lightning 1.1.8, whose default sanity check (``num_sanity_val_steps=2``)
runs two validation batches before the first step and calls ``validation_epoch_end``, so the untrained
network's accuracy is the first entry of ``AdaptiveThresholdPolicy``'s history: epoch 1's accuracy is
compared with it (a move at epoch 1) and it stays in the 5-accuracy mean for epochs 1 to 4.  With
``ring_val_before_training`` a validation-adaptive policy gets that first signal
(:meth:`RingSchedule.before_training`, called by pretraining before a cell's first step, never again on
resume: the policy's state is in the checkpoint).  ``adaptive_val_authors`` has it on unless a config
says otherwise (:data:`ring.core.methods.POLICY_DEFAULTS`); ``adaptive_val`` (ours) has it off.  Our analogue
of the two batches is the whole held-out split, the measurement every epoch makes (two batches are 512 of
the authors' 10,000 validation images: the same quantity, noisier); the authors' sanity accuracy is a
1-NN against a memory bank still holding random vectors (about chance), ours a kNN on the untrained
network's own embeddings (above chance).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np


class _StepCounted:
    """Policies whose only state is how many steps they have taken."""

    step_count: int

    def step(self, **_signals) -> None:
        self.step_count += 1

    def epoch_end(self, **_signals) -> None:
        """Called once after every epoch; only the validation-adaptive policy acts on it."""

    def state_dict(self) -> dict:
        return {"step_count": self.step_count}

    def load_state_dict(self, state: dict) -> None:
        self.step_count = int(state["step_count"])


@dataclass
class LinearPolicy(_StepCounted):
    """w_l moves linearly from ``start`` to ``end`` over ``steps`` steps, then stays at ``end``."""

    start: float
    end: float
    steps: int
    step_count: int = 0

    def progress(self) -> float:
        """The fraction of the annealing steps taken, in [0, 1]."""
        return 1.0 if self.steps <= 0 else min(self.step_count / self.steps, 1.0)

    def value(self) -> float:
        return self.start + (self.end - self.start) * self.progress()


@dataclass
class ConstantPolicy(_StepCounted):
    """No annealing: the window stays at its final value from the first step (Table 2 lesion)."""

    end: float
    step_count: int = 0

    def value(self) -> float:
        return self.end


@dataclass
class StepPolicy(LinearPolicy):
    """w_l climbs from ``start`` to ``end`` in ``stages`` equal jumps, the last one at ``steps``."""

    stages: int = 4

    def __post_init__(self):
        if self.stages < 1:
            raise ValueError(f"ring_anneal_stages={self.stages} must be at least 1 (1: a single jump at the end).")

    def value(self) -> float:
        # Integer arithmetic, so that a jump lands exactly on its step.
        done = self.stages if self.steps <= 0 else min(self.step_count * self.stages // self.steps, self.stages)
        return self.start + (self.end - self.start) * done / self.stages


@dataclass
class ExponentialPolicy(LinearPolicy):
    """The threshold ``100 - w_l`` decays geometrically from ``100 - start`` to ``100 - end`` over ``steps``."""

    def value(self) -> float:
        first, last = 100.0 - self.start, 100.0 - self.end  # both > 0: w_l < w_u <= 100 is validated
        return 100.0 - first * (last / first) ** self.progress()


@dataclass
class _Adaptive(_StepCounted):
    """w_l moves by ``rate`` towards ``end`` (harder) or back towards ``start`` (easier), clamped to that span."""

    start: float
    end: float
    rate: float
    w_l: float | None = None
    reference: float | None = None  # the value the next signal is compared with
    step_count: int = 0

    def value(self) -> float:
        return self.start if self.w_l is None else self.w_l

    def _move(self, harder: bool) -> None:
        lo, hi = min(self.start, self.end), max(self.start, self.end)
        direction = 1.0 if self.end >= self.start else -1.0
        step = self.rate if harder else -self.rate
        self.w_l = min(max(self.value() + direction * step, lo), hi)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "w_l": self.w_l, "reference": self.reference}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.w_l, self.reference = state["w_l"], state["reference"]


@dataclass
class ValidationAdaptivePolicy(_Adaptive):
    """Once per epoch: harder if the validation accuracy rose above the previous epoch's, easier otherwise."""

    needs_validation = True

    def epoch_end(self, val_accuracy: float | None = None, **_signals) -> None:
        if val_accuracy is None:
            raise ValueError("The adaptive_val annealing policy needs a validation accuracy after every epoch.")
        if self.reference is not None:
            self._move(harder=val_accuracy > self.reference)
        self.reference = float(val_accuracy)

    def before_training(self, val_accuracy: float) -> None:
        """The untrained network's accuracy: the reference epoch 1's is compared with."""
        self.epoch_end(val_accuracy=val_accuracy)


@dataclass
class LossAdaptivePolicy(_Adaptive):
    """Every step: harder if the loss is below its moving average (``ema`` momentum), easier otherwise."""

    needs_loss = True
    ema: float = 0.99

    def step(self, loss: float | None = None, **_signals) -> None:
        super().step()
        if loss is None:
            raise ValueError("The adaptive_loss annealing policy needs the training loss of every step.")
        if self.reference is not None:
            self._move(harder=loss < self.reference)
            self.reference = self.ema * self.reference + (1.0 - self.ema) * float(loss)
        else:
            self.reference = float(loss)


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
class _AuthorsAdaptive(_StepCounted):
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


def _step_authors(ring: Mapping, steps_per_epoch: int):
    start, end = ring["ring_w_l"]
    return AuthorsStepPolicy(start=start, end=end, steps=ring["ring_anneal_epochs"] * steps_per_epoch)


def _exponential_authors(ring: Mapping, steps_per_epoch: int):
    start, end = ring["ring_w_l"]
    return AuthorsExponentialPolicy(start=start, end=end, steps=ring["ring_anneal_epochs"] * steps_per_epoch)


def _adaptive_loss_authors(ring: Mapping, steps_per_epoch: int):
    start, end = ring["ring_w_l"]
    return AuthorsLossAdaptivePolicy(
        start=start, end=end, delta=AUTHORS_LOSS_DELTA, window=AUTHORS_LOSS_WINDOW, lower_is_better=True
    )


def _adaptive_val_authors(ring: Mapping, steps_per_epoch: int):
    start, end = ring["ring_w_l"]
    return AuthorsValidationAdaptivePolicy(
        start=start, end=end, delta=AUTHORS_VAL_DELTA, window=AUTHORS_VAL_WINDOW, lower_is_better=False
    )


def _linear(ring: Mapping, steps_per_epoch: int):
    start, end = ring["ring_w_l"]
    return LinearPolicy(start=start, end=end, steps=ring["ring_anneal_epochs"] * steps_per_epoch)


def _step(ring: Mapping, steps_per_epoch: int):
    start, end = ring["ring_w_l"]
    steps = ring["ring_anneal_epochs"] * steps_per_epoch
    return StepPolicy(start=start, end=end, steps=steps, stages=ring["ring_anneal_stages"])


def _exponential(ring: Mapping, steps_per_epoch: int):
    start, end = ring["ring_w_l"]
    return ExponentialPolicy(start=start, end=end, steps=ring["ring_anneal_epochs"] * steps_per_epoch)


def _epoch_rate(ring: Mapping) -> float:
    start, end = ring["ring_w_l"]
    return abs(end - start) / max(ring["ring_anneal_epochs"], 1)


def _adaptive_val(ring: Mapping, steps_per_epoch: int):
    start, end = ring["ring_w_l"]
    return ValidationAdaptivePolicy(start=start, end=end, rate=_epoch_rate(ring))


def _adaptive_loss(ring: Mapping, steps_per_epoch: int):
    start, end = ring["ring_w_l"]
    rate = _epoch_rate(ring) / steps_per_epoch
    return LossAdaptivePolicy(start=start, end=end, rate=rate, ema=ring["ring_loss_ema"])


def _none(ring: Mapping, steps_per_epoch: int):
    return ConstantPolicy(end=ring["ring_w_l"][1])


# ring_anneal name -> builder of its policy from the Ring keys' values (build_schedule) and the steps per epoch.
ANNEAL_POLICIES = {
    "linear": _linear,
    "step": _step,
    "exponential": _exponential,
    "adaptive_val": _adaptive_val,
    "adaptive_loss": _adaptive_loss,
    "none": _none,
    # The authors' parameterisations (see the module docstring).
    "step_authors": _step_authors,
    "exponential_authors": _exponential_authors,
    "adaptive_loss_authors": _adaptive_loss_authors,
    "adaptive_val_authors": _adaptive_val_authors,
}
# The policies reading a validation accuracy every epoch (needs_validation): ring_val_before_training is for them alone.
VALIDATION_POLICIES = ("adaptive_val", "adaptive_val_authors")


def validate_window(w_l: float, w_u: float) -> None:
    """Fail with one sentence when a percentile window is unusable (ring.engine.objectives.ring selects in it)."""
    for name, value in (("w_l", w_l), ("w_u", w_u)):
        if not (0.0 <= value <= 100.0) or math.isnan(value):
            raise ValueError(f"Ring percentile {name}={value} is outside [0, 100]; percentiles are given in percent.")
    if w_l >= w_u:
        raise ValueError(
            f"Ring window w_l={w_l} >= w_u={w_u} selects nothing; choose w_l < w_u (w_l=0, w_u=100 is the base method)."
        )


class RingSchedule:
    """The current Ring window ``(w_l, w_u)`` and how it moves."""

    def __init__(
        self, policy, inner: float | None = None, w_u: float | None = None, validate_before_training: bool = False
    ):
        if validate_before_training and not getattr(policy, "needs_validation", False):
            raise ValueError(
                "ring_val_before_training is read only by the validation-adaptive annealing policies "
                "(adaptive_val, adaptive_val_authors); set it to false or use one of them."
            )
        self.validates_before_training = validate_before_training
        if (inner is None) == (w_u is None):
            raise ValueError("Give exactly one of ring_inner (relative upper bound) or ring_w_u (fixed upper bound).")
        if inner is not None and not (0.0 <= inner < 1.0):
            raise ValueError(
                f"ring_inner={inner} must lie in [0, 1): it is the excluded fraction of the eligible slice."
            )
        self.policy = policy
        self.inner = inner
        self.fixed_w_u = w_u

    def upper(self, w_l: float) -> float:
        if self.fixed_w_u is not None:
            return self.fixed_w_u
        return 100.0 - self.inner * (100.0 - w_l)

    def window(self) -> tuple[float, float]:
        w_l = self.policy.value()
        return w_l, self.upper(w_l)

    def step(self, **signals) -> None:
        self.policy.step(**signals)

    def epoch_end(self, **signals) -> None:
        self.policy.epoch_end(**signals)

    def before_training(self, val_accuracy: float) -> None:
        """The validation accuracy before the cell's first step (``validates_before_training``): the policy's first
        signal."""
        self.policy.before_training(val_accuracy=float(val_accuracy))

    @property
    def needs_loss(self) -> bool:
        """Whether the policy reads every step's training loss (pretraining then reads it every step)."""
        return getattr(self.policy, "needs_loss", False)

    @property
    def needs_validation(self) -> bool:
        """Whether the policy reads a validation accuracy after every epoch."""
        return getattr(self.policy, "needs_validation", False)

    def validate(self) -> None:
        """Check the window at the start and at the end of the schedule."""
        start = getattr(self.policy, "start", self.policy.end)
        for w_l in (start, self.policy.end):
            if math.isnan(w_l):
                raise ValueError("Ring percentile w_l is NaN.")
            validate_window(w_l, self.upper(w_l))

    def state_dict(self) -> dict:
        return {"policy": self.policy.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["policy"])


def build_schedule(ring: Mapping, steps_per_epoch: int) -> RingSchedule:
    """The schedule of a Ring method's cell from ``ring``, the Ring keys' values (:data:`ring.core.method_keys.RING`)
    as its entry point read them (:class:`ring.core.objective_settings.OwnKeys`); no other key is read."""
    anneal = ring["ring_anneal"]
    if anneal not in ANNEAL_POLICIES:
        raise ValueError(f"Unknown ring_anneal {anneal!r}; choose one of {sorted(ANNEAL_POLICIES)}.")
    policy = ANNEAL_POLICIES[anneal](ring, steps_per_epoch)
    validate = ring["ring_val_before_training"]
    schedule = RingSchedule(policy, inner=ring["ring_inner"], w_u=ring["ring_w_u"], validate_before_training=validate)
    schedule.validate()
    return schedule
