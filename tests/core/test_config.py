"""ring.core.config: stage configs, loading with one-sentence refusals, and the config hash."""

import dataclasses
import re

import pytest
import yaml

from ring.core import config
from ring.plan import grid as grid_plan


@pytest.mark.parametrize("name", ["paper", "smoke", "ring_digits"])
def test_cell_configs_dump_to_the_same_text_with_libyaml(root, name):
    """ring.core.config.dump uses libyaml's emitter for speed (the workflow dumps every cell's config when it
    plans); a different text would change every cell's params and rerun the finished config rules."""
    grid = grid_plan.load(root / "ring" / "resources" / "grids" / f"{name}.yaml")
    configs = [
        build(d, m, s, "data") for d, m, s in grid.cells() for build in (grid.pretrain_config, grid.lincls_config)
    ]
    configs += [grid.transfer_config(d, m, s, "data") for d, m, s in grid.transfer_cells()]
    configs += [grid.detection_config(m, t, s, "detectron2") for _, m, t, s in grid.detection_cells()]
    configs += [grid.toy_cnce_config(s) for s in grid.toy_cnce_seeds()]
    assert configs and yaml.__with_libyaml__
    for cfg in configs:
        assert config.dump(cfg) == yaml.safe_dump(config.to_dict(cfg), sort_keys=False), cfg


def test_yaml_1_2_floats_are_numbers_and_a_syntax_error_names_file_and_line(tmp_path):
    grid = tmp_path / "mine.yaml"
    grid.write_text(
        "datasets: [digits]\nmethods: [IR]\nseeds: [0]\npretrain:\n  all: {lr: 3e-2, weight_decay: 1e-4, "
        "bank_negatives: 1024}\n"
    )
    cfg = grid_plan.load(grid).pretrain_config("digits", "IR", 0, "data")
    assert (cfg.lr, cfg.weight_decay) == (0.03, 0.0001)
    hand = tmp_path / "config.yaml"
    hand.write_text("method: IR\ndataset: digits\nlr: 3e-2\n")
    assert config.load(config.PretrainConfig, hand).lr == 0.03
    hand.write_text("method: IR\ndataset: digits\nlr: [0.1\n")
    with pytest.raises(ValueError, match=re.escape(f"Config file {hand} is not valid YAML at line 4, column 1: ")):
        config.load(config.PretrainConfig, hand)
    grid.write_text("datasets: [digits\nmethods: [IR]\n")
    with pytest.raises(ValueError, match=re.escape(f"Grid file {grid} is not valid YAML at line 2")):
        grid_plan.load(grid)


def test_an_unknown_key_suggests_the_closest_field_or_lists_them_all():
    with pytest.raises(
        ValueError, match=r"^Unknown PretrainConfig key 'bank_negative'\. Did you mean 'bank_negatives'\?$"
    ):
        config.check_key(config.PretrainConfig, "bank_negative")
    with pytest.raises(ValueError, match=r"^Grid g: Unknown ToyCNCEConfig key 'zzz'\. Known keys: seed, n_points, "):
        config.check_key(config.ToyCNCEConfig, "zzz", context="Grid g: ")
    config.check_key(config.LinclsConfig, "augmentation")  # a field: no error


def test_from_dict_builds_a_config_and_refuses_an_unknown_key():
    assert config.from_dict(config.LinclsConfig, {"dataset": "stl10", "lr": 0.1}) == config.LinclsConfig(
        dataset="stl10", lr=0.1
    )
    with pytest.raises(ValueError, match="Unknown LinclsConfig key 'source'"):  # a TransferConfig key
        config.from_dict(config.LinclsConfig, {"dataset": "dtd", "source": "cifar10"})


@pytest.mark.parametrize(
    "text, sentence",
    [
        (None, "Config file {path} does not exist; the workflow writes it, or pass an existing file."),
        ("# nothing\n", "Config file {path} is empty (no keys, at most comments); write its LinclsConfig keys, one "),
        ("- dataset: digits\n", "Config file {path} holds no mapping of LinclsConfig keys; write one key: value per "),
        ("epochs: 3\n", "Config file {path} does not set dataset, which LinclsConfig needs; add it (the workflow "),
        ("dataset: digits\nepoch: 3\n", "Unknown LinclsConfig key 'epoch'. Did you mean 'epochs'?"),
    ],
    ids=["absent", "empty", "list", "required", "unknown"],
)
def test_load_refuses_a_bad_config_file_in_one_sentence(tmp_path, text, sentence):
    path = tmp_path / "config.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises((ValueError, FileNotFoundError), match="^" + re.escape(sentence.format(path=path))):
        config.load(config.LinclsConfig, path)


@pytest.mark.parametrize(
    "cfg",
    [
        config.PretrainConfig(method="MoCo", dataset="cifar10", lr_milestones=[5], ring_w_u=0.5),
        config.LinclsConfig(dataset="digits", augmentation="none"),
        config.TransferConfig(dataset="dtd", stats_cache="cache"),
        config.ToyCNCEConfig(percentages=[10.0]),
        config.DetectionConfig(task="voc_det", method="IR", source="imagenet", overrides={"SOLVER.MAX_ITER": 10}),
    ],
    ids=lambda cfg: type(cfg).__name__,
)
def test_save_then_load_gives_the_same_config_and_hash(tmp_path, cfg):
    config.save(cfg, tmp_path / "config.yaml")
    loaded = config.load(type(cfg), tmp_path / "config.yaml")
    assert loaded == cfg and config.config_hash(loaded) == config.config_hash(cfg)
    assert config.dump(cfg) == (tmp_path / "config.yaml").read_text()


def test_runtime_fields_are_left_out_of_the_hash():
    cfg = config.TransferConfig(dataset="dtd")
    assert not set(config.TransferConfig.RUNTIME_FIELDS) & set(config.hashed_values(cfg))
    same = dataclasses.replace(cfg, num_workers=0, threads=3, device="cpu", stats_cache="x", data_root="elsewhere")
    assert config.config_hash(same) == config.config_hash(cfg)
    assert config.config_hash(dataclasses.replace(cfg, lr=0.02)) != config.config_hash(cfg)
    assert re.fullmatch(r"[0-9a-f]{16}", config.config_hash(cfg))


def test_a_field_added_later_changes_the_hash_only_when_set_away_from_its_default():
    cfg = config.PretrainConfig(method="IR", dataset="digits")
    assert "augment" in config.PretrainConfig.HASHED_WHEN_SET and "augment" in config.hashed_values(cfg)
    assert config.config_hash(dataclasses.replace(cfg, augment="auto")) == config.config_hash(cfg)  # its default
    assert config.config_hash(dataclasses.replace(cfg, augment="cpu")) != config.config_hash(cfg)


def test_view_draws_hash_only_as_batch_so_every_cell_before_the_key_keeps_its_hash_and_its_draws():
    cfg = config.PretrainConfig(method="IR", dataset="digits")
    before = "e120bd7908080cdb"  # this config's hash at main 24d7168, before the key
    assert cfg.view_draws == "sample" and config.config_hash(cfg) == before
    assert config.config_hash(dataclasses.replace(cfg, view_draws="batch")) != before
