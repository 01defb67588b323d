import pytest
import torch

from ring.engine.checkpoint import (
    CheckpointError,
    atomic_save,
    finish_checkpoints,
    load_latest_checkpoint,
    load_verified,
    previous_path,
    safe_load,
    save_checkpoint,
)


def test_atomic_save_round_trip_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "ckpt.pt"
    atomic_save({"a": torch.arange(3), "epoch": 2}, path)
    atomic_save({"a": torch.arange(4), "epoch": 3}, path)
    assert safe_load(path)["epoch"] == 3
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]


def test_truncated_checkpoint_fails_with_one_sentence(tmp_path):
    path = tmp_path / "ckpt.pt"
    atomic_save({"a": torch.randn(1000)}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"ckpt.pt is unreadable or truncated .*; delete it"):
        safe_load(path)


class Payload:
    pass


def test_pickled_code_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"x": Payload()}, path)
    with pytest.raises(CheckpointError) as err:
        safe_load(path)
    # Issue 40 item 5: a whole, readable file whose contents are refused is not "unreadable or truncated".
    assert str(err.value) == (
        f"The checkpoint {path} holds objects other than tensors and plain data, which ring-bench never unpickles "
        "(refused without running them); delete it to start this stage again."
    )


def test_missing_file_says_which_stage_to_run(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist; run the stage that produces it first"):
        safe_load(tmp_path / "nope.pt", "encoder")


def test_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    atomic_save({"epoch": 1}, path)

    def crash(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        atomic_save({"epoch": 2}, path)
    monkeypatch.undo()
    assert safe_load(path)["epoch"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]


def test_a_checkpoint_altered_on_disk_fails_its_checksum_and_the_previous_one_is_used(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint({"w": torch.arange(20000.0), "epoch": 1}, path)
    save_checkpoint({"w": torch.arange(20000.0) + 1, "epoch": 2}, path)
    assert load_verified(previous_path(path))["epoch"] == 1 and load_verified(path)["epoch"] == 2
    data = bytearray(path.read_bytes())
    middle = len(data) // 2  # inside the tensor's bytes: torch.load itself reads it without complaint
    data[middle : middle + 4096] = bytes(4096)
    path.write_bytes(bytes(data))
    assert torch.load(path, weights_only=True)["epoch"] == 2
    with pytest.raises(CheckpointError, match="checkpoint.pt fails its checksum"):
        load_verified(path)
    lines = []
    assert load_latest_checkpoint(path, log=lines.append)["epoch"] == 1
    assert lines == [
        f"ring: The checkpoint {path} fails its checksum (the file was altered on disk); kept as "
        "checkpoint.corrupt.pt, resuming from the previous checkpoint checkpoint.prev.pt"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.corrupt.pt", "checkpoint.prev.pt"]


@pytest.mark.parametrize("keep, left", [("last", ["ckpt.corrupt.pt", "ckpt.pt"]), ("none", ["ckpt.corrupt.pt"])])
def test_a_finished_stage_drops_the_previous_checkpoint_and_the_last_one_under_none(tmp_path, keep, left):
    path = tmp_path / "ckpt.pt"
    for epoch in (1, 2):
        save_checkpoint({"w": torch.zeros(1000), "epoch": epoch}, path)
    (tmp_path / "ckpt.corrupt.pt").write_bytes(b"set aside by a resume: evidence, kept")
    sizes = {p.name: p.stat().st_size for p in tmp_path.iterdir()}
    freed = finish_checkpoints(path, keep)
    assert sorted(p.name for p in tmp_path.iterdir()) == left
    assert freed == sum(size for name, size in sizes.items() if name not in left)
    if keep == "last":
        assert load_latest_checkpoint(path)["epoch"] == 2  # what a longer schedule continues
    assert finish_checkpoints(path, keep) == 0  # a finished stage run again: nothing left to drop
