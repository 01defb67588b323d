"""Annealing of the Ring window over training, with state that survives a resume.

The schedule owns the lower percentile ``w_l`` (see :mod:`ring.objectives.ring` for how it
maps onto the appendix's "threshold annealed from 100% to 10%": ``w_l = 100 - threshold``).
The upper percentile ``w_u`` is either fixed or, as in the authors' code, a constant fraction
``inner`` of the eligible closest slice: ``w_u = 100 - inner * (100 - w_l)``.

Policies advance once per optimisation step, as the authors' ``LinearThresholdPolicy`` does,
so a resumed run reproduces the window of an uninterrupted one step for step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ring.objectives.ring import validate_window


class _StepCounted:
    """Policies whose only state is how many steps they have taken."""

    step_count: int

    def step(self, **_signals) -> None:
        self.step_count += 1

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

    def value(self) -> float:
        if self.steps <= 0:
            return self.end
        frac = min(self.step_count / self.steps, 1.0)
        return self.start + (self.end - self.start) * frac


@dataclass
class ConstantPolicy(_StepCounted):
    """No annealing: the window stays at its final value from the first step (Table 2 lesion)."""

    end: float
    step_count: int = 0

    def value(self) -> float:
        return self.end


ANNEAL_POLICIES = {"linear": LinearPolicy, "none": ConstantPolicy}


class RingSchedule:
    """The current Ring window ``(w_l, w_u)`` and how it moves."""

    def __init__(self, policy, inner: float | None = None, w_u: float | None = None):
        if (inner is None) == (w_u is None):
            raise ValueError("Give exactly one of ring_inner (relative upper bound) or ring_w_u (fixed upper bound).")
        if inner is not None and not (0.0 <= inner < 1.0):
            raise ValueError(f"ring_inner={inner} must lie in [0, 1): it is the excluded fraction of the eligible slice.")
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


def build_schedule(cfg, steps_per_epoch: int) -> RingSchedule:
    """The schedule a pretraining config asks for (``cfg`` is a :class:`ring.config.PretrainConfig`)."""
    start, end = cfg.ring_w_l
    if cfg.ring_anneal == "linear":
        policy = LinearPolicy(start=start, end=end, steps=cfg.ring_anneal_epochs * steps_per_epoch)
    elif cfg.ring_anneal == "none":
        policy = ConstantPolicy(end=end)
    else:
        raise ValueError(f"Unknown ring_anneal {cfg.ring_anneal!r}; choose one of {sorted(ANNEAL_POLICIES)}.")
    schedule = RingSchedule(policy, inner=cfg.ring_inner, w_u=cfg.ring_w_u)
    schedule.validate()
    return schedule
