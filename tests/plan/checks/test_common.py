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
        ({"precision": "fp16"}, "here: precision='fp16' is not one of auto, bf16, fp32; choose one of them."),
    ],
)
def test_a_shared_rule_reads_the_same_in_every_stage(make, values, sentence):
    assert _refused(make(**values)).startswith(sentence)


@pytest.mark.parametrize("make", [lincls_config, _pretrain], ids=["lincls", "pretrain"])
def test_an_unregistered_method_is_refused_naming_the_registered_ones(make):
    assert _refused(make(method="NotAMethod")).startswith("here: method='NotAMethod' is not a method")
