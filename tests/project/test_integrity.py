"""Nothing wrong reaches a table: numerical health, verified checkpoints, no pickle from disk (issue 13).

Each test goes through a stage's entry point (``main``) or the loader the stage itself uses, on the
tiny digits configs of tests/helpers.py.
"""

import errno
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile

import pytest
import torch

from ring import pretrain, toy_cnce, transfer
from ring.core.config import ToyCNCEConfig, save
from ring.core.files import record_checksums
from ring.core.methods import METHODS
from ring.engine.checkpoint import CheckpointError, load_verified
from ring.engine.encoder import LabEncoder, export_trunks, load_feature_extractor, save_trunks
from ring.pretrain import Pretraining
from ring.reports import tables
from tests.helpers import lincls_config, pretrain_config, run_module

# Two short epochs at 16 pixels (a checkpoint and the one before it); no kNN monitor (it touches nothing tested here).
FAST = dict(epochs=2, lr_milestones=[], knn_every=0, resize=16, crop=16)


def _cell(tmp_path, name, cfg):
    cell = tmp_path / name
    cell.mkdir()
    save(cfg, cell / "config.yaml")
    return cell


def _ring_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("ring:")]


# ---- numerical health ---------------------------------------------------------------------------


@pytest.mark.slow
def test_pretraining_stops_at_the_first_non_finite_loss(tmp_path):
    cell = _cell(tmp_path, "cell", pretrain_config("IR", **FAST, lr=1e6))
    result = run_module("ring.pretrain", "--config", cell / "config.yaml", "--out", cell, check=False)
    assert result.returncode == 1
    (line,) = _ring_lines(result.stderr)
    assert "training loss became nan at epoch 1 step" in line and "lr=1e+06) is likely too high" in line, line
    assert str(cell) in line
    assert not (cell / "encoder.pt").exists()  # no final artefact
    assert not (cell / "checkpoint.pt").exists()  # nothing diverged is ever checkpointed


@pytest.mark.slow
def test_a_non_finite_parameter_at_epoch_end_keeps_the_last_good_checkpoint(tmp_path, monkeypatch, capsys):
    """The loss stays finite but a memory-bank entry goes bad in epoch 2: epoch 1's checkpoint stays."""
    cell = _cell(tmp_path, "cell", pretrain_config("IR", **FAST))
    real_end = Pretraining._end_epoch

    def poison_in_epoch_2(self):
        if self.epoch == 1:
            self.objective.bank.memory.data[0, 0] = float("inf")
        real_end(self)

    monkeypatch.setattr(Pretraining, "_end_epoch", poison_in_epoch_2)
    assert pretrain.main(["--config", str(cell / "config.yaml"), "--out", str(cell)]) == 1
    (line,) = [line for line in _ring_lines(capsys.readouterr().err) if "non-finite" in line]
    assert "became non-finite by the end of epoch 2" in line and "memory" in line, line
    assert load_verified(cell / "checkpoint.pt")["epoch"] == 1
    assert not (cell / "encoder.pt").exists()


@pytest.mark.slow
def test_linear_evaluation_stops_at_a_non_finite_loss(tmp_path, encoder_file):
    # lr near float32's maximum (3.4e38): one update makes the weights ~1e37, so the logits (a sum over
    # 25,088 features) overflow whatever the random encoder's features are; 1e30 could stay finite.
    cell = _cell(tmp_path, "lin", lincls_config(lr=1e38))
    result = run_module(
        "ring.lincls", "--config", cell / "config.yaml", "--encoder", encoder_file, "--out", cell, check=False
    )
    assert result.returncode == 1
    (line,) = _ring_lines(result.stderr)
    assert "the training loss became" in line and "at epoch 1 step" in line and "lr=1e+38" in line, line
    assert not (cell / "metrics.json").exists()


def test_toy_stops_at_a_non_finite_loss(tmp_path):
    cfg = ToyCNCEConfig(
        n_points=256, epochs=2, batch_size=64, negatives=20, eval_points=200, percentages=[50.0], lr=1e30
    )
    cell = _cell(tmp_path, "toy", cfg)
    assert toy_cnce.main(["--config", str(cell / "config.yaml"), "--out", str(cell)]) == 1
    assert not (cell / "metrics.json").exists()


