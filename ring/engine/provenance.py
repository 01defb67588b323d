"""Provenance beside every cell's outputs: what ran, where, for how long.

``<cell>/provenance.json`` holds the code (git commit and dirty flag, with the package version; installed outside a
checkout, the version alone and a ``code`` line saying so; the grid file and workflow
config that made the cell, with their sha256, count as dirty when untracked or modified), the config hash and seed,
the software (torch, CUDA), and one *segment* per process that worked on the cell: a first run,
a resumed run, or a SLURM job requeued after preemption.  Each segment records its SLURM job id
and restart count, node, GPU model, wall time and outcome, so GPU-hours add up over requeues, and the seconds the
process spent in each pass and fixed cost (``passes_s``, with ``pass_images`` and ``pass_calls``: ring.engine.clock;
from the process's start, so they may exceed ``wall_s``, which starts with the segment).
Runs that were killed before they could write theirs (an external requeue's SIGKILL, a job killed
for good) are added from SLURM's accounting (``sacct -D``, ring.core.accounting): by the next segment of
the same job, or by the launcher before it resubmits or collects the cell.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

import ring
from ring.core.accounting import missing_runs, totals
from ring.core.files import FileError, write_json
from ring.core.stop import Preempted
from ring.engine import clock, distributed

FILE = "provenance.json"
PROGRESS = "progress.json"  # the running segment's rate, rewritten by rank 0 each epoch (ring status reads it)
# The checkout this package runs from, if it runs from one (an editable install or PYTHONPATH); an installed wheel
# sits in site-packages, whose parent is no checkout of ours (and may lie inside some other repository).
REPO = Path(__file__).resolve().parents[2]


def git_state(repo: Path = REPO) -> dict:
    """The checkout's commit and dirty flag; outside a checkout of this package, the installed version instead,
    saying so (``code``), since no commit can be known."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()

    try:
        # Another repository around site-packages is not ours: its top level must be this package's parent.
        if Path(git("rev-parse", "--show-toplevel")).resolve() == repo.resolve() and (repo / "ring").is_dir():
            return {
                "commit": git("rev-parse", "HEAD"),
                "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
                "version": ring.__version__,
                "code": "git checkout",
            }
    except (OSError, subprocess.SubprocessError):
        pass
    return {
        "commit": None,
        "dirty": None,
        "version": ring.__version__,
        "code": f"installed package ring-bench {ring.__version__}, not a git checkout: no commit recorded",
    }


# The workflow exports the grid file and its config file to every job (workflow/rules/common.smk).
GRID_ENV, WORKFLOW_CONFIG_ENV = "RING_GRID_FILE", "RING_WORKFLOW_CONFIG"


def file_state(path: str | Path) -> dict:
    """A file's sha256 and whether git tracks it unmodified (a file outside any repository is untracked)."""
    path = Path(path).resolve()
    sha = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(path.parent), *args], capture_output=True, text=True, timeout=10)

    try:
        tracked = git("ls-files", "--error-unmatch", path.name).returncode == 0
        modified = bool(git("status", "--porcelain", "--", path.name).stdout.strip()) if tracked else None
    except (OSError, subprocess.SubprocessError):
        tracked, modified = False, None
    return {"path": str(path), "sha256": sha, "tracked": tracked, "modified": modified}


def run_files_state(env=os.environ) -> dict:
    """The grid file and workflow config of this run (when the workflow started it), and whether
    either makes the run dirty: untracked or modified counts as dirty."""
    files = {
        key: file_state(env[var])
        for key, var in (("grid_file", GRID_ENV), ("workflow_config", WORKFLOW_CONFIG_ENV))
        if env.get(var)
    }
    return {**files, "files_dirty": any(not f["tracked"] or f["modified"] for f in files.values())}


def slurm_env() -> dict:
    env = os.environ
    job = env.get("SLURM_JOB_ID")
    if env.get("SLURM_ARRAY_JOB_ID"):
        job = f"{env['SLURM_ARRAY_JOB_ID']}_{env.get('SLURM_ARRAY_TASK_ID')}"
    return {"job_id": job, "restart_count": int(env.get("SLURM_RESTART_COUNT", 0)) if job else None}


def nodes_in_use() -> int:
    """The nodes of this run (SLURM_JOB_NUM_NODES; one outside SLURM): its GPUs are those of every node."""
    return int(os.environ.get("SLURM_JOB_NUM_NODES") or os.environ.get("SLURM_NNODES") or 1)


def gpus_in_use() -> tuple[int, str | None]:
    if not torch.cuda.is_available():
        return 0, None
    world = int(os.environ.get("WORLD_SIZE", 1))  # every rank's GPU, on every node: GPU-hours are wall x all of them
    return world, torch.cuda.get_device_name(0)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Segment:
    """Context manager recording one process's work on a cell in ``provenance.json``."""

    def __init__(self, cell: str | Path, config_hash: str, seed: int):
        self.path = Path(cell) / FILE
        self.config_hash = config_hash
        self.seed = seed

    def __enter__(self) -> Segment:
        self.started = _now()
        self.t0 = time.monotonic()
        return self

    def progress(self, start_epoch: float, done_epochs: int, epochs: int) -> None:
        """Rank 0 after each epoch: how far this segment got (from ``start_epoch``, fractional when it resumed
        mid-epoch) in how long, on how many GPUs, in ``progress.json``: the rate ``ring status`` extrapolates."""
        if not distributed.is_main():
            return
        gpus, _ = gpus_in_use()
        record = {
            "epoch": done_epochs,
            "epochs": epochs,
            "segment_epochs": round(done_epochs - start_epoch, 6),
            "segment_wall_s": round(time.monotonic() - self.t0, 3),
            "gpus": gpus,
            "updated": _now(),
        }
        write_json(self.path.with_name(PROGRESS), record, indent=None)

    def __exit__(self, exc_type, exc, tb) -> None:
        if not distributed.is_main():  # one record per data-parallel job, written by rank 0
            return
        outcome = "completed" if exc_type is None else ("preempted" if issubclass(exc_type, Preempted) else "failed")
        gpus, gpu_model = gpus_in_use()
        wall = time.monotonic() - self.t0
        record = {
            "started": self.started,
            "ended": _now(),
            "wall_s": round(wall, 3),
            "outcome": outcome,
            "node": socket.gethostname(),  # rank 0's
            "nodes": nodes_in_use(),
            "gpus": gpus,
            "gpu_model": gpu_model,
            **slurm_env(),
            **clock.record(),
        }
        previous = json.loads(self.path.read_text()) if self.path.exists() else {}
        earlier = previous.get("segments", [])
        segments = [*earlier, *missing_runs(earlier, record), record]
        files = run_files_state()
        files_dirty = files.pop("files_dirty")
        code = git_state()
        # Dirty too when the grid file or workflow config is untracked or modified (their sha256 is kept).
        dirty = True if files_dirty else code["dirty"]
        doc = {
            **code,
            "dirty": dirty,
            **files,
            "config_hash": self.config_hash,
            "seed": self.seed,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "segments": segments,
            **totals(segments),
        }
        try:
            write_json(self.path, doc)
        except FileError:
            if exc_type is None:
                raise
            # The stage is failing already, most often for the same reason (a full disk): its own
            # sentence is the one to show, and this segment cannot be written until that is fixed.
