import hashlib
import json
import math

import pytest
import torch

from ring.core.files import FileError, record_checksums
from ring.engine.checkpoint import CheckpointError
from ring.engine.encoder import Encoder, save_trunks, torchvision_state_dict
from ring.lincls import LinearEval
from tests.helpers import lincls_config, retrain_and_undo


def _state_hash(module) -> str:
    h = hashlib.sha256()
    for key, value in module.state_dict().items():
        h.update(key.encode())
        h.update(value.cpu().numpy().tobytes())
    return h.hexdigest()


# 16-pixel views for the tests of what a cell keeps and resumes, not of its accuracy or its feature shape: each
# evaluation's cost is its pass of the frozen trunk over the digits (cached, augmentation none), smaller at 16 pixels,
# where ResNet-18's layer4 map is 1 x 1 as at 32 (one evaluation measured alone, one thread: 9.1 CPU-s at 32 px, 5.4 at
# 16).  What these tests compare (files, the top-1 of the same computation, checkpoint steps) does not depend on the
# size.  Not the bit-identical trunk test: its crop_flip probe of the seed-0 trunk is at chance at 16 pixels (10.2%),
# a diverged verdict without the top-1 it checks.
PX16 = dict(resize=16, crop=16)


@pytest.mark.parametrize("augmentation", ["none", "crop_flip"])
@pytest.mark.slow
def test_encoder_is_bit_identical_after_evaluation(tmp_path, encoder_file, augmentation):
    file_before = encoder_file.read_bytes()
    evaluation = LinearEval(lincls_config(augmentation=augmentation, epochs=2), encoder_file, tmp_path / "cell")
    before = _state_hash(evaluation.trunk)
    metrics = evaluation.run()
    assert _state_hash(evaluation.trunk) == before  # weights and BatchNorm statistics untouched
    assert encoder_file.read_bytes() == file_before
    assert 0.0 <= metrics["top1"] <= metrics["top5"] <= 100.0


@pytest.mark.slow
def test_metrics_stamp_the_protocol(tmp_path, encoder_file):
    LinearEval(lincls_config(method="IR"), encoder_file, tmp_path / "cell").run()
    metrics = json.loads((tmp_path / "cell" / "metrics.json").read_text())
    protocol = metrics["protocol"]
    assert metrics["method"] == "IR" and metrics["dataset"] == "digits"
    assert protocol["feature_shape"] == [512, 1, 1] and protocol["input_size"] == 32
    assert (protocol["epochs"], protocol["lr"], protocol["momentum"], protocol["weight_decay"]) == (3, 0.01, 0.9, 0.0)
    assert protocol["augmentation"] == "none"
    assert protocol["encoder_sha256"] == hashlib.sha256(encoder_file.read_bytes()).hexdigest()


def test_paper_protocol_reads_the_7x7_map(tmp_path, encoder_file):
    evaluation = LinearEval(lincls_config(resize=256, crop=224), encoder_file, tmp_path / "cell")
    assert evaluation.feature_shape == (512, 7, 7)
    assert evaluation.classifier.in_features == 512 * 7 * 7


@pytest.mark.slow
def test_linear_probe_learns_from_a_trained_feature(tmp_path, encoder_file):
    # Enough epochs on the frozen random-init ResNet features separate digits far above chance.
    metrics = LinearEval(lincls_config(epochs=15), encoder_file, tmp_path / "cell").run()
    assert metrics["top1"] > 50.0


@pytest.mark.slow
def test_resume_continues_from_the_last_epoch(tmp_path, encoder_file):
    cell = tmp_path / "cell"
    first = LinearEval(lincls_config(epochs=2, **PX16), encoder_file, cell).run()
    # A later run with the same config and encoder finds the finished checkpoint and trains nothing more.
    again = LinearEval(lincls_config(epochs=2, **PX16), encoder_file, cell)
    again.resume()
    assert again.epoch == 2
    assert again.run()["top1"] == first["top1"]