def _table_files(tmp_path):
    files = []
    for i, top1 in enumerate([80.0, 82.0]):
        path = tmp_path / f"m{i}.json"
        path.write_text(json.dumps({"dataset": "cifar10", "method": "IR", "seed": i, "top1": top1}))
        files.append(path)
    prefix = tmp_path / "tables" / "table1"
    args = ["table1", "--out", str(prefix), "--methods", "IR", "--datasets", "cifar10", "--metrics", *map(str, files)]
    assert tables.main(args) == 0
    return files, prefix, args


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"dataset": "cifar10", "method": "IR", "seed": 1, "top1": NaN}', "holds a non-finite metric \\(top1\\)"),
        ('{"dataset": "cifar10", "method": "IR", "se', "is unreadable or corrupt"),
    ],
)
def test_a_table_refuses_a_bad_metrics_file_and_keeps_the_old_table(tmp_path, capsys, content, message):
    files, prefix, args = _table_files(tmp_path)
    before = {p: p.read_bytes() for p in prefix.parent.iterdir()}
    files[1].write_text(content)
    capsys.readouterr()
    assert tables.main(args) == 1
    (line,) = _ring_lines(capsys.readouterr().err)
    assert str(files[1]) in line
    assert re.search(message, line), line
    assert {p: p.read_bytes() for p in prefix.parent.iterdir()} == before  # old tables untouched


# ---- checkpoints ----------------------------------------------------------------------------------


# A finished cell drops its previous checkpoint once its encoder verifies (ring.engine.pretrain_state.finish); a process
# killed between that export and the drop leaves both checkpoints, the state these tests corrupt.
KILLED_BEFORE_THE_DROP = (
    "import sys; from ring import pretrain; from ring.engine import pretrain_state; "
    "pretrain_state.finish_checkpoints = lambda *a: 0; sys.exit(pretrain.main())"
)


@pytest.fixture(scope="module")
def finished_cell(module_tmp):
    """A 2-epoch cell killed as it finished: checkpoint.pt is epoch 2's, checkpoint.prev.pt epoch 1's."""
    cell = _cell(module_tmp("finished"), "cell", pretrain_config("IR", **FAST))
    subprocess.run(
        [sys.executable, "-c", KILLED_BEFORE_THE_DROP, "--config", str(cell / "config.yaml"), "--out", str(cell)],
        check=True,
        capture_output=True,
    )
    return cell


def _copy(cell, tmp_path):
    copy = tmp_path / "cell"
    shutil.copytree(cell, copy)
    return copy


def _overwrite_middle(path, size=4096):
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + size] = os.urandom(size)
    path.write_bytes(bytes(data))


@pytest.mark.slow
def test_a_corrupted_latest_checkpoint_resumes_from_the_previous_one_bit_exactly(finished_cell, tmp_path):
    cell = _copy(finished_cell, tmp_path)
    assert load_verified(cell / "checkpoint.prev.pt")["epoch"] == 1
    _overwrite_middle(cell / "checkpoint.pt")
    (cell / ".checkpoint.pt.x1y2z3.tmp").write_bytes(b"left by a SIGKILL mid-write")
    (cell / "encoder.pt").unlink()
    result = run_module("ring.pretrain", "--config", cell / "config.yaml", "--out", cell)
    lines = _ring_lines(result.stderr)
    assert any("removed 1 temporary file(s) left by killed writes" in line for line in lines), lines
    assert any(
        f"{cell / 'checkpoint.pt'} fails its checksum" in line
        and "kept as checkpoint.corrupt.pt, resuming from the previous checkpoint checkpoint.prev.pt" in line
        for line in lines
    ), lines
    assert not list(cell.glob(".*.tmp"))
    # Epoch 2 redone from epoch 1's checkpoint: the same weights as the uninterrupted run.
    a, b = (torch.load(c / "encoder.pt", weights_only=True) for c in (finished_cell, cell))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_no_good_checkpoint_starts_fresh_and_says_so(finished_cell, tmp_path, capsys):
    cell = _copy(finished_cell, tmp_path)
    _overwrite_middle(cell / "checkpoint.pt")
    (cell / "checkpoint.prev.pt").write_bytes(b"PK\x03\x04 truncated")
    state = Pretraining(pretrain_config("IR", **FAST), cell)
    assert state.resume() is False
    (line,) = _ring_lines(capsys.readouterr().err)
    assert "fails its checksum" in line and "no good previous checkpoint; starting this cell from scratch" in line
    assert (cell / "checkpoint.corrupt.pt").exists()


@pytest.mark.slow
def test_a_full_disk_during_a_checkpoint_write_is_one_sentence(tmp_path, monkeypatch, capsys):
    cell = _cell(tmp_path, "cell", pretrain_config("IR", **FAST))

    real = os.fsync

    def full(fd):  # the small run.json record before training fits; the checkpoint does not
        if ".checkpoint.pt." in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)

    monkeypatch.setattr(os, "fsync", full)  # ENOSPC as a full (network) file system reports it on flush
    assert pretrain.main(["--config", str(cell / "config.yaml"), "--out", str(cell)]) == 1
    (line,) = _ring_lines(capsys.readouterr().err)
    assert line == (
        f"ring: The disk holding {cell} is full (no space left while writing checkpoint.pt); no checkpoint.pt "
        "was written: free some space and rerun to continue."
    )
    assert not list(cell.glob(".*.tmp")) and not (cell / "checkpoint.pt").exists()


