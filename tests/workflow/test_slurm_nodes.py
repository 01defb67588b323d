"""ring-bench on a real SLURM cluster (.ci/slurm/start.sh): one cell on two GPUs, and across two
nodes (also preempted, and with its second node lost).

These tests never skip: a machine without the cluster fails them, as CI must.  What the SLURM files share is in
tests/workflow/slurm.py.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ring.core.config import PretrainConfig, config_hash, save
from ring.engine.checkpoint import safe_load
from tests.engine.test_distributed_run import gaps
from tests.helpers import TINY_PRETRAIN, pretrain_config
from tests.workflow.slurm import (
    CLUSTER,
    SCRIPTS,
    SLURM_TESTS,
    STATE,
    cluster_turn,
    launch_cell,
    log_lines,
    wait_for,
)

pytestmark = SLURM_TESTS


def test_two_gpu_cell_runs_ddp_from_submitits_environment(tmp_path):
    """gpus_per_node=2: two tasks, one per (fake) GPU, ranks from submitit; gloo on this CPU machine."""
    # Two steps, from the same start (the epoch-0 snapshot): as in tests/engine/test_distributed.py, the updates are
    # compared.
    cfg = PretrainConfig(
        method="MoCoRing",
        **{
            **TINY_PRETRAIN,
            "epochs": 1,
            "knn_every": 0,
            "bn_groups": 2,
            "batch_size": 640,
            "queue_size": 1280,
            "snapshot_epochs": [0],
        },
    )
    single = tmp_path / "results" / "t" / "pretrain" / "digits" / "MoCoRing" / "seed0"
    proc = launch_cell(single, cfg, CLUSTER)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    double = tmp_path / "results" / "t" / "pretrain" / "digits" / "MoCoRing" / "seed1"
    proc = launch_cell(double, cfg, {**CLUSTER, "gpus_per_node": 2})
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    a, b = (torch.load(c / "encoder.pt", weights_only=True) for c in (single, double))
    start = {k.removeprefix("trunk."): v for k, v in safe_load(single / "snapshot_epoch0.pt")["encoder"].items()}
    keys = [k for k in a if "running_" not in k and "num_batches_tracked" not in k]
    step = [torch.cat([(state[k] - start[k]).flatten() for k in keys]) for state in (a, b)]
    # One process sums each BatchNorm group's statistics in one call, each rank its own group: rounding, which
    # digits' flat backgrounds amplify to about 0.5% of two steps' update (tests/engine/test_distributed.py
    # measures it).
    assert (step[0] - step[1]).norm() <= 0.03 * step[0].norm()
    assert json.loads((double / "provenance.json").read_text())["segments"][0]["outcome"] == "completed"


TWO_NODES = {**CLUSTER, "partition": "multi", "nodes": 2, "gpus_per_node": 2}  # 4 tasks, 2 per node


SECOND = "-b"  # start.sh names the second node after the machine: <hostname -s>-b


def job_of(cell: Path) -> str:
    return json.loads((cell / "slurm" / "job.json").read_text())["job_id"]


def task_nodes(cell: Path, job_id: str) -> dict[int, int]:
    """Each task's global rank -> its node index, from submitit's first line in every task's output log."""
    nodes = {}
    for log in (cell / "slurm").glob(f"{job_id}_*_log.out"):
        found = re.search(r"JobEnvironment\(.*node=(\d+).*global_rank=(\d+)", log.read_text())
        if found:
            nodes[int(found.group(2))] = int(found.group(1))
    return nodes