def test_a_finished_evaluation_drops_its_previous_checkpoint_and_under_none_its_last_one_too(
    tmp_path, encoder_file, capsys
):
    last = LinearEval(lincls_config(epochs=2, **PX16), encoder_file, tmp_path / "last").run()
    assert sorted(p.name for p in (tmp_path / "last").glob("checkpoint*.pt")) == ["checkpoint.pt"]
    cell = tmp_path / "none"
    none = LinearEval(lincls_config(epochs=2, keep_checkpoint="none", **PX16), encoder_file, cell).run()
    assert not list(cell.glob("checkpoint*.pt"))
    # The same computation in the same process (a runtime key changes nothing trained): equal, not close.
    assert (none["top1"], none["top5"]) == (last["top1"], last["top5"])
    # Snakemake deleted metrics.json: back from its verified copy, and nothing trains.
    (cell / "metrics.json").unlink()
    capsys.readouterr()
    assert LinearEval(lincls_config(epochs=2, keep_checkpoint="none", **PX16), encoder_file, cell).run() == none
    assert "evaluation is complete (kept outputs verified); nothing to train" in capsys.readouterr().err


@pytest.mark.slow
def test_a_retrained_encoders_evaluation_is_kept_and_an_undo_brings_it_back(tmp_path, encoder_file):
    cell = tmp_path / "cell"
    retrain_and_undo(lambda: LinearEval(lincls_config(epochs=1, **PX16), encoder_file, cell).run(), encoder_file, cell)


@pytest.mark.slow
def test_a_checkpoint_of_another_encoder_without_a_run_record_is_kept_under_runs(tmp_path, encoder_file):
    cell = tmp_path / "cell"
    LinearEval(lincls_config(epochs=1, **PX16), encoder_file, cell).run()
    (cell / "run.json").unlink()  # a cell written before run.json named its encoder
    torch.manual_seed(1)
    save_trunks({"encoder.pt": torchvision_state_dict(Encoder())}, encoder_file.parent)  # pretraining was rerun
    evaluation = LinearEval(lincls_config(epochs=1, **PX16), encoder_file, cell)
    evaluation.resume()
    assert evaluation.epoch == 0 and not (cell / "checkpoint.pt").exists()
    # Kept under runs/ (its checkpoint dropped under keep_superseded: results, the default), never in the cell.
    assert not list(cell.glob("checkpoint.stale-*")) and len(list(cell.glob("runs/*/metrics.json"))) == 1
    assert not list(cell.glob("runs/*/checkpoint.pt"))


def test_wrong_encoder_files_fail_with_one_sentence(tmp_path):
    bad = tmp_path / "bad.pt"
    save_trunks({"bad.pt": {"conv1.weight": torch.zeros(1)}}, tmp_path)
    with pytest.raises(ValueError, match="not a torchvision resnet18 trunk: .*missing=.*'bn1.bias'"):
        LinearEval(lincls_config(), bad, tmp_path / "cell")
    state = torchvision_state_dict(Encoder())
    state["conv1.weight"] = torch.zeros(1)
    save_trunks({"bad.pt": state}, tmp_path)
    with pytest.raises(ValueError, match="does not fit resnet18 .*conv1.weight"):
        LinearEval(lincls_config(), bad, tmp_path / "cell")
    with pytest.raises(FileError, match="does not exist; run the stage"):
        LinearEval(lincls_config(), tmp_path / "missing.pt", tmp_path / "cell")
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(b"PK\x03\x04")
    record_checksums(tmp_path, ["truncated.pt"])  # cut short before it was recorded: the checksum holds
    with pytest.raises(CheckpointError, match="unreadable or truncated"):
        LinearEval(lincls_config(), truncated, tmp_path / "cell")


