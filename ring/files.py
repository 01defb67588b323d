"""Files written whole or not at all, and one sentence when the file system refuses a write.

A file is written to a temporary file beside it (``.<name>.<random>.tmp``), flushed to disk and
renamed over the old one, so a process killed at any instant leaves the previous file or the new
one, never a torn one; :func:`remove_stale_temporaries` clears what killed writes left behind.
Torch-free: the SLURM client on a login node (ring.launch, ring.accounting) writes through it too.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path


class FileError(RuntimeError):
    """A file cannot be read or written as a stage needs it; the message is one sentence naming it."""


def atomic_write(path: str | Path, write) -> None:
    """``write(binary file)`` into a temporary file, fsync, rename over ``path``.

    A full disk or a folder that cannot be written is one sentence (:class:`FileError`); the file
    ``path`` held before is untouched either way.
    """
    path = Path(path)
    tmp = write_temporary(path, write)
    try:
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise FileError(write_failure(path, err)) from None


def write_json(path: str | Path, doc, indent: int | None = 2) -> None:
    """``doc`` as JSON text (one trailing newline), written atomically."""
    text = json.dumps(doc, indent=indent) + "\n"
    atomic_write(path, lambda fh: fh.write(text.encode()))


def write_temporary(path: Path, write) -> Path:
    """``write`` into ``.<name>.*.tmp`` beside ``path``, flushed to disk; the temporary file's path."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        return Path(tmp)
    except BaseException as err:
        # A writer that swallows the OSError (torch.save reports ENOSPC as "unexpected pos ..."): a disk
        # with no room left, seen before our own temporary frees its blocks, is the reason.
        full = not isinstance(err, OSError) and isinstance(err, Exception) and tmp is not None and _no_room(path.parent)
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if full:
            raise FileError(write_failure(path, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))) from None
        if isinstance(err, OSError):
            raise FileError(write_failure(path, err)) from None
        raise


def _no_room(folder: Path, margin: int = 1 << 20) -> bool:
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < margin


def write_failure(path: Path, err: OSError) -> str:
    """One sentence for a write that the file system refused."""
    if err.errno == errno.ENOSPC:
        return (f"The disk holding {path.parent} is full (no space left while writing {path.name}); the previous file "
                "is kept: free some space and rerun to continue.")
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"The folder {path.parent} is not writable ({err.strerror}); fix its permissions or choose another results folder."
    return f"Writing {path} failed ({err.strerror or err}); the previous file is kept: fix the cause and rerun."


def check_writable(folder: str | Path) -> None:
    """Create ``folder`` and prove a file can be written in it: an unwritable cell folder fails before training."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-probe.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise FileError(
            f"The cell folder {folder} is not writable ({err.strerror or err}); fix its permissions or choose another "
            "results folder.") from None


def remove_stale_temporaries(folder: str | Path) -> list[str]:
    """Delete what killed writes left in ``folder`` (``.<name>.*.tmp`` of :func:`atomic_write`); their names.

    Call it at the start of a stage, when no write of this cell can be under way.
    """
    removed = []
    for tmp in sorted(Path(folder).glob(".*.tmp")):
        if tmp.is_file():
            tmp.unlink(missing_ok=True)
            removed.append(tmp.name)
    return removed
