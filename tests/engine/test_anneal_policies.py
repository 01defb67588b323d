"""The appendix's annealing policies (ring.engine.anneal_policies), each built by its ring_anneal name as a cell's
schedule is."""

import pytest

from tests.engine.test_anneal import anneal_schedule, threshold_trace


def test_step_policy_jumps_in_equal_stages_then_stays_at_ten_percent():
    schedule = anneal_schedule("step", ring_anneal_stages=4)  # 100 epochs x 10 steps: a jump every 250 steps
    assert schedule.window()[0] == 0.0
    thresholds = threshold_trace(schedule, 1200)
    assert thresholds[248] == 100.0 and thresholds[249] == pytest.approx(77.5)  # after the 250th step
    assert sorted(set(round(t, 6) for t in thresholds)) == [10.0, 32.5, 55.0, 77.5, 100.0]
    assert thresholds[999] == pytest.approx(10.0) and thresholds[-1] == pytest.approx(10.0)


def test_exponential_policy_shrinks_the_threshold_by_a_constant_factor():
    schedule = anneal_schedule("exponential", ring_anneal_epochs=2)  # 20 steps from 100% to 10%
    thresholds = [100.0, *threshold_trace(schedule, 30)]
    ratios = [b / a for a, b in zip(thresholds[:20], thresholds[1:21], strict=True)]
    assert ratios == pytest.approx([0.1 ** (1 / 20)] * 20)
    assert thresholds[10] == pytest.approx(100.0 * 0.1**0.5)  # halfway in steps, geometric mean in threshold
    assert thresholds[20:] == pytest.approx([10.0] * 11)
    assert schedule.window()[1] == pytest.approx(99.0)


def test_adaptive_val_harder_when_validation_improves_easier_otherwise():
    schedule = anneal_schedule("adaptive_val", ring_anneal_epochs=10)  # 9 points of w_l per epoch
    assert schedule.needs_validation
    w_l = []
    for acc in [40.0, 50.0, 60.0, 55.0, 70.0, 80.0, 81.0, 90.0, 91.0, 92.0, 93.0, 94.0, 95.0, 96.0, 97.0, 98.0]:
        threshold_trace(schedule, 10)  # steps alone never move it
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
    schedule = anneal_schedule("adaptive_val", ring_anneal_epochs=10)
    for acc in [50.0, 40.0, 30.0]:
        schedule.epoch_end(val_accuracy=acc)
    assert schedule.window()[0] == 0.0


def test_adaptive_loss_follows_the_loss_against_its_moving_average():
    schedule = anneal_schedule("adaptive_loss", steps_per_epoch=10, ring_anneal_epochs=10, ring_loss_ema=0.5)
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


def test_adaptive_val_ours_takes_the_sanity_accuracy_as_its_first_reference():
    schedule = anneal_schedule("adaptive_val", ring_anneal_epochs=10, ring_val_before_training=True)
    schedule.before_training(val_accuracy=10.0)
    schedule.epoch_end(val_accuracy=20.0)
    assert schedule.window()[0] == pytest.approx(9.0)  # a move at epoch 1: 20 > 10