@pytest.mark.slow
def test_cmc_cell_is_evaluated_on_both_encoders_and_says_so(tmp_path):
    torch.manual_seed(0)
    from ring.core.catalog import spec
    from ring.engine.encoder import LabEncoder, export_trunks

    s = spec("digits")
    save_trunks(export_trunks(LabEncoder("linear", 128, s.mean, s.std)), tmp_path)
    metrics = LinearEval(lincls_config(method="CMC", epochs=1), tmp_path / "encoder.pt", tmp_path / "out").run()
    protocol = metrics["protocol"]
    assert protocol["feature_shape"] == [1024, 1, 1]
    assert "L and ab encoders, concatenated" in protocol["feature_layer"]
    assert sorted(protocol["encoder_files"]) == ["encoder.pt", "encoder_ab.pt"]


def _constant_feature_encoder(tmp_path):
    """A trunk whose last BatchNorm adds 1000 to every channel: large, near-constant features, as CMC's ab trunk
    gives on grey images (its input there is a constant image)."""
    torch.manual_seed(0)
    state = torchvision_state_dict(Encoder())
    state["layer4.1.bn2.bias"] = state["layer4.1.bn2.bias"] + 1000.0
    save_trunks({"encoder.pt": state}, tmp_path / "pre")
    return tmp_path / "pre" / "encoder.pt"


@pytest.mark.slow
def test_a_diverged_linear_evaluation_says_so_in_one_sentence_and_writes_no_accuracy(tmp_path, capsys):
    from ring.engine import health
    from ring.lincls import main

    cfg = lincls_config(epochs=2)
    C_path = tmp_path / "config.yaml"
    from ring.core.config import save

    save(cfg, C_path)
    cell = tmp_path / "cell"
    assert (
        main(["--config", str(C_path), "--encoder", str(_constant_feature_encoder(tmp_path)), "--out", str(cell)]) == 0
    )
    err = capsys.readouterr().err
    sentence = [line for line in err.splitlines() if "diverged" in line]
    assert len(sentence) == 1 and sentence[0].startswith(f"ring: {cell}: the linear evaluation diverged: ")
    # Constant features: the probe is at chance (within 3 binomial standard errors of 10% over 450 test images).
    assert "is at chance" in sentence[0] and "= 14.2%" in sentence[0] and "100 x ln(10) = 230" in sentence[0]
    assert "top1=" not in err
    metrics = json.loads((cell / "metrics.json").read_text())
    assert "top1" not in metrics and "top5" not in metrics  # no number a table could show
    assert metrics["diverged"] == sentence[0][len("ring: ") :]
    last = json.loads((cell / "log.jsonl").read_text().splitlines()[-1])
    assert last["loss"] > health.DIVERGENCE_FACTOR * math.log(10)
    # Found again finished, it reads the last epoch's loss from its log and says the same.
    again = LinearEval(cfg, tmp_path / "pre" / "encoder.pt", cell).run()
    assert again["diverged"] == metrics["diverged"] and "top1" not in again


@pytest.mark.parametrize("bad_step, written", [(1, False), (30, True)])  # 22 steps an epoch: epoch 1, or epoch 2
def test_a_non_finite_loss_says_what_the_rerun_starts_from_as_the_folder_holds_it(
    tmp_path, encoder_file, monkeypatch, bad_step, written
):
    """Issue 40 item 5: "the last good checkpoint is kept" was said also before any checkpoint was written."""
    from ring import lincls
    from ring.engine.health import NonFinite

    calls, cross_entropy = [], lincls.F.cross_entropy

    def loss(*args, **kwargs):
        calls.append(1)
        value = cross_entropy(*args, **kwargs)
        return value * math.nan if len(calls) == bad_step else value

    monkeypatch.setattr(lincls.F, "cross_entropy", loss)
    cell = tmp_path / "cell"
    with pytest.raises(NonFinite) as err:
        LinearEval(lincls_config(epochs=2, **PX16), encoder_file, cell).run()
    assert (cell / "checkpoint.pt").is_file() == written
    assert str(err.value).endswith(
        f"lower lr and rerun (the last good checkpoint, {cell / 'checkpoint.pt'}, is kept: the rerun resumes from it)."
        if written
        else "lower lr and rerun (no checkpoint was written before it: the rerun starts from scratch)."
    ), err.value
