"""What the stages' checks share (ring.plan.checks.common): one rule, one sentence, in every stage that has the key."""

import dataclasses

import pytest

from ring.plan import checks
from tests.helpers import lincls_config, pretrain_config


def _pretrain(**values):
    return dataclasses.replace(pretrain_config("IR"), **values)


def _refused(cfg) -> str:
    with pytest.raises(checks.ConfigError) as err:
        checks.check(cfg, "here")
    return str(err.value)


@pytest.mark.parametrize("make", [_pretrain, lincls_config], ids=["pretrain", "lincls"])
@pytest.mark.parametrize(
    "values, sentence",
    [
        ({"crop": 48}, "here: crop=48 exceeds resize=32 (the crop is taken from the resized image); lower crop or"),
        ({"resize": 8, "crop": 8}, f"here: resize=8 is below {checks.MIN_INPUT_PX} px, the smallest view a ResNet-18"),
        ({"weight_decay": -1.0}, "here: weight_decay=-1.0 must be a finite number of at least 0; set weight_decay >="),
        ({"momentum": 1.0}, "here: momentum=1.0 must lie in [0.0, 1.0); choose momentum in that range."),
        ({"batch_size": 5000}, "here: batch_size=5000 exceeds the 1347 "),
        ({"num_workers": -1}, "here: num_workers=-1 must be an integer of at least 0"),
        # Pretraining's list goes on (fp64, its verification setting): the shared words read the same.
        ({"precision": "fp16"}, "here: precision='fp16' is not one of auto, bf16, fp32"),
    ],
)
def test_a_shared_rule_reads_the_same_in_every_stage(make, values, sentence):
    assert _refused(make(**values)).startswith(sentence)


@pytest.mark.parametrize("make", [lincls_config, _pretrain], ids=["lincls", "pretrain"])
def test_an_unregistered_method_is_refused_naming_the_registered_ones(make):
    assert _refused(make(method="NotAMethod")).startswith("here: method='NotAMethod' is not a method")


def test_store_is_refused_for_a_dataset_without_a_store_and_its_hash_kept_where_it_reads_one(tmp_path):
    """Issue 52 item 1: store: raw on digits was accepted and changed the cell's hash (finished cells retrained)
    while the cell read the same images.  Refused in both stages that have the key; a cell of a dataset with a store
    takes it, and a cell that leaves it at its default keeps the hash it had."""
    from ring.core.config import config_hash
    from ring.plan import grid

    sentence = (
        "here: store={!r} is set for digits, which has no prepared store (the datasets with one: imagenet, "
        "digits_folder); remove the key for it (set store under by_dataset: for the datasets that have one)."
    )
    for make in (_pretrain, lambda **v: dataclasses.replace(lincls_config(), **v)):
        for word in ("raw", "none"):
            assert _refused(make(store=word)) == sentence.format(word)
        checks.check(make(store="raw", dataset="digits_folder"), "here")
    assert config_hash(_pretrain(store="jpeg95")) == config_hash(_pretrain())
    path = tmp_path / "g.yaml"
    path.write_text(
        "datasets: [digits]\nmethods: [IR]\nseeds: [0]\npretrain: {all: {store: raw, bank_negatives: 256}}\n"
    )
    with pytest.raises(checks.ConfigError, match=r"store='raw' is set for digits, which has no prepared store"):
        grid.load(path)
