"""ring.core.objective_settings: what an objective is built from, its own keys held to what its objective declares."""

import dataclasses

import pytest

from ring.core import catalog
from ring.core.methods import METHOD_KEYS, Method, Objective, method
from ring.core.objective_settings import ObjectiveSettings, OwnKeys
from ring.pretrain import objective_settings
from tests.helpers import pretrain_config


def test_own_keys_are_a_mapping_that_refuses_an_undeclared_key_in_one_sentence():
    keys = OwnKeys("moco", {"queue_size": 4096, "key_momentum": 0.999})
    assert dict(keys) == {"queue_size": 4096, "key_momentum": 0.999} and len(keys) == 2
    with pytest.raises(
        KeyError, match=r"moco reads 'bank_negatives', which its objective does not declare \(own_keys: "
    ):
        keys["bank_negatives"]
    assert "bank_negatives" not in keys and keys.get("bank_negatives") is None


@pytest.mark.parametrize("name", ["IR", "MoCoRing", "LA", "CMCRingCi"])
def test_the_entry_point_hands_an_objective_the_shared_values_and_the_keys_its_method_reads(name):
    cfg = pretrain_config(name, temperature=0.2, seed=3)
    m = method(name)
    settings = objective_settings(cfg, m, catalog.spec(cfg.dataset))
    assert isinstance(settings, ObjectiveSettings) and settings.method is m
    assert settings.dataset is catalog.spec(cfg.dataset) and settings.dataset.name == cfg.dataset
    shared = ("head", "out_dim", "temperature", "batch_size", "seed")
    assert {k: getattr(settings, k) for k in shared} == {k: getattr(cfg, k) for k in shared}
    assert set(settings.keys) == set(m.reads) and all(settings.keys[k] == getattr(cfg, k) for k in m.reads)
    assert ("ring_w_l" in settings.keys) == m.ring and ("queue_size" in settings.keys) == name.startswith("MoCo")


def test_an_objective_that_declares_no_keys_gets_every_method_key():
    cfg = pretrain_config("IR")
    legacy = Method(Objective("legacy", "x:Y", "IR"), ring=False, base="IR")  # own_keys None: reads every key
    settings = objective_settings(cfg, legacy, catalog.spec(cfg.dataset))
    assert tuple(settings.keys) == METHOD_KEYS


def test_the_settings_are_values_not_the_config():
    cfg = pretrain_config("IRing")
    settings = objective_settings(cfg, method("IRing"), catalog.spec(cfg.dataset))
    cfg.ring_w_l[1] = 50.0  # an edit of the config after the entry point changes nothing handed down
    assert settings.keys["ring_w_l"] == [0.0, 90.0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.temperature = 1.0
