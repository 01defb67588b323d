"""Files written whole or not at all, and one sentence when the file system refuses a write.

A file is written to a temporary file beside it (``.<name>.<random>.tmp``), flushed to disk and
renamed over the old one, so a process killed at any instant leaves the previous file or the new
one, never a torn one; :func:`remove_stale_temporaries` clears what killed writes left behind.
Torch-free: the SLURM client on a login node (ring.cluster.launch, ring.core.accounting) writes through it too.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

# The checksum record of a folder's exported files (a pretraining cell's encoders): their SHA-256,
# written last, checked by every stage that reads one of them.
CHECKSUMS = "export.json"
# The config (hash and values) a cell's checkpoint and outputs were made with, written by each stage when it starts
# (ring.core.cell_runs).
RUN_RECORD = "run.json"


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


def append_text(path: str | Path, text: str) -> None:
    """``text`` appended to ``path`` (a log); a write the file system refuses is one sentence (:class:`FileError`)."""
    path = Path(path)
    try:
        with open(path, "a") as fh:
            fh.write(text)
    except OSError as err:
        raise FileError(write_failure(path, err)) from None


def write_text(path: str | Path, text: str) -> None:
    """``text`` (UTF-8) written atomically: a refused write is one sentence naming the file."""
    atomic_write(path, lambda fh: fh.write(text.encode()))


def write_json(path: str | Path, doc, indent: int | None = 2) -> None:
    """``doc`` as JSON text (one trailing newline), written atomically."""
    text = json.dumps(doc, indent=indent) + "\n"
    atomic_write(path, lambda fh: fh.write(text.encode()))


def write_temporary(path: Path, write) -> Path:
    """``write`` into ``.<name>.*.tmp`` beside ``path``, flushed to disk; the temporary file's path."""
    tmp = fh = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        # mkstemp makes the file 0600; a result on a shared cluster follows the user's umask like any other file.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as raw:
            fh = _Recording(raw)
            write(fh)
            raw.flush()
            os.fsync(raw.fileno())
        return Path(tmp)
    except BaseException as err:
        # A writer that swallows the OSError (torch.save reports ENOSPC or EFBIG as "[enforce fail at
        # inline_container.cc] ... unexpected pos"): the error its write met is the reason, else a disk with no
        # room left, seen before our own temporary frees its blocks.
        refused = err if isinstance(err, OSError) else fh.error if fh is not None else None
        if refused is None and isinstance(err, Exception) and tmp is not None and _no_room(path.parent):
            refused = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if refused is not None and isinstance(err, Exception):
            raise FileError(write_failure(path, refused)) from None
        raise


class _Recording:
    """A binary file whose write keeps the OSError it raises, for writers that replace it with their own error."""

    def __init__(self, raw):
        self.raw, self.error = raw, None

    def write(self, data):
        try:
            return self.raw.write(data)
        except OSError as err:
            self.error = err
            raise

    def __getattr__(self, name):  # flush, tell, seek, fileno ...: the file's own
        return getattr(self.raw, name)


def _umask() -> int:
    """The process's umask, read without changing it where Linux shows it (os.umask can only set it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def read_record(path: str | Path) -> dict:
    """A JSON record written by this module (a checksum record, run.json, metrics), or {} when it is missing,
    unreadable or not an object: its readers treat all of those as "no record"."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def record_checksums(folder: str | Path, names, read_from: str | None = None, **fields) -> dict:
    """Write ``folder/export.json``: the SHA-256 of each of ``names`` in ``folder`` (read from its subfolder
    ``read_from`` when given: the same bytes, kept where no one deletes them) and ``fields``; the record.

    Entries of other files already recorded there are kept (a backbone converted into its encoder's folder
    by hand must not make the encoder unverifiable); the names given, and the fields, are replaced."""
    folder = Path(folder)
    old = read_record(folder / CHECKSUMS).get("files")
    kept = {k: v for k, v in old.items() if k not in names} if isinstance(old, dict) else {}
    source = folder / read_from if read_from else folder
    doc = {**fields, "files": {**kept, **{name: sha256_file(source / name) for name in names}}}
    write_json(folder / CHECKSUMS, doc)
    return doc


# Exported files are also kept here (real copies, or reflinks where the file system shares blocks until one side
# is written: never hard links, which an edit in place would change on both sides), where Snakemake, which deletes
# a rerun job's declared outputs, does not look: a client can restore them torch-free (ring.core.cell_runs).
KEPT = "exported"
FICLONE = 0x40049409  # Linux's ioctl that makes a file share another's blocks copy-on-write (btrfs, XFS)


def _clone_or_copy(source: Path, target: Path) -> None:
    with open(source, "rb") as src, open(target, "wb") as dst:
        try:
            import fcntl

            fcntl.ioctl(dst.fileno(), FICLONE, src.fileno())
            return
        except (ImportError, OSError):
            pass  # no reflinks here: a byte copy
        shutil.copyfileobj(src, dst, 1 << 20)


