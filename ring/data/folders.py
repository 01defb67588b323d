"""A dataset's folder against its catalog entry (:mod:`ring.core.catalog`), torch-free: the data check.

The data check (``ring check``, the workflow's ``data_check`` rule) finds a missing dataset and says in one sentence
how to get it (:func:`check`); it downloads nothing.  It also verifies the contents against what the publisher
publishes (:func:`ring.data.verify.verify`, beside torchvision, whose lists it reads; the rest of it is here):
torchvision's md5 of every file that has one (CIFAR10/100 batches, STL10's binaries), the publisher's image counts for
the others.  A passing verification is cached in a stamp keyed by the size and modification time of every file and
folder it read, so it runs once per dataset and again only when one changes.  A folder that
``ring.data.download`` filled and stamped (``.ring-fetch.json``) is not hashed again while the stamp still describes it
(:func:`fetched_from_publisher`).  The transfer datasets' listings are parsed by :mod:`ring.data.listings`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

from ring.core.catalog import FETCH_STAMP, TRANSFER, DatasetMissing, folder, hint, spec
from ring.core.refs import resolve
from ring.data.listings import PART, SPLITS, Listing


def check(name: str, data_root: str | Path) -> None:
    """Raise :class:`DatasetMissing` with one sentence if ``name`` is not usable under ``data_root``."""
    s = spec(name)
    if not s.required:
        return
    root = Path(data_root)
    how = hint(name, root)
    if not root.is_dir():
        raise DatasetMissing(
            f"Data root {root} does not exist; create it and put the datasets below it ({name}: {how}), "
            "or set data_root in the config."
        )
    base = folder(name, root)
    for rel in s.required:
        if not (base / rel).exists():
            raise DatasetMissing(f"Dataset {name} is missing {base / rel}; {how}.")
    if name in TRANSFER:
        check_listing(name, root, how)
    if getattr(s, "store_size", 0):  # image folders (transfer datasets have their own layouts)
        for split in ("train", "val"):
            if not any(p.is_dir() for p in (base / split).iterdir()):
                raise DatasetMissing(f"{base / split} has no class folders; {how}.")


def fetched_from_publisher(name: str, data_root: str | Path) -> dict | None:
    """ring.data.download's stamp of ``name``'s folder when it vouches for what the comparison with the
    publisher checks, so that the data check need not hash the files again; else None.

    The stamp is only JSON (never unpickled), read by these rules, each for a reason:

    * it names this dataset and this very folder (resolved): a folder copied or moved elsewhere,
      stamp included, was not checked where it is now;
    * every archive in it has the publisher's md5 and the md5 that ring.data.download measured, equal: the
      fetch refuses a mismatch, so this says the archives were verified against the publisher.  A
      publisher that publishes no checksum (FGVC-Aircraft) leaves nothing verified, so its folder
      is compared with the publisher's counts as any other;
    * the folder still has the sizes and modification times it had when the fetch, having unpacked
      the verified archives, passed the layout check (its ``fingerprint``, the one of
      :func:`fingerprint`): replacing or truncating a file that the comparison reads (the md5-listed
      files and the annotation files that give the counts sit beside the required files), or adding
      or removing entries of the image folders, changes it, and the full comparison runs.  A change
      that keeps sizes and times is not seen, the same trust as the verified stamp of :func:`verify`
      (delete ``.ring-fetch.json`` to force hashing).

    What :func:`check` checks (layout, listings, every listed file present) runs in any case.
    """
    base = folder(name, data_root)
    try:
        stamp = json.loads((base / FETCH_STAMP).read_text())
        archives = stamp["files"]
        trusted = (
            stamp["dataset"] == name
            and Path(stamp["folder"]).resolve() == base.resolve()
            and isinstance(archives, list)
            and archives
            and all(a["publisher_md5"] is not None and a["md5"] == a["publisher_md5"] for a in archives)
            and stamp.get("fingerprint") == fingerprint(name, data_root) != ""
        )
    except (OSError, ValueError, KeyError, TypeError):  # no stamp, or a torn or foreign one
        return None
    if not trusted:
        return None
    return {
        "stamp": str(base / FETCH_STAMP),
        "fetched_at": stamp.get("fetched_at"),
        "archives": {a["file"]: a["md5"] for a in archives},
    }


VERIFIED_SUFFIX = ".verified.json"


def md5_of(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _counts(name: str, data_root: Path) -> tuple[dict[str, int], list[Path]]:
    """Images per split and the folders counted: the transfer listing, or ImageNet's class folders."""
    base = folder(name, data_root)
    if name in TRANSFER:
        splits = listing(name, data_root)
        return {split: len(items) for split, items in splits.items()}, [base / rel for rel in spec(name).required]
    counts, read = {}, []
    for split in ("train", "val"):
        classes = sorted(p for p in (base / split).iterdir() if p.is_dir())
        counts[split] = sum(sum(1 for e in os.scandir(c) if e.is_file()) for c in classes)
        read += [base / split, *classes]
    return counts, read


