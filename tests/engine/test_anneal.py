import math

import pytest

from ring.core.config import PretrainConfig
from ring.core.method_keys import RING
from ring.engine.anneal import ANNEAL_POLICIES, ConstantPolicy, LinearPolicy, RingSchedule, build_schedule


def _ring(cfg: PretrainConfig) -> dict:
    """The Ring keys' values of ``cfg``: all the schedule reads (the stage's entry point hands it no other key)."""
    return {key: getattr(cfg, key) for key in RING.names}


def test_paper_default_anneals_threshold_100_to_10_percent_over_100_epochs():
    cfg = PretrainConfig(method="IRing", dataset="cifar10")
    schedule = build_schedule(_ring(cfg), steps_per_epoch=10)
    assert schedule.window() == (0.0, 90.0)  # all entries eligible, closest 10% excluded
    for _ in range(500):
        schedule.step()
    assert schedule.window() == pytest.approx((45.0, 94.5))
    for _ in range(500):
        schedule.step()
    assert schedule.window() == pytest.approx((90.0, 99.0))  # top 10% eligible, its closest 10% excluded
    for _ in range(2000):
        schedule.step()
    assert schedule.window() == pytest.approx((90.0, 99.0))


def test_schedule_state_survives_a_resume():
    a = RingSchedule(LinearPolicy(0.0, 90.0, 100), inner=0.1)
    for _ in range(37):
        a.step()
    b = RingSchedule(LinearPolicy(0.0, 90.0, 100), inner=0.1)
    b.load_state_dict(a.state_dict())
    assert b.window() == a.window()
    a.step(), b.step()
    assert b.window() == a.window()


def test_lesions_no_anneal_and_ball():
    no_anneal = build_schedule(_ring(PretrainConfig(method="IRing", dataset="cifar10", ring_anneal="none")), 10)
    assert no_anneal.window() == pytest.approx((90.0, 99.0))
    ball = build_schedule(_ring(PretrainConfig(method="IRing", dataset="cifar10", ring_inner=None, ring_w_u=100.0)), 10)
    assert ball.window() == (0.0, 100.0)
    assert isinstance(no_anneal.policy, ConstantPolicy)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"ring_w_l": [0.0, 120.0]}, "outside"),
        ({"ring_inner": None, "ring_w_u": 50.0, "ring_w_l": [0.0, 60.0]}, "w_l=60.0 >= w_u=50.0"),
        ({"ring_inner": 1.5}, "ring_inner=1.5"),
        ({"ring_anneal": "cosine"}, "Unknown ring_anneal 'cosine'"),
        ({"ring_inner": None}, "exactly one of ring_inner"),
    ],
)
def test_bad_ring_settings_fail_before_training(overrides, message):
    with pytest.raises(ValueError, match=message):
        build_schedule(_ring(PretrainConfig(method="IRing", dataset="cifar10", **overrides)), 10)


def _schedule(anneal, steps_per_epoch=10, **overrides):
    return build_schedule(
        _ring(PretrainConfig(method="IRing", dataset="cifar10", ring_anneal=anneal, **overrides)), steps_per_epoch
    )


def _thresholds(schedule, steps, **signals):
    """The threshold 100 - w_l after each of ``steps`` steps."""
    out = []
    for _ in range(steps):
        schedule.step(**signals)
        out.append(100.0 - schedule.window()[0])
    return out


def test_step_policy_jumps_in_equal_stages_then_stays_at_ten_percent():
    schedule = _schedule("step", ring_anneal_stages=4)  # 100 epochs x 10 steps: a jump every 250 steps
    assert schedule.window()[0] == 0.0
    thresholds = _thresholds(schedule, 1200)
    assert thresholds[248] == 100.0 and thresholds[249] == pytest.approx(77.5)  # after the 250th step
    assert sorted(set(round(t, 6) for t in thresholds)) == [10.0, 32.5, 55.0, 77.5, 100.0]
    assert thresholds[999] == pytest.approx(10.0) and thresholds[-1] == pytest.approx(10.0)


