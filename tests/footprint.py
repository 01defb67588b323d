"""The test suite's disk footprint under pytest's temporary folder (issue 33 item 8), a pytest plugin.

With ``tmp_path_retention_policy = "failed"`` a passed test's folder goes when it ends and a green run removes
its whole base folder at the end, so what stands at any moment is the running test's folder, the running module's
fixtures' data (tests/conftest.py's ``module_tmp``) and session-scoped fixtures' data.  :class:`Footprint` samples
the base folder at the end of every test (before the test's own folder is removed) and, after pytest's own clean-up,
what the run left in it; a run past either bound fails at the end with one sentence naming the test at the peak and
the largest folders then.  Under pytest-xdist (README's command (2) runs two workers) each worker measures its own
folder, as a run of its share of the tests alone would be measured, and sends its peak to the controller
(:class:`WorkerPeaks`), which applies the bounds.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest


def disk_bytes(folder: Path, seen: set | None = None) -> int:
    """Bytes ``folder`` takes on disk: each file once however many hard links it has (a cell's ``encoder.pt`` and
    ``exported/encoder.pt``, a checkpoint and its ``.prev.pt`` between two saves), symbolic links not followed;
    ``seen`` carries the files already counted across calls (``folder`` may itself be a file or a link)."""
    seen, total = set() if seen is None else seen, 0
    if folder.is_dir() and not folder.is_symlink():
        paths = (os.path.join(dirpath, name) for dirpath, _, names in os.walk(folder) for name in names)
    else:  # a file beside the folders (pytest's .lock), or a link (its <name>current links): not followed
        paths = [str(folder)]
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:  # a test's own clean-up racing the walk
            continue
        if (st.st_dev, st.st_ino) not in seen and not stat.S_ISLNK(st.st_mode):
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
    return total


class Footprint:
    """Fails a run whose temporary folder ever held more than ``peak_bound`` bytes, or that leaves more than
    ``retained_bound`` bytes in it after a green run (checked only when pytest chose the base folder: a
    ``--basetemp`` given by hand is kept whole by design)."""

    def __init__(self, peak_bound: int, retained_bound: int):
        self.peak_bound, self.retained_bound = peak_bound, retained_bound
        self.peak, self.peak_after, self.peak_folders, self.retained = 0, "", [], None
        self.config = None

    def _factory(self):
        return getattr(self.config, "_tmp_path_factory", None)

    def pytest_configure(self, config):
        self.config = config
        if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
            config.pluginmanager.register(WorkerPeaks(self), "ring-footprint-workers")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item):  # before the test's own tmp_path is removed
        base = getattr(self._factory(), "_basetemp", None)
        if base is not None and base.is_dir():
            seen: set = set()
            folders = {child.name: disk_bytes(child, seen) for child in base.iterdir()}
            large = sorted(((name, size) for name, size in folders.items() if size >= 500_000), key=lambda kv: -kv[1])
            self.merge([sum(folders.values()), item.nodeid, large[:3]])

    def merge(self, peak: list) -> None:
        """Keeps ``[bytes, test, largest folders]`` if it is the largest peak seen (here or on a worker)."""
        if peak[0] > self.peak:
            self.peak, self.peak_after, self.peak_folders = peak[0], peak[1], [tuple(kv) for kv in peak[2]]

    @pytest.hookimpl(trylast=True)  # after _pytest.tmpdir's sessionfinish has removed what a green run keeps
    def pytest_sessionfinish(self, session, exitstatus):
        if hasattr(self.config, "workeroutput"):  # an xdist worker: the controller judges (WorkerPeaks)
            self.config.workeroutput["ring_footprint"] = [self.peak, self.peak_after, self.peak_folders]
            return
        factory = self._factory()
        base = getattr(factory, "_basetemp", None)
        if exitstatus == 0 and base is not None and getattr(factory, "_given_basetemp", None) is None:
            self.retained = disk_bytes(base) if base.is_dir() else 0
        if self.problems():
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def problems(self) -> list[str]:
        found = []
        if self.peak > self.peak_bound:
            found.append(
                f"the tests' temporary folder reached {self.peak / 1e9:.2f} GB (after {self.peak_after}), "
                f"past the {self.peak_bound / 1e9:.1f} GB bound: a test or a shared fixture writes too much "
                f"into its temporary folder (largest then: {self.largest()})"
            )
        if self.retained is not None and self.retained > self.retained_bound:
            found.append(
                f"a green run left {self.retained / 1e6:.0f} MB in its temporary folder, past the "
                f"{self.retained_bound / 1e6:.0f} MB bound: check tmp_path_retention_policy in pyproject.toml "
                "and what a test leaves that pytest cannot remove"
            )
        return found

    def largest(self) -> str:
        return ", ".join(f"{name} {size / 1e6:.0f} MB" for name, size in self.peak_folders)

    def pytest_terminal_summary(self, terminalreporter):
        line = f"peak size of the tests' temporary folder: {self.peak / 1e6:.0f} MB (after {self.peak_after or '-'})"
        if self.retained is not None:
            line += f"; left after the run: {self.retained / 1e6:.0f} MB"
        terminalreporter.write_line(line)
        for problem in self.problems():
            terminalreporter.write_line(problem)


class WorkerPeaks:
    """On an xdist controller: each worker's peak, as the worker finishes (xdist's ``pytest_testnodedown``)."""

    def __init__(self, footprint: Footprint):
        self.footprint = footprint

    def pytest_testnodedown(self, node, error):
        peak = getattr(node, "workeroutput", {}).get("ring_footprint")
        if peak:
            self.footprint.merge(peak)
