"""The authors' parameterisations (contrastive-ring-public, src/utils/policy.py; ring.engine.anneal_authors),
hand-computed."""

import math

import pytest

from tests.engine.test_anneal import anneal_schedule, threshold_trace


def test_step_authors_ten_levels_one_per_tenth_of_the_annealing():
    schedule = anneal_schedule("step_authors")  # 100 epochs x 10 steps: a level every 100 steps (10 epochs)
    thresholds = [100.0 - schedule.window()[0], *threshold_trace(schedule, 1500)]  # thresholds[t]: used at step t
    # The authors' threshold at step t is level min(t // 100, 9) of 1.0, 0.9, ..., 0.1.
    assert [thresholds[t] for t in (0, 99, 100, 199, 200, 899, 900, 999, 1000, 1500)] == pytest.approx(
        [100.0, 100.0, 90.0, 90.0, 80.0, 20.0, 10.0, 10.0, 10.0, 10.0]
    )
    assert sorted(set(round(t, 6) for t in thresholds)) == [10.0 * i for i in range(1, 11)]  # 10 levels
    assert schedule.window()[1] == pytest.approx(99.0)


def test_exponential_authors_decays_per_step_with_rate_point_one():
    schedule = anneal_schedule("exponential_authors")  # 1000 annealing steps
    thresholds = [100.0 - schedule.window()[0], *threshold_trace(schedule, 1200)]
    # threshold(t) = 0.1 + 0.9 exp(-0.1 t) in the authors' units, i.e. 10 + 90 exp(-0.1 t) percent
    assert thresholds[0] == 100.0
    assert thresholds[10] == pytest.approx(10.0 + 90.0 / math.e)  # 43.109...
    assert thresholds[50] == pytest.approx(10.0 + 90.0 * math.exp(-5.0)) and thresholds[50] < 10.7
    assert thresholds[999] == pytest.approx(10.0) and thresholds[1000:] == [10.0] * 201


def test_adaptive_loss_authors_moves_one_point_against_the_mean_of_the_last_ten_losses():
    schedule = anneal_schedule("adaptive_loss_authors")
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
    schedule = anneal_schedule("adaptive_val_authors")
    assert schedule.needs_validation
    w_l = []
    for acc in [50.0, 60.0, 55.0, 58.0, 70.0, 40.0, 56.0]:
        threshold_trace(schedule, 10)  # steps alone never move it
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


def test_adaptive_val_authors_with_the_sanity_accuracy_moves_at_epoch_one_and_keeps_it_in_its_mean():
    """Lightning's sanity check put the untrained accuracy first in the authors' history: epoch 1 is compared
    with it, and it stays in the 5-accuracy mean until epoch 5 pushes it out."""
    with_it, without = (
        anneal_schedule("adaptive_val_authors", ring_val_before_training=True),
        anneal_schedule("adaptive_val_authors"),
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
