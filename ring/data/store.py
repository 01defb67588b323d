"""The prepared store: an image-folder dataset's images resized once and packed into shards (the ``prepare`` stage).

The paper's first step, "We resize input images to be 256 by 256 pixels", depends only on the file.  Done once,
ahead of training, it removes from every pass (pretraining, the kNN monitor, linear evaluation) the per-image
decode of a full-size JPEG, its resize and one file open per image.  The store holds, for every image of the
dataset's ``train`` and ``val`` folders, exactly what ``T.Resize((size, size))`` makes of the PIL image that
torchvision's ``ImageFolder`` loads (``convert("RGB")``, then PIL's bilinear resize), in the same order as
``ImageFolder`` (classes sorted by name, files sorted within each class), so that index ``i`` of the store is index
``i`` of the folder: IR's memory bank and the per-image view seeds are unchanged.

On disk (``<data_root>/<dataset>/store/<format>-<size>/``), readable with numpy and PIL alone::

    manifest.json              written last: format, size, image counts, classes, the SHA-256 of every file below
    checked.json               {file: [size, mtime_ns, SHA-256]}: the checks hash a file again only once it changed
    <split>/source.json        the image folder's stats as it was listed (a store older than its images is stale)
    <split>/samples.tsv        the listing: one "relative/path<TAB>label" line per image, in store order
    <split>/index.npy          one row per image: shard (u4), offset (u8), length (u4), label (i4) -- np.load(...)
    <split>/shard-00000/data.bin    the records of images [0, shard_images), back to back
    <split>/shard-00000/shard.json  that shard's own record (images, bytes, SHA-256; written last): one job a shard,
                                    and the build resumes shard by shard

    row = np.load("train/index.npy")[i]
    rec = np.fromfile(f"train/shard-{row['shard']:05d}/data.bin", np.uint8, row["length"], offset=row["offset"])
    raw:    rec.reshape(size, size, 3)                    # uint8 RGB, bit-exact with the PIL resize
    jpeg95: np.asarray(PIL.Image.open(io.BytesIO(rec)))   # quality 95, 4:4:4 chroma

Splits are named as the stages name them (``train``, ``test``); their folders are the dataset's (``train``,
``val``).  Why this format and not FFCV's, webdataset's or LitData's: docs/datasets.md, "The prepared store".
This module is torch-free (numpy and PIL): the workflow client plans with it, the prepare jobs build with it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from ring.core.files import atomic_write, read_record, sha256_file, write_json, write_text
from ring.data.store_layout import (
    BYTES_PER_PIXEL,
    CHOICES,
    INDEX,
    INDEX_DTYPE,
    MANIFEST,
    SAMPLES,
    SHARD,
    SHARD_DATA,
    SHARD_RECORD,
    SOURCE,
    SPLIT_FOLDERS,
    StoreError,
    hashed,
    n_shards,
    read_manifest,
    rebuild_command,
    source_stats,
)

# torchvision.datasets.folder.IMG_EXTENSIONS: the files ImageFolder lists (tests check the two agree).
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
RESAMPLE = "PIL Image.convert('RGB').resize((size, size), BILINEAR): torchvision's T.Resize((size, size))"


# -- formats ---------------------------------------------------------------------------------------------------------
def _encode_raw(image: Image.Image) -> bytes:
    return np.asarray(image, dtype=np.uint8).tobytes()


def _decode_raw(record, size: int) -> np.ndarray:
    return np.frombuffer(record, dtype=np.uint8).reshape(size, size, 3)


def _encode_jpeg95(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, "JPEG", quality=95, subsampling=0)  # 4:4:4: the colour jitter sees full-resolution chroma
    return out.getvalue()


def _decode_jpeg(record, size: int) -> np.ndarray:
    with Image.open(io.BytesIO(record)) as image:
        array = np.array(image.convert("RGB"))  # writable: it becomes a tensor without a warning
    if array.shape != (size, size, 3):
        raise ValueError(f"a record decodes to {array.shape}, not ({size}, {size}, 3)")
    return array


@dataclass(frozen=True)
class Format:
    """How a store writes and reads one image."""

    name: str
    about: str
    encode: Callable[[Image.Image], bytes]
    decode: Callable[[bytes, int], np.ndarray]


FORMATS: dict[str, Format] = {
    "jpeg95": Format(
        "jpeg95",
        "JPEG quality 95, 4:4:4 chroma (a 256-pixel decode)",
        _encode_jpeg95,
        _decode_jpeg,
    ),
    "raw": Format("raw", "uint8 RGB, bit-exact with the PIL resize, no decode", _encode_raw, _decode_raw),
}
assert FORMATS.keys() == BYTES_PER_PIXEL.keys()


def format_of(name: str) -> Format:
    if name not in FORMATS:
        raise ValueError(f"Unknown store format {name!r}; choose {', '.join(CHOICES)}.")
    return FORMATS[name]


# -- where, and how big ----------------------------------------------------------------------------------------------
# -- the listing: ImageFolder's order, torch-free ----------------------------------------------------------------------
def list_folder(folder: Path) -> tuple[list[str], list[tuple[str, int]]]:
    """(classes, [(path relative to ``folder``, label)]) in torchvision ImageFolder's order."""
    classes = sorted(entry.name for entry in os.scandir(folder) if entry.is_dir())
    if not classes:
        raise StoreError(f"{folder} holds no class folders; the store reads image folders (<split>/<class>/<image>).")
    samples = []
    for label, cls in enumerate(classes):
        for root, _, names in sorted(os.walk(folder / cls, followlinks=True)):
            for name in sorted(names):
                if name.lower().endswith(IMG_EXTENSIONS):
                    samples.append((os.path.relpath(os.path.join(root, name), folder), label))
    return classes, samples


