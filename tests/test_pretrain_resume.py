"""A pretraining cell stopped anywhere (killed, preempted, or given a longer schedule) continues to the run it would
have been uninterrupted, bit for bit.  Its own file, apart from tests/test_pretrain.py, so that pytest-xdist's two
workers (one file each at a time) run the two side by side."""

import json
import signal
import subprocess
import sys
import time

import pytest
import torch

from ring.core.config import config_hash, save
from ring.core.methods import METHODS
from ring.engine.checkpoint import safe_load
from ring.pretrain import Pretraining
from tests.helpers import pretrain_config, run_module
from tests.pretrained import assert_same_weights, run_cell, train_here, trained  # noqa: F401 (a fixture)

# What a resume must restore beyond a step count, one run each: IRing's bank and its annealing policy's state (w_l, the
# loss average, the last validation accuracy), and the host loader's place in its epoch and its view draws; MoCoRing's
# queue and the device augmentation's generator.  16x16 views: the state is the point, not the pixels (at 32 px, plain
# IRing and MoCoRing runs covered nothing these do not, at four times the CPU).  The kNN monitor only where the
# policy reads it (adaptive_val).  These are also the longer schedule's references (the module's trained cells).
RESUMED = {
    "IRing-adaptive_loss": ("IRing", {"ring_anneal": "adaptive_loss", "resize": 16, "crop": 16, "knn_every": 0}),
    "IRing-adaptive_val": ("IRing", {"ring_anneal": "adaptive_val", "resize": 16, "crop": 16}),
    "MoCoRing-device_augment": ("MoCoRing", {"augment": "device", "resize": 16, "crop": 16, "knn_every": 0}),
}
LONGER = {"IRing": RESUMED["IRing-adaptive_loss"][1], "MoCoRing": RESUMED["MoCoRing-device_augment"][1]}


