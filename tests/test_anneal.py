import pytest

from ring.anneal import ConstantPolicy, LinearPolicy, RingSchedule, build_schedule
from ring.config import PretrainConfig


def test_paper_default_anneals_threshold_100_to_10_percent_over_100_epochs():
    cfg = PretrainConfig(method="IRing", dataset="cifar10")
    schedule = build_schedule(cfg, steps_per_epoch=10)
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
    no_anneal = build_schedule(PretrainConfig(method="IRing", dataset="cifar10", ring_anneal="none"), 10)
    assert no_anneal.window() == pytest.approx((90.0, 99.0))
    ball = build_schedule(PretrainConfig(method="IRing", dataset="cifar10", ring_inner=None, ring_w_u=100.0), 10)
    assert ball.window() == (0.0, 100.0)
    assert isinstance(no_anneal.policy, ConstantPolicy)


@pytest.mark.parametrize(
    "overrides, message",
    [({"ring_w_l": [0.0, 120.0]}, "outside"), ({"ring_inner": None, "ring_w_u": 50.0, "ring_w_l": [0.0, 60.0]}, "w_l=60.0 >= w_u=50.0"),
     ({"ring_inner": 1.5}, "ring_inner=1.5"), ({"ring_anneal": "cosine"}, "Unknown ring_anneal 'cosine'"),
     ({"ring_inner": None}, "exactly one of ring_inner")],
)
def test_bad_ring_settings_fail_before_training(overrides, message):
    with pytest.raises(ValueError, match=message):
        build_schedule(PretrainConfig(method="IRing", dataset="cifar10", **overrides), 10)
