"""The data check against the publisher (``ring check``, ``python -m ring.data.verify check``):
:func:`ring.data.folders.check`, then torchvision's md5 lists and the publisher's image counts
(:func:`verify`).  Here, not in the torch-free catalog, because the md5 lists are torchvision's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ring.core.catalog import DATASETS, SKIP_HINT, DatasetMissing, folder, hint, loader_verifies, skip_refusal, spec
from ring.core.files import FileError, unwritable, unwritable_below, write_json
from ring.data.folders import (
    VERIFIED_SUFFIX,
    _counts,
    _fingerprint,
    check,
    fetched_from_publisher,
    md5_of,
)


def published_md5(name: str) -> dict[str, str]:
    """{path below <data_root>/<name>: md5} of torchvision's lists for ``name`` (empty if it has none)."""
    cls_name = getattr(spec(name), "torchvision_md5", None)
    if cls_name is None:
        return {}
    from torchvision import datasets as tvd  # only here: the rest of the catalog stays torch-free

    cls = getattr(tvd, cls_name)
    files = [*cls.train_list, *cls.test_list]
    if isinstance(getattr(cls, "meta", None), dict):
        files.append([cls.meta["filename"], cls.meta["md5"]])
    return {f"{cls.base_folder}/{file}": md5 for file, md5 in files}


def _still_verified(stamp: Path | None, base: Path, skip_checksums: bool) -> dict | None:
    """The record of an earlier passing verification of this folder, while every file it read is unchanged."""
    if stamp is None or not stamp.is_file():
        return None
    try:
        previous = json.loads(stamp.read_text())
        if (
            previous["folder"] == str(base.resolve())
            and (skip_checksums or not previous["skip_checksums"])
            and previous["fingerprint"] == _fingerprint([base / rel for rel in previous["fingerprint"]], base)
        ):
            return previous
    except (OSError, ValueError, KeyError, TypeError):
        pass  # a stale, torn or foreign stamp: verify again
    return None


def _check_md5s(name: str, base: Path, how: str) -> dict[str, str]:
    """torchvision's md5 of each file that has one against the file's, by path below the dataset folder."""
    md5s = {}
    for rel, expected in published_md5(name).items():
        path = base / rel
        if not path.is_file():
            raise DatasetMissing(f"Dataset {name} is missing {path}; {how}.")
        actual = md5_of(path)
        if actual != expected:
            raise DatasetMissing(
                f"Dataset {name} file {path} is corrupted or truncated: its md5 is {actual}, the publisher's "
                f"(torchvision's) is {expected}; replace the file ({how})."
            )  # no skip_checksums: see loader_verifies
        md5s[rel] = actual
    return md5s


def _check_counts(name: str, root: Path, how: str, skip_checksums: bool) -> tuple[dict[str, int], list[Path]]:
    """The images of each split (and the folders counted), against the publisher's counts unless skipped."""
    s, base = spec(name), folder(name, root)
    counts, counted = _counts(name, root)
    if name in DATASETS and not skip_checksums:  # ImageNet: one folder per class in each split
        for split in counts:
            n = sum(1 for p in (base / split).iterdir() if p.is_dir())
            if n != s.num_classes:
                raise DatasetMissing(
                    f"Dataset {name}'s {base / split} holds {n} class folders, the publisher's "
                    f"release has {s.num_classes}; complete it ({how}), {SKIP_HINT}."
                )
    if not skip_checksums and tuple(counts.values()) != tuple(s.publisher_counts):
        found = ", ".join(f"{n} {split}" for split, n in counts.items())
        raise DatasetMissing(
            f"Dataset {name} under {base} holds {found} images, the publisher's release has "
            f"{' and '.join(map(str, s.publisher_counts))}; complete it ({how}), {SKIP_HINT}."
        )
    return counts, counted


def verify(name: str, data_root: str | Path, skip_checksums: bool = False, stamp_dir: str | Path | None = None) -> dict:
    """:func:`check`, then the contents against the publisher; returns the record (also the stamp).

    Checksums: torchvision's md5 of each file that has one; counts: the publisher's image counts
    (ImageNet, the transfer sets).  ``skip_checksums``: only the layout and listings are checked (a
    user's own modified copy, the test fixtures), and the record says so.  ``stamp_dir``: where the
    record of a passing verification is kept, reused while every file and folder it read keeps its
    size and modification time.
    """
    check(name, data_root)
    if skip_checksums and loader_verifies(name):
        raise DatasetMissing(skip_refusal(name))
    root = Path(data_root)
    base = folder(name, root)
    how = hint(name, root)
    stamp = Path(stamp_dir) / f"{name}{VERIFIED_SUFFIX}" if stamp_dir is not None else None
    previous = _still_verified(stamp, base, skip_checksums)
    if previous is not None:
        return previous
    record = {"dataset": name, "folder": str(base.resolve()), "skip_checksums": skip_checksums, "md5": {}, "counts": {}}
    read = [base / rel for rel in spec(name).required]
    fetched = None if skip_checksums else fetched_from_publisher(name, root)
    if fetched is not None:
        record["fetched"] = fetched
    elif not skip_checksums:
        record["md5"] = _check_md5s(name, base, how)
        read += [base / rel for rel in record["md5"]]
    if getattr(spec(name), "publisher_counts", None) is not None and fetched is None:
        record["counts"], counted = _check_counts(name, root, how, skip_checksums)
        read += counted
    record["checksums"] = (
        "skipped (skip_checksums): layout and listings only"
        if skip_checksums
        else f"verified by ring.data.download on {fetched['fetched_at']} (the publisher's md5 of its archives)"
        if fetched is not None
        else "verified against the publisher"
    )
    record["fingerprint"] = _fingerprint(list(dict.fromkeys(read)), base)
    if stamp is not None:
        write_json(stamp, record, indent=1)
    return record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Check that a dataset is present and intact under the data root.")
    parser.add_argument("command", choices=["check"])
    parser.add_argument("dataset")
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--touch", help="file to create when the check passes")
    parser.add_argument(
        "--skip-checksums",
        action="store_true",
        help="check layout and listings only, not md5s and publisher counts (a modified copy)",
    )
    parser.add_argument("--stamp-dir", help="folder of the verified stamps (<dataset>.verified.json), so it runs once")
    parser.add_argument(
        "--writable",
        action="append",
        default=[],
        help="a results folder that the jobs will write (checked before any of them runs)",
    )
    args = parser.parse_args(argv)
    try:
        for path in args.writable:  # a folder still to be created: its nearest existing parent decides
            if problem := unwritable(path) or unwritable_below(path):
                raise PermissionError(problem)
        record = verify(args.dataset, args.data_root, args.skip_checksums, args.stamp_dir)
    except (DatasetMissing, ValueError, PermissionError, FileError) as err:
        print(f"ring: {err}", file=sys.stderr)
        return 1
    except OSError as err:  # unreadable file (I/O error, permissions) met while verifying
        print(
            f"ring: Dataset {args.dataset} cannot be read under {args.data_root} ({err}); fix the file or its "
            "permissions.",
            file=sys.stderr,
        )
        return 1
    if args.touch:
        try:
            write_json(args.touch, record, indent=1)  # the folder is created
        except FileError as err:
            print(f"ring: {err}", file=sys.stderr)
            return 1
    print(f"{args.dataset}: present under {args.data_root}; checksums {record['checksums']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
