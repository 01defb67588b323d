"""``ring fetch``: download the datasets a user names, or every dataset a grid reads, from their publishers.

    ring fetch cifar10 cub [--data-root data] [--mirror https://mirror.example/datasets]
    ring fetch --grid paper          # every dataset the grid reads (detection: coco, voc2007, voc2012)

The command (``python -m ring.fetch``, what the workflow's ``fetch_data`` rule runs) reads the grid (:mod:`ring.plan`);
each dataset is fetched, verified and unpacked by :func:`ring.data.download.fetch`, which knows no grid.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ring import resources
from ring.data.download import FetchError, fetch
from ring.plan import grid


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="ring fetch", description="Download datasets from their publishers, verify and unpack them."
    )
    parser.add_argument("names", nargs="*", metavar="NAME")
    parser.add_argument(
        "--grid", help="every dataset of a grid: a name (ring/resources/grids/GRID.yaml) or a grid file's path"
    )
    parser.add_argument("--grids-dir", type=Path, default=resources.GRIDS)
    parser.add_argument("--data-root", default="data")
    parser.add_argument("--mirror", help="fetch URL/<host>/<path> instead of each publisher's URL")
    parser.add_argument(
        "--detectron2-root",
        help="Detectron2's datasets folder (default $DETECTRON2_DATASETS, else <data-root>/detectron2)",
    )
    args = parser.parse_args(argv)
    names = list(args.names)
    try:
        if args.grid:
            names += grid.datasets_read(grid.load(grid.resolve(args.grid, args.grids_dir)))
        if not names:
            raise FetchError("Name datasets to fetch, or --grid GRID.")
    except (FetchError, ValueError) as err:
        print(f"ring: {err}", file=sys.stderr)
        return 1
    det_root = args.detectron2_root or os.environ.get("DETECTRON2_DATASETS")
    failed = 0
    for name in dict.fromkeys(names):
        try:
            print(fetch(name, args.data_root, args.mirror, det_root), flush=True)
        except FetchError as err:
            print(f"ring: {name}: {err}", file=sys.stderr, flush=True)
            failed += 1
    if failed:
        print(f"ring: {failed} of {len(set(names))} datasets not fetched (above)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
