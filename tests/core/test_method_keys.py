"""The keys only some methods read, declared by what reads them (ring.core.method_keys): PretrainConfig takes them as
flat fields in config.yaml's order, and the hashes of existing cells stay what they were before the declarations."""

import dataclasses

import pytest

from ring.core import method_keys
from ring.core.config import PretrainConfig, config_hash
from ring.core.methods import METHODS

# PretrainConfig's keys in config.yaml's order, as cells have always written it: the workflow's rules take the text of
# config.yaml as a parameter, so another order would rerun every cell.
CONFIG_YAML_ORDER = (
    "method dataset seed data_root epochs batch_size lr momentum weight_decay lr_milestones lr_gamma resize crop "
    "crop_scale_min head out_dim temperature bank_negatives bank_momentum negatives_count queue_size key_momentum "
    "bn_groups ring_w_l ring_anneal ring_anneal_epochs ring_inner ring_w_u ring_anneal_stages ring_loss_ema "
    "ring_val_fraction ring_val_before_training max_chunk_elements kmeans_k kmeans_clusterings kmeans_iters "
    "kmeans_warmup_epochs la_own_entry cmc_negatives knn_every knn_k knn_temperature knn_schedule log_window_classes "
    "snapshot_epochs init_from checkpoint_interval_min loss_read_every precision channels_last augment view_draws "
    "store store_decode store_decoder num_workers threads device compile keep_superseded keep_checkpoint"
).split()
# Hashes computed before the keys moved into their declarations (ring/core/config.py at 11fa162): results on disk are
# kept under them.
HASHES = [
    ({"method": "IR"}, "e35587dea3834d3a"),
    ({"method": "MoCo"}, "4a5355af1a4c8b26"),
    ({"method": "LA"}, "ae6be54ebfdd03e1"),
    ({"method": "CMCRing"}, "5e89b0df464b9bf4"),
    ({"method": "IRingBall"}, "a1982aed97b8cc51"),
    ({"method": "LA", "kmeans_k": 2000, "ring_anneal": "step", "queue_size": 8192}, "ed77534561faeb0f"),
]


def test_every_declared_key_is_a_flat_field_at_its_place_in_config_yaml():
    fields = {f.name: f for f in dataclasses.fields(PretrainConfig)}
    assert list(fields) == CONFIG_YAML_ORDER
    assert set(method_keys.KEYS) <= set(fields)
    for key in method_keys.KEYS.values():
        cfg = PretrainConfig(method="IR", dataset="digits")
        assert fields[key.name].type == key.type and getattr(cfg, key.name) == key.default


@pytest.mark.parametrize("values, digest", HASHES, ids=[str(v) for v, _ in HASHES])
def test_a_cells_hash_is_what_it_was_before_the_declarations(values, digest):
    assert config_hash(PretrainConfig(dataset="cifar10", **values)) == digest


def test_a_list_default_is_each_configs_own():
    a, b = PretrainConfig(method="IRing", dataset="digits"), PretrainConfig(method="IRing", dataset="digits")
    a.ring_w_l.append(99.0)
    assert b.ring_w_l == [0.0, 90.0] == method_keys.RING.keys[0].default


def test_the_keys_added_after_cells_were_trained_are_hashed_only_when_set():
    late = {k.name for k in method_keys.KEYS.values() if k.hashed_when_set}
    assert late == {
        *method_keys.KMEANS.names,
        *method_keys.LA.names,
        *method_keys.CMC.names,
        "negatives_count",
        "ring_val_before_training",
    }
    assert {"augment", "store", "store_decode", "view_draws"} == set(PretrainConfig.HASHED_WHEN_SET)
    for key in late:  # set off its default it is hashed, in a method that reads it (at it: the pinned hashes)
        cfg = PretrainConfig(method=next(n for n, m in METHODS.items() if m.reads(key)), dataset="cifar10")
        other = [1.0] if isinstance(getattr(cfg, key), list) else ("x" if isinstance(getattr(cfg, key), str) else 7)
        assert config_hash(dataclasses.replace(cfg, **{key: other})) != config_hash(cfg), key


@pytest.mark.parametrize(
    "method, groups",
    [
        ("IR", (method_keys.BANK,)),
        ("IRing", (method_keys.BANK, method_keys.RING)),
        ("MoCo", (method_keys.QUEUE,)),
        ("MoCoRing", (method_keys.QUEUE, method_keys.RING)),
        ("CMCRing", (method_keys.BANK, method_keys.CMC, method_keys.RING)),
        ("LA", (method_keys.BANK, method_keys.KMEANS, method_keys.LA)),
        ("IRCave", (method_keys.BANK, method_keys.KMEANS)),
        ("CMCRingCi", (method_keys.BANK, method_keys.CMC, method_keys.KMEANS, method_keys.RING)),
    ],
)
def test_a_method_runs_the_checks_of_the_groups_its_objective_reads(method, groups):
    assert METHODS[method].key_groups == groups


def test_every_key_is_documented_and_says_what_it_allows():
    class Options:  # what a callable allowed is handed: the plan's option lists
        NEGATIVES_COUNTS = ANNEAL_POLICIES = CMC_NEGATIVE_DRAWS = LA_OWN_ENTRY_RULES = ("a", "b")
        VALIDATION_POLICIES = ("b",)

    for key in method_keys.KEYS.values():
        assert key.description().endswith(".") and key.allowed_text(Options)
