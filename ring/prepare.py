"""The prepare stage: an image-folder dataset's prepared store (:mod:`ring.data.store`), built once on CPUs.

    ring prepare build  imagenet --data-root data --format jpeg95 [--workers 8]  # all of it, here
    ring prepare list   imagenet --data-root data --format jpeg95                # the workflow's steps:
    ring prepare shard  imagenet --data-root data --format jpeg95 --split train --shard 17
    ring prepare finish imagenet --data-root data --format jpeg95
    ring prepare check  imagenet --data-root data --format jpeg95 [--skip-checksums] [--touch OK]

The workflow (workflow/rules/prepare.smk) runs ``list`` once, ``shard`` once per shard (CPU jobs, in parallel here or
on the cluster) and ``finish`` once; ``build`` does the same in one process pool.  Every step resumes: a finished
listing or shard is kept, so an interrupted build (a preempted job, a full disk) continues where it stopped.
The store's size is the catalog's ``store_size`` of the dataset (ImageNet: 256, the paper's resize).
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ring.core import catalog
from ring.core.files import FileError, read_record, sha256_file, write_json
from ring.data import store, store_layout
from ring.data.folders import check


class Target:
    """One dataset's store: where it is, how it is made, and the image folders it is made from."""

    def __init__(self, dataset: str, data_root: str | Path, fmt: str, shard_images: int = store_layout.SHARD_IMAGES):
        spec = catalog.spec(dataset)
        if not getattr(spec, "store_size", 0) or not getattr(spec, "publisher_counts", None):
            stored = ", ".join(name for name, s in catalog.DATASETS.items() if s.store_size)
            raise ValueError(f"{dataset} has no prepared store (it is not an image folder); stored datasets: {stored}.")
        self._set(dataset, catalog.folder(dataset, data_root), fmt, spec.store_size, shard_images)
        self.counts = dict(zip(store_layout.SPLIT_FOLDERS, spec.publisher_counts, strict=True))

    def _set(self, dataset: str, folder: Path, fmt: str, size: int, shard_images: int) -> None:
        if fmt not in store.FORMATS:  # store: none is a cell's choice to read the files, not a store to build
            raise ValueError(
                f"A prepared store is built in {' or '.join(store.FORMATS)}, not {fmt!r}; pass --format "
                f"{' or --format '.join(store.FORMATS)}."
            )
        self.dataset, self.format, self.size, self.shard_images = dataset, fmt, size, shard_images
        self.folder, self.data_root = Path(folder), Path(folder).parent
        self.dir = store_layout.store_dir(self.folder, self.format, self.size)

    @classmethod
    def of_folder(cls, folder: Path, fmt: str, size: int, shard_images: int = store_layout.SHARD_IMAGES) -> Target:
        """The store of any image folder (``train/`` and ``val/`` below ``folder``) at ``size`` (the benchmarks'):
        its counts are what the listing finds, not a catalog's."""
        target = cls.__new__(cls)
        target._set(Path(folder).name, folder, fmt, size, shard_images)
        target.counts = {split: None for split in store_layout.SPLIT_FOLDERS}
        return target

    def shards(self, split: str) -> int:
        images = self.counts[split]
        if images is None:  # a folder outside the catalog: the listing says
            images = len(store.read_listing(self.dir / split)[1])
        return store_layout.n_shards(images, self.shard_images)

    def source(self, split: str) -> Path:
        return self.folder / store_layout.SPLIT_FOLDERS[split]

    def list(self) -> None:
        """Each split's listing, kept when it is there and matches the manifest of an earlier build (one damaged
        since is listed again); one sentence first when the images are not there or do not fit on the disk."""
        self.check_source()
        store_layout.check_room(self.dir, sum(n or 0 for n in self.counts.values()), self.format, self.size)
        recorded = read_record(self.dir / store_layout.MANIFEST).get("splits", {})
        for split, expected in self.counts.items():
            listing = self.dir / split / store_layout.SAMPLES
            sha = recorded.get(split, {}).get("listing", {}).get("sha256") if isinstance(recorded, dict) else None
            if not listing.is_file() or (sha is not None and sha256_file(listing) != sha):
                store.write_listing(self.dir / split, self.source(split), expected)

    def check_source(self) -> None:
        """The data check's sentence for a catalog dataset whose image folders are not there (a missing data root
        included), a plain one for another folder."""
        if self.dataset in catalog.DATASETS and self.folder == catalog.folder(self.dataset, self.data_root):
            check(self.dataset, self.data_root)
        for split in store_layout.SPLIT_FOLDERS:
            if not self.source(split).is_dir():
                raise ValueError(
                    f"{self.source(split)} is not a folder; the store is built from {self.folder}/train and "
                    f"{self.folder}/val, one folder per class in each."
                )

    def shard(self, split: str, shard: int) -> dict:
        return store.build_shard(self.dir / split, self.source(split), shard, self.format, self.size, self.shard_images)

    def finish(self) -> dict:
        return store.finish(self.dir, self.format, self.size, self.dataset, self.shard_images)


