"""Data parallelism: 2 gloo processes on the CPU compute what one process computes on the same global batch
(IRing and MoCoRing; CMCRing, whose two views draw their negatives view by view)."""

import json
import os
import socket
import subprocess
import sys

import pytest
import torch

from ring import config as C
from ring.checkpoint import safe_load

from .helpers import pretrain_config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(cfg: C.PretrainConfig, cell, world: int) -> None:
    cell.mkdir(parents=True)
    C.save(cfg, cell / "config.yaml")
    port = free_port()
    procs = []
    for rank in range(world):
        env = {**os.environ, "OMP_NUM_THREADS": "1", "WORLD_SIZE": str(world), "RANK": str(rank),
               "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        procs.append(subprocess.Popen([sys.executable, "-m", "ring.pretrain", "--config", str(cell / "config.yaml"),
                                       "--out", str(cell)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs


@pytest.mark.parametrize("method", ["IRing", "MoCoRing", "CMCRing"])
def test_two_processes_match_one_process_with_as_many_bn_groups(tmp_path, method):
    cfg = pretrain_config(method, epochs=1, lr_milestones=[], knn_every=0, bn_groups=2)
    run_ranks(cfg, tmp_path / "single", world=1)
    run_ranks(cfg, tmp_path / "ddp", world=2)

    loss = [json.loads((tmp_path / d / "log.jsonl").read_text())["loss"] for d in ("single", "ddp")]
    assert loss[0] == pytest.approx(loss[1], rel=1e-4)
    single, ddp = (safe_load(tmp_path / d / "checkpoint.pt") for d in ("single", "ddp"))
    for name, value in single["encoder"].items():
        if "running_" in name or "num_batches_tracked" in name:
            continue  # BN running statistics follow rank 0's groups under DDP, as in MoCo
        assert torch.allclose(value, ddp["encoder"][name], atol=1e-5), name
    # The bank / queue stayed consistent: every rank applied the whole global batch's update.
    for name, value in single["objective"].items():
        if name.endswith(("memory", "queue", "queue_ptr")):
            assert torch.allclose(value.float(), ddp["objective"][name].float(), atol=1e-5), name
    assert (tmp_path / "ddp" / "encoder.pt").exists()
    assert json.loads((tmp_path / "ddp" / "provenance.json").read_text())["segments"][0]["outcome"] == "completed"


def test_bn_groups_must_cover_the_processes(tmp_path):
    cfg = pretrain_config("IR", epochs=1, bn_groups=1)
    cell = tmp_path / "cell"
    cell.mkdir()
    C.save(cfg, cell / "config.yaml")
    env = {**os.environ, "WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port())}
    # A lone rank 0 would wait for rank 1 at init; the check fails before any collective.
    code = ("import os, sys; from ring import config as C; from ring.pretrain import Pretraining\n"
            "import ring.distributed as D; D.init_from_env = lambda t: None; D.world_size = lambda: 2\n"
            f"Pretraining(C.load(C.PretrainConfig, {str(cell / 'config.yaml')!r}), {str(cell)!r})")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "bn_groups=1 must be multiples of the 2 processes" in out.stderr