def test_an_unwritable_cell_folder_fails_before_training(tmp_path, monkeypatch, capsys):
    cell = _cell(tmp_path, "cell", pretrain_config("IR", **FAST))
    real = tempfile.mkstemp

    def refuse(*args, dir=None, **kwargs):
        if str(dir) == str(cell):  # what chmod a-w does to a non-root user (the tests may run as root)
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    monkeypatch.setattr(Pretraining, "_train", lambda self: pytest.fail("training started"))
    assert pretrain.main(["--config", str(cell / "config.yaml"), "--out", str(cell)]) == 1
    (line,) = _ring_lines(capsys.readouterr().err)
    assert line == (
        f"ring: The cell folder {cell} is not writable (Permission denied); fix its permissions or choose "
        "another results folder."
    )


# ---- no pickle from disk --------------------------------------------------------------------------


class Payload:
    """Unpickling this creates a folder: proof that code from the file ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_a_planted_payload_runs_nowhere_and_the_error_names_the_file(tmp_path, encoder_file):
    marker = tmp_path / "payload-ran"
    evil = Payload(marker)

    def planted(name, torch_format):
        path = tmp_path / name
        if torch_format:
            torch.save({"encoder": evil, "payload_sha256": "0"}, path)
        else:
            path.write_bytes(pickle.dumps({"model": evil}))
        return path

    cases = []
    # checkpoint, snapshot: the loaders ring.pretrain and ring.lincls use
    path = planted("checkpoint.pt", True)
    cases.append((path, lambda p=path: load_verified(p, "pretraining checkpoint")))
    path = planted("snapshot_epoch1.pt", True)
    cases.append(
        (
            path,
            lambda p=path: Pretraining(
                pretrain_config("IR", **FAST, init_from=str(p)), tmp_path / "study"
            ).checkpoint.init_from_snapshot(),
        )
    )
    # encoder: what ring.lincls, ring.transfer and ring.detection.convert read
    path = planted("encoder.pt", True)
    record_checksums(tmp_path, ["encoder.pt"])  # a payload recorded as the cell's own: the loader still refuses it
    cases.append((path, lambda p=path: load_feature_extractor(p, METHODS["IR"].encoder_files, [0.5] * 3, [0.2] * 3)))
    # converted Detectron2 weights, through the stage's reader and Detectron2's (safe) checkpointer
    path = planted("backbone.pkl", False)
    from ring.detection.convert import read_converted

    cases.append((path, lambda p=path: read_converted(p)))
    # a metrics file, as a table reads it
    path = planted("metrics.json", False)
    cases.append((path, lambda p=path: tables.read_metrics(p, ("top1",))))
    for path, load in cases:
        with pytest.raises((CheckpointError, ValueError)) as err:
            load()
        assert str(path) in str(err.value), err.value
        assert not marker.exists(), f"loading {path} ran its payload"
    # the normalisation cache: never unpickled, recomputed (and said) when it is not JSON
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "normalization-32x32.json").write_bytes(pickle.dumps(evil))

    class Images(torch.utils.data.Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            from PIL import Image

            return Image.new("RGB", (8, 8), (i * 100, 0, 0)), 0

    doc = transfer.normalization(Images(), "sha", 32, 32, cache)
    assert doc["split_sha256"] == "sha" and not marker.exists()
    json.loads((cache / "normalization-32x32.json").read_text())  # replaced by valid JSON


# ---- every encoder a later stage reads is verified ------------------------------------------------


@pytest.mark.parametrize("name", ["encoder.pt", "encoder_ab.pt"])
def test_an_encoder_overwritten_mid_file_stops_every_reader_with_one_sentence(tmp_path, name):
    """A few KiB overwritten in the middle of a trunk (still a loadable zip of tensors, a plausible wrong
    number) stops linear evaluation, transfer and conversion before they use it, naming the file."""
    from ring.core.catalog import spec
    from ring.core.files import FileError
    from ring.detection.convert import convert

    torch.manual_seed(0)
    s = spec("digits")
    save_trunks(export_trunks(LabEncoder("linear", 128, s.mean, s.std)), tmp_path)
    path = tmp_path / name
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4096] = bytes(4096)
    path.write_bytes(bytes(data))
    sentence = (
        re.escape(f"The encoder {path} fails its checksum (sha256 ")
        + r"[0-9a-f]{12}\.\.\., recorded [0-9a-f]{12}"
        + re.escape("...: the file was altered on disk); rerun the pretraining cell that writes it.")
    )
    with pytest.raises(FileError, match=sentence):
        load_feature_extractor(
            tmp_path / "encoder.pt", METHODS["CMC"].encoder_files, s.mean, s.std
        )  # ring.lincls and ring.transfer
    if name == "encoder.pt":
        with pytest.raises(FileError, match=sentence):
            convert(path, tmp_path / "backbone.pkl")
        assert not (tmp_path / "backbone.pkl").exists()
