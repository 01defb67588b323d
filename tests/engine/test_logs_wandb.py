"""Optional W&B logging (RING_WANDB_PROJECT), tested for real in wandb's offline mode: the runs' .wandb
files are read back record by record and their history compared with log.jsonl."""

import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from ring.engine import logs
from tests.helpers import preempt_resume_and_requeue, pretrain_config

wandb = pytest.importorskip("wandb")  # pinned in envs/requirements-cpu.txt; optional for users

CFG = dict(
    resize=16, crop=16, knn_every=1, knn_schedule="every", batch_size=128
)  # as tests/engine/test_logs.py: 10 steps an epoch


def wandb_records(path: Path):
    """The protobuf records of a ``.wandb`` file, read with wandb's own ``Record`` schema.

    wandb 0.31 ships no Python reader any more (wandb-core writes these files), so this is the format
    itself: a 7-byte header (":W&B", magic 0xBEE1, version 0), then LevelDB's log format (32 KiB
    blocks; chunks of crc32, length, type FULL/FIRST/MIDDLE/LAST), each checksum verified.
    """
    from wandb.proto.wandb_internal_pb2 import Record

    data = path.read_bytes()
    assert struct.unpack("<4sHB", data[:7]) == (b":W&B", 0xBEE1, 0), f"{path}: not a version-0 .wandb file"
    block, pos, pending = 32768, 7, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a chunk header is padding
            pos += block - pos % block
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:  # zero fill after the last record
            break
        body = data[pos + 7 : pos + 7 + length]
        assert zlib.crc32(body, zlib.crc32(bytes([kind]))) == crc, f"{path}: bad checksum at byte {pos}"
        pos += 7 + length
        pending += body
        if kind in (1, 4):  # FULL, LAST: a whole record
            record = Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def history(run_dirs: list[Path]) -> list[dict]:
    rows = []
    for run_dir in run_dirs:
        for (path,) in [list(run_dir.glob("run-*.wandb"))]:
            for record in wandb_records(path):
                if record.WhichOneof("record_type") == "history":
                    row = {
                        item.key or "/".join(item.nested_key): json.loads(item.value_json)
                        for item in record.history.item
                    }
                    rows.append({k: v for k, v in row.items() if not k.startswith("_")})  # not W&B's _step, _runtime
    return rows


def test_wandb_run_gets_every_record_and_step_once_across_a_resume(tmp_path, monkeypatch):
    monkeypatch.setenv("RING_WANDB_PROJECT", "ring-tests")
    monkeypatch.setenv("WANDB_MODE", "offline")  # nothing leaves the machine
    monkeypatch.delenv("WANDB_DIR", raising=False)
    cell = tmp_path / "results" / "g" / "pretrain" / "digits" / "IR" / "seed0"
    # Preempted in epoch 1, resumed, then requeued from an older checkpoint than what W&B was sent:
    # steps 15..20 and epoch 1 are redone, and not sent again.
    steps_per_epoch = preempt_resume_and_requeue(cell, monkeypatch, pretrain_config("IR", **CFG))

    marker = json.loads((cell / "wandb-run.json").read_text())
    runs = sorted((cell / "wandb").glob("offline-run-*"))
    assert len(runs) == 3 and all(r.name.endswith("-" + marker["id"]) for r in runs)  # one W&B run, resumed
    for path in (r / f"run-{marker['id']}.wandb" for r in runs):
        (run,) = [rec.run for rec in wandb_records(path) if rec.WhichOneof("record_type") == "run"]
        assert (run.run_id, run.display_name, run.project, run.run_group) == (
            marker["id"],
            "g/pretrain/digits/IR/seed0",
            "ring-tests",
            "g/pretrain/digits/IR",
        )
    rows = history(runs)
    log = [json.loads(line) for line in (cell / "log.jsonl").read_text().splitlines()]
    epochs = [r for r in rows if "epoch" in r]
    assert [r["epoch"] for r in epochs] == [0, 1]  # once each, in order
    for row, record in zip(epochs, log, strict=True):
        # W&B keeps the float64 JSON values: exactly the log's numbers.
        assert row == {"epoch": record["epoch"], **{f"pretrain/{k}": v for k, v in logs.scalars(record).items()}}
    n = 2 * steps_per_epoch
    per_step = [r for r in rows if "global_step" in r]
    assert [r["global_step"] for r in per_step] == list(range(1, n + 1))
    assert all(
        set(r) == {"global_step", "pretrain_step/loss", "pretrain_step/lr", "pretrain_step/images_per_s"}
        for r in per_step
    )
    assert marker["epoch"] == 1 and marker["step"] == n


def test_enabled_without_wandb_installed_is_one_sentence(tmp_path, monkeypatch):
    monkeypatch.setenv("RING_WANDB_PROJECT", "p")
    find_spec = logs.importlib.util.find_spec
    monkeypatch.setattr(
        logs.importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else find_spec(name, *a)
    )
    with pytest.raises(
        logs.WandbMissing,
        match=r"^RING_WANDB_PROJECT=p asks for W&B logging but wandb is not "
        r"installed; install it .* or unset RING_WANDB_PROJECT\.$",
    ):
        logs.JsonLog(tmp_path / "log.jsonl")


def test_wandb_is_not_imported_unless_asked_for(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RING_WANDB_PROJECT"}
    code = (
        "import sys; from ring.engine.logs import JsonLog; log = JsonLog(sys.argv[1]); "
        "log.append({'epoch': 0, 'loss': 1.0}); log.step(1, {'loss': 1.0}); log.close(); "
        "assert log.wandb is None and 'wandb' not in sys.modules, sorted(m for m in sys.modules if 'wandb' in m)"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "log.jsonl")], check=True, env=env)
    assert not (tmp_path / "wandb").exists() and not (tmp_path / "wandb-run.json").exists()
