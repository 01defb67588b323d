"""TensorBoard event files beside log.jsonl: tags per stage, steps = epochs, a resume appends without
duplicate or out-of-order steps (read back with TensorBoard's own EventAccumulator)."""

import json
import shutil

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from ring import runtime
from ring.pretrain import Pretraining
from tests.helpers import pretrain_config

# 16x16 views, 10 steps an epoch, two epochs: the log's shape is the point, not the accuracy.
CFG = dict(resize=16, crop=16, knn_every=1, batch_size=128)


def _scalars(cell, purge=True) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(cell), purge_orphaned_data=purge)
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_resumed_pretraining_appends_each_epoch_once_in_order(tmp_path, monkeypatch):
    cell = tmp_path / "results" / "g" / "pretrain" / "digits" / "IR" / "seed0"
    first = Pretraining(pretrain_config("IR", **CFG), cell)
    step, steps = first.optimizer.step, []

    def stop_in_epoch_1(*args, **kwargs):
        steps.append(1)
        if len(steps) == first.steps_per_epoch + 4:  # a preemption 4 steps into epoch 1
            runtime.request_stop()
        return step(*args, **kwargs)

    monkeypatch.setattr(first.optimizer, "step", stop_in_epoch_1)
    with pytest.raises(runtime.Preempted):
        first.run()
    monkeypatch.setattr(runtime, "_stop_requested", False)
    first.log.tensorboard.close()
    shutil.copy(cell / "checkpoint.pt", tmp_path / "mid_epoch_1.pt")
    Pretraining(pretrain_config("IR", **CFG), cell).run()
    # A requeue from an older checkpoint than the log (epoch 1 logged, checkpoint inside epoch 1): epoch 1 is redone.
    shutil.copy(tmp_path / "mid_epoch_1.pt", cell / "checkpoint.pt")
    (cell / "encoder.pt").unlink()
    Pretraining(pretrain_config("IR", **CFG), cell).run()

    log = [json.loads(line) for line in (cell / "log.jsonl").read_text().splitlines()]
    scalars = _scalars(cell)
    assert {"pretrain/loss", "pretrain/lr", "pretrain/knn_top1", "pretrain/nn1_top1", "pretrain/w_l"} - set(scalars) \
        == {"pretrain/w_l"}  # IR has no Ring window
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
    n = 2 * first.steps_per_epoch
    for tag, series in steps.items():
        assert [s for s, _ in series] == list(range(1, n + 1)), tag
    assert len(_scalars(cell / "steps", purge=False)["pretrain_step/loss"]) == n + first.steps_per_epoch - 4


def test_tags_name_the_stage_of_the_cell_folder(tmp_path):
    for path, stage in [("results/g/lincls/cifar10/IR/seed1", "lincls"), ("results/g/transfer/cub/IR/seed0", "transfer"),
                        ("results/g/study/anneal_policies/cifar10/IRing/step/seed0", "pretrain"), ("elsewhere", "train")]:
        log = runtime.JsonLog(tmp_path / path / "log.jsonl")
        (tmp_path / path).mkdir(parents=True)
        log.append({"epoch": 0, "loss": 1.5, "top1": 40.0, "note": "text is not a scalar"})
        log.tensorboard.close()
        assert _scalars(tmp_path / path) == {f"{stage}/loss": [(0, 1.5)], f"{stage}/top1": [(0, 40.0)]}
