"""ring.core.files: whole-or-nothing writes, their one-sentence failures, and what killed writes leave."""

import errno
import json
import os
import re
import subprocess
import sys

import pytest

from ring.core import files


def test_json_is_written_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "cell" / "provenance.json"  # the folder is created
    files.write_json(path, {"segments": [1, 2]})
    files.write_json(path, {"segments": [1, 2, 3]}, indent=None)
    assert path.read_text() == '{"segments": [1, 2, 3]}\n'
    assert sorted(p.name for p in path.parent.iterdir()) == ["provenance.json"]


def test_a_refused_write_keeps_the_old_file_and_says_why(tmp_path, monkeypatch):
    path = tmp_path / "metrics.json"
    files.write_json(path, {"top1": 50.0})

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(
        files.FileError,
        match=rf"^The disk holding {tmp_path} is full \(no space left while writing "
        r"metrics.json\); the previous file is kept",
    ):
        files.write_json(path, {"top1": 99.0})
    assert json.loads(path.read_text()) == {"top1": 50.0}
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]  # the temporary went with the failure


def test_stale_temporaries_of_killed_writes_are_removed_by_name(tmp_path):
    (tmp_path / ".checkpoint.pt.abc123.tmp").write_bytes(b"torn")
    (tmp_path / ".running.json.x.tmp").write_text("{")
    (tmp_path / "checkpoint.pt").write_bytes(b"whole")
    assert files.remove_stale_temporaries(tmp_path) == [".checkpoint.pt.abc123.tmp", ".running.json.x.tmp"]
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_the_login_node_client_writes_without_torch():
    """ring.cluster.launch and ring.core.accounting write job records and provenance through ring.core.files on a
    login node, where importing torch costs seconds (or torch is not installed)."""
    code = "import sys, ring.core.files, ring.cluster.launch, ring.core.accounting; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_writer_that_hides_a_full_disk_still_gets_the_full_disk_sentence(tmp_path, monkeypatch):
    """torch.save turns ENOSPC into "[enforce fail at inline_container.cc:672] unexpected pos ..." (seen
    when this machine's disk filled during CI); with no room left on the disk the sentence says so."""

    def torch_like(fh):
        fh.write(b"x" * 10)
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")

    monkeypatch.setattr(files, "_no_room", lambda folder: True)
    with pytest.raises(files.FileError, match=r"is full \(no space left while writing checkpoint.pt\)"):
        files.atomic_write(tmp_path / "checkpoint.pt", torch_like)
    monkeypatch.setattr(files, "_no_room", lambda folder: False)  # room left: the writer's own error stands
    with pytest.raises(RuntimeError, match="unexpected pos"):
        files.atomic_write(tmp_path / "checkpoint.pt", torch_like)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_written_files_follow_the_users_umask(tmp_path, umask, mode):
    """On a shared cluster the group reads results where the umask allows it (mkstemp alone makes 0600)."""
    from ring.core.files import atomic_write

    old = os.umask(umask)
    try:
        atomic_write(tmp_path / "metrics.json", lambda fh: fh.write(b"{}"))
    finally:
        os.umask(old)
    assert (tmp_path / "metrics.json").stat().st_mode & 0o777 == mode


class _FillingDisk:
    """A file on a disk with ``room`` bytes left: a write past them raises ENOSPC, as the kernel's does, while statvfs
    still shows room (a quota, a full network file system, the root-reserved blocks)."""

    def __init__(self, raw, room: int):
        self.raw, self.room = raw, room

    def write(self, data):
        size = memoryview(data).nbytes
        if size > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= size
        return self.raw.write(data)

    def __getattr__(self, name):
        return getattr(self.raw, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.raw.close()


def test_torch_save_meeting_a_full_disk_names_the_file_and_the_cause(tmp_path, monkeypatch):
    """torch.save turns the ENOSPC of its write into "[enforce fail at inline_container.cc:672] unexpected pos": the
    write's own error is kept and named, for a checkpoint and any other file written through torch.save."""
    import torch

    from ring.engine.checkpoint import atomic_save, save_checkpoint

    real = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, mode: _FillingDisk(real(fd, mode), room=4096))
    monkeypatch.setattr(files, "_no_room", lambda folder: False)  # statvfs shows room: the write's error must tell
    state = {"w": torch.zeros(1 << 16)}
    for save, name in ((save_checkpoint, "checkpoint.pt"), (atomic_save, "encoder.pt")):
        with pytest.raises(files.FileError) as err:
            save(state, tmp_path / name)
        assert str(err.value) == (
            f"The disk holding {tmp_path} is full (no space left while writing {name}); no {name} "
            "was written: free some space and rerun to continue."
        )
    assert list(tmp_path.iterdir()) == []


