import pytest

from ring.core.config import PretrainConfig
from ring.core.method_keys import RING
from ring.engine.anneal import ANNEAL_POLICIES, RingSchedule, build_schedule
from ring.engine.anneal_policies import ConstantPolicy, LinearPolicy


def ring_keys(cfg: PretrainConfig):
    """The Ring window's frozen config read from ``cfg``: all the schedule reads (the stage's entry point hands it no
    other key)."""
    return RING.read(vars(cfg))


def test_paper_default_anneals_threshold_100_to_10_percent_over_100_epochs():
    cfg = PretrainConfig(method="IRing", dataset="cifar10")
    schedule = build_schedule(ring_keys(cfg), steps_per_epoch=10)
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
    no_anneal = build_schedule(ring_keys(PretrainConfig(method="IRing", dataset="cifar10", ring_anneal="none")), 10)
    assert no_anneal.window() == pytest.approx((90.0, 99.0))
    ball = build_schedule(
        ring_keys(PretrainConfig(method="IRing", dataset="cifar10", ring_inner=None, ring_w_u=100.0)), 10
    )
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
        build_schedule(ring_keys(PretrainConfig(method="IRing", dataset="cifar10", **overrides)), 10)


def anneal_schedule(anneal, steps_per_epoch=10, **overrides):
    return build_schedule(
        ring_keys(PretrainConfig(method="IRing", dataset="cifar10", ring_anneal=anneal, **overrides)), steps_per_epoch
    )


def threshold_trace(schedule, steps, **signals):
    """The threshold 100 - w_l after each of ``steps`` steps."""
    out = []
    for _ in range(steps):
        schedule.step(**signals)
        out.append(100.0 - schedule.window()[0])
    return out


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

    reference = anneal_schedule(anneal, ring_anneal_epochs=20)
    expected = run(reference, 0, 400)
    first = anneal_schedule(anneal, ring_anneal_epochs=20)
    run(first, 0, 173)
    resumed = anneal_schedule(anneal, ring_anneal_epochs=20)
    resumed.load_state_dict(first.state_dict())
    assert run(resumed, 173, 400) == expected[173:]
    assert (len(set(expected)) > 1) == (anneal != "none")  # the schedule really moves (the lesion must not)


# --- the untrained network's accuracy, measured before training (ring_val_before_training) --------------


def test_the_sanity_accuracy_is_refused_for_a_policy_that_reads_no_validation():
    from ring.plan import checks

    with pytest.raises(ValueError, match="ring_val_before_training is read only by the validation-adaptive"):
        anneal_schedule("linear", ring_val_before_training=True)
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

    from ring.core import config
    from ring.plan import grid

    def load(**values):
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump({"dataset": "cifar10", **values}))
        return config.load(PretrainConfig, path)

    assert load(method="IRing", ring_anneal="adaptive_val_authors").ring_val_before_training is True
    assert (
        load(
            method="MoCoRing", ring_anneal="adaptive_val_authors", ring_val_before_training=False
        ).ring_val_before_training
        is False
    )
    assert load(method="IRing", ring_anneal="adaptive_val").ring_val_before_training is False
    assert load(method="IR", ring_anneal="adaptive_val_authors").ring_val_before_training is False
    paper = grid.load("ring/resources/grids/paper.yaml")
    cell = paper.study_config("anneal_policies", "IRing", "adaptive_val", 0, "data")
    assert cell.ring_anneal == "adaptive_val_authors" and cell.ring_val_before_training is True
    ours = paper.study_config("anneal_policies", "IRing", "adaptive_val_ours", 0, "data")
    # and its hash is what it was (tests/core/test_methods.py, GRID_HASHES)
    assert ours.ring_val_before_training is False
