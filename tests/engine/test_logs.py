"""TensorBoard event files beside log.jsonl: tags per stage, steps = epochs, a resume appends without
duplicate or out-of-order steps (read back with TensorBoard's own EventAccumulator)."""

import json
import shutil

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from ring.core import stop
from ring.engine import logs
from tests.helpers import preempt_resume_and_requeue, pretrain_config

# 16x16 views, 10 steps an epoch, two epochs: the log's shape is the point, not the accuracy.
CFG = dict(resize=16, crop=16, knn_every=1, knn_schedule="every", batch_size=128)


def _scalars(cell, purge=True) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(cell), purge_orphaned_data=purge)
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_resumed_pretraining_appends_each_epoch_once_in_order(tmp_path, monkeypatch):
    cell = tmp_path / "results" / "g" / "pretrain" / "digits" / "IR" / "seed0"
    # Preempted in epoch 1, resumed, then requeued from an older checkpoint than the log (epoch 1
    # logged, checkpoint inside epoch 1): epoch 1 is redone.
    steps_per_epoch = preempt_resume_and_requeue(cell, monkeypatch, pretrain_config("IR", **CFG))

    log = [json.loads(line) for line in (cell / "log.jsonl").read_text().splitlines()]
    scalars = _scalars(cell)
    assert {"pretrain/loss", "pretrain/lr", "pretrain/knn_top1", "pretrain/nn1_top1", "pretrain/w_l"} - set(
        scalars
    ) == {"pretrain/w_l"}  # IR has no Ring window
    for tag, series in scalars.items():
        key = tag.split("/", 1)[1]
        assert [s for s, _ in series] == [0, 1], tag  # once each, in order
        # Event files hold float32: equal to the log's float64 within float32 rounding.
        assert [v for _, v in series] == pytest.approx([r[key] for r in log], rel=1e-6), tag
    # Without TensorBoard's purge at the resumed epoch the redone epoch would be there twice.
    assert [s for s, _ in _scalars(cell, purge=False)["pretrain/loss"]] == [0, 1, 1]
    # Per-step curves in the run <cell>/steps: every optimizer step once, in order, across both resumes.
    steps = _scalars(cell / "steps")
    assert set(steps) == {"pretrain_step/loss", "pretrain_step/lr", "pretrain_step/images_per_s"}
    n = 2 * steps_per_epoch
    for tag, series in steps.items():
        assert [s for s, _ in series] == list(range(1, n + 1)), tag
    assert len(_scalars(cell / "steps", purge=False)["pretrain_step/loss"]) == n + steps_per_epoch - 4


def test_tags_name_the_stage_of_the_cell_folder(tmp_path):
    for path, stage in [
        ("results/g/lincls/cifar10/IR/seed1", "lincls"),
        ("results/g/transfer/cub/IR/seed0", "transfer"),
        ("results/g/study/anneal_policies/cifar10/IRing/step/seed0", "pretrain"),
        ("elsewhere", "train"),
    ]:
        log = logs.JsonLog(tmp_path / path / "log.jsonl")
        (tmp_path / path).mkdir(parents=True)
        log.append({"epoch": 0, "loss": 1.5, "top1": 40.0, "note": "text is not a scalar"})
        log.tensorboard.close()
        assert _scalars(tmp_path / path) == {f"{stage}/loss": [(0, 1.5)], f"{stage}/top1": [(0, 40.0)]}


def test_linear_evaluation_logs_test_accuracy_each_epoch_once_across_resumes(tmp_path, monkeypatch, encoder_file):
    from ring.lincls import LinearEval
    from tests.helpers import lincls_config

    cell = tmp_path / "results" / "g" / "lincls" / "digits" / "IR" / "seed0"
    first = LinearEval(lincls_config(epochs=3), encoder_file, cell)
    save, saved = first.save_checkpoint, []

    def save_then_stop_in_epoch_1():
        save()
        saved.append(1)
        if len(saved) == 1:  # the checkpoint after epoch 0, for the requeue below
            shutil.copy(cell / "checkpoint.pt", tmp_path / "after_epoch_0.pt")
        if len(saved) == 2:  # a preemption once epoch 1 is checkpointed
            stop.request_stop()

    monkeypatch.setattr(first, "save_checkpoint", save_then_stop_in_epoch_1)
    with pytest.raises(stop.Preempted):
        first.run()
    monkeypatch.setattr(stop, "_stop_requested", False)
    LinearEval(lincls_config(epochs=3), encoder_file, cell).run()
    # A requeue from an older checkpoint than the log: epochs 1 and 2 are redone, their lines rewritten.
    shutil.copy(tmp_path / "after_epoch_0.pt", cell / "checkpoint.pt")
    metrics = LinearEval(lincls_config(epochs=3), encoder_file, cell).run()

    log = [json.loads(line) for line in (cell / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [0, 1, 2] and all({"loss", "top1", "top5"} <= set(r) for r in log)
    # The reported accuracy is the last epoch's, the very number of its line (no selection on the test split).
    assert (metrics["top1"], metrics["top5"]) == (log[-1]["top1"], log[-1]["top5"])
    assert json.loads((cell / "metrics.json").read_text())["top1"] == log[-1]["top1"]
    scalars = _scalars(cell)
    assert set(scalars) == {"lincls/loss", "lincls/top1", "lincls/top5"}
    for tag, series in scalars.items():
        assert [s for s, _ in series] == [0, 1, 2], tag  # once each, in order, after two resumes
        # float32 event values against the log's float64: equal within float32 rounding.
        assert [v for _, v in series] == pytest.approx([r[tag.split("/")[1]] for r in log], rel=1e-6), tag
    # Evaluating every epoch draws no random numbers: the interrupted run equals an uninterrupted one exactly.
    straight = tmp_path / "straight"
    LinearEval(lincls_config(epochs=3), encoder_file, straight).run()
    assert [json.loads(line) for line in (straight / "log.jsonl").read_text().splitlines()] == log