def copy_into_place(source: Path, target: Path) -> None:
    """``target`` becomes a copy of ``source`` at once (a reflink where the file system has them, else a byte copy,
    renamed over it): it never vanishes or shows half a file, and an edit of either never changes the other.
    Raises OSError."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        _clone_or_copy(source, tmp)
        shutil.copystat(source, tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def link_into_place(source: Path, target: Path) -> None:
    """``target`` becomes ``source``'s content at once (a hard link, a copy where links are not supported,
    renamed over it): it never vanishes or shows half a file.  Raises OSError.  Only for a file its writer then
    replaces by a rename (the previous checkpoint): a file anyone may edit in place is kept by
    :func:`copy_into_place`."""
    link = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    link.unlink(missing_ok=True)
    try:
        os.link(source, link)
    except OSError:
        shutil.copyfile(source, link)
    os.replace(link, target)


def keep_exports(folder: str | Path, names) -> None:
    folder = Path(folder)
    kept = folder / KEPT
    try:
        kept.mkdir(exist_ok=True)
        for name in names:
            copy_into_place(folder / name, kept / name)
    except OSError as err:
        raise FileError(write_failure(kept / list(names)[-1], err)) from None


def place_exports(folder: str | Path, names) -> None:
    """Copy each kept copy (``folder/exported/NAME``) into ``folder``, in the order given."""
    folder = Path(folder)
    for name in names:
        try:
            copy_into_place(folder / KEPT / name, folder / name)
        except OSError as err:
            raise FileError(write_failure(folder / name, err)) from None


def verify_checksum(
    path: str | Path, what: str = "encoder", fix: str = "rerun the pretraining cell that writes it"
) -> str:
    """The SHA-256 of ``path``, after checking it against the checksum record beside it; one sentence otherwise.

    A file altered on disk (a block overwritten, a copy cut short) or a record that is missing,
    unreadable or silent about the file all stop the reader before it uses the file.
    """
    path = Path(path)
    record = path.with_name(CHECKSUMS)
    if not path.is_file():
        raise FileError(f"The {what} {path} does not exist; run the stage that produces it first.")
    try:
        doc = json.loads(record.read_text())
        expected = doc["files"][path.name]
    except FileNotFoundError:
        raise FileError(
            f"The {what} {path} has no checksum record ({record.name} beside it, written with it), so it "
            f"cannot be verified; {fix}."
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
        raise FileError(f"The checksum record {record} is unreadable or does not list {path.name}; {fix}.") from None
    actual = sha256_file(path)
    if actual != expected:
        raise FileError(
            f"The {what} {path} fails its checksum (sha256 {actual[:12]}..., recorded {str(expected)[:12]}...: "
            f"the file was altered on disk); {fix}."
        )
    return actual


def _no_room(folder: Path, margin: int = 1 << 20) -> bool:
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < margin


def write_failure(path: Path, err: OSError) -> str:
    """One sentence for a write that the file system refused (the file it replaces, if any, is untouched)."""
    kept = "the previous file is kept" if path.exists() else f"no {path.name} was written"
    if err.errno == errno.ENOSPC:
        return (
            f"The disk holding {path.parent} is full (no space left while writing {path.name}); {kept}: free some "
            "space and rerun to continue."
        )
    if err.errno == errno.EFBIG:
        return (
            f"Writing {path} exceeds the largest file this process may write (File too large: the file-size limit, "
            f"ulimit -f, or the file system's); {kept}: raise the limit and rerun to continue."
        )
    if err.errno == errno.EDQUOT:
        return (
            f"Writing {path} exceeds this user's disk quota on {path.parent} (Disk quota exceeded); {kept}: free "
            "some space or raise the quota and rerun to continue."
        )
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (
            f"The folder {path.parent} is not writable ({err.strerror}); "
            "fix its permissions or choose another results folder."
        )
    return f"Writing {path} failed ({err.strerror or err}); {kept}: fix the cause and rerun."


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
            "results folder."
        ) from None


def unwritable(folder: str | Path) -> str | None:
    """Why files cannot be written in ``folder`` (one sentence), checked without creating anything; None when they can.

    The nearest existing folder on its path decides: a file in the way, or a folder this user may not
    write, is found before any job (Snakemake's dry runs included) instead of by the first job that writes.
    """
    folder = Path(folder)
    for existing in (folder, *folder.parents):
        if existing.exists() or existing == Path(existing.anchor or "."):
            break
    if not existing.is_dir():
        where = "is a file, not a folder" if existing == folder else f"cannot be created: {existing} is a file"
        return f"The results folder {folder} {where}; move it away or choose another grid name."
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "is" if existing == folder else f"cannot be created: {existing} is"
        return (
            f"The results folder {folder} {what} not writable by this user; fix its permissions or run from a "
            "folder you can write."
        )
    return None


def unwritable_below(folder: str | Path) -> str | None:
    """Why a cell's files cannot be written in an existing folder below ``folder`` (one sentence), else None.

    Every folder under ``results/<grid>/`` is a cell's (or one of its runs', logs'), written by some job of the
    grid; one this user may not write is found here, before any job, instead of by Snakemake's PermissionError."""
    for parent, folders, _ in os.walk(folder):
        for name in sorted(folders):
            cell = Path(parent, name)
            if not os.access(cell, os.W_OK | os.X_OK):
                return (
                    f"The cell folder {cell} is not writable by this user; fix its permissions "
                    f"(chmod -R u+w {cell}) or move it away, and rerun."
                )
    return None


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
