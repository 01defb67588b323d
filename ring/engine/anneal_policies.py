"""The appendix's annealing policies ("Exploring annealing policies"): how ``w_l``, the lower percentile of the
Ring window (:mod:`ring.engine.anneal`), moves over training.  All move ``w_l`` between ``start`` (0: threshold 100%)
and ``end`` (90: threshold 10%, the lowest allowed):

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
always improves anneals exactly as fast as the linear one.  The authors' parameterisations of them are
:mod:`ring.engine.anneal_authors`.

A policy is a class here (or in a module of its own) with ``value()``, ``step(**signals)``, ``epoch_end(**signals)``
and ``state_dict()``/``load_state_dict()``, and a builder from the Ring window's frozen config and the steps per
epoch, which one entry of :data:`ring.engine.anneal.ANNEAL_POLICIES` names.
"""

from __future__ import annotations

from dataclasses import dataclass

from ring.core.method_keys import RingKeys


class StepCounted:
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
class LinearPolicy(StepCounted):
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
class ConstantPolicy(StepCounted):
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
class _Adaptive(StepCounted):
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


def linear(ring: RingKeys, steps_per_epoch: int):
    start, end = ring.ring_w_l
    return LinearPolicy(start=start, end=end, steps=ring.ring_anneal_epochs * steps_per_epoch)


def step(ring: RingKeys, steps_per_epoch: int):
    start, end = ring.ring_w_l
    steps = ring.ring_anneal_epochs * steps_per_epoch
    return StepPolicy(start=start, end=end, steps=steps, stages=ring.ring_anneal_stages)


def exponential(ring: RingKeys, steps_per_epoch: int):
    start, end = ring.ring_w_l
    return ExponentialPolicy(start=start, end=end, steps=ring.ring_anneal_epochs * steps_per_epoch)


def _epoch_rate(ring: RingKeys) -> float:
    start, end = ring.ring_w_l
    return abs(end - start) / max(ring.ring_anneal_epochs, 1)


def adaptive_val(ring: RingKeys, steps_per_epoch: int):
    start, end = ring.ring_w_l
    return ValidationAdaptivePolicy(start=start, end=end, rate=_epoch_rate(ring))


def adaptive_loss(ring: RingKeys, steps_per_epoch: int):
    start, end = ring.ring_w_l
    rate = _epoch_rate(ring) / steps_per_epoch
    return LossAdaptivePolicy(start=start, end=end, rate=rate, ema=ring.ring_loss_ema)


def none(ring: RingKeys, steps_per_epoch: int):
    return ConstantPolicy(end=ring.ring_w_l[1])
