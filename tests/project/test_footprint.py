"""tests/footprint.py, the suite's disk bound, run on an inner pytest session as CI runs the suite."""

import os
import subprocess
import sys
from pathlib import Path

from tests import ROOT
from tests.footprint import disk_bytes

MB = 1000**2

INNER_CONFTEST = """
from tests.footprint import Footprint

def pytest_configure(config):
    config.pluginmanager.register(Footprint(peak_bound=3 * 1000**2, retained_bound=1000**2), "ring-footprint")
"""

INNER_TESTS = """
def test_writes(tmp_path):
    (tmp_path / "data.bin").write_bytes(bytes({size}))
"""


def _inner_run(tmp_path: Path, size: int, policy: str, *args: str) -> subprocess.CompletedProcess:
    """An inner session whose one test writes ``size`` bytes into its tmp_path, pytest's base folder chosen by
    pytest itself (under PYTEST_DEBUG_TEMPROOT), as in a plain `pytest` run."""
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "conftest.py").write_text(INNER_CONFTEST)
    (project / "test_inner.py").write_text(INNER_TESTS.format(size=size))
    (project / "pytest.ini").write_text(f"[pytest]\ntmp_path_retention_policy = {policy}\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DEBUG_TEMPROOT": str(tmp_path / "temproot")}
    (tmp_path / "temproot").mkdir()
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args, str(project)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_run_within_both_bounds_passes_and_leaves_nothing(tmp_path):
    result = _inner_run(tmp_path, 2 * MB, "failed")
    assert result.returncode == 0, result.stdout
    assert "peak size of the tests' temporary folder: 2 MB" in result.stdout
    assert "left after the run: 0 MB" in result.stdout


def test_a_test_past_the_peak_bound_fails_the_run_naming_it(tmp_path):
    result = _inner_run(tmp_path, 4 * MB, "failed")
    assert result.returncode == 1, result.stdout
    assert (
        "the tests' temporary folder reached 0.00 GB (after test_inner.py::test_writes), past the 0.0 GB bound: "
        "a test or a shared fixture writes too much into its temporary folder (largest then: test_writes0 4 MB)"
        in result.stdout
    )


def test_under_xdist_a_workers_peak_reaches_the_controller_which_fails_the_run(tmp_path):
    # README's command (2) runs two workers: the peak is measured where the test ran and judged where the run ends.
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "test_other.py").write_text(
        "def test_small(tmp_path):\n    (tmp_path / 'x').write_bytes(b'1')\n"
    )
    result = _inner_run(tmp_path, 4 * MB, "failed", "-n", "2", "--dist", "loadfile")
    assert result.returncode == 1, result.stdout
    assert "2 passed" in result.stdout
    assert (
        "the tests' temporary folder reached 0.00 GB (after test_inner.py::test_writes), past the 0.0 GB bound: "
        "a test or a shared fixture writes too much into its temporary folder (largest then: test_writes0 4 MB)"
        in result.stdout
    )


def test_a_green_run_that_keeps_its_folders_fails(tmp_path):
    result = _inner_run(tmp_path, 2 * MB, "all")
    assert result.returncode == 1, result.stdout
    assert "a green run left 2 MB in its temporary folder, past the 1 MB bound" in result.stdout


def test_a_hard_linked_file_counts_once(tmp_path):
    (tmp_path / "encoder.pt").write_bytes(bytes(MB))
    os.link(tmp_path / "encoder.pt", tmp_path / "exported.pt")
    (tmp_path / "alias.pt").symlink_to(tmp_path / "encoder.pt")
    assert disk_bytes(tmp_path) == MB


def test_the_compiled_tests_share_a_kernel_cache_outside_the_temporary_folder():
    """tests/conftest.py: TorchInductor's cache (its default is under the system temporary folder) persists between
    runs, so that a compiled test loads the kernels an earlier run compiled (249 s cold, 7 s warm, measured)."""
    import tempfile

    from torch._inductor.runtime.cache_dir_utils import cache_dir

    assert not Path(cache_dir()).resolve().is_relative_to(Path(tempfile.gettempdir()).resolve()), cache_dir()
