"""ring.cluster.progress: where a locally launched cell stands, read from its marker, log and config."""

import json
import os
import socket
from pathlib import Path

import pytest

from ring.cluster import progress


def _gone_pid() -> int:
    """A process id no process can have (above the kernel's largest)."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


def test_running_marks_the_cell_and_removes_the_marker_when_the_stage_succeeds(tmp_path):
    cell = tmp_path / "new" / "cell"  # created by running()
    with progress.running(cell) as run:
        record = json.loads((cell / progress.MARKER).read_text())
        assert (record["state"], record["pid"], record["host"]) == ("running", os.getpid(), socket.gethostname())
        assert record["started"].endswith("+00:00")  # UTC
        run["status"] = 0
    assert not (cell / progress.MARKER).exists()


def test_running_marks_a_nonzero_status_or_an_exception_failed(tmp_path):
    with progress.running(tmp_path / "a") as run:
        run["status"] = 3
    assert json.loads((tmp_path / "a" / progress.MARKER).read_text())["error"] == "exit status 3"
    with pytest.raises(KeyError), progress.running(tmp_path / "b"):
        raise KeyError("x" * 400)
    record = json.loads((tmp_path / "b" / progress.MARKER).read_text())
    assert record["state"] == "failed" and record["error"].startswith("KeyError: 'xxx") and len(record["error"]) == 300


def test_alive_knows_only_processes_of_this_host():
    here = socket.gethostname()
    assert progress.alive({"host": here, "pid": os.getpid()}) is True
    assert progress.alive({"host": here, "pid": _gone_pid()}) is False
    assert progress.alive({"host": here + "-elsewhere", "pid": os.getpid()}) is None


def test_last_records_skips_a_line_being_written_and_a_line_cut_by_the_tail(tmp_path, monkeypatch):
    log = tmp_path / progress.LOG
    assert progress.last_records(log) == []  # no log yet
    log.write_text('{"epoch": 0}\nnot json\n{"epoch": 1}\n{"epo')
    assert progress.last_records(log) == [{"epoch": 0}, {"epoch": 1}]
    # A log longer than the tail read: the line the seek cut is dropped, the whole lines after it kept.
    monkeypatch.setattr(progress, "TAIL_BYTES", len('1}\n{"epoch": 2}\n'))
    log.write_text('{"epoch": 0}\n{"epoch": 1}\n{"epoch": 2}\n')
    assert progress.last_records(log) == [{"epoch": 2}]


def test_progress_reads_the_last_epoch_the_configs_epochs_and_the_last_knn(tmp_path):
    assert progress.progress(tmp_path) == ""  # before the first epoch ends
    (tmp_path / progress.LOG).write_text('{"epoch": 0, "knn_top1": 12.345}\n{"epoch": 1, "knn_top1": null}\n')
    assert progress.progress(tmp_path) == "epoch 2, kNN 12.35%"  # no config: no total
    (tmp_path / "config.yaml").write_text("epochs: 300\n")
    assert progress.progress(tmp_path) == "epoch 2/300, kNN 12.35%"
    (tmp_path / "config.yaml").write_text("epochs: [300\n")  # unreadable config: the epoch alone
    assert progress.progress(tmp_path) == "epoch 2, kNN 12.35%"
    (tmp_path / progress.LOG).write_text('{"epoch": 4}\n')
    assert progress.progress(tmp_path) == "epoch 5"


def _marker(cell: Path, **record) -> None:
    cell.mkdir(parents=True, exist_ok=True)
    (cell / progress.MARKER).write_text(json.dumps(record))


def test_local_state_of_each_kind_of_cell(tmp_path):
    here = socket.gethostname()
    assert progress.local_state(tmp_path / "none") == ("missing", "")
    (tmp_path / "configured").mkdir()
    (tmp_path / "configured" / "config.yaml").write_text("epochs: 2\n")
    assert progress.local_state(tmp_path / "configured") == ("pending", "configured, not started")
    _marker(tmp_path / "runs", state="running", pid=os.getpid(), host=here)
    (tmp_path / "runs" / progress.LOG).write_text('{"epoch": 0, "knn_top1": 50.0}\n')
    assert progress.local_state(tmp_path / "runs") == ("running", f"epoch 1, kNN 50.00%, pid {os.getpid()} on {here}")
    _marker(tmp_path / "elsewhere", state="running", pid=1, host="other-node")  # unknowable here: running
    assert progress.local_state(tmp_path / "elsewhere") == ("running", "pid 1 on other-node")
    _marker(tmp_path / "gone", state="running", pid=_gone_pid(), host=here)
    assert progress.local_state(tmp_path / "gone") == ("failed", f"pid {_gone_pid()} on {here} is gone")
    _marker(tmp_path / "failed", state="failed", pid=7, host="n1", error="exit status 1")
    assert progress.local_state(tmp_path / "failed") == ("failed", "pid 7 on n1: exit status 1")
    (tmp_path / "stopped").mkdir()  # a log and no marker: nothing runs it
    (tmp_path / "stopped" / progress.LOG).write_text('{"epoch": 2}\n')
    assert progress.local_state(tmp_path / "stopped") == ("failed", "stopped, no process runs it (epoch 3)")
    (tmp_path / "torn").mkdir()
    (tmp_path / "torn" / progress.MARKER).write_text('{"state": "runn')  # a torn marker is still a marker
    assert progress.local_state(tmp_path / "torn") == ("running", "pid None on None")
