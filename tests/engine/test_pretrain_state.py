"""A pretraining cell's checkpoint (ring.engine.pretrain_state): a corrupt one set aside, another method's refused,
and rank 0 alone deciding what every rank resumes from (resuming bit-exactly is tests/test_pretrain_resume.py's and
tests/project/test_integrity.py's)."""

from pathlib import Path

import pytest
import torch

from ring.engine import pretrain_state
from ring.engine.checkpoint import CheckpointError, checksummed
from ring.pretrain import Pretraining
from tests.helpers import pretrain_config


def test_corrupt_checkpoint_is_kept_aside_and_the_cell_starts_fresh_saying_so(tmp_path, capsys):
    # (with a good checkpoint.prev.pt the cell resumes from it instead: tests/project/test_integrity.py)
    cell = tmp_path / "cell"
    cell.mkdir()
    (cell / "checkpoint.pt").write_bytes(b"PK\x03\x04 truncated")
    (cell / "encoder.pt").write_bytes(b"finished result")
    assert Pretraining(pretrain_config("IR"), cell).resume() is False
    err = capsys.readouterr().err
    assert "checkpoint.pt is unreadable or truncated" in err and "starting this cell from scratch" in err
    assert (cell / "checkpoint.corrupt.pt").read_bytes() == b"PK\x03\x04 truncated"
    assert (cell / "encoder.pt").read_bytes() == b"finished result"


def test_checkpoint_of_another_method_names_both_methods(tmp_path):
    cell = tmp_path / "cell"
    cell.mkdir()
    # A verified checkpoint (its checksum holds) of another method: refused by method, not as corrupt.
    torch.save(checksummed({"config_hash": "0" * 16, "method": "IR", "epoch": 1}), cell / "checkpoint.pt")
    with pytest.raises(
        CheckpointError,
        match=f"checkpoint {cell / 'checkpoint.pt'} was written by method IR, but this "
        "cell trains IRing; move the checkpoint away",
    ):
        Pretraining(pretrain_config("IRing"), cell).run()
    assert torch.load(cell / "checkpoint.pt", weights_only=True)["method"] == "IR"  # never overwritten


@pytest.mark.parametrize(("choice", "loaded"), [(0, None), (1, "checkpoint.pt"), (2, "checkpoint.prev.pt")])
def test_ranks_other_than_0_resume_from_the_file_rank_0_chose(tmp_path, monkeypatch, choice, loaded):
    """Rank 0 alone looks at the checkpoints (it moves a corrupt one aside; another node may not see a new file yet)
    and broadcasts its choice; a rank other than 0 loads that file without deciding anything itself."""

    from ring.engine import checkpoint as ckpt
    from ring.engine import distributed

    path = tmp_path / "checkpoint.pt"
    assert ckpt.previous_path(path).name == "checkpoint.prev.pt"
    monkeypatch.setattr(distributed, "is_main", lambda: False)
    monkeypatch.setattr(distributed, "broadcast_choice", lambda mine: choice)
    monkeypatch.setattr(pretrain_state, "resume_state", lambda *a: pytest.fail("only rank 0 decides"))
    monkeypatch.setattr(pretrain_state, "load_verified", lambda p, what: {"from": Path(p).name})
    seen = []
    checkpoint = pretrain_state.PretrainCheckpoint(tmp_path, None, {})
    position = pretrain_state.Position(epoch=3)
    monkeypatch.setattr(checkpoint, "load", lambda state, p, fix: seen.append(state["from"]) or position)
    assert checkpoint.resume() == (position if loaded else None)
    assert seen == ([loaded] if loaded else [])


def test_a_rank_0_that_cannot_resume_tells_the_others_before_failing(tmp_path, monkeypatch):
    """Rank 0's CheckpointError (another method's checkpoint) reaches every rank at once: none waits for it in vain."""

    from ring.engine import distributed
    from ring.engine.checkpoint import CheckpointError

    sent = []
    monkeypatch.setattr(distributed, "broadcast_choice", lambda mine: sent.append(mine) or mine)

    def refuse(*args):
        raise CheckpointError("written by method MoCo")

    monkeypatch.setattr(pretrain_state, "resume_state", refuse)
    checkpoint = pretrain_state.PretrainCheckpoint(tmp_path, None, {})
    with pytest.raises(CheckpointError, match="written by method MoCo"):
        checkpoint.resume()
    assert sent == [3]
    monkeypatch.setattr(distributed, "is_main", lambda: False)
    monkeypatch.setattr(distributed, "broadcast_choice", lambda mine: 3)
    with pytest.raises(CheckpointError, match="rank 0 could not resume this cell; its log says why"):
        checkpoint.resume()
