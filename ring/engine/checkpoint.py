"""Atomic, verified checkpoints and safe loading.

Every file is written through :mod:`ring.core.files` (a temporary file renamed over the old one).
A training checkpoint (:func:`save_checkpoint`) also carries the SHA-256 of its payload (every
tensor's bytes, every key and number), verified when it is loaded, and the checkpoint it replaces is
kept beside it as ``<name>.prev.pt``: a latest checkpoint that fails verification (a flipped block on
disk, a copy cut short) is set aside and the run resumes from the previous one
(:func:`load_latest_checkpoint`).  Once the stage has finished (its outputs exported and verified against their
checksum record) the previous checkpoint has nothing left to fall back for and goes (:func:`finish_checkpoints`),
with the final one too where the cell's ``keep_checkpoint`` is ``none``.  Loading always uses
``weights_only=True`` (no pickled code runs) and turns every failure into one sentence that names the file and
what to do.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from ring.core.files import FileError, atomic_write, link_into_place, write_failure, write_temporary

CHECKSUM_KEY = "payload_sha256"


class CheckpointError(FileError):
    """A checkpoint or encoder file cannot be used (a write the file system refuses is a FileError)."""


def atomic_save(obj, path: str | Path) -> None:
    atomic_write(path, lambda fh: torch.save(obj, fh))


def safe_load(path: str | Path, what: str = "checkpoint", fix: str = "delete it to start this stage again"):
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"The {what} {path} does not exist; run the stage that produces it first.")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated zip, foreign pickle, wrong file type ...
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        if "Weights only load failed" in reason:  # torch's advice (weights_only=False) would run the file's code
            # Readable and whole: what it holds is refused, which "unreadable or truncated" would not say.
            raise CheckpointError(
                f"The {what} {path} holds objects other than tensors and plain data, which ring-bench never "
                f"unpickles (refused without running them); {fix}."
            ) from None
        raise CheckpointError(f"The {what} {path} is unreadable or truncated ({reason}); {fix}.") from None


# ---- verified checkpoints -------------------------------------------------------------------------


def payload_digest(obj) -> str:
    """SHA-256 of a checkpoint payload: its structure, keys, numbers, strings and every tensor's bytes."""
    h = hashlib.sha256()
    _digest(obj, h)
    return h.hexdigest()


def _digest(obj, h) -> None:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy())
    elif isinstance(obj, dict):
        h.update(b"D%d" % len(obj))
        for key, value in obj.items():
            _digest(key, h)
            _digest(value, h)
    elif isinstance(obj, (list, tuple)):
        h.update(b"L%d" % len(obj) if isinstance(obj, list) else b"U%d" % len(obj))
        for value in obj:
            _digest(value, h)
    elif isinstance(obj, float):
        h.update(b"F" + struct.pack("<d", obj))
    else:  # int, bool, str, None, torch.Size members, dtypes: their repr is exact
        h.update(f"{type(obj).__name__}:{obj!r}".encode())


def previous_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def checksummed(state: dict) -> dict:
    """``state`` with its payload checksum, as :func:`load_verified` expects it."""
    return {**state, CHECKSUM_KEY: payload_digest(state)}


def save_checkpoint(state: dict, path: str | Path) -> None:
    """Write ``state`` with its checksum; the checkpoint it replaces becomes ``<name>.prev.pt``.

    The new file is complete on disk before anything is renamed, and ``path`` exists at every
    instant: a kill anywhere leaves a complete latest checkpoint (old or new) and a previous one.
    """
    path = Path(path)
    tmp = write_temporary(path, lambda fh: torch.save(checksummed(state), fh))
    try:
        if path.exists():
            # The previous checkpoint as a hard link (a copy where links are not supported), so that
            # checkpoint.pt never vanishes, not even for an instant between two renames.
            link_into_place(path, previous_path(path))
        os.replace(tmp, path)
    except OSError as err:
        raise FileError(write_failure(path, err)) from None
    finally:
        tmp.unlink(missing_ok=True)


def finish_checkpoints(path: str | Path, keep: str = "last") -> int:
    """A finished stage's checkpoints, once its outputs are exported and verified: the previous one (``<name>.prev.pt``)
    is deleted, as the verified outputs and their checksum record now stand where it stood (a crash mid-save is no
    longer possible); the latest one too when ``keep`` is ``"none"``.  The bytes freed; one sentence when the file
    system refuses.  A ``.corrupt.pt`` set aside by :func:`load_latest_checkpoint` stays: it is evidence, not state."""
    path = Path(path)
    files = [previous_path(path), *([path] if keep == "none" else [])]
    freed = 0
    for file in files:
        try:
            size = file.stat().st_size
            file.unlink()
        except FileNotFoundError:
            continue
        except OSError as err:
            raise FileError(
                f"Cannot delete {file} of a finished stage ({err.strerror or err}); fix the folder's permissions "
                "and rerun (the stage's outputs are complete)."
            ) from None
        freed += size
    return freed


def load_verified(path: str | Path, what: str = "checkpoint", fix: str = "delete it to start this stage again") -> dict:
    """A checkpoint written by :func:`save_checkpoint`, its checksum verified; one sentence otherwise."""
    path = Path(path)
    doc = safe_load(path, what, fix)
    if not isinstance(doc, dict) or CHECKSUM_KEY not in doc:
        raise CheckpointError(
            f"The {what} {path} carries no checksum (not written by this version of ring-bench); {fix}."
        )
    stored = doc.pop(CHECKSUM_KEY)
    actual = payload_digest(doc)
    if stored != actual:
        raise CheckpointError(f"The {what} {path} fails its checksum (the file was altered on disk); {fix}.")
    return doc


def load_latest_checkpoint(path: str | Path, what: str = "checkpoint", log=print) -> dict | None:
    """The newest checkpoint at ``path`` that verifies, else the previous one, else None (start fresh).

    A latest checkpoint that fails verification is moved aside to ``<name>.corrupt.pt`` (so that the
    next save cannot rotate it over the good previous one) and ``log`` says which file the run
    continues from.
    """
    path = Path(path)
    previous = previous_path(path)
    problem = None
    if path.exists():
        try:
            return load_verified(path, what)
        except CheckpointError as err:
            problem = str(err).split(";")[0]
            aside = path.with_name(f"{path.stem}.corrupt{path.suffix}")
            os.replace(path, aside)
    if previous.exists():
        try:
            state = load_verified(previous, what)
        except CheckpointError as err:
            if problem is None:
                problem = str(err).split(";")[0]
        else:
            if problem:
                log(
                    f"ring: {problem}; kept as {path.stem}.corrupt{path.suffix}, resuming from the previous "
                    f"checkpoint {previous.name}"
                )
            return state
    if problem:
        log(f"ring: {problem}, and there is no good previous checkpoint; starting this cell from scratch")
    return None


def resume_state(
    path: str | Path, what: str, belongs: Callable[[dict], bool], set_aside: Callable[[dict], None]
) -> dict | None:
    """The state a stage resumes from, or None (it starts from scratch): the latest checkpoint at ``path`` that
    verifies, else the previous one (:func:`load_latest_checkpoint`, saying so on stderr), when ``belongs(state)``
    says it is this cell's; a state that does not belong (another config's, another encoder's) goes to
    ``set_aside``, which keeps it out of the way, saying where, and the stage starts over."""
    state = load_latest_checkpoint(path, what, log=lambda line: print(line, file=sys.stderr))
    if state is None:
        return None
    if not belongs(state):
        set_aside(state)
        return None
    return state


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
