"""The transfer datasets of Table 3 (Meta-Dataset's nine image sets): loaders; their listings and
manifests are :mod:`ring.plan.listings` (torch-free, re-exported here).

Each dataset is read in the layout its publisher distributes (``ring.plan.catalog.TRANSFER`` says where
it goes and how to get it).  A dataset's **listing** is its documented, deterministic train/test
split as ``(file, label)`` pairs, parsed from the publisher's annotation files without torch, so
that the data check (``ring check``) and the workflow client stay light.  Items
that are not whole files name their part: ``MNIST/raw/train-images-idx3-ubyte#17`` (the 18th image
of an idx file), ``train2017/000000000009.jpg#1,187,613,474`` (a COCO box, left,top,right,bottom).

The **split manifest** is the listing plus a SHA-256 over it (paths relative to the dataset
folder, so two labs with different data roots get the same checksum when they evaluate the same
images with the same labels).

Loaders use torchvision's classes where they exist (FGVCAircraft, DTD, MNIST, FashionMNIST, GTSRB)
and are checked against the listing, so the manifest describes exactly what was evaluated;
CUB-200-2011, the FGVCx Fungi json release, VGG Flowers (torchvision's class insists on the
publisher's md5 of the .mat files, so it cannot read a test fixture) and MSCOCO object crops have
their own.  Every loader returns RGB images: grayscale sets are replicated to three channels.
torch and torchvision are imported only when a dataset is loaded.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ring.plan import catalog
from ring.plan.catalog import DatasetMissing, _listing, check_listing, listing, manifest  # noqa: F401  (this module's names before)
from ring.plan.listings import (  # noqa: F401
    DTD_PARTS,
    GENERATED,
    GENERATORS,
    LISTINGS,
    PART,
    SPLITS,
    Item,
    Listing,
    generate_shapes,
    per_class_split,
)


# -- loaders (torch imported here only) --------------------------------------------------------------
class FileImages:
    """Images listed as (file, label) below ``base``, opened with PIL as RGB."""

    def __init__(self, base: Path, items: list[Item]):
        self.base, self.items = Path(base), list(items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        from PIL import Image

        rel, label = self.items[i]
        path, _, part = rel.partition(PART)
        with Image.open(self.base / path) as img:
            img = img.convert("RGB")
            if part:  # a COCO box: left, top, right, bottom
                img = img.crop(tuple(int(v) for v in part.split(",")))
        return img, label


class RGBParts:
    """torchvision datasets (one or several concatenated), their images converted to RGB."""

    def __init__(self, parts: list):
        self.parts = parts
        self.offsets = np.cumsum([0, *map(len, parts)])

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getitem__(self, i: int):
        k = int(np.searchsorted(self.offsets, i, side="right")) - 1
        img, label = self.parts[k][i - int(self.offsets[k])]
        return img.convert("RGB"), int(label)

    def items(self, base: Path) -> list[tuple[str | None, int]]:
        """(file relative to base, label) of every image; file is None for array datasets (MNIST)."""
        out = []
        for ds in self.parts:
            if hasattr(ds, "targets"):
                out += [(None, int(t)) for t in ds.targets.tolist()]
            else:
                pairs = ds._samples if hasattr(ds, "_samples") else zip(ds._image_files, ds._labels, strict=True)
                out += [(Path(p).relative_to(base).as_posix(), int(label)) for p, label in pairs]
        return out


def _torchvision(make_parts: Callable[[Path, str], list]) -> Callable[[Path, str, list[Item]], RGBParts]:
    def build(base: Path, split: str, listing: list[Item]) -> RGBParts:
        dataset = RGBParts(make_parts(base, split))
        got = dataset.items(base)
        # Array datasets have no per-image file to compare: their labels must agree.
        want = [(None if path is None else rel, label) for (path, _), (rel, label) in zip(got, listing, strict=True)]
        if len(got) != len(listing) or got != want:
            raise DatasetMissing(
                f"torchvision reads {len(got)} {split} images (or other labels) from {base} where its "
                f"annotation files list {len(listing)}; extract the dataset again from its publisher's archives."
            )
        return dataset

    return build


def _tv_aircraft(base: Path, split: str) -> list:
    from torchvision.datasets import FGVCAircraft

    return [FGVCAircraft(str(base), split={"train": "trainval", "test": "test"}[split], annotation_level="variant")]


def _tv_dtd(base: Path, split: str) -> list:
    from torchvision.datasets import DTD

    return [DTD(str(base), split=part, partition=1) for part in DTD_PARTS[split]]


def _tv_idx(cls_name: str) -> Callable[[Path, str], list]:
    def parts(base: Path, split: str) -> list:
        import torchvision.datasets as tvd

        return [getattr(tvd, cls_name)(str(base), train=(split == "train"))]

    return parts


def _tv_gtsrb(base: Path, split: str) -> list:
    from torchvision.datasets import GTSRB

    return [GTSRB(str(base), split=split)]


def _files(base: Path, split: str, listing: list[Item]) -> FileImages:
    return FileImages(base, listing)


@dataclass(frozen=True)
class TransferDataset:
    listing: Callable[[Path], Listing]
    build: Callable[[Path, str, list[Item]], object]  # (folder, split, that split's listing) -> dataset


TRANSFER_DATASETS: dict[str, TransferDataset] = {
    "aircraft": TransferDataset(LISTINGS["aircraft"], _torchvision(_tv_aircraft)),
    "cub": TransferDataset(LISTINGS["cub"], _files),
    "dtd": TransferDataset(LISTINGS["dtd"], _torchvision(_tv_dtd)),
    "fungi": TransferDataset(LISTINGS["fungi"], _files),
    "mnist": TransferDataset(LISTINGS["mnist"], _torchvision(_tv_idx("MNIST"))),
    "fashion_mnist": TransferDataset(LISTINGS["fashion_mnist"], _torchvision(_tv_idx("FashionMNIST"))),
    "traffic_sign": TransferDataset(LISTINGS["traffic_sign"], _torchvision(_tv_gtsrb)),
    "vgg_flower": TransferDataset(LISTINGS["vgg_flower"], _files),
    "mscoco": TransferDataset(LISTINGS["mscoco"], _files),
    "shapes": TransferDataset(LISTINGS["shapes"], _files),
}
assert TRANSFER_DATASETS.keys() == catalog.TRANSFER.keys()


def load(name: str, data_root: str | Path, split: str):
    """The ``split`` ("train" or "test") of transfer dataset ``name``: (RGB PIL image, label) pairs."""
    catalog.check(name, data_root)
    base = catalog.folder(name, data_root)
    try:
        return TRANSFER_DATASETS[name].build(base, split, listing(name, data_root)[split])
    except DatasetMissing:
        raise
    except (RuntimeError, OSError) as err:  # torchvision's "Dataset not found or corrupted"
        hint = catalog.hint(name, data_root)
        raise DatasetMissing(
            f"Dataset {name} under {base} is incomplete or corrupted ({str(err).splitlines()[0]}); {hint}."
        ) from None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Generate an embedded transfer dataset, or print a split manifest.")
    parser.add_argument("command", choices=["generate", "manifest"])
    parser.add_argument("dataset")
    parser.add_argument("--data-root", required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "generate":
            if args.dataset not in GENERATORS:
                raise ValueError(f"{args.dataset} is not generated; generated datasets: {', '.join(GENERATORS)}.")
            GENERATORS[args.dataset](catalog.folder(args.dataset, args.data_root))
            print(f"{args.dataset}: generated under {catalog.folder(args.dataset, args.data_root)}")
        else:
            doc = manifest(args.dataset, args.data_root)
            print(json.dumps({k: v for k, v in doc.items() if k != "files"}, indent=2))
    except (DatasetMissing, ValueError) as err:
        print(f"ring: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
