"""The sentence every failed check raises and the checks of one value (ring.plan.checks.checker)."""

import math

import pytest

from ring.plan.checks import checker
from ring.plan.checks.checker import Checker, ConfigError
from tests.helpers import pretrain_config


def _sentence(call) -> str:
    with pytest.raises(ConfigError) as err:
        call()
    return str(err.value)


def test_a_failure_is_one_sentence_naming_where_the_key_its_value_what_is_allowed_and_the_fix():
    c = Checker("Grid g.yaml, stage pretrain, cell digits/IR/seed0", pretrain_config("IR", lr=-1.0))
    assert _sentence(lambda: c.fail("lr", "must be above 0", "set a positive lr")) == (
        "Grid g.yaml, stage pretrain, cell digits/IR/seed0: lr=-1.0 must be above 0; set a positive lr."
    )


@pytest.mark.parametrize("value", [True, 1.0, "2", -1])
def test_an_integer_check_refuses_booleans_floats_words_and_values_below_its_bound(value):
    cfg = pretrain_config("IR", epochs=value)
    assert _sentence(lambda: checker.int_at_least("here", cfg, "epochs", 1)) == (
        f"here: epochs={value!r} must be an integer of at least 1; set epochs to 1 or more."
    )


@pytest.mark.parametrize("value", [math.nan, math.inf, 0, "0.1", False])
def test_a_positive_number_is_finite_and_no_boolean_or_word(value):
    assert not checker.number(value) or value <= 0
    cfg = pretrain_config("IR", lr=value)
    assert "must be a finite number above 0" in _sentence(lambda: checker.positive("here", cfg, "lr"))


def test_a_range_says_whether_its_top_is_open():
    cfg = pretrain_config("IR", momentum=1.0)
    assert "momentum=1.0 must lie in [0.0, 1.0)" in _sentence(
        lambda: checker.in_range("here", cfg, "momentum", 0.0, 1.0)
    )
    checker.in_range("here", cfg, "momentum", 0.0, 1.0, high_open=False)


@pytest.mark.parametrize("value, word", [(True, "on"), (False, "off")])
def test_an_unquoted_yaml_boolean_for_a_word_key_is_told_to_be_quoted(value, word):
    c = Checker("here", pretrain_config("IR", channels_last=value))
    assert _sentence(lambda: c.one_of("channels_last", ("auto", "on", "off"))).endswith(
        f"and this key takes a word; write channels_last: '{word}' (quoted)."
    )


def test_the_checker_hands_a_declared_keys_check_the_plans_option_lists():
    from ring.plan.checks import options

    assert Checker.options is options and "adaptive_val" in Checker("here", None).options.ANNEAL_POLICIES