def _build_one(args: tuple[Target, str, int]) -> int:
    target, split, shard = args
    return target.shard(split, shard)["images"]


def build(target: Target, workers: int) -> dict:
    target.list()
    jobs = [(target, split, shard) for split in store_layout.SPLIT_FOLDERS for shard in range(target.shards(split))]
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            done = sum(pool.map(_build_one, jobs))
    else:
        done = sum(map(_build_one, jobs))
    print(f"prepare: {done:,} images in {len(jobs)} shards of {target.dir}", flush=True)
    return target.finish()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Build or check an image-folder dataset's prepared store.")
    parser.add_argument("command", choices=["build", "list", "shard", "finish", "check"])
    parser.add_argument("dataset")
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--format", default="jpeg95", help=f"{' or '.join(store.FORMATS)}")
    parser.add_argument("--split", choices=list(store_layout.SPLIT_FOLDERS), help="shard: the split")
    parser.add_argument("--shard", type=int, help="shard: its number")
    parser.add_argument("--shard-images", type=int, default=store_layout.SHARD_IMAGES, help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=1, help="build: processes")
    parser.add_argument("--skip-checksums", action="store_true", help="check: sizes only, no SHA-256 of the shards")
    parser.add_argument("--touch", type=Path, help="check: write this stamp when the store passes")
    args = parser.parse_args(argv)
    try:
        target = Target(args.dataset, args.data_root, args.format, args.shard_images)
        if args.command == "build":
            build(target, args.workers)
        elif args.command == "list":
            target.list()
        elif args.command == "shard":
            if args.split is None or args.shard is None or not 0 <= args.shard < target.shards(args.split):
                raise ValueError(f"shard needs --split and --shard in 0..{target.shards(args.split or 'train') - 1}.")
            target.shard(args.split, args.shard)
        elif args.command == "finish":
            target.finish()
        else:
            checksums = not args.skip_checksums
            manifest = store_layout.verify(target.dir, target.format, target.size, checksums, every_image=checksums)
            print(
                f"prepare: {target.dir} holds {store_layout.size_text(manifest['bytes'])}, as its manifest says",
                flush=True,
            )
            if args.touch:
                # The store as checked (the workflow checks it again once this changes: store_changed).
                stamp = {
                    "store": str(target.dir),
                    "checksums": checksums,
                    "fingerprint": store_layout.fingerprint(target.dir),
                }
                write_json(args.touch, stamp)
    except (ValueError, FileError, catalog.DatasetMissing) as err:
        print(f"ring: {err}", file=sys.stderr)
        return 1
    except OSError as err:  # a file of the image folder or the store that cannot be read or written
        print(
            f"ring: {args.dataset}'s store cannot be prepared ({err}); fix the file or its permissions and rerun.",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
