"""The words a key takes (ring.plan.checks.options): each list is what the checks accept for its key, on the stage
configs that have the key, and a word outside it is refused naming the list."""

import pytest

from ring.plan import checks
from ring.plan.checks import options
from tests.helpers import lincls_config, pretrain_config

# key -> its list, for the pretraining keys that take a word.
PRETRAIN_WORDS = {
    "ring_anneal": options.ANNEAL_POLICIES,
    "head": options.HEADS,
    "la_own_entry": options.LA_OWN_ENTRY_RULES,
    "cmc_negatives": options.CMC_NEGATIVE_DRAWS,
    "negatives_count": options.NEGATIVES_COUNTS,
    "augment": options.AUGMENT_PLACES,
    "view_draws": options.VIEW_DRAWS,
    "store": options.STORE_FORMATS,
    "compile": options.COMPILE,
    "precision": options.PRETRAIN_PRECISIONS,
    "channels_last": options.CHANNELS_LAST,
    "keep_superseded": options.KEEP_SUPERSEDED,
    "keep_checkpoint": options.KEEP_CHECKPOINT,
}


@pytest.mark.parametrize("key", PRETRAIN_WORDS)
def test_every_word_of_a_pretraining_keys_list_is_accepted_and_no_other(key):
    words = PRETRAIN_WORDS[key]
    for word in words:
        # The ring window's validation-before-training and DALI's store rule are other checks' business.
        # store: a key of the datasets that have a store (ring.plan.checks.common.store).
        dataset = {"dataset": "digits_folder"} if key == "store" or word == "dali" else {}
        checks.check(
            pretrain_config("IRing", **{key: word, **dataset, **({"store": "none"} if word == "dali" else {})}), "here"
        )
    with pytest.raises(checks.ConfigError) as err:
        checks.check(pretrain_config("IRing", **{key: "nonsense"}), "here")
    assert str(err.value) == f"here: {key}='nonsense' is not one of {', '.join(words)}; choose one of them."


def test_a_linear_evaluations_words_are_its_own_lists():
    for word in options.AUGMENTATIONS:
        checks.check(lincls_config(augmentation=word), "here")
    with pytest.raises(checks.ConfigError, match="augmentation='flip' is not one of crop_flip, none"):
        checks.check(lincls_config(augmentation="flip"), "here")
    # fp64 is pretraining's verification setting, which linear evaluation does not honour.
    with pytest.raises(checks.ConfigError, match="precision='fp64' is not one of auto, bf16, fp32"):
        checks.check(lincls_config(precision="fp64"), "here")


def test_the_validation_policies_are_annealing_policies():
    assert set(options.VALIDATION_POLICIES) <= set(options.ANNEAL_POLICIES)
    for policy in options.VALIDATION_POLICIES:
        checks.check(pretrain_config("IRing", ring_anneal=policy, ring_val_before_training=True), "here")
