"""Annealing of the Ring window over training, with state that survives a resume.

The schedule owns the lower percentile ``w_l`` (see :mod:`ring.engine.objectives.ring` for how it
maps onto the appendix's "threshold annealed from 100% to 10%": ``w_l = 100 - threshold``).
The upper percentile ``w_u`` is either fixed or, as in the authors' code, a constant fraction
``inner`` of the eligible closest slice: ``w_u = 100 - inner * (100 - w_l)``.

How ``w_l`` moves is a policy's (:data:`ANNEAL_POLICIES`, ``ring_anneal``): the appendix's policies are
:mod:`ring.engine.anneal_policies`, the authors' parameterisations of them :mod:`ring.engine.anneal_authors`.
Policies advance once per optimisation step, as the authors' ``LinearThresholdPolicy`` does,
so a resumed run reproduces the window of an uninterrupted one step for step.  Every policy
keeps all it needs in ``state_dict()`` (step count, and for the adaptive ones the current
``w_l`` and the reference they compare against), which the pretraining checkpoint stores.

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

from ring.core.method_keys import RingKeys
from ring.engine import anneal_authors as authors
from ring.engine import anneal_policies as policies

# ring_anneal name -> builder of its policy from the Ring keys' values (build_schedule) and the steps per epoch.
ANNEAL_POLICIES = {
    "linear": policies.linear,
    "step": policies.step,
    "exponential": policies.exponential,
    "adaptive_val": policies.adaptive_val,
    "adaptive_loss": policies.adaptive_loss,
    "none": policies.none,
    # The authors' parameterisations (ring.engine.anneal_authors).
    "step_authors": authors.step,
    "exponential_authors": authors.exponential,
    "adaptive_loss_authors": authors.adaptive_loss,
    "adaptive_val_authors": authors.adaptive_val,
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


def build_schedule(ring: RingKeys, steps_per_epoch: int) -> RingSchedule:
    """The schedule of a Ring method's cell from ``ring``, the Ring window's frozen config
    (:data:`ring.core.method_keys.RING`) as its entry point read it (``settings.keys.ring``); no other key is read."""
    anneal = ring.ring_anneal
    if anneal not in ANNEAL_POLICIES:
        raise ValueError(f"Unknown ring_anneal {anneal!r}; choose one of {sorted(ANNEAL_POLICIES)}.")
    policy = ANNEAL_POLICIES[anneal](ring, steps_per_epoch)
    validate = ring.ring_val_before_training
    schedule = RingSchedule(policy, inner=ring.ring_inner, w_u=ring.ring_w_u, validate_before_training=validate)
    schedule.validate()
    return schedule
