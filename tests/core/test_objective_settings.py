"""ring.core.objective_settings: what an objective is built from, its key groups' frozen configs and nothing else."""

import dataclasses

import pytest

from ring.core import catalog, method_keys
from ring.core.methods import Method, Objective, method
from ring.core.objective_settings import ObjectiveSettings, own_config
from ring.pretrain import objective_settings
from tests.helpers import pretrain_config


def test_a_methods_own_config_holds_its_groups_and_has_no_attribute_for_another():
    values = {"queue_size": 4096, "key_momentum": 0.999, "bank_negatives": 7}
    keys = own_config((method_keys.QUEUE,), (method_keys.QUEUE.read(values),))
    assert keys.queue.queue_size == 4096 and keys.queue.key_momentum == 0.999
    assert [f.name for f in dataclasses.fields(keys)] == ["queue"]
    with pytest.raises(AttributeError, match=r"'OwnKeys\[queue\]' object has no attribute 'bank'"):
        _ = keys.bank
    with pytest.raises(dataclasses.FrozenInstanceError):
        keys.queue.queue_size = 1


@pytest.mark.parametrize("name", ["IR", "MoCoRing", "LA", "CMCRingCi"])
def test_the_entry_point_hands_an_objective_the_shared_values_and_the_groups_its_method_reads(name):
    cfg = pretrain_config(name, temperature=0.2, seed=3)
    m = method(name)
    settings = objective_settings(cfg, m, catalog.spec(cfg.dataset))
    assert isinstance(settings, ObjectiveSettings) and settings.method is m
    assert settings.dataset is catalog.spec(cfg.dataset) and settings.dataset.name == cfg.dataset
    shared = ("head", "out_dim", "temperature", "batch_size", "seed")
    assert {k: getattr(settings, k) for k in shared} == {k: getattr(cfg, k) for k in shared}
    groups = [f.name for f in dataclasses.fields(settings.keys)]
    assert groups == [g.name for g in m.key_groups]
    for group in m.key_groups:  # each group's config holds the cell's values of its keys, and only those
        held = dataclasses.asdict(getattr(settings.keys, group.name))
        as_flat = {k: list(v) if isinstance(v, tuple) else v for k, v in held.items()}  # lists are held as tuples
        assert as_flat == {k: getattr(cfg, k) for k in group.names}
    assert ("ring" in groups) == m.ring and ("queue" in groups) == name.startswith("MoCo")


def test_an_objective_that_declares_no_groups_reads_the_common_values_only():
    cfg = pretrain_config("IR")
    plain = Method(Objective("plain", "x:Y", "IR"), ring=False, base="IR")
    assert dataclasses.fields(objective_settings(cfg, plain, catalog.spec(cfg.dataset)).keys) == ()
    ring = Method(Objective("plain", "x:Y", "IR"), ring=True, base="IR")  # the trainer builds its window
    assert objective_settings(cfg, ring, catalog.spec(cfg.dataset)).keys.ring.ring_w_l == (0.0, 90.0)


def test_the_settings_are_values_not_the_config():
    cfg = pretrain_config("IRing")
    settings = objective_settings(cfg, method("IRing"), catalog.spec(cfg.dataset))
    cfg.ring_w_l[1] = 50.0  # an edit of the config after the entry point changes nothing handed down
    assert settings.keys.ring.ring_w_l == (0.0, 90.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.temperature = 1.0
    with pytest.raises(TypeError):  # a list in a group's config is held as a tuple: no part edits another's values
        settings.keys.ring.ring_w_l[1] = 50.0
