import os
import shutil
import sys
from pathlib import Path

import pytest

from tests import ROOT
from tests.helpers import copy_workflow  # torch-free: the thread settings below still come first

sys.path.insert(0, str(ROOT))

# README's command (2) runs the suite on two pytest-xdist workers, one test file each at a time (--dist loadfile: a
# module's fixtures are made once; the SLURM files share one cluster, tests/workflow/slurm.py).  Alone the suite
# left half of CI's two cores idle (vmstat over a fresh-clone run: 30-50 % idle), waiting on imports, subprocesses and
# the SLURM scheduler.  Each worker's torch, and every stage it starts, gets its share of the cores; OpenMP threads
# that find no work sleep rather than spin, so that the other worker's threads get the core (spinning OpenMP threads
# on shared cores made a training test 8-16x slower, pyproject.toml).  Set before torch is imported.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // WORKERS)))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Under xdist the longest files go first (longest-processing-time first: a long file dealt last would run alone
# while the other worker idles).  The order is by each file's time on one worker of a fresh-clone `pytest -n 2 -v`
# run (2026-12-03, 71f96d0, an AVX-512 2-vCPU host, 3,756 s in all, the stamps of each worker's lines): the quick
# start's halves 677 and 549 s, test_pretrain_step_budget.py 630 s (CI's TorchInductor cache is cold: its compiled
# steps took 327, 114 and 104 s, and dealt last in that run they kept one worker busy 8 minutes after the other had
# finished), the SLURM files 490, 486, 457 and 159 s, the finished grid 428 s, the resume tests 365 s,
# test_workflow.py 318 s, the wheel about 230 s (521 s in that run, when its `ring run` trained Table 1's 14 cells, not
# one: an estimate), and 100-200 s each for the rest below.  The SLURM files alternate with the others: two at once
# share the cluster's two CPUs.
LONGEST_FIRST = (
    "tests/workflow/test_quick_start.py",
    "tests/test_pretrain_step_budget.py",
    "tests/workflow/test_quick_start_appendix.py",
    "tests/workflow/test_slurm_nodes.py",
    "tests/workflow/test_workflow_finished.py",
    "tests/workflow/test_slurm_submit.py",
    "tests/test_pretrain_resume.py",
    "tests/workflow/test_slurm_grid.py",
    "tests/workflow/test_workflow.py",
    "tests/project/test_wheel.py",
    "tests/detection/test_runner.py",
    "tests/workflow/test_slurm_preempt.py",
    "tests/engine/test_distributed_run.py",
    "tests/test_pretrain.py",
    "tests/engine/test_distributed.py",
    "tests/project/test_plugin_guide.py",
    "tests/workflow/test_quick_start_rerun.py",
    "tests/project/test_benchmarks.py",
)


def pytest_collection_modifyitems(config, items):
    if WORKERS > 1:
        rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep order


# The compiled-network tests share TorchInductor's kernel cache, in this process and in the stages' subprocesses; kept
# out of the system temporary folder (its default), which the tests' folders fill and a reboot may wipe, so that the
# next run on this machine starts warm.  Measured on this 2-core machine, loaded by other work:
# test_a_compiled_step_computes_the_eager_step[IR] alone 249 s with a cold cache, 7 s warm (docs/development.md).
INDUCTOR_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ring-bench" / "torchinductor"
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(INDUCTOR_CACHE))


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory, request):
    """``tmp_path_factory.mktemp`` for a module's fixtures, whose folders go when the module ends: pytest itself keeps
    every ``mktemp`` folder to the end of the session, so a module's trained references would stand beside every
    later test.  The fresh-clone CI of 65314ac peaked at 2.69 GB after README command (1)'s test, which alone peaks at
    1.83 GB: test_slurm.py's reference runs, made earlier, still stood beside it (tests/footprint.py).
    Kept when a test of the module failed, as pytest keeps a failed test's own folder."""
    made, failed_before = [], request.session.testsfailed

    def mktemp(name: str) -> Path:
        made.append(tmp_path_factory.mktemp(name))
        return made[-1]

    yield mktemp
    if request.session.testsfailed == failed_before:
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def no_pending_stop():
    """A stop requested in one test (SLURM's USR2, simulated in-process) must not preempt the next;
    monkeypatch would restore a flag set mid-test by ring.core.stop.request_stop()."""
    from ring.core import stop

    stop._stop_requested = False
    yield
    stop._stop_requested = False


@pytest.fixture(autouse=True)
def no_wandb_from_the_shell(monkeypatch):
    """A developer's own RING_WANDB_PROJECT must not send every test's cells to W&B (test_logs_wandb.py sets it)."""
    monkeypatch.delenv("RING_WANDB_PROJECT", raising=False)


@pytest.fixture(autouse=True)
def no_distributed_environment_left_behind():
    """A test must not leave WORLD_SIZE & co. in this process: every later stage subprocess would wait
    for ranks that never come (a hang until the 30-minute rendezvous timeout), far from the cause."""
    import os

    names = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    before = {name: os.environ.get(name) for name in names}
    yield
    after = {name: os.environ.get(name) for name in names}
    assert after == before, f"the test left distributed variables behind: {after}"


@pytest.fixture
def workdir(tmp_path) -> Path:
    """A scratch copy of the workflow to run Snakemake in (tests/helpers.py's ``copy_workflow``): results never touch
    the checkout.  tests/workflow/runs.py runs it."""
    return copy_workflow(tmp_path)


@pytest.fixture
def encoder_file(tmp_path) -> Path:
    """A randomly initialised trunk in the exported format (torchvision resnet18, no fc), seed 0."""
    import torch

    from ring.engine.encoder import Encoder, save_trunks, torchvision_state_dict

    torch.manual_seed(0)
    path = tmp_path / "encoder.pt"
    save_trunks({"encoder.pt": torchvision_state_dict(Encoder())}, tmp_path)
    return path


# The suite's disk footprint (issue 33 item 8; tests/footprint.py).  The peak is README command (1)'s test: the smoke
# grid's 25 pretraining cells.  Measured alone on this 2-core machine (2026-11-28, each hard link counted once) before
# finished cells dropped their checkpoints: 6.27 GB, of which final checkpoints 2.7 GB, previous checkpoints 1.7 GB,
# encoders 1.3 GB, Detectron2 models 0.3 GB.  Now a finished cell drops checkpoint.prev.pt and the smoke grid sets
# keep_checkpoint: none (docs/results.md, "Disk"): what stays is the encoders, the study snapshots, the Detectron2
# models and the data.  Measured alone on the same machine (2026-11-28, loaded by other work): 1,827 MB.
# After a green run pytest removes the whole base folder (tmp_path_retention_policy = "failed"): 0 MB measured.
# Since issue 52 item 7 each encoder's kept copy under exported/ is a real copy, not a hard link counted once: the
# encoders' 1.3 GB twice, about 3.1 GB (an estimate from those figures, not yet measured: remeasure and tighten).
FOOTPRINT_BOUND_BYTES = int(3.5 * 1000**3)
RETAINED_BOUND_BYTES = 200 * 1000**2


def pytest_configure(config):
    from tests.footprint import Footprint

    config.pluginmanager.register(Footprint(FOOTPRINT_BOUND_BYTES, RETAINED_BOUND_BYTES), "ring-footprint")