def test_exponential_policy_shrinks_the_threshold_by_a_constant_factor():
    schedule = _schedule("exponential", ring_anneal_epochs=2)  # 20 steps from 100% to 10%
    thresholds = [100.0, *_thresholds(schedule, 30)]
    ratios = [b / a for a, b in zip(thresholds[:20], thresholds[1:21], strict=True)]
    assert ratios == pytest.approx([0.1 ** (1 / 20)] * 20)
    assert thresholds[10] == pytest.approx(100.0 * 0.1**0.5)  # halfway in steps, geometric mean in threshold
    assert thresholds[20:] == pytest.approx([10.0] * 11)
    assert schedule.window()[1] == pytest.approx(99.0)


def test_adaptive_val_harder_when_validation_improves_easier_otherwise():
    schedule = _schedule("adaptive_val", ring_anneal_epochs=10)  # 9 points of w_l per epoch
    assert schedule.needs_validation
    w_l = []
    for acc in [40.0, 50.0, 60.0, 55.0, 70.0, 80.0, 81.0, 90.0, 91.0, 92.0, 93.0, 94.0, 95.0, 96.0, 97.0, 98.0]:
        _thresholds(schedule, 10)  # steps alone never move it
        schedule.epoch_end(val_accuracy=acc)
        w_l.append(schedule.window()[0])
    # first epoch: nothing to compare with; then up, up, down (55 < 60), up ... clamped at 90 (threshold 10%)
    assert w_l[:6] == pytest.approx([0.0, 9.0, 18.0, 9.0, 18.0, 27.0])
    assert w_l[-1] == 90.0 and max(w_l) == 90.0
    schedule.epoch_end(val_accuracy=10.0)
    assert schedule.window()[0] == pytest.approx(81.0)
    with pytest.raises(ValueError, match="needs a validation accuracy"):
        schedule.epoch_end()


def test_adaptive_val_never_goes_below_the_start():
    schedule = _schedule("adaptive_val", ring_anneal_epochs=10)
    for acc in [50.0, 40.0, 30.0]:
        schedule.epoch_end(val_accuracy=acc)
    assert schedule.window()[0] == 0.0


def test_adaptive_loss_follows_the_loss_against_its_moving_average():
    schedule = _schedule("adaptive_loss", steps_per_epoch=10, ring_anneal_epochs=10, ring_loss_ema=0.5)
    assert not schedule.needs_validation
    rate = 90.0 / 100  # per step: the linear policy's rate
    for loss in [5.0, 4.0, 3.0, 2.0]:  # falling loss: harder negatives every step after the first
        schedule.step(loss=loss)
    assert schedule.window()[0] == pytest.approx(3 * rate)
    schedule.step(loss=10.0)  # a spike above the average (2.75): easier again
    assert schedule.window()[0] == pytest.approx(2 * rate)
    for _ in range(500):
        schedule.step(loss=-float(_))  # ever lower: clamped at threshold 10%
    assert schedule.window() == pytest.approx((90.0, 99.0))
    with pytest.raises(ValueError, match="needs the training loss"):
        schedule.step()


