"""Atomic checkpoints and safe loading.

A checkpoint is written to a temporary file in the same folder, flushed to disk and renamed over
the old one, so a job killed at any instant leaves either the previous or the new checkpoint,
never a torn file.  Loading always uses ``weights_only=True`` (no pickled code runs) and turns
every failure into one sentence that names the file and what to do.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import torch


class CheckpointError(RuntimeError):
    """A checkpoint or encoder file cannot be used."""


def atomic_save(obj, path: str | Path) -> None:
    atomic_write(path, lambda fh: torch.save(obj, fh))


def atomic_write(path: str | Path, write) -> None:
    """``write(binary file)`` into a temporary file, fsync, rename over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def safe_load(path: str | Path, what: str = "checkpoint", fix: str = "delete it to start this stage again"):
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"The {what} {path} does not exist; run the stage that produces it first.")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated zip, foreign pickle, wrong file type ...
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CheckpointError(f"The {what} {path} is unreadable or truncated ({reason}); {fix}.") from None


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
