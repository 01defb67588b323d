import os
import shutil
import sys
from pathlib import Path

import pytest

from tests import ROOT

sys.path.insert(0, str(ROOT))

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
FOOTPRINT_BOUND_BYTES = 2 * 1000**3
RETAINED_BOUND_BYTES = 200 * 1000**2


def pytest_configure(config):
    from tests.footprint import Footprint

    config.pluginmanager.register(Footprint(FOOTPRINT_BOUND_BYTES, RETAINED_BOUND_BYTES), "ring-footprint")
