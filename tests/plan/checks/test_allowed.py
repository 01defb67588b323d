"""What the checks allow, in words (ring.plan.checks.allowed): the configuration reference's column."""

from ring.core.method_keys import KEYS
from ring.plan import checks
from ring.plan.checks import options


def test_a_methods_own_keys_allow_what_their_declarations_say_with_the_plans_lists():
    assert {k: checks.ALLOWED[k] for k in KEYS} == {k: key.allowed_text(options) for k, key in KEYS.items()}
    assert checks.ALLOWED["ring_anneal"] == ", ".join(options.ANNEAL_POLICIES)
    assert checks.ALLOWED["ring_val_before_training"] == (
        "true, false (true only with ring_anneal adaptive_val or adaptive_val_authors)"
    )


def test_a_word_keys_allowed_values_are_its_list():
    for key, words in [("head", options.HEADS), ("augment", options.AUGMENT_PLACES), ("compile", options.COMPILE)]:
        assert checks.ALLOWED[key] == ", ".join(words)