def test_a_log_line_on_a_full_disk_names_the_file(tmp_path):
    """/dev/full refuses every write with the kernel's ENOSPC: the log's append says which file, not an OSError."""
    with pytest.raises(files.FileError, match=r"^The disk holding /dev is full \(no space left while writing full\)"):
        files.append_text("/dev/full", '{"epoch": 0}\n')


@pytest.mark.slow
def test_a_checkpoint_past_the_file_size_limit_stops_the_stage_with_one_sentence(tmp_path):
    """A real EFBIG: the pretraining stage under a 1 MiB file-size limit (SIGXFSZ ignored, so the write fails rather
    than killing the process) writes its first checkpoint (~1 MB past it) and says why, where torch.save printed
    "[enforce fail at inline_container.cc:672] . unexpected pos ..."."""
    import resource
    import signal

    from ring.core import config
    from tests.helpers import pretrain_config, run_module

    cell = tmp_path / "cell"
    cell.mkdir()
    config.save(pretrain_config("IR", epochs=1, checkpoint_interval_min=0), cell / "config.yaml")

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    result = run_module(
        "ring.pretrain", "--config", cell / "config.yaml", "--out", cell, check=False, preexec_fn=limited, timeout=300
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"ring: Writing {cell / 'checkpoint.pt'} exceeds the largest file this process may write (File too large: the "
        "file-size limit, ulimit -f, or the file system's); no checkpoint.pt was written: raise the limit and rerun "
        "to continue."
    )
    assert not list(cell.glob(".*.tmp"))


def test_a_stage_log_past_the_file_size_limit_names_its_file(tmp_path):
    """A real EFBIG met by the log's TensorBoard event file (written by its own thread, which raises it on flush) or by
    log.jsonl: one sentence naming the file, no OSError."""
    cell = tmp_path / "results" / "g" / "pretrain" / "digits" / "IR" / "seed0"
    code = f"""
import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
from ring.core.files import FileError
from ring.engine.logs import JsonLog
resource.setrlimit(resource.RLIMIT_FSIZE, (300, 300))
try:
    with JsonLog({str(cell / "log.jsonl")!r}) as log:
        for epoch in range(50):
            log.append({{"epoch": epoch, "loss": 1.0}})
except FileError as err:
    print(err)
"""
    cell.mkdir(parents=True)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.fullmatch(
        rf"Writing {re.escape(str(cell))}/(log\.jsonl|events\.out\.tfevents\.[\w.]+) exceeds the "
        r"largest file this process may write \(File too large: .*; the previous file is kept: raise "
        r"the limit and rerun to continue\.\n",
        result.stdout,
    ), result.stdout + result.stderr[-2000:]


def test_kept_exports_are_copies_that_an_edit_in_place_leaves_alone(tmp_path):
    """Issue 52 item 7: exported/metrics.json was a hard link of metrics.json, so an edit in place (r+ mode, the
    inode kept) changed the kept copy too; kept and restored copies are now their own files."""
    (tmp_path / "metrics.json").write_text('{"top1": 50.0}')
    files.keep_exports(tmp_path, ["metrics.json"])
    kept = tmp_path / files.KEPT / "metrics.json"
    with open(tmp_path / "metrics.json", "r+") as fh:
        fh.write('{"top1": 95.0}')
    assert kept.read_text() == '{"top1": 50.0}'
    (tmp_path / "metrics.json").unlink()
    files.place_exports(tmp_path, ["metrics.json"])  # put back from the kept copy, as a restore does
    with open(tmp_path / "metrics.json", "r+") as fh:
        fh.write('{"top1": 99.0}')
    assert kept.read_text() == '{"top1": 50.0}' and kept.stat().st_nlink == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exported", "metrics.json"]  # no temporary left
