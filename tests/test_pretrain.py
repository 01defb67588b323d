import dataclasses
import json

import pytest
import torch
from torch.utils.data import Subset
from torchvision.models import resnet18

from ring import pretrain
from ring.core.config import config_hash, save
from ring.core.files import FileError
from ring.data import datasets
from ring.engine.checkpoint import CheckpointError, atomic_save, checksummed, safe_load
from ring.pretrain import Pretraining
from tests.helpers import pretrain_config, run_module
from tests.pretrained import assert_same_weights, copied_cell, train_here, trained  # noqa: F401 (a fixture)


@pytest.mark.slow
def test_outputs_contract(trained):
    cell = trained(pretrain_config("IR", epochs=1, lr_milestones=[]), checkpoint=True)
    result = resnet18().load_state_dict(torch.load(cell / "encoder.pt", weights_only=True), strict=False)
    assert sorted(result.missing_keys) == ["fc.bias", "fc.weight"] and result.unexpected_keys == []
    record = json.loads((cell / "log.jsonl").read_text())
    assert set(record) == {"epoch", "loss", "lr", "knn_top1", "nn1_top1"}
    assert 10.0 < record["nn1_top1"] <= 100.0
    state = safe_load(cell / "checkpoint.pt")
    assert {
        "encoder",
        "objective",
        "optimizer",
        "scheduler",
        "schedule",
        "rng",
        "epoch",
        "step_in_epoch",
    } <= state.keys()
    assert state["objective"]["bank.memory"].shape == (1347, 128)


def test_an_fp64_cell_computes_in_float64_and_leaves_the_default_dtype_as_it_was(tmp_path, monkeypatch):
    """precision: fp64 (the verification setting that multi-process runs are compared in): the network, its
    BatchNorm statistics, the bank and SGD's momentum are float64; the process's default dtype is restored after."""
    load = datasets.Source.load  # 4 steps over the first 256 digits: seconds, not a whole epoch's minute
    monkeypatch.setattr(datasets.Source, "load", lambda self, split: Subset(load(self, split), range(256)))
    cfg = pretrain_config(
        "IRing", epochs=1, lr_milestones=[], knn_every=0, resize=16, crop=16, precision="fp64", bank_negatives=64
    )
    pretrain.run(cfg, tmp_path / "cell")
    assert torch.get_default_dtype() == torch.float32
    state = safe_load(tmp_path / "cell" / "checkpoint.pt")
    momentum = [s["momentum_buffer"] for s in state["optimizer"]["state"].values()]
    floats = [t for t in [*state["encoder"].values(), *state["objective"].values(), *momentum] if t.is_floating_point()]
    assert floats and {t.dtype for t in floats} == {torch.float64}


@pytest.mark.parametrize(
    "method, overrides, error, message",
    [
        ("NoSuchMethod", {}, ValueError, "Unknown method 'NoSuchMethod'"),
        ("LA", {"kmeans_k": 2000}, ValueError, "kmeans_k=2000 must lie between 1 and the 1347 training images"),
        ("IR", {"dataset": "svhn"}, ValueError, "Unknown dataset 'svhn'"),
        ("IRing", {"bank_negatives": 5000}, ValueError, "bank_negatives=5000 is larger than the memory bank"),
        (
            "IRing",
            {"ring_w_l": [0.0, 100.0]},
            ValueError,
            r"ring_w_l=\[0.0, 100.0\] must satisfy 0 <= start <= final < 100",
        ),
        ("IRing", {"ring_inner": None, "ring_w_u": 30.0, "ring_w_l": [40.0, 40.0]}, ValueError, "w_l=40.0 >= w_u=30.0"),
        (
            "IR",
            {"dataset": "cifar10", "data_root": "/nonexistent"},
            FileNotFoundError,
            "Data root /nonexistent does not exist",
        ),
    ],
)
def test_bad_input_fails_before_training(tmp_path, method, overrides, error, message):
    with pytest.raises(error, match=message):
        Pretraining(pretrain_config(method, **overrides), tmp_path / "cell").run()
    assert not (tmp_path / "cell" / "checkpoint.pt").exists()


