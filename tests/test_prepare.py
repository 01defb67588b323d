"""ring.prepare, the prepare stage: it resumes shard by shard and refuses what it cannot store."""

import json
import subprocess
import sys

import pytest

from ring import prepare
from ring.data import store_layout
from tests.data.test_store import root, stored  # noqa: F401  (the fixture: digits_folder and its two stores)


def test_a_build_resumes_shard_by_shard(tmp_path, root):
    """A finished shard is kept (its file untouched); a shard without its record is built again; the manifest waits
    for every shard."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(root / "digits_folder", data / "digits_folder", ignore=shutil.ignore_patterns("store"))
    target = prepare.Target("digits_folder", data, "raw", shard_images=500)
    target.list()
    first = target.shard("train", 0)
    kept = (target.dir / "train" / "shard-00000" / "data.bin").stat().st_mtime_ns
    with pytest.raises(
        store_layout.StoreError, match=r"shard-00001/data.bin is missing or incomplete; rerun the prepare"
    ):
        target.finish()
    manifest = prepare.build(target, workers=1)
    assert (target.dir / "train" / "shard-00000" / "data.bin").stat().st_mtime_ns == kept
    assert manifest["splits"]["train"]["shards"][0]["sha256"] == first["sha256"]
    assert manifest == json.loads(
        (stored(root, "raw") / store_layout.MANIFEST).read_text()
    )  # the same bytes as built at once


def test_the_prepare_command_refuses_a_dataset_without_a_store(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "ring.prepare", "build", "cifar10", "--data-root", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "ring: cifar10 has no prepared store (it is not an image folder); stored datasets: imagenet, digits_folder."
    ]


def test_each_refusal_of_the_prepare_command_is_one_sentence(tmp_path, root, monkeypatch, capsys):
    """Issue 52 item 1: a missing data root was a traceback, --format none was refused by a list naming none, and a
    full disk said "the previous file is kept" where no shard was there before."""
    import errno
    import os
    import shutil

    def refusal(*args) -> str:
        assert prepare.main(["build", "digits_folder", *args]) == 1
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1, lines
        return lines[0]

    missing = tmp_path / "nowhere"
    assert refusal("--data-root", str(missing)).startswith(
        f"ring: Data root {missing} does not exist; create it and put the datasets below it (digits_folder: generate"
    )
    for fmt in ("png", "none"):
        assert refusal("--data-root", str(root), "--format", fmt) == (
            f"ring: A prepared store is built in jpeg95 or raw, not {fmt!r}; pass --format jpeg95 or --format raw."
        )
    data = tmp_path / "data"
    shutil.copytree(root / "digits_folder", data / "digits_folder", ignore=shutil.ignore_patterns("store"))
    real = os.fsync

    def full(fd):  # the listing fits, the first shard does not
        if ".data.bin." in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)

    monkeypatch.setattr(os, "fsync", full)
    shard = store_layout.store_dir(data / "digits_folder", "raw", 32) / "train" / "shard-00000"
    assert refusal("--data-root", str(data), "--format", "raw") == (
        f"ring: The disk holding {shard} is full (no space left while writing data.bin); no data.bin was written: "
        "free some space and rerun to continue."
    )
    monkeypatch.undo()
    assert prepare.main(["build", "digits_folder", "--data-root", str(data), "--format", "raw"]) == 0  # it resumes