def write_listing(split_dir: Path, source: Path, expected: int | None) -> int:
    """``split_dir/samples.tsv`` of the image folder ``source``; one sentence when it does not hold ``expected``
    images (the catalog's count, from which the plan made the shards)."""
    classes, samples = list_folder(source)
    if expected is not None and len(samples) != expected:
        raise StoreError(
            f"{source} holds {len(samples):,} images, the catalog expects {expected:,}; complete the dataset (the data "
            "check says what is missing) before preparing its store."
        )
    lines = [f"# classes\t{json.dumps(classes)}"] + [f"{path}\t{label}" for path, label in samples]
    # The folder as listed, written first: the manifest carries it, and the checks compare the folder with it.
    write_json(split_dir / SOURCE, source_stats(source, [path for path, _ in samples]), indent=None)
    write_text(split_dir / SAMPLES, "\n".join(lines) + "\n")
    return len(samples)


def read_listing(split_dir: Path) -> tuple[list[str], list[tuple[str, int]]]:
    text = (split_dir / SAMPLES).read_text().splitlines()
    classes = json.loads(text[0].split("\t", 1)[1])
    samples = [(path, int(label)) for path, label in (line.rsplit("\t", 1) for line in text[1:])]
    return classes, samples


# -- building: one shard at a time, then the manifest ------------------------------------------------------------------
def resized(path: Path, size: int) -> Image.Image:
    """The image as ImageFolder loads it, resized as ``T.Resize((size, size))`` resizes a PIL image."""
    with open(path, "rb") as fh:
        image = Image.open(fh).convert("RGB")
    return image.resize((size, size), Image.BILINEAR)


def shard_files(split_dir: Path, shard: int) -> tuple[Path, Path]:
    folder = split_dir / SHARD.format(shard=shard)
    return folder / SHARD_DATA, folder / SHARD_RECORD


def build_shard(split_dir: Path, source: Path, shard: int, fmt: str, size: int, shard_images: int) -> dict:
    """Shard ``shard`` of the listing in ``split_dir`` from the image folder ``source``: its .bin, then its .json
    (written last: a shard without one is rebuilt).  A finished shard is kept; its record is returned."""
    data, record_path = shard_files(split_dir, shard)
    done = read_record(record_path)
    if done and data.exists() and data.stat().st_size == done.get("bytes") and _intact(split_dir.parent, data, done):
        return done
    _, samples = read_listing(split_dir)
    chunk = samples[shard * shard_images : (shard + 1) * shard_images]
    if not chunk:
        raise StoreError(f"Shard {shard} of {split_dir} is past its {len(samples):,} images; replan the store.")
    encode, digest, lengths = format_of(fmt).encode, hashlib.sha256(), []

    def write(fh) -> None:
        for path, _ in chunk:
            try:
                record = encode(resized(source / path, size))
            except (OSError, ValueError) as err:
                raise StoreError(f"{source / path} cannot be read as an image ({err}); replace or remove it.") from None
            fh.write(record)
            digest.update(record)
            lengths.append(len(record))

    atomic_write(data, write)
    record = {
        "mtime_ns": data.stat().st_mtime_ns,  # with bytes and sha256: the checks hash it again only once it changes
        "first": shard * shard_images,
        "images": len(chunk),
        "bytes": sum(lengths),
        "sha256": digest.hexdigest(),
        "lengths": lengths,
        "labels": [label for _, label in chunk],
    }
    write_json(record_path, record, indent=None)
    return record


def _seed(split_dir: Path, data: Path, record: dict) -> dict:
    """The (size, time, SHA-256) the build recorded of a shard as it wrote it, for
    :func:`ring.data.store_layout.hashed`."""
    if not isinstance(record.get("mtime_ns"), int):
        return {}
    return {str(data.relative_to(split_dir.parent)): [record["bytes"], record["mtime_ns"], record["sha256"]]}


def _intact(store: Path, data: Path, record: dict) -> bool:
    """Whether a finished shard still holds what its record says (a damaged one is built again)."""
    rel = str(data.relative_to(store))
    return hashed(store, [rel], _seed(data.parents[1], data, record))[rel] == record.get("sha256")