def test_a_two_node_cell_computes_what_one_process_computes(tmp_path):
    """2 nodes x 2 tasks, one BatchNorm group per node (MoCoRing, bn_groups 2: a group spans a node's 2 ranks and
    MoCo's shuffled keys cross the nodes), one step: the update is the single process's (as tests/engine/
    test_distributed.py measures it: 0.45%, the fp32 gradient's own accuracy on digits)."""
    values = {
        **TINY_PRETRAIN,
        "epochs": 1,
        "knn_every": 0,
        "bn_groups": 2,
        "batch_size": 1280,
        "queue_size": 1280,
        "snapshot_epochs": [0],
    }
    cfg = PretrainConfig(method="MoCoRing", **values)
    single = tmp_path / "single"
    single.mkdir()
    save(cfg, single / "config.yaml")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(
        [sys.executable, "-m", "ring.pretrain", "--config", str(single / "config.yaml"), "--out", str(single)],
        check=True,
        capture_output=True,
        timeout=600,
        env=env,
    )
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "MoCoRing" / "seed0"
    proc = launch_cell(cell, cfg, TWO_NODES)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out
    job_id = job_of(cell)
    alloc = subprocess.run(
        ["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "NNodes,AllocTRES,NodeList"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split("\n")[0]
    nnodes, tres, nodelist = alloc.split("|")
    assert nnodes == "2" and "gres/gpu=4" in tres, alloc
    assert task_nodes(cell, job_id) == {0: 0, 1: 0, 2: 1, 3: 1}, nodelist  # consecutive ranks share a node
    a, b = (torch.load(c / "encoder.pt", weights_only=True) for c in (single, cell))
    start = {k.removeprefix("trunk."): v for k, v in safe_load(single / "snapshot_epoch0.pt")["encoder"].items()}
    keys = [k for k in a if "running_" not in k and "num_batches_tracked" not in k]
    step = [torch.cat([(state[k] - start[k]).flatten() for k in keys]) for state in (a, b)]
    assert (step[0] - step[1]).norm() <= 0.03 * step[0].norm()
    segment = json.loads((cell / "provenance.json").read_text())["segments"][0]
    assert (segment["outcome"], segment["nodes"]) == ("completed", 2)


def test_a_two_node_cell_trains_what_one_process_trains_over_a_run(tmp_path):
    """IR with one BatchNorm group spread over 2 nodes x 2 tasks (bn_groups 1, the docs' setting for IR on several
    GPUs), two epochs in float64 (precision: fp64), against the one-process run of the same config hash: every
    parameter, every buffer (BatchNorm running statistics and counts), SGD's momentum and the bank.

    The two runs add the same terms in other orders (per rank, then over the ranks and nodes), so they part by
    rounding, 1e-16 in float64, grown by training's own sensitivity: measured 2.6e-14 after one step to 1.2e-9 after
    42, at most 1.4-fold a step (tests/engine/test_distributed_run.py).  These 20 steps measured 4.2e-11 at most (SGD's
    momentum; every other tensor less); 1e-6 leaves room for other thread counts and orders, while a wrong statistic,
    momentum, count, gradient scale, shard or bank update moves a tensor by percents (fp32, where ReLU flips part whole
    runs, is docs/cluster.md's "What differs in fp32")."""
    cfg = pretrain_config(
        "IR",
        epochs=2,
        lr_milestones=[1],
        knn_every=0,
        bn_groups=1,
        batch_size=128,  # 10 steps an epoch, 32 images a rank
        resize=16,  # the network's arithmetic at a quarter of 32 px's cost
        crop=16,
        precision="fp64",
    )
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "IR" / "seed0"
    proc = launch_cell(cell, cfg, TWO_NODES)  # the job trains while this process trains the one-process run
    single = tmp_path / "single"
    single.mkdir()
    save(cfg, single / "config.yaml")
    subprocess.run(
        [sys.executable, "-m", "ring.pretrain", "--config", str(single / "config.yaml"), "--out", str(single)],
        check=True,
        capture_output=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out
    assert task_nodes(cell, job_of(cell)) == {0: 0, 1: 0, 2: 1, 3: 1}  # the group really spans both nodes
    hashes = [json.loads((c / "run.json").read_text())["config_hash"] for c in (single, cell)]
    assert hashes[0] == hashes[1] == config_hash(cfg)
    a, b = (safe_load(c / "checkpoint.pt") for c in (single, cell))
    assert (a["epoch"], a["step_in_epoch"]) == (b["epoch"], b["step_in_epoch"]) == (2, 0)
    apart = {k: v for k, v in gaps(a, b).items() if v > 1e-6}
    assert not apart, f"the 2-node cell parts from one process: {apart}"


# Two epochs: each disruption comes once the first has ended (its log line), and the second runs on after it.
IRING_2_EPOCHS = PretrainConfig(method="IRing", **{**TINY_PRETRAIN, "epochs": 2})


def equal_across_processes(a: Path, b: Path) -> bool:
    """Two 4-process runs' encoders, equal up to the order in which gloo sums the 4 ranks' gradients: DDP rebuilds
    its buckets after a restart and the all-reduce then adds the same values in another grouping (measured 3.8e-6
    of the weights' norm after a USR2 requeue, two epochs on).  A resume from the wrong step, a lost update or
    another random stream moves them by percents."""
    sa, sb = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
    keys = [k for k in sa if sa[k].is_floating_point()]
    gap = sum((sa[k].double() - sb[k].double()).norm() ** 2 for k in keys) ** 0.5
    return sa.keys() == sb.keys() and bool(gap <= 1e-4 * sum(sa[k].double().norm() ** 2 for k in keys) ** 0.5)


@pytest.fixture(scope="module")
def two_node_reference(module_tmp) -> Path:
    """An undisturbed two-node run of the interruption tests' cell (one BatchNorm group over the 4 ranks)."""
    cell = module_tmp("ref2") / "results" / "t" / "pretrain" / "digits" / "IRing" / "seed0"
    with cluster_turn():
        proc = launch_cell(cell, IRING_2_EPOCHS, TWO_NODES)
        out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out
    return cell / "encoder.pt"


def test_usr2_on_a_two_node_job_checkpoints_requeues_once_and_finishes_equal(tmp_path, two_node_reference):
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "IRing" / "seed0"
    proc = launch_cell(cell, IRING_2_EPOCHS, TWO_NODES)
    wait_for(lambda: log_lines(cell) >= 1, 600, "the first epoch")
    job_id = job_of(cell)
    subprocess.run(["scancel", "--signal=USR2", job_id], check=True, timeout=30)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out
    segments = json.loads((cell / "provenance.json").read_text())["segments"]
    assert [s["outcome"] for s in segments] == ["preempted", "completed"], segments
    assert segments[1]["restart_count"] == 1 and {s["job_id"] for s in segments} == {job_id}
    assert equal_across_processes(two_node_reference, cell / "encoder.pt")


def test_a_lost_second_node_is_requeued_once_and_the_cell_still_finishes_equal(tmp_path, two_node_reference):
    """The second node's slurmd and its job steps killed, the node marked down: the job ends NODE_FAIL, SLURM
    (JobRequeue=1) requeues it under its own id, the launcher waits on that job rather than submitting a second one
    for the cell, and the stage resumes from its checkpoint once the node is back."""
    node = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip() + SECOND
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "IRing" / "seed0"
    proc = launch_cell(cell, IRING_2_EPOCHS, TWO_NODES)
    wait_for(lambda: log_lines(cell) >= 1, 600, "the first epoch")
    job_id = job_of(cell)
    # Only this file's jobs run in partition "multi", the one the second node is in; the node is down under the lock
    # of start.sh and stop.sh, so that the other worker's start.sh waits rather than restart a cluster missing a node.
    with open(STATE / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(["bash", str(SCRIPTS / "node.sh"), "fail", node], check=True, timeout=120)
        subprocess.run(["bash", str(SCRIPTS / "node.sh"), "start", node], check=True, timeout=120)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out
    # The job's run ends NODE_FAIL and SLURM runs the same job again: the launcher, which reads the controller's
    # word while it holds a lost job, submitted nothing (before, it saw accounting's NODE_FAIL and submitted a second
    # job beside the requeued one).  A site without JobRequeue gets a new job (tests/cluster/test_watch.py).  The run
    # that ended NODE_FAIL is in the cell's provenance (from sacct).
    assert job_of(cell) == job_id, f"a second job {job_of(cell)} was submitted beside the requeued {job_id}"
    runs = subprocess.run(
        ["sacct", "-D", "-X", "-n", "-P", "-j", ",".join({job_id, job_of(cell)}), "-o", "JobID,State"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert "NODE_FAIL" in runs, runs
    segments = json.loads((cell / "provenance.json").read_text())["segments"]
    assert [s["outcome"] for s in segments][0] == "killed (NODE_FAIL)" and segments[-1]["outcome"] == "completed"
    assert equal_across_processes(two_node_reference, cell / "encoder.pt")
    assert (STATE / "run").is_dir()
