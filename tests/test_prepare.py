"""ring.prepare, the prepare stage: it resumes shard by shard and refuses what it cannot store."""

import json
import subprocess
import sys

import pytest

from ring import prepare
from ring.data import store
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
    with pytest.raises(store.StoreError, match=r"shard-00001/data.bin is missing or incomplete; rerun the prepare"):
        target.finish()
    manifest = prepare.build(target, workers=1)
    assert (target.dir / "train" / "shard-00000" / "data.bin").stat().st_mtime_ns == kept
    assert manifest["splits"]["train"]["shards"][0]["sha256"] == first["sha256"]
    assert manifest == json.loads((stored(root, "raw") / store.MANIFEST).read_text())  # the same bytes as built at once


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