@pytest.mark.slow
def test_an_edited_config_keeps_the_previous_run_aside_and_starts_over(tmp_path, trained):
    first = pretrain_config("IR", epochs=1, lr_milestones=[])
    cell = copied_cell(trained, tmp_path, "cell", first)
    before = {p.name: p.read_bytes() for p in cell.iterdir() if p.is_file() and p.name != "config.yaml"}
    save(pretrain_config("IR", epochs=1, lr_milestones=[], lr=0.1), cell / "config.yaml")
    result = run_module("ring.pretrain", "--config", cell / "config.yaml", "--out", cell)
    aside = cell / "runs" / config_hash(first)
    assert (
        f"ring: {cell}: its config changed (lr): the previous run is kept in {aside} and this cell starts over"
        in result.stderr.splitlines()
    )
    # Every file of the first run, byte for byte, under its config's hash, but its checkpoints, which
    # keep_superseded: results (the default) drops; the cell's own are the new run's.
    assert "checkpoint.pt" in before
    # progress.json (ring status's rate of the running segment) is no result either.
    dropped = {n for n in before if n.startswith("checkpoint") or n == "progress.json"}
    assert {name for name in before if not (aside / name).exists()} == dropped
    assert {name: (aside / name).read_bytes() for name in before if name not in dropped} == {
        name: data for name, data in before.items() if name not in dropped
    }
    assert json.loads((cell / "run.json").read_text())["config"]["lr"] == 0.1
    assert json.loads((cell / "export.json").read_text())["config_hash"] == config_hash(
        pretrain_config("IR", epochs=1, lr_milestones=[], lr=0.1)
    )
    assert (cell / "encoder.pt").read_bytes() != before["encoder.pt"]


@pytest.mark.slow
def test_a_checkpoint_of_another_config_without_a_record_is_kept_aside(tmp_path, trained, capsys):
    # A cell trained before run.json existed: its checkpoint's own config hash decides.
    first = pretrain_config("IR", epochs=1, lr_milestones=[])
    cell = copied_cell(trained, tmp_path, "cell", first)
    (cell / "run.json").unlink()
    assert Pretraining(pretrain_config("IR", epochs=1, lr_milestones=[], lr=0.1), cell).resume() is False
    aside = cell / "runs" / config_hash(first)
    assert (
        f"ring: {cell}: its checkpoint was written with another config (hash {config_hash(first)}); the previous "
        f"run is kept in {aside} and this cell starts over" in capsys.readouterr().err
    )
    assert (aside / "encoder.pt").is_file() and not (cell / "checkpoint.pt").exists()
    assert not (aside / "checkpoint.pt").exists()  # keep_superseded: results


# Two epochs of IR at 16 px without monitors: two saves, so that the previous checkpoint exists until the cell
# finishes; the finished cell also says how far its one segment got.
TWO_EPOCHS = dict(epochs=2, lr_milestones=[], knn_every=0, resize=16, crop=16)


def test_a_finished_cell_drops_its_previous_checkpoint_and_under_none_its_last_one_too(tmp_path, trained):
    cfg = pretrain_config("IR", **TWO_EPOCHS)
    cell = trained(cfg, checkpoint=True)
    assert sorted(p.name for p in cell.glob("checkpoint*.pt")) == ["checkpoint.pt"]
    assert safe_load(cell / "checkpoint.pt")["epoch"] == 2  # what a longer schedule continues

    none = tmp_path / "none"
    none.mkdir()
    save(dataclasses.replace(cfg, keep_checkpoint="none"), none / "config.yaml")
    result = run_module("ring.pretrain", "--config", none / "config.yaml", "--out", none)
    assert not list(none.glob("checkpoint*.pt")) and f"ring: {none}: finished; dropped its checkpoints" in result.stderr
    assert_same_weights(none / "encoder.pt", cell / "encoder.pt")  # a runtime key: the same run, less kept
    # Run again (Snakemake deleted its encoder): the verified kept copy is the result, and nothing trains.
    (none / "encoder.pt").unlink()
    result = run_module("ring.pretrain", "--config", none / "config.yaml", "--out", none)
    assert "nothing to train" in result.stderr and "epoch 1/2" not in result.stderr
    assert_same_weights(none / "encoder.pt", cell / "encoder.pt")