@pytest.mark.parametrize("anneal", sorted(ANNEAL_POLICIES))  # every policy a config can name
def test_every_policy_resumes_exactly(anneal):
    """A schedule rebuilt from the config and loaded from a state_dict continues exactly like the original."""
    losses = [3.0 + ((7 * i) % 11) / 5 for i in range(400)]
    accuracies = [50.0 + ((3 * e) % 7) for e in range(40)]

    def run(schedule, begin, end):
        windows = []
        for i in range(begin, end):
            schedule.step(loss=losses[i])
            if i % 10 == 9:
                schedule.epoch_end(val_accuracy=accuracies[i // 10])
            windows.append(schedule.window())
        return windows

    reference = _schedule(anneal, ring_anneal_epochs=20)
    expected = run(reference, 0, 400)
    first = _schedule(anneal, ring_anneal_epochs=20)
    run(first, 0, 173)
    resumed = _schedule(anneal, ring_anneal_epochs=20)
    resumed.load_state_dict(first.state_dict())
    assert run(resumed, 173, 400) == expected[173:]
    assert (len(set(expected)) > 1) == (anneal != "none")  # the schedule really moves (the lesion must not)


# --- the authors' parameterisations (contrastive-ring-public, src/utils/policy.py), hand-computed --------


def test_step_authors_ten_levels_one_per_tenth_of_the_annealing():
    schedule = _schedule("step_authors")  # 100 epochs x 10 steps: a level every 100 steps (10 epochs)
    thresholds = [100.0 - schedule.window()[0], *_thresholds(schedule, 1500)]  # thresholds[t]: used at step t
    # The authors' threshold at step t is level min(t // 100, 9) of 1.0, 0.9, ..., 0.1.
    assert [thresholds[t] for t in (0, 99, 100, 199, 200, 899, 900, 999, 1000, 1500)] == pytest.approx(
        [100.0, 100.0, 90.0, 90.0, 80.0, 20.0, 10.0, 10.0, 10.0, 10.0]
    )
    assert sorted(set(round(t, 6) for t in thresholds)) == [10.0 * i for i in range(1, 11)]  # 10 levels
    assert schedule.window()[1] == pytest.approx(99.0)


def test_exponential_authors_decays_per_step_with_rate_point_one():
    schedule = _schedule("exponential_authors")  # 1000 annealing steps
    thresholds = [100.0 - schedule.window()[0], *_thresholds(schedule, 1200)]
    # threshold(t) = 0.1 + 0.9 exp(-0.1 t) in the authors' units, i.e. 10 + 90 exp(-0.1 t) percent
    assert thresholds[0] == 100.0
    assert thresholds[10] == pytest.approx(10.0 + 90.0 / math.e)  # 43.109...
    assert thresholds[50] == pytest.approx(10.0 + 90.0 * math.exp(-5.0)) and thresholds[50] < 10.7
    assert thresholds[999] == pytest.approx(10.0) and thresholds[1000:] == [10.0] * 201


def test_adaptive_loss_authors_moves_one_point_against_the_mean_of_the_last_ten_losses():
    schedule = _schedule("adaptive_loss_authors")
    assert not schedule.needs_validation
    w_l = []
    for loss in [5.0, 4.0, 4.0, 6.0, 4.5, 4.7]:
        schedule.step(loss=loss)
        w_l.append(schedule.window()[0])
    # 5: nothing to compare; 4 < 5: harder; 4 < 4.5: harder; 6 > 4.33: easier; 4.5 < 4.75: harder;
    # 4.7 == mean(5, 4, 4, 6, 4.5): unchanged
    assert w_l == [0.0, 1.0, 2.0, 1.0, 2.0, 2.0]
    for _ in range(5):
        schedule.step(loss=1.0)  # each below the mean: harder; the window is then 4, 4, 6, 4.5, 4.7, 1, 1, 1, 1, 1
    assert schedule.window()[0] == 7.0
    schedule.step(loss=2.9)  # above the mean of the last 10 (2.82) but below the mean of all 11 (3.02): easier
    assert schedule.window()[0] == 6.0
    for i in range(200):
        schedule.step(loss=-float(i))
    assert schedule.window() == pytest.approx((90.0, 99.0))  # clamped at threshold 10%
    with pytest.raises(ValueError, match="needs the training loss"):
        schedule.step()


def test_adaptive_val_authors_moves_five_points_against_the_mean_of_the_last_five_accuracies():
    schedule = _schedule("adaptive_val_authors")
    assert schedule.needs_validation
    w_l = []
    for acc in [50.0, 60.0, 55.0, 58.0, 70.0, 40.0, 56.0]:
        _thresholds(schedule, 10)  # steps alone never move it
        schedule.epoch_end(val_accuracy=acc)
        w_l.append(schedule.window()[0])
    # 50: nothing to compare; 60 > 50: harder; 55 == 55: unchanged; 58 > 55: harder; 70 > 55.75: harder;
    # 40 < 58.6: easier; 56 < 56.6 (mean of the last five; of all six it would be 55.5): easier
    assert w_l == [0.0, 5.0, 5.0, 10.0, 15.0, 10.0, 5.0]
    for acc in range(100):
        schedule.epoch_end(val_accuracy=float(acc))
    assert schedule.window()[0] == 90.0
    with pytest.raises(ValueError, match="needs a validation accuracy"):
        schedule.epoch_end()


# --- the untrained network's accuracy, measured before training (ring_val_before_training) --------------


def test_adaptive_val_authors_with_the_sanity_accuracy_moves_at_epoch_one_and_keeps_it_in_its_mean():
    """Lightning's sanity check put the untrained accuracy first in the authors' history: epoch 1 is compared
    with it, and it stays in the 5-accuracy mean until epoch 5 pushes it out."""
    with_it, without = (
        _schedule("adaptive_val_authors", ring_val_before_training=True),
        _schedule("adaptive_val_authors"),
    )
    assert with_it.validates_before_training and not without.validates_before_training
    with_it.before_training(val_accuracy=10.0)
    assert with_it.window()[0] == 0.0 and with_it.policy.history == [10.0]  # the first entry: nothing to compare
    w_l = {id(s): [] for s in (with_it, without)}
    for acc in [30.0, 25.0, 28.0, 27.0, 29.0, 28.0]:
        for s in (with_it, without):
            s.epoch_end(val_accuracy=acc)
            w_l[id(s)].append(s.window()[0])
    # with it: 30 > 10 harder; 25 > 20, 28 > 21.67, 27 > 23.25, 29 > 24 harder (10 still in the mean);
    # 28 > 27.8 harder (10 pushed out: the mean of 30, 25, 28, 27, 29)
    assert w_l[id(with_it)] == [5.0, 10.0, 15.0, 20.0, 25.0, 30.0]
    # without: 30 nothing to compare; 25 < 30 easier (clamped at 0); 28 > 27.5 harder; 27 < 27.67 easier;
    # 29 > 27.5 harder; 28 > 27.8 harder
    assert w_l[id(without)] == [0.0, 0.0, 5.0, 0.0, 5.0, 10.0]


def test_adaptive_val_ours_takes_the_sanity_accuracy_as_its_first_reference():
    schedule = _schedule("adaptive_val", ring_anneal_epochs=10, ring_val_before_training=True)
    schedule.before_training(val_accuracy=10.0)
    schedule.epoch_end(val_accuracy=20.0)
    assert schedule.window()[0] == pytest.approx(9.0)  # a move at epoch 1: 20 > 10


def test_the_sanity_accuracy_is_refused_for_a_policy_that_reads_no_validation():
    from ring.plan import checks

    with pytest.raises(ValueError, match="ring_val_before_training is read only by the validation-adaptive"):
        _schedule("linear", ring_val_before_training=True)
    cfg = PretrainConfig(
        method="IRing", dataset="cifar10", ring_anneal="adaptive_loss_authors", ring_val_before_training=True
    )
    with pytest.raises(
        checks.ConfigError,
        match=r"ring_val_before_training=True is read only by the validation-adaptive "
        r"annealing policies \(adaptive_val, adaptive_val_authors\), not "
        r"ring_anneal='adaptive_loss_authors'; set it to false",
    ):
        checks.check(cfg, "here")


def test_adaptive_val_authors_measures_before_training_unless_the_config_says_otherwise(tmp_path):
    """The authors' behaviour is the policy's default for grids and config files; a config that sets the key keeps it,
    our adaptive_val and methods without a Ring window keep the field's default (and their hash)."""
    import yaml

    from ring.core import config as C
    from ring.plan import grid as G

    def load(**values):
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump({"dataset": "cifar10", **values}))
        return C.load(PretrainConfig, path)

    assert load(method="IRing", ring_anneal="adaptive_val_authors").ring_val_before_training is True
    assert (
        load(
            method="MoCoRing", ring_anneal="adaptive_val_authors", ring_val_before_training=False
        ).ring_val_before_training
        is False
    )
    assert load(method="IRing", ring_anneal="adaptive_val").ring_val_before_training is False
    assert load(method="IR", ring_anneal="adaptive_val_authors").ring_val_before_training is False
    paper = G.load("ring/resources/grids/paper.yaml")
    cell = paper.study_config("anneal_policies", "IRing", "adaptive_val", 0, "data")
    assert cell.ring_anneal == "adaptive_val_authors" and cell.ring_val_before_training is True
    ours = paper.study_config("anneal_policies", "IRing", "adaptive_val_ours", 0, "data")
    # and its hash is what it was (tests/core/test_methods.py, GRID_HASHES)
    assert ours.ring_val_before_training is False
