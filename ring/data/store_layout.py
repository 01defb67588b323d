"""A prepared store as the plan and the status see it: its layout, its manifest, and whether it is what it says.

The store itself (what a record is, the build, the readers) is :mod:`ring.data.store`, whose docstring draws the
layout; this module is what the login-node side needs of it without PIL or torch: where a store lies, which cells
read one, how many shards it has, how much room it needs, and the check of its files against its manifest (the
workflow's ``store_check``, ``ring status``).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
from pathlib import Path

import numpy as np

from ring.core.files import FileError, read_record, sha256_file, write_json

STORE = "store"  # below the dataset's folder
MANIFEST = "manifest.json"
SAMPLES = "samples.tsv"
INDEX = "index.npy"
SHARD = "shard-{shard:05d}"  # one folder a shard: the launcher's job records of its job live there too
SHARD_DATA = "data.bin"
SHARD_RECORD = "shard.json"  # the prepare stage's output (its Stage.output, ring.core.stages)
SOURCE = "source.json"  # <split>/source.json: the image folder's stats as the listing was made (the staleness check)
CHECKED = "checked.json"  # {file: [size, mtime_ns, SHA-256]}: each file hashed once per change of its size or time
# Images per shard: one CPU job each.  ImageNet's 1,281,167 training images make 257 shards of about 280 MB in jpeg95
# (about a minute of decoding and resizing on 8 cores each), small enough that a preempted job loses little.
SHARD_IMAGES = 5000
SPLIT_FOLDERS = {"train": "train", "test": "val"}  # the stages' split -> the image folder it is read from
INDEX_DTYPE = np.dtype([("shard", "<u4"), ("offset", "<u8"), ("length", "<u4"), ("label", "<i4")])
# Bytes per stored pixel of each format, for the room check before a build: raw is exact; jpeg95's is ImageNet's (about
# 73 GB for its 1,331,167 images at 256 x 256: 0.84 bytes a pixel; photos vary by about 20%).
BYTES_PER_PIXEL = {"jpeg95": 0.84, "raw": 3.0}
NONE = "none"  # the config value that reads the original files
CHOICES = (*BYTES_PER_PIXEL, NONE)


class StoreError(FileError):
    """A prepared store is missing, incomplete or damaged; the message is one sentence naming it and the fix."""


class StoreStale(StoreError):
    """A prepared store whose image folder changed since it was built."""


def format_name(name: str) -> str:
    if name not in BYTES_PER_PIXEL:
        raise ValueError(f"Unknown store format {name!r}; choose {', '.join(CHOICES)}.")
    return name


# -- where, and how big ----------------------------------------------------------------------------------------------
def store_dir(dataset_folder: str | Path, fmt: str, size: int) -> Path:
    """The store of one dataset folder (``<data_root>/<dataset>``) in format ``fmt`` at ``size`` pixels."""
    return Path(dataset_folder) / STORE / f"{fmt}-{size}"


def n_shards(images: int, shard_images: int = SHARD_IMAGES) -> int:
    return max(1, -(-images // shard_images))


def needed_bytes(images: int, fmt: str, size: int) -> int:
    return int(images * size * size * BYTES_PER_PIXEL[format_name(fmt)])


def check_room(folder: Path, images: int, fmt: str, size: int) -> None:
    """One sentence when the file system under ``folder`` has less free space than the store needs."""
    need = needed_bytes(images, fmt, size)
    probe = folder
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < need:
        cheaper = "or choose store: jpeg95 (about a quarter of raw)" if fmt == "raw" else "or build it on another disk"
        raise StoreError(
            f"The {fmt} store of {images:,} images at {size}x{size} needs about {size_text(need)} under {folder}, "
            f"which has {size_text(free)} free; free space there, {cheaper}."
        )


def size_text(nbytes: float) -> str:
    return f"{nbytes / 1e9:.1f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:.1f} MB"


def cell_store(dataset_folder: str | Path, store_size: int, store: str, resize: int) -> Path | None:
    """The store a cell reads: its ``store`` format at the dataset's store size (the catalog's ``store_size``) when
    the cell resizes to that size; None, the dataset's own files: in-memory datasets (``store_size`` 0), ``store:
    none``, or another resize (the store holds one size, the paper's)."""
    if store == NONE or not store_size or resize != store_size:
        return None
    return store_dir(dataset_folder, format_name(store), resize)


# -- checking ---------------------------------------------------------------------------------------------------------
def rebuild_command(store: Path) -> str:
    """The command that builds ``store`` again where it lies: it keeps every file that verifies and redoes the rest."""
    folder, fmt = Path(store).parents[1], Path(store).name.rsplit("-", 1)[0]
    return f"`ring prepare build {folder.name} --data-root {shlex.quote(str(folder.parent))} --format {fmt}`"


def read_manifest(store: Path) -> dict:
    """The finished store's manifest; one sentence when there is none (an unfinished or absent store)."""
    manifest = read_record(store / MANIFEST)
    if not manifest.get("splits"):
        raise StoreError(
            f"No prepared store at {store} (no readable {MANIFEST}); build it with {rebuild_command(store)}, or set "
            "store: none to read the original files."
        )
    return manifest


def source_stats(source: Path, paths: list[str] | None = None) -> dict:
    """What the store's staleness is judged by, of the image folder ``source`` (a split's): ``folders``, a digest of the
    size and time of the folder and its class folders (a folder's time changes when an image is added, removed or
    renamed in it; a few stats, as the data check's fingerprint), and with ``paths`` (the listing's) ``images``, a
    digest of every image's size and time (one stat an image: the full checks only)."""
    folders = [source, *sorted(p for p in source.iterdir() if p.is_dir())]
    stats = {"folders": _digest([(str(p.relative_to(source)), *_stat(p)) for p in folders])}
    if paths is not None:
        stats["images"] = _digest([(path, *_stat(source / path)) for path in paths])
    return stats


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def _digest(rows: list) -> str:
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def hashed(store: Path, files: list[str], seeds: dict | None = None) -> dict[str, str]:
    """{file below ``store``: its SHA-256}, each recomputed only when its size or modification time differs from the
    ``(size, mtime_ns, sha256)`` recorded in ``store/checked.json`` (or in ``seeds``: what the build recorded as it
    wrote it); the new triples are recorded.  A store that cannot be written is hashed again next time."""
    checked = read_record(store / CHECKED)
    known, new = {**(seeds or {}), **checked}, {}
    for rel in files:
        size, mtime = _stat(store / rel)
        entry = known.get(rel)
        if not (isinstance(entry, list) and len(entry) == 3 and entry[:2] == [size, mtime]):
            entry = new[rel] = [size, mtime, sha256_file(store / rel)]
        known[rel] = entry
    if new or set(known) - set(checked):
        try:
            write_json(store / CHECKED, {k: known[k] for k in sorted(known)}, indent=None)
        except FileError:
            pass  # a read-only store: verified all the same, by hashing again
    return {rel: known[rel][2] for rel in files}


def verify(store: Path, fmt: str, size: int, checksums: bool = True, every_image: bool = False) -> dict:
    """The manifest of a store that is what it says: its format and size; each split's image count the same in the
    manifest, the listing, the index and the shards; its image folder unchanged since the listing was made (its
    folders' times, and with ``every_image`` every image's size and time); every file present at its recorded size
    and, with ``checksums``, at its recorded SHA-256 (:func:`hashed`: a file is hashed again only after its size or
    time changed, so a cell checks a store it read before in a few stats).  One sentence naming the first file that
    is not and the command that builds it again."""
    manifest = read_manifest(store)
    if (manifest.get("format"), manifest.get("size")) != (fmt, size):
        raise StoreError(
            f"The store at {store} holds {manifest.get('format')} at {manifest.get('size')} px, not {fmt} at {size}; "
            f"delete the folder and build it again with {rebuild_command(store)}."
        )
    files = {}
    for split, entry in manifest["splits"].items():
        _check_source(store, split, entry.get("source"), every_image)
        for small in (entry["index"], entry["listing"]):
            files[f"{split}/{small['file']}"] = (None, small["sha256"])
        for shard in entry["shards"]:
            files[f"{split}/{shard['file']}"] = (shard["bytes"], shard["sha256"])
    for rel, (nbytes, _) in files.items():
        path = store / rel
        if not path.is_file() or (nbytes is not None and path.stat().st_size != nbytes):
            raise StoreError(
                f"{path} is missing or truncated; run {rebuild_command(store)}, which builds that file again."
            )
    # The index and listings always (small); the shards with ``checksums``.
    for rel, sha in hashed(store, [rel for rel, (n, _) in files.items() if checksums or n is None]).items():
        if sha != files[rel][1]:
            raise StoreError(
                f"{store / rel} does not match its recorded SHA-256 (damaged or edited since the store was "
                f"built); run {rebuild_command(store)}, which builds that file again."
            )
    for split, entry in manifest["splits"].items():
        _check_counts(store, split, entry)
    return manifest


def _check_source(store: Path, split: str, recorded: dict | None, every_image: bool) -> None:
    """One sentence when the split's image folder changed since the store's listing was made (a store built before
    the listing recorded it, or whose folder is gone, has nothing to compare)."""
    source = store.parents[1] / SPLIT_FOLDERS[split]
    if not recorded or not source.is_dir():
        return
    paths = [path for path, _ in _listing_rows(store / split)] if every_image and "images" in recorded else None
    now = source_stats(source, paths)
    if any(now[key] != recorded.get(key) for key in now):
        raise StoreStale(
            f"The store at {store} was built from {source} before its images changed (an image added, removed or "
            f"rewritten since); delete {store} and run {rebuild_command(store)}, which builds it from the images "
            "as they are now."
        )


def _listing_rows(split_dir: Path) -> list[tuple[str, str]]:
    lines = (split_dir / SAMPLES).read_text().splitlines()[1:]
    return [tuple(line.rsplit("\t", 1)) for line in lines]


def _check_counts(store: Path, split: str, entry: dict) -> None:
    """The split's image count in the manifest against its listing's, its index's and its shards', and the index
    against each shard's images and bytes: an edited manifest or a foreign index is named before any job reads it."""
    split_dir = store / split
    index = np.load(split_dir / entry["index"]["file"], allow_pickle=False)
    counts = {
        "listing": len(_listing_rows(split_dir)),
        "index": len(index) if index.dtype == INDEX_DTYPE else -1,
        "shards": sum(shard["images"] for shard in entry["shards"]),
    }
    if any(n != entry["images"] for n in counts.values()):
        found = ", ".join(f"its {what} {n:,}" for what, n in counts.items())
        raise StoreError(
            f"The manifest of {store} says its {split} split holds {entry['images']:,} images, but {found}; run "
            f"{rebuild_command(store)}, which writes the index and the manifest again from the shards."
        )
    per_shard = np.bincount(index["shard"], minlength=len(entry["shards"]))
    nbytes = np.bincount(index["shard"], weights=index["length"], minlength=len(entry["shards"]))
    for i, shard in enumerate(entry["shards"]):
        if per_shard[i] != shard["images"] or int(nbytes[i]) != shard["bytes"]:
            raise StoreError(
                f"{split_dir / entry['index']['file']} does not match shard {shard['file']} of the manifest; run "
                f"{rebuild_command(store)}, which writes the index and the manifest again from the shards."
            )


def fingerprint(store: Path) -> str:
    """A digest of the size and time of the store's manifest and shards, in a few stats ("" for no store): the
    workflow checks a store again (store_check's params) once it was deleted, damaged or built again, where the
    check's stamp alone said "Nothing to be done"."""
    files = [store / MANIFEST, *sorted(store.glob(f"*/shard-*/{SHARD_DATA}"))]
    stats = [(str(p.relative_to(store)), *_stat(p)) for p in files if p.is_file()]
    return _digest(stats)[:16] if stats else ""


def state(store: Path, shards: int) -> str:
    """What ``ring status`` says of a store that should hold ``shards`` shards: verified by its manifest's SHA-256s
    (each shard hashed again only after its size or time changed), stale, or how far its build got."""
    if (store / MANIFEST).is_file():
        try:
            manifest = read_manifest(store)
            verify(store, manifest["format"], int(manifest["size"]))
        except StoreStale as err:
            return f"stale: {err}"
        except (StoreError, KeyError, ValueError, TypeError, OSError) as err:
            return f"damaged: {err}"
        return f"built, {size_text(manifest['bytes'])}, every file matching its recorded SHA-256"
    done = sum(1 for split in SPLIT_FOLDERS for _ in (store / split).glob(f"shard-*/{SHARD_RECORD}"))
    if done:
        return f"building: {done} of {shards} shards done ({rebuild_command(store)} resumes from them)"
    return f"not built ({rebuild_command(store)} builds it; `ring run all_tables` builds it first on its own)"