def finish(store: Path, fmt: str, size: int, dataset: str, shard_images: int) -> dict:
    """The index of every split and the manifest (written last: a store without one is unfinished)."""
    splits, seeds = {}, {}
    for split in SPLIT_FOLDERS:
        split_dir = store / split
        classes, samples = read_listing(split_dir)
        shards, rows = [], []
        for shard in range(n_shards(len(samples), shard_images)):
            data, record_path = shard_files(split_dir, shard)
            rec = read_record(record_path)
            if not rec or not data.exists() or data.stat().st_size != rec["bytes"]:
                raise StoreError(f"Shard {data} is missing or incomplete; rerun the prepare stage, which builds it.")
            seeds.update(_seed(split_dir, data, rec))
            offsets = np.concatenate([[0], np.cumsum(rec["lengths"])[:-1]]).astype(np.uint64)
            columns = zip([shard] * rec["images"], offsets, rec["lengths"], rec["labels"], strict=True)
            rows.append(np.array(list(columns), INDEX_DTYPE))
            shards.append(
                {
                    "file": str(data.relative_to(split_dir)),
                    "images": rec["images"],
                    "bytes": rec["bytes"],
                    "sha256": rec["sha256"],
                }
            )
        index = np.concatenate(rows)
        if len(index) != len(samples) or index["label"].tolist() != [label for _, label in samples]:
            raise StoreError(
                f"The shards of {split_dir} do not match its listing; delete {store} and run {rebuild_command(store)}."
            )
        atomic_write(split_dir / INDEX, lambda fh, index=index: np.save(fh, index, allow_pickle=False))
        source = read_record(split_dir / SOURCE)
        splits[split] = {
            **({"source": source} if source else {}),
            "folder": SPLIT_FOLDERS[split],
            "images": len(samples),
            "classes": classes,
            "index": {"file": INDEX, "sha256": sha256_file(split_dir / INDEX)},
            "listing": {"file": SAMPLES, "sha256": sha256_file(split_dir / SAMPLES)},
            "shards": shards,
        }
    manifest = {
        "dataset": dataset,
        "format": fmt,
        "about": format_of(fmt).about,
        "size": size,
        "resample": RESAMPLE,
        "pillow": Image.__version__,
        "shard_images": shard_images,
        "bytes": sum(s["bytes"] for split in splits.values() for s in split["shards"]),
        "splits": splits,
    }
    # The shards' hashes as the build recorded them, so that the first check hashes only what changed since.
    small = [f"{split}/{name}" for split in splits for name in (INDEX, SAMPLES)]
    hashed(store, small + [f"{split}/{s['file']}" for split, e in splits.items() for s in e["shards"]], seeds)
    write_json(store / MANIFEST, manifest)
    return manifest


# -- reading ----------------------------------------------------------------------------------------------------------
class StoreReader:
    """Random access to one split of a store: record ``i`` by one ``os.pread`` from its shard (no per-image file
    open; the shards' descriptors are opened once per process, so forked loader workers each open their own)."""

    def __init__(self, store: Path, split: str):
        self.store, self.split = Path(store), split
        manifest = read_manifest(self.store)
        if split not in manifest["splits"]:
            raise StoreError(f"The store at {store} has no {split} split; delete it and prepare it again.")
        entry = manifest["splits"][split]
        self.size, self.format = int(manifest["size"]), format_of(manifest["format"])
        self.classes = entry["classes"]
        self.index = np.load(self.store / split / INDEX, allow_pickle=False)
        if self.index.dtype != INDEX_DTYPE or len(self.index) != entry["images"]:
            raise StoreError(
                f"{self.store / split / INDEX} is not this store's index; run {rebuild_command(self.store)}, "
                "which writes it again."
            )
        self.files = [self.store / split / shard["file"] for shard in entry["shards"]]
        self.targets = self.index["label"].tolist()
        self._fds: dict[int, int] = {}
        self._pid = -1

    def __len__(self) -> int:
        return len(self.index)

    def __getstate__(self):  # a pickled copy (spawned workers) opens its own descriptors
        return {**self.__dict__, "_fds": {}, "_pid": -1}

    def record(self, i: int) -> bytearray:
        if self._pid != os.getpid():
            self._fds, self._pid = {}, os.getpid()
        shard, offset, length, _ = self.index[i].tolist()
        fd = self._fds.get(shard)
        if fd is None:
            fd = self._fds[shard] = os.open(self.files[shard], os.O_RDONLY)
        record = bytearray(length)  # writable: a raw record becomes a tensor without a copy
        if os.preadv(fd, [record], offset) != length:
            raise StoreError(
                f"{self.files[shard]} is truncated at record {i}; run {rebuild_command(self.store)}, which builds "
                "it again."
            )
        return record

    def array(self, i: int) -> np.ndarray:
        """Image ``i`` as uint8 H x W x 3."""
        return self.format.decode(self.record(i), self.size)

    def __del__(self):
        if getattr(self, "_pid", -1) == os.getpid():
            for fd in self._fds.values():
                os.close(fd)


class StoreImages:
    """A store split as the stages read a dataset: ``(PIL image, label)`` in ImageFolder's order, with ``targets``.
    The image is the stored ``size x size`` one: the views' own ``Resize((size, size))`` then copies it unchanged."""

    def __init__(self, store: Path, split: str):
        self.reader = StoreReader(store, split)
        self.targets = self.reader.targets
        self.classes = self.reader.classes

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, i: int):
        return Image.fromarray(self.reader.array(i)), self.targets[i]