@pytest.mark.parametrize("method, overrides", RESUMED.values(), ids=RESUMED.keys())
@pytest.mark.slow
def test_killed_mid_epoch_then_resumed_equals_uninterrupted(tmp_path, trained, method, overrides):
    reference = trained(pretrain_config(method, **overrides))

    cell = tmp_path / "killed"
    cell.mkdir()
    # Checkpoint after every step, so the kill lands after a mid-epoch checkpoint.
    save(pretrain_config(method, checkpoint_interval_min=0.0, **overrides), cell / "config.yaml")
    cmd = [sys.executable, "-m", "ring.pretrain", "--config", str(cell / "config.yaml"), "--out", str(cell)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 900  # a hang detector: a loaded CI host took minutes for this epoch
    while not (cell / "log.jsonl").exists() or not (cell / "log.jsonl").read_text().strip():
        assert proc.poll() is None and time.monotonic() < deadline, "pretraining ended before its first epoch"
        time.sleep(0.1)
    # Kill right after the first mid-epoch checkpoint of epoch 1 (the end-of-epoch-0 one is replaced),
    # however loaded the machine is: a fixed delay could land before the first step on a busy CPU.
    first = (cell / "checkpoint.pt").stat().st_mtime_ns
    while (cell / "checkpoint.pt").stat().st_mtime_ns == first:
        assert proc.poll() is None and time.monotonic() < deadline, "pretraining ended before a mid-epoch checkpoint"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    state = safe_load(cell / "checkpoint.pt")
    assert state["epoch"] == 1 and 0 < state["step_in_epoch"] < 21, "the kill must land mid-epoch"
    assert not (cell / "encoder.pt").exists()

    # The resumed run saves at the default interval (a runtime key: the same run): a save after every one of its
    # ~20 steps would only cost time (a checkpoint is ~90 MB, written and verified).
    save(pretrain_config(method, **overrides), cell / "config.yaml")
    result = run_module("ring.pretrain", "--config", cell / "config.yaml", "--out", cell)
    assert "resuming" in result.stderr and "config changed" not in result.stderr
    assert_same_weights(reference / "encoder.pt", cell / "encoder.pt")
    log = [json.loads(line) for line in (cell / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [0, 1]
    assert log == [json.loads(line) for line in (reference / "log.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("method", ["IRing", "MoCoRing"])
@pytest.mark.slow
def test_a_longer_schedule_continues_the_checkpoint_and_equals_training_that_long_from_the_start(
    tmp_path, trained, method
):
    # The same computation through the same shapes and threads, resumed at an epoch boundary: bit for bit.
    fixed = LONGER[method]  # the killed-and-resumed runs' settings: their finished cells are the references
    reference = trained(pretrain_config(method, epochs=2, lr_milestones=[1], **fixed))
    # The 1-epoch start trained in this process (a stage process's ~3.5 s of imports saved): the test is about the
    # later runs, which are stage processes, and in-process training gives the stage process's weights bit for bit
    # (the preempted k-means test compares the two), so the continued run must still equal the reference exactly.
    cell = train_here(tmp_path, "cell", pretrain_config(method, epochs=1, lr_milestones=[1], **fixed))
    short = (cell / "encoder.pt").read_bytes()
    save(pretrain_config(method, epochs=2, lr_milestones=[1], **fixed), cell / "config.yaml")
    result = run_module("ring.pretrain", "--config", cell / "config.yaml", "--out", cell)
    aside = cell / "runs" / config_hash(pretrain_config(method, epochs=1, lr_milestones=[1], **fixed))
    assert (
        f"ring: {cell}: its config changed (epochs): continuing from its checkpoint to epochs=2; the 1-epoch encoder "
        f"is kept in {aside}"
    ) in result.stderr.splitlines()
    assert "resuming" in result.stderr and (aside / "encoder.pt").read_bytes() == short
    assert_same_weights(cell / "encoder.pt", reference / "encoder.pt")
    assert (cell / "log.jsonl").read_text() == (reference / "log.jsonl").read_text()
    # Finished again: the last checkpoint kept (keep_checkpoint: last, the default), the one before it dropped.
    assert sorted(p.name for p in cell.glob("checkpoint*.pt")) == ["checkpoint.pt"]

    # A shorter schedule cannot be continued (a checkpoint cannot be made younger), but the 1-epoch run it was kept
    # aside as is finished: undoing the edit restores it and trains nothing (issue 40).
    save(pretrain_config(method, epochs=1, lr_milestones=[1], **fixed), cell / "config.yaml")
    result = run_module("ring.pretrain", "--config", cell / "config.yaml", "--out", cell)
    assert "nothing to train" in result.stderr and "this cell starts over" not in result.stderr
    assert (cell / "encoder.pt").read_bytes() == short


# Small images and no kNN pass: these tests are about the training state, not accuracy.
FAST = dict(resize=16, crop=16, knn_every=0)


@pytest.mark.slow
def test_preempted_kmeans_cell_resumes_with_its_clusters_and_equals_uninterrupted(tmp_path, monkeypatch):
    """CMCRingCi: two encoders and banks, Ring, and k-means clusters computed at the start of the
    preempted epoch (after a one-epoch warm start), which the resumed run must reuse."""
    from ring.core import stop

    # 16x16 views: the clusters and the training state are the point, not the pixels (at 32 px this test
    # took over 900 s on 2 cores shared with a CPU-heavy neighbour, 56 s alone).
    cfg = dict(kmeans_k=20, kmeans_clusterings=2, kmeans_warmup_epochs=1, **FAST)
    reference = run_cell(tmp_path, "reference", pretrain_config("CMCRingCi", **cfg))
    cell = tmp_path / "preempted"
    first = Pretraining(pretrain_config("CMCRingCi", **cfg), cell)
    step, steps = first.optimizer.step, []

    def step_then_stop_in_epoch_1(*args, **kwargs):
        steps.append(1)
        if len(steps) == first.steps_per_epoch + 4:  # the preemption signal, 4 steps into epoch 1
            stop.request_stop()
        return step(*args, **kwargs)

    monkeypatch.setattr(first.optimizer, "step", step_then_stop_in_epoch_1)
    with pytest.raises(stop.Preempted):
        first.run()
    monkeypatch.setattr(stop, "_stop_requested", False)
    state = safe_load(cell / "checkpoint.pt")
    assert (state["epoch"], state["step_in_epoch"]) == (1, 4)
    assert int(state["objective"]["clusterings.epoch"]) == 1  # the preempted epoch's clusters were saved
    Pretraining(pretrain_config("CMCRingCi", **cfg), cell).run()
    for name in METHODS["CMCRingCi"].encoder_files:
        assert_same_weights(reference / name, cell / name)
    assert torch.equal(
        safe_load(cell / "checkpoint.pt")["objective"]["clusterings.labels"],
        safe_load(reference / "checkpoint.pt")["objective"]["clusterings.labels"],
    )
