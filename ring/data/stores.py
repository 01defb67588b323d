"""A prepared store as the plan and the status see it: its layout, its manifest, and whether it is what it says.

The store itself (what a record is, the build, the readers) is :mod:`ring.data.store`, whose docstring draws the
layout; this module is what the login-node side needs of it without PIL or torch: where a store lies, which cells
read one, how many shards it has, how much room it needs, and the check of its files against its manifest (the
workflow's ``store_check``, ``ring status``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from ring.core.files import FileError, read_record, sha256_file

STORE = "store"  # below the dataset's folder
MANIFEST = "manifest.json"
SAMPLES = "samples.tsv"
INDEX = "index.npy"
SHARD = "shard-{shard:05d}"  # one folder a shard: the launcher's job records of its job live there too
SHARD_DATA = "data.bin"
SHARD_RECORD = "shard.json"  # the prepare stage's output (ring.cluster.jobs.OUTPUT)
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
        raise StoreError(
            f"The {fmt} store of {images:,} images at {size}x{size} needs about {need / 1e9:.1f} GB under {folder}, "
            f"which has {free / 1e9:.1f} GB free; free space there, or choose store: jpeg95 (about a quarter of raw)."
        )


def cell_store(dataset_folder: str | Path, store_size: int, store: str, resize: int) -> Path | None:
    """The store a cell reads: its ``store`` format at the dataset's store size (the catalog's ``store_size``) when
    the cell resizes to that size; None, the dataset's own files: in-memory datasets (``store_size`` 0), ``store:
    none``, or another resize (the store holds one size, the paper's)."""
    if store == NONE or not store_size or resize != store_size:
        return None
    return store_dir(dataset_folder, format_name(store), resize)


# -- checking ---------------------------------------------------------------------------------------------------------
def read_manifest(store: Path) -> dict:
    """The finished store's manifest; one sentence when there is none (an unfinished or absent store)."""
    manifest = read_record(store / MANIFEST)
    if not manifest.get("splits"):
        raise StoreError(
            f"No prepared store at {store} (no readable {MANIFEST}); build it with `snakemake prepare_stores` or "
            f"`ring prepare build`, or set store: none to read the original files."
        )
    return manifest


def verify(store: Path, fmt: str, size: int, checksums: bool = True) -> dict:
    """The manifest of a store that is what it says: its format and size, every file present at its recorded size,
    the index and listing by checksum and, with ``checksums``, every shard by its SHA-256 (ImageNet's 73 GB take a few
    minutes: the data check runs this once and stamps it).  One sentence naming the first file that is not."""
    manifest = read_manifest(store)
    if (manifest.get("format"), manifest.get("size")) != (fmt, size):
        raise StoreError(
            f"The store at {store} holds {manifest.get('format')} at {manifest.get('size')} px, not {fmt} at {size}; "
            "delete the folder and prepare it again."
        )
    for split, entry in manifest["splits"].items():
        split_dir = store / split
        for small in (entry["index"], entry["listing"]):
            if not (split_dir / small["file"]).is_file() or sha256_file(split_dir / small["file"]) != small["sha256"]:
                raise StoreError(
                    f"{split_dir / small['file']} is missing or damaged; delete {store} and prepare again."
                )
        for shard in entry["shards"]:
            path = split_dir / shard["file"]
            if not path.is_file() or path.stat().st_size != shard["bytes"]:
                raise StoreError(f"{path} is missing or truncated; delete its folder and run the prepare stage again.")
            if checksums and sha256_file(path) != shard["sha256"]:
                raise StoreError(f"{path} does not match its recorded SHA-256; delete its folder and prepare again.")
    return manifest


def state(store: Path, shards: int) -> str:
    """What ``ring status`` says of a store that should hold ``shards`` shards: checked by its manifest's sizes (the
    SHA-256s are the data check's), or how far its build got."""
    if (store / MANIFEST).is_file():
        try:
            manifest = read_manifest(store)
            verify(store, manifest["format"], int(manifest["size"]), checksums=False)
        except (StoreError, KeyError, ValueError) as err:
            return f"damaged: {err}"
        size = manifest["bytes"]
        size_text = f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.1f} MB"
        return f"built, {size_text}, every shard at its recorded size"
    done = sum(1 for split in SPLIT_FOLDERS for _ in (store / split).glob(f"shard-*/{SHARD_RECORD}"))
    if done:
        return f"building: {done} of {shards} shards done (the prepare stage resumes from them)"
    return "not built (snakemake prepare_stores builds it, all_tables on its own)"