def _fingerprint(paths: list[Path], base: Path) -> dict[str, list[int]]:
    """Size and modification time of every file and folder a verification read."""
    stats = {}
    for path in paths:
        st = path.stat()
        stats[str(path.relative_to(base))] = [st.st_size, st.st_mtime_ns]
    return stats


def fingerprint(name: str, data_root: str | Path) -> str:
    """A digest of the size and modification time of the dataset's files, in a few stats, torch-free.

    Each required file with its sibling files (but the fetch stamp), each required folder with its
    subfolders (a folder's time changes when an entry is added or removed).  The workflow reruns the
    data check when it changes; "" for a dataset with no files here (embedded, or not there yet: the
    check says so).
    """
    base = folder(name, data_root)
    paths = set()
    for rel in spec(name).required:
        path = base / rel
        if path.is_file():  # not the fetch stamp, written after the fetch took this fingerprint
            paths.update(p for p in path.parent.iterdir() if p.is_file() and p.name != FETCH_STAMP)
        elif path.is_dir():
            paths.update([path, *(p for p in path.iterdir() if p.is_dir())])
    if not paths:
        return ""
    stats = [(str(p.relative_to(base)), p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(paths)]
    return hashlib.sha256(json.dumps(stats).encode()).hexdigest()[:16]


# -- the transfer datasets' listings and manifests (the parsers: ring.data.listings) -----------------


@functools.lru_cache(maxsize=4)
def _listing(name: str, base: str) -> Listing:
    return resolve(TRANSFER[name].listing)(Path(base))


def listing(name: str, data_root: str | Path) -> Listing:
    """The dataset's train/test split; one sentence naming the problem if an annotation file is bad."""
    base = folder(name, data_root)
    how = hint(name, data_root)
    try:
        return _listing(name, str(base))
    except FileNotFoundError as err:
        raise DatasetMissing(f"Dataset {name} is missing {err.filename}; {how}.") from None
    except (OSError, ValueError, KeyError, IndexError, TypeError) as err:
        raise DatasetMissing(
            f"Dataset {name} under {base} has an unreadable annotation file "
            f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); {how}."
        ) from None


def check_listing(name: str, data_root: str | Path, hint: str) -> None:
    """Every split non-empty, labels in range, every listed file present (called by check)."""
    s = spec(name)
    base = folder(name, data_root)
    for split, items in listing(name, data_root).items():
        if not items:
            raise DatasetMissing(f"Dataset {name} lists no {split} images under {base}; {hint}.")
        bad = [label for _, label in items if not 0 <= label < s.num_classes]
        if bad:
            raise DatasetMissing(f"Dataset {name} has {split} label {bad[0]} outside 0..{s.num_classes - 1}; {hint}.")
        files = dict.fromkeys(rel.partition(PART)[0] for rel, _ in items)
        missing = [f for f in files if not (base / f).is_file()]
        if missing:
            raise DatasetMissing(
                f"Dataset {name} lists {len(files)} {split} image files but {len(missing)} are missing "
                f"(first: {base / missing[0]}); {hint}."
            )


def manifest(name: str, data_root: str | Path) -> dict:
    """The split manifest: every (file, label) of both splits and a SHA-256 over them."""
    splits = listing(name, data_root)
    files = {split: [[rel, label] for rel, label in splits[split]] for split in SPLITS}
    s = spec(name)
    counts = [len(files[split]) for split in SPLITS]
    return {
        "dataset": name,
        "folder": str(folder(name, data_root)),
        "split": s.split,
        "counts": dict(zip(SPLITS, counts, strict=True)),
        "publisher_counts": None if s.publisher_counts is None else dict(zip(SPLITS, s.publisher_counts, strict=True)),
        "matches_publisher": None if s.publisher_counts is None else tuple(counts) == s.publisher_counts,
        "sha256": hashlib.sha256(json.dumps(files, separators=(",", ":")).encode()).hexdigest(),
        "files": files,
    }