def test_cli_reports_one_sentence(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("method: IR\ndataset: digits\nweight_decy: 0.1\n")
    result = run_module("ring.pretrain", "--config", cfg, "--out", tmp_path, check=False)
    assert result.returncode == 1
    assert result.stderr.strip() == "ring: Unknown PretrainConfig key 'weight_decy'. Did you mean 'weight_decay'?"


@pytest.mark.slow
def test_cmc_cell_exports_an_l_and_an_ab_torchvision_trunk(tmp_path):
    cell = train_here(tmp_path, "cmc", pretrain_config("CMC", epochs=1, lr_milestones=[], knn_every=0))
    for name, channels in (("encoder.pt", 1), ("encoder_ab.pt", 2)):
        model = resnet18()
        model.conv1 = torch.nn.Conv2d(channels, 64, 7, 2, 3, bias=False)
        result = model.load_state_dict(torch.load(cell / name, weights_only=True), strict=False)
        assert sorted(result.missing_keys) == ["fc.bias", "fc.weight"] and result.unexpected_keys == [], name
    objective = safe_load(cell / "checkpoint.pt")["objective"]
    assert objective["bank.memory"].shape == objective["bank_ab.memory"].shape == (1347, 128)


# Small images and no kNN pass: these tests are about the training state, not accuracy.
FAST = dict(resize=16, crop=16, knn_every=0)


@pytest.mark.slow
def test_snapshots_and_a_cell_started_from_one(tmp_path):
    source = train_here(tmp_path, "source", pretrain_config("IR", snapshot_epochs=[0, 1], **FAST))
    snapshots = {e: safe_load(source / f"snapshot_epoch{e}.pt") for e in (0, 1)}
    assert [s["epoch"] for s in snapshots.values()] == [0, 1]
    assert snapshots[1]["objective"]["bank.memory"].shape == (1347, 128)

    # Continuing the source's own config from its epoch-1 snapshot reproduces its final weights:
    # the snapshot holds the whole training state (bank, optimizer, lr schedule, RNG).
    same = train_here(tmp_path, "same", pretrain_config("IR", init_from=str(source / "snapshot_epoch1.pt"), **FAST))
    assert_same_weights(source / "encoder.pt", same / "encoder.pt")
    assert [json.loads(line)["epoch"] for line in (same / "log.jsonl").read_text().splitlines()] == [1]

    # IRing with a fixed threshold of 10% from the same snapshot: the hard-negatives study's cell.
    ring = train_here(
        tmp_path,
        "ring",
        pretrain_config(
            "IRing", ring_anneal="none", ring_w_l=[90.0, 90.0], init_from=str(source / "snapshot_epoch1.pt"), **FAST
        ),
    )
    record = json.loads((ring / "log.jsonl").read_text())
    assert (record["epoch"], record["w_l"]) == (1, 90.0)
    assert not torch.equal(
        torch.load(ring / "encoder.pt", weights_only=True)["conv1.weight"],
        torch.load(same / "encoder.pt", weights_only=True)["conv1.weight"],
    )


@pytest.mark.parametrize(
    "method, overrides, error, message",
    [
        (
            "MoCo",
            {"init_from": "snapshot_epoch1.pt"},
            CheckpointError,
            "does not match this cell .*same dataset and objective",
        ),
        ("IR", {"init_from": "snapshot_epoch1.pt", "epochs": 1}, ValueError, "starts at epoch 1, not before epochs=1"),
        (
            "IR",
            {"init_from": "nowhere/snapshot_epoch1.pt"},
            CheckpointError,
            "snapshot .*nowhere/snapshot_epoch1.pt does not exist",
        ),
        ("IR", {"snapshot_epochs": [3]}, ValueError, r"snapshot_epochs=\[3\] must be epochs in 0..epochs=2"),
    ],
)
def test_bad_snapshot_use_fails_before_training(tmp_path, method, overrides, error, message):
    snapshot = tmp_path / "snapshot_epoch1.pt"
    source = Pretraining(pretrain_config("IR"), tmp_path / "source")  # a real IR state: bank, optimizer, ...
    source.epoch = 1
    # As the cell writes snapshots: verified on load.
    atomic_save(checksummed(source.checkpoint.state(source.position())), snapshot)
    if "init_from" in overrides:
        overrides = {**overrides, "init_from": str(tmp_path / overrides["init_from"])}
    with pytest.raises(error, match=message):
        Pretraining(pretrain_config(method, **overrides), tmp_path / "cell").run()
    assert not (tmp_path / "cell" / "checkpoint.pt").exists()


def test_window_same_class_is_logged_after_every_epoch(tmp_path):
    """log_window_classes: the share of same-class images in the Ring window, read from labels only."""
    # 16 px and batches of 128 (11 steps): the smallest run that ends an epoch.
    cfg = pretrain_config(
        "IRing", epochs=1, lr_milestones=[], knn_every=0, resize=16, crop=16, batch_size=128, log_window_classes=True
    )
    Pretraining(cfg, tmp_path / "iring").run()
    record = json.loads((tmp_path / "iring" / "log.jsonl").read_text().splitlines()[0])
    assert 0.0 <= record["window_same_class"] <= 100.0 and record["w_l"] == 90.0


def test_the_sanity_accuracy_is_measured_once_before_a_cells_first_step_and_not_on_resume(tmp_path, monkeypatch):
    """ring_val_before_training (adaptive_val_authors' default): one validation accuracy before training enters the
    policy's history; a resumed cell finds it in the checkpoint's policy state and measures nothing more."""
    measured = []
    monitors = Pretraining.monitors

    def counting(self, test, validation, window_classes=False):
        out = monitors(self, test, validation, window_classes)
        measured.append(out["val_knn_top1"])
        return out

    def no_training(self):  # the measurement is the point: one checkpoint in place of the epochs
        self.save_checkpoint()

    monkeypatch.setattr(Pretraining, "monitors", counting)
    monkeypatch.setattr(Pretraining, "_train", no_training)
    cfg = pretrain_config("IRing", ring_anneal="adaptive_val_authors", resize=16, crop=16)
    assert cfg.ring_val_before_training  # the policy's default, as a grid or a config file gets it
    first = Pretraining(cfg, tmp_path / "cell")
    first.run()
    assert len(measured) == 1 and first.schedule.policy.history == measured and first.schedule.window()[0] == 0.0
    assert 0.0 <= measured[0] <= 100.0
    again = Pretraining(cfg, tmp_path / "cell")
    again.run()  # resumed from the checkpoint
    assert len(measured) == 1 and again.schedule.policy.history == measured
    off = Pretraining(
        pretrain_config(
            "IRing", ring_anneal="adaptive_val_authors", ring_val_before_training=False, resize=16, crop=16
        ),
        tmp_path / "off",
    )
    off.run()
    assert len(measured) == 1 and off.schedule.policy.history == []


def test_a_non_finite_loss_before_any_checkpoint_says_the_rerun_starts_from_scratch(tmp_path, monkeypatch):
    """Issue 40 item 5: the sentence said "the last good checkpoint is kept" when none had been written."""
    from ring import pretrain
    from ring.engine.health import NonFinite

    monkeypatch.setattr(pretrain.distributed, "mean_values", lambda t: [float("nan")] * len(t))
    cell = tmp_path / "cell"
    with pytest.raises(NonFinite) as err:
        Pretraining(pretrain_config("IR", epochs=1, knn_every=0), cell).run()
    assert not (cell / "checkpoint.pt").exists()
    assert str(err.value).endswith(
        "lower lr and rerun (no checkpoint was written before it: the rerun starts from scratch)."
    ), err.value


def test_no_rank_leaves_a_preempted_step_before_rank_0s_checkpoint_is_written(monkeypatch):
    """Sites with KillOnBadExit=1 ended a USR2 requeue as FAILED: ranks other than 0 exited before rank 0 had written
    its checkpoint.  Every rank now waits for it at a barrier, then stops."""
    import types

    from ring.core.stop import Preempted
    from ring.engine import distributed

    order = []
    monkeypatch.setattr(distributed, "barrier", lambda: order.append("barrier"))
    run = types.SimpleNamespace(
        save_checkpoint=lambda: order.append("checkpoint"), out="cell", epoch=1, step_in_epoch=4, loss_sum=1.5
    )
    with pytest.raises(Preempted):
        pretrain.stop_here(run, types.SimpleNamespace(read=lambda: order.append("losses") or 2.0))
    assert order == ["losses", "checkpoint", "barrier"]
    assert run.loss_sum == 3.5  # the step's losses are in the checkpoint


def test_a_cell_says_how_far_its_running_segment_got_after_each_epoch(trained):
    record = json.loads((trained(pretrain_config("IR", **TWO_EPOCHS), checkpoint=True) / "progress.json").read_text())
    assert (record["epoch"], record["epochs"], record["segment_epochs"]) == (2, 2, 2.0)
    assert record["segment_wall_s"] > 0 and record["gpus"] == 0  # CPU: no GPU-hours


def test_rank_0_cleans_up_only_after_every_ranks_write_probe_is_gone(tmp_path, monkeypatch):
    """A 4-process cell failed "not writable (No such file or directory)": rank 0 removed the write probe another
    rank still held as a temporary of a killed write.  The ranks now agree first, in a collective."""
    from ring.engine import distributed

    order = []
    monkeypatch.setattr(pretrain, "check_writable", lambda out: order.append("probe"))
    monkeypatch.setattr(distributed, "any_rank", lambda flag: order.append("together") or flag)
    pretrain.check_writable_on_every_rank(tmp_path)
    assert order == ["probe", "together"]
    monkeypatch.setattr(distributed, "any_rank", lambda flag: True)  # another rank could not write
    with pytest.raises(FileError, match="another rank cannot write this cell folder; its log says why"):
        pretrain.check_writable_on_every_rank(tmp_path)


def test_a_cell_reading_a_damaged_store_stops_before_training(tmp_path, capsys):
    """Issue 52 item 1: a grid that had passed its store check retrained on a shard damaged since (rc 0, no word).
    The stage verifies the store it reads before its first batch: one sentence naming the shard and the command that
    mends it, and nothing of a run in the cell folder."""
    from ring import prepare
    from ring.data import store_layout
    from ring.data.digits import generate_folder

    generate_folder(tmp_path / "data" / "digits_folder")
    prepare.build(prepare.Target("digits_folder", tmp_path / "data", "raw"), workers=1)
    shard = store_layout.store_dir(tmp_path / "data" / "digits_folder", "raw", 32) / "test" / "shard-00000" / "data.bin"
    damaged = bytearray(shard.read_bytes())
    damaged[5000] ^= 0xFF
    shard.write_bytes(bytes(damaged))
    cell = tmp_path / "cell"
    cfg = pretrain_config("IR", dataset="digits_folder", store="raw", data_root=str(tmp_path / "data"), epochs=1)
    cell.mkdir()
    save(cfg, cell / "config.yaml")
    assert pretrain.main(["--config", str(cell / "config.yaml"), "--out", str(cell)]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"ring: {shard} does not match its recorded SHA-256 (damaged or edited since the store was built); run "
        f"`ring prepare build digits_folder --data-root {tmp_path / 'data'} --format raw`, which builds that file "
        "again."
    )
    assert sorted(p.name for p in cell.iterdir()) == ["config.yaml"]
