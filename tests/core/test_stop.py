"""ring.core.stop: the stop request a stage checks at its step boundaries (SLURM's USR2 sets it), torch-free."""

import subprocess
import sys

from ring.core import stop


def test_a_stop_is_asked_once_and_stays_asked():
    # tests/conftest.py clears the flag around every test, as a fresh process starts without one.
    assert stop.stop_requested() is False
    stop.request_stop()
    assert stop.stop_requested() is True
    stop.request_stop()  # asked twice (two signals): still one request
    assert stop.stop_requested() is True


def test_preempted_is_an_exception_a_stage_raises_with_its_reason():
    err = stop.Preempted("checkpoint written at epoch 3")
    assert isinstance(err, Exception) and not isinstance(err, (RuntimeError, ValueError))  # no generic handler eats it
    assert str(err) == "checkpoint written at epoch 3"


def test_the_job_wrapper_imports_it_without_torch():
    code = "import sys, ring.core.stop; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
