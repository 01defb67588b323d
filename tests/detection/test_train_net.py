"""ring.detection.train_net: Detectron2's trainer with ring's contracts (no unpickling, no non-finite or
half-written checkpoint, a stop request honoured at the step boundary).  The training runs themselves are
tests/detection/test_runner.py's."""

import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from detectron2.config import get_cfg
from detectron2.data import MetadataCatalog

from ring.core import stop
from ring.core.stop import Preempted
from ring.detection import train_net
from ring.detection.train_net import SafeCheckpointer, StopOnRequest, Trainer
from ring.engine.checkpoint import CheckpointError
from ring.engine.health import NonFinite
from tests.detection.test_runner import _Payload


def test_a_code_carrying_detectron2_checkpoint_gets_the_projects_sentence(tmp_path):
    """A .pth that carries objects: refused without running them, in our words (not torch's advice to set
    weights_only=False, which would run the file's code)."""
    marker = tmp_path / "payload-ran"
    pth = tmp_path / "model_0000009.pth"
    torch.save({"model": {"w": torch.zeros(1)}, "trainer": _Payload(marker)}, pth)
    with pytest.raises(CheckpointError) as err:
        SafeCheckpointer(torch.nn.Linear(1, 1))._load_file(str(pth))
    assert str(err.value) == (
        f"The Detectron2 checkpoint {pth} holds objects other than tensors and plain data, which ring-bench "
        "never unpickles (refused without running them); delete it (and last_checkpoint beside it) to start this "
        "cell again."
    )
    assert "weights_only" not in str(err.value) and not marker.exists()


def test_a_saved_checkpoint_and_its_tag_are_written_whole_and_read_back(tmp_path):
    model = torch.nn.Linear(3, 2)
    SafeCheckpointer(model, save_dir=str(tmp_path)).save("model_0000004", iteration=4)
    assert (tmp_path / "last_checkpoint").read_text() == "model_0000004.pth"
    assert not list(tmp_path.glob(".*.tmp"))  # renamed into place, no temporary left
    loaded = SafeCheckpointer(torch.nn.Linear(3, 2))._load_file(str(tmp_path / "model_0000004.pth"))
    assert loaded["iteration"] == 4
    assert all(torch.equal(loaded["model"][k], v) for k, v in model.state_dict().items())


def test_a_bare_state_dict_is_read_as_the_model(tmp_path):
    """Detectron2 expects {"model": ...}; a .pth holding only a state dict is wrapped, not refused."""
    torch.save({"weight": torch.ones(2, 2)}, tmp_path / "bare.pth")
    loaded = SafeCheckpointer(torch.nn.Linear(2, 2))._load_file(str(tmp_path / "bare.pth"))
    assert list(loaded) == ["model"] and torch.equal(loaded["model"]["weight"], torch.ones(2, 2))


def test_a_non_finite_model_is_never_checkpointed_and_the_sentence_names_tensor_iteration_and_lr(tmp_path):
    model = torch.nn.Linear(3, 2)
    with torch.no_grad():
        model.bias[1] = float("inf")
    trainer = SimpleNamespace(cfg=SimpleNamespace(SOLVER=SimpleNamespace(BASE_LR=0.02)), state_dict=lambda: {})
    checkpointer = SafeCheckpointer(model, save_dir=str(tmp_path), trainer=trainer)
    with pytest.raises(NonFinite) as err:
        checkpointer.save("model_0000009", iteration=9)
    # Detectron2 counts iterations from 0; the sentence counts as a user does.
    assert str(err.value).startswith(f"{tmp_path}: tensor bias became non-finite after iteration 10 (Detectron2")
    assert "(lr=0.02) is likely too high" in str(err.value)
    assert list(tmp_path.iterdir()) == []  # neither the checkpoint nor last_checkpoint
    with pytest.raises(NonFinite, match="became non-finite at checkpoint model_final .* the learning rate is"):
        SafeCheckpointer(model, save_dir=str(tmp_path)).save("model_final")  # no trainer: no lr to name


def test_without_a_save_dir_nothing_is_checked_or_written(tmp_path, monkeypatch):
    model = torch.nn.Linear(1, 1)
    with torch.no_grad():
        model.weight.fill_(float("nan"))
    monkeypatch.chdir(tmp_path)
    SafeCheckpointer(model).save("model_final")  # Detectron2's evaluation-only checkpointer has no folder
    assert list(tmp_path.iterdir()) == []


def test_a_stop_request_checkpoints_at_the_step_and_raises_preempted(monkeypatch):
    saved = []
    hook = StopOnRequest()
    hook.trainer = SimpleNamespace(
        iter=41,
        cfg=SimpleNamespace(OUTPUT_DIR="cells/voc"),
        checkpointer=SimpleNamespace(save=lambda name, **kw: saved.append((name, kw))),
    )
    hook.after_step()  # no stop requested: the step passes
    assert saved == []
    monkeypatch.setattr(stop, "_stop_requested", True)
    with pytest.raises(Preempted, match=r"^cells/voc: checkpointed after iteration 42$"):
        hook.after_step()
    assert saved == [("model_0000041", {"iteration": 41})]


def test_setup_seeds_every_rng_from_the_config_and_removes_killed_writes(tmp_path):
    cfg = get_cfg()
    cfg.OUTPUT_DIR = str(tmp_path)

    def draws(seed):
        cfg.SEED = seed
        train_net.setup(cfg, SimpleNamespace(eval_only=True))
        return torch.rand(3).tolist(), np.random.rand(3).tolist(), random.random()

    (tmp_path / ".model_0000009.pth.abc.tmp").write_bytes(b"half a checkpoint")
    first = draws(7)
    assert not (tmp_path / ".model_0000009.pth.abc.tmp").exists()
    assert draws(7) == first and draws(8) != first


def test_an_evaluator_type_outside_table_4_is_refused_in_one_sentence():
    MetadataCatalog.get("ring_test_lvis").set(evaluator_type="lvis")
    with pytest.raises(ValueError, match=r"^Dataset ring_test_lvis has evaluator type 'lvis'; Table 4 evaluates COCO"):
        Trainer.build_evaluator(get_cfg(), "ring_test_lvis")
