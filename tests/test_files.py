"""ring.core.files: whole-or-nothing writes, their one-sentence failures, and what killed writes leave."""

import errno
import json
import os
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
    with pytest.raises(files.FileError, match=rf"^The disk holding {tmp_path} is full \(no space left while writing "
                                              r"metrics.json\); the previous file is kept"):
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
    """ring.cluster.launch and ring.cluster.accounting write job records and provenance through ring.core.files on a login
    node, where importing torch costs seconds (or torch is not installed)."""
    code = "import sys, ring.core.files, ring.cluster.launch, ring.cluster.accounting; assert 'torch' not in sys.modules"
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
