"""The pretraining config's checks (ring.plan.checks.pretrain): a method's own keys as ring.core.method_keys declares
them, and the grey-CMC warning."""

import pytest

from ring.plan import checks
from tests.helpers import pretrain_config
from tests.plan.checks import BASE, plan, with_value


def _refused(cfg) -> str:
    with pytest.raises(checks.ConfigError) as err:
        checks.check(cfg, "here")
    return str(err.value)


@pytest.mark.parametrize(
    "method, key, value, sentence",
    [
        # IR has no Ring window, MoCo no bank, IR no queue: a bad value there is still refused, wherever it is written.
        ("IR", "ring_anneal", "linaer", "here: ring_anneal='linaer' is not one of linear, step,"),
        ("MoCo", "bank_momentum", 1.5, "here: bank_momentum=1.5 must lie in [0.0, 1.0); choose bank_momentum in"),
        ("IR", "key_momentum", -0.1, "here: key_momentum=-0.1 must lie in [0.0, 1.0)"),
        ("MoCo", "negatives_count", "all", "here: negatives_count='all' is not one of excluding_positive, including_"),
        ("IR", "kmeans_iters", 0, "here: kmeans_iters=0 must be an integer of at least 1; set kmeans_iters to 1"),
        ("CMC", "la_own_entry", "closest", "here: la_own_entry='closest' is not one of topk, positive; choose one"),
        ("LA", "cmc_negatives", "both", "here: cmc_negatives='both' is not one of shared, per_view; choose one"),
        ("IR", "ring_val_before_training", "yes", "here: ring_val_before_training='yes' must be true or false"),
    ],
)
def test_every_declared_keys_value_is_checked_on_every_cell(method, key, value, sentence):
    assert _refused(pretrain_config(method, **{key: value})).startswith(sentence)


@pytest.mark.parametrize(
    "values, never, reader, sentence",
    [
        ({"queue_size": 32}, "IR", "MoCoRing", "here: queue_size=32 is smaller than batch_size=64"),
        ({"bank_negatives": 5000}, "MoCo", "IRing", "here: bank_negatives=5000 is larger than the memory bank (1347"),
        ({"kmeans_warmup_epochs": 9}, "IRing", "LA", "here: kmeans_warmup_epochs=9 is not below epochs=2, so k-means"),
        (
            {"ring_inner": None, "ring_w_u": 50.0},
            "IR",
            "IRing",
            "here: ring_w_l=[0.0, 90.0] ends at w_l=90.0 >= w_u=50.0 (ring_w_u), a window that selects nothing",
        ),
    ],
    ids=["queue", "bank", "kmeans", "ring"],
)
def test_a_groups_checks_against_the_cell_run_where_the_method_reads_the_group(values, never, reader, sentence):
    """A value that only the cell's training set, batch or epochs (or the group's other keys) make wrong: a method that
    never reads the group keeps its keys at their defaults in its hash, so its cell runs; one that reads it is
    refused."""
    checks.check(pretrain_config(never, epochs=2, **values), "here")
    assert _refused(pretrain_config(reader, epochs=2, **values)).startswith(sentence)


def test_cmc_on_a_grey_dataset_is_warned_about_once_at_plan_time_in_one_sentence(workdir):
    """A warning, not a refusal: a grid may run CMC's methods on the grey digits to exercise their code path."""
    cmc = pretrain_config("CMC", dataset="digits")
    sentence = checks.grey_cmc_warning(cmc, "here")
    assert sentence.startswith("here: warning: digits holds grey images, so CMC's ab view is a constant image")
    assert sentence.count(". ") == 0 and sentence.endswith(".")  # one sentence
    assert "diverge" in sentence and "colour dataset (digits_colour)" in sentence
    assert checks.grey_cmc_warning(pretrain_config("CMC", dataset="digits_colour"), "here") is None  # the smoke grid's
    assert checks.grey_cmc_warning(pretrain_config("IR", dataset="digits"), "here") is None
    assert checks.grey_cmc_warning(pretrain_config("CMCRing", dataset="cifar10", resize=32, crop=32), "here") is None
    grid, result = plan(workdir, with_value(BASE, "methods", ["IR", "CMC", "CMCRing"]))  # 4 CMC cells: one line
    assert result.returncode == 0, result.stderr[-2000:]
    warnings = [line for line in result.stderr.splitlines() if "holds grey images" in line]
    assert len(warnings) == 1 and warnings[0].startswith(f"ring: Grid {grid}, stage pretrain, cell digits/CMC"), (
        warnings
    )


def test_a_recorded_decoder_that_contradicts_the_choice_is_refused_in_one_sentence():
    """Issue 48: store_decoder is what the plan records; a hand-written one that store_decode does not choose fails."""
    cfg = pretrain_config("IR", store_decode="cpu", store_decoder="gpu")
    with pytest.raises(checks.ConfigError, match=r"store_decoder='gpu' is not the decoder store_decode: cpu chooses"):
        checks.check(cfg, "cell")
    checks.check(pretrain_config("IR", store_decode="cpu", store_decoder="cpu"), "cell")
    with pytest.raises(checks.ConfigError, match=r"store_decoder='nvjpeg'"):
        checks.check(pretrain_config("IR", store_decoder="nvjpeg"), "cell")


def test_batch_view_draws_under_dali_are_refused_in_one_sentence():
    """DALI draws its own views' values: view_draws: batch there is a choice that would not be kept."""
    cfg = pretrain_config("IR", dataset="digits_folder", store="none", augment="dali", view_draws="batch")
    with pytest.raises(checks.ConfigError, match=r"^cell: view_draws='batch' draws the views' parameters for PIL and"):
        checks.check(cfg, "cell")
    checks.check(pretrain_config("IR", dataset="digits_folder", store="none", augment="dali"), "cell")
    checks.check(pretrain_config("IR", augment="device", view_draws="batch"), "cell")
