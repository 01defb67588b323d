"""What the SLURM test files share (tests/workflow/test_slurm_*.py): the test cluster's site values, the clients and
launchers they start, the questions they ask of squeue and sacct, and the turns they take on the cluster.

The cluster (.ci/slurm/start.sh) is one per machine, shared by the files that run side by side on pytest-xdist's
workers: every question about jobs is filtered by the asking test's working folder, and a test that disturbs the
whole cluster (stops the controller, drains the node) waits for the cluster alone (``cluster_turn``).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from ring.cluster.batch import load_config, merge
from ring.cluster.slurm import stage_resources
from ring.core.config import PretrainConfig, save
from tests import ROOT
from tests.helpers import copy_workflow, launch_command
from tests.workflow.runs import SMALL, TINY, snakemake, write_grid

# Each SLURM file's pytestmark: a real SLURM cluster, minutes of jobs, outside the developer loop (pytest -m 'not
# slow'); each test in its turn on the cluster that the files share (tests/workflow/conftest.py).
SLURM_TESTS = [pytest.mark.slow, pytest.mark.usefixtures("slurm_turn")]
SCRIPTS = ROOT / ".ci" / "slurm"
STATE = Path(os.environ.get("RING_SLURM_STATE", "/tmp/ring-slurm"))  # .ci/slurm/lib.sh's default


@contextmanager
def cluster_turn(alone: bool = False) -> Iterator[None]:
    """A turn on the shared cluster: many tests at once, or one test alone (``alone``), which waits until the running
    ones end.  A readers-writer lock of two flocks in the cluster's state folder: each turn queues at the gate, so
    that a test waiting to be alone is not starved by the other worker's next tests (flock itself queues nobody)."""
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "tests.gate", "a") as gate, open(STATE / "tests.turn", "a") as turn:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(turn, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(turn, fcntl.LOCK_UN)


# The test cluster's site values, written to profiles/slurm/site.yaml as a user would (layered over
# the SHIPPED cluster.yaml): partition gpu, account ring, and node sizes it can hold (2 CPUs, ~20 GB,
# 2 fake GPUs); poll_s 1 keeps the tests short.
SITE = {
    "slurm": {
        "defaults": {"partition": "gpu", "account": "ring", "cpus_per_task": 1, "mem_gb": 2, "poll_s": 1},
        "lincls": {"mem_gb": 2},
        "transfer": {"mem_gb": 2},
    }
}

TINY_SEED0 = {**TINY, "seeds": [0]}  # the SLURM tests' grid: 2 pretraining and 2 linear-evaluation cells
# The same at 16 pixels (the workflow tests' SMALL): a quarter of the compute, for the tests that need no job to last
# long enough for a disruption at a chosen moment (a signal, a kill of the client while the jobs run).
SMALL_SEED0 = {**SMALL, "seeds": [0]}

SHIPPED = [ROOT / "ring" / "resources" / "config.yaml", ROOT / "ring" / "resources" / "cluster.yaml"]


def shipped_resources(stage: str) -> dict:
    """A stage's resources as the profile resolves them: shipped cluster.yaml, then the site file."""
    return stage_resources(merge(load_config(SHIPPED), SITE)["slurm"], stage)


CLUSTER = shipped_resources("pretrain")

# The profile with the test grid (after the target: --config takes every argument after it);
# cluster values come from the copy's site.yaml.
SLURM = ("--profile", "profiles/slurm", "--config", "grid=tiny")

BATCH_CONFIGS = [
    "--configfile",
    "ring/resources/config.yaml",
    "ring/resources/cluster.yaml",
    "profiles/slurm/site.yaml",
]


def start_client(workdir: Path, *targets: str, log: Path | None = None) -> subprocess.Popen:
    """A Snakemake client of the SLURM profile in the background (``targets``, all_tables by default), in a session of
    its own so that ``os.killpg`` kills it with its waiting launchers and not the test; its output goes to ``log``,
    else nowhere."""
    cmd = [sys.executable, "-m", "snakemake", *(targets or ("all_tables",)), *SLURM]
    if log is None:
        return subprocess.Popen(
            cmd, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
    with open(log, "w") as sink:  # the client holds its own copy of the file: ours can close
        return subprocess.Popen(cmd, cwd=workdir, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)


@pytest.fixture
def workdir(tmp_path) -> Path:
    """The workflow's copy with the test cluster's site file and the tiny grid (seed 0); imported by each SLURM file,
    where it stands for tests/conftest.py's ``workdir``."""
    copy_workflow(tmp_path)
    (tmp_path / "profiles" / "slurm" / "site.yaml").write_text(yaml.safe_dump(SITE))
    write_grid(tmp_path, "tiny", TINY_SEED0)
    return tmp_path


def sacct_jobs(name_prefix: str, since: str, workdir: Path) -> list[tuple[str, str, str]]:
    """(JobID, JobName, State) of allocations submitted since ``since`` whose name starts with the prefix, and that
    were submitted from ``workdir`` (sacct -S also lists jobs submitted earlier that still ran then, and the tests
    running beside this one on the shared cluster submit jobs of the same names)."""
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-S", since, "-o", "JobID,JobName,State,Submit,WorkDir"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    rows = [line.split("|", 4) for line in out.splitlines()]
    return [
        tuple(row[:3]) for row in rows if row[1].startswith(name_prefix) and row[3] >= since and row[4] == str(workdir)
    ]


def batch(workdir: Path, *command: str) -> str:
    """``ring.cluster.batch COMMAND`` on the workdir's tiny grid with the SLURM profile's configs: its output."""
    where = ["--grid", "tiny", *BATCH_CONFIGS, "--grids-dir", "ring/resources/grids"]
    cmd = [sys.executable, "-m", "ring.cluster.batch", *command, *where]
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, check=True, timeout=120).stdout


def now() -> str:
    return datetime.now().strftime("%Y-%m-%dT%H:%M:%S")


def launch_cell(cell: Path, cfg: PretrainConfig, resources: dict) -> subprocess.Popen:
    cell.mkdir(parents=True, exist_ok=True)
    save(cfg, cell / "config.yaml")
    cmd = launch_command(cell, "--launcher", "slurm", "--resources", json.dumps(resources))
    return subprocess.Popen(
        cmd,
        cwd=cell.parents[5],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def wait_for(predicate, timeout: float, what: str, poll_s: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(poll_s)


def log_lines(cell: Path) -> int:
    path = cell / "log.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def same_weights(a: Path, b: Path) -> bool:
    import torch  # here: tests/workflow/conftest.py imports this module, and the workflow tests need no torch

    sa, sb = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def readme_client_mb() -> float:
    """The waiting client's resident memory as README.md states it."""
    match = re.search(r"`ring.cluster.launch` process holds about (\d+) MB resident", (ROOT / "README.md").read_text())
    assert match, "README.md no longer states the waiting client's memory (the sentence this test checks)"
    return float(match.group(1))


def client_within_readme(rss_kb: int) -> bool:
    """README's figure is a measurement: within 15% of what is measured (imports and allocator vary that little)."""
    return abs(rss_kb / 1024 - readme_client_mb()) <= 0.15 * readme_client_mb()


def sacct_states(job_ids: list[str]) -> list[str]:
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", ",".join(job_ids), "-o", "JobID,State"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    return [line.split("|")[1].split()[0] for line in out.splitlines() if line.split("|")[0] in job_ids]


def all_completed(job_ids: list[str]) -> bool:
    states = sacct_states(job_ids)
    return len(states) == len(job_ids) and set(states) == {"COMPLETED"}


def kill_and_rerun_until_reattached(workdir: Path, client, cell: Path, job_id: str, target: str) -> subprocess.Popen:
    """The client killed with its waiting launchers (the jobs live on), the workdir unlocked and ``target`` rerun:
    the rerun, once its launcher for ``cell`` says it re-attached to ``job_id`` (its output on a pipe)."""
    os.killpg(client.pid, signal.SIGKILL)
    client.wait()
    snakemake(workdir, "--unlock")
    rerun = subprocess.Popen(
        [sys.executable, "-m", "snakemake", target, *SLURM],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    log = cell / "pretrain.log"
    wait_for(lambda: log.exists() and f"re-attached to SLURM job {job_id}" in log.read_text(), 300, "the re-attach")
    return rerun


def recorded_id(cell: Path) -> str | None:
    path = cell / "slurm" / "job.json"
    return json.loads(path.read_text())["job_id"] if path.exists() else None


def live_state(job_id: str | None) -> str | None:
    """squeue's state of a live job (None when it is not queued or running; needs the controller)."""
    if job_id is None:
        return None
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=30)
    return out.stdout.split()[0] if out.returncode == 0 and out.stdout.split() else None


def accounted_runs_of(job_id: str) -> int:
    out = subprocess.run(
        ["sacct", "-n", "-X", "-D", "-P", "-j", job_id, "-o", "JobID"], capture_output=True, text=True, timeout=30
    ).stdout
    return sum(line == job_id for line in out.splitlines())


def training_started(cell: Path) -> bool:
    """The stage's per-step TensorBoard run exists: ring.cluster.jobs has replaced submitit's USR2 handler, so
    USR2 now stops at a step boundary (before that, python's default would kill the step)."""
    return any((cell / "steps").glob("events.out.tfevents.*"))


def submitted(folder: Path) -> set[str]:
    """The SLURM jobs submitit submitted from the cells under ``folder`` (their submission scripts)."""
    return {path.name.split("_")[0] for path in folder.rglob("slurm/*_submission.sh")}
