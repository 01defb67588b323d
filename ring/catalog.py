"""The dataset catalog, free of torch so that the workflow client can read it.

Every dataset lives under ``<data_root>/<name>/`` in the layout its publisher (or torchvision's
downloader, given that folder as ``root``) produces.  The check downloads nothing: a missing
dataset is reported by :func:`check` with one sentence saying where to put it
(``python -m ring.catalog fetch`` downloads, see :mod:`ring.fetch`).  Loaders live in
:mod:`ring.datasets`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path


class DatasetMissing(FileNotFoundError):
    """A dataset is absent or incomplete under the data root."""


@dataclass(frozen=True)
class DatasetSpec:
    display: str  # column name in the paper's tables
    num_classes: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    required: tuple[str, ...]  # files or folders below <data_root>/<name> that must exist
    how_to_get: str


def _torchvision_hint(cls: str, name: str, extra: str = "") -> str:
    return (f"run `python -c \"import torchvision; torchvision.datasets.{cls}('<data_root>/{name}'{extra}, download=True)\"` "
            "on a machine with internet and copy the folder there")


DATASETS: dict[str, DatasetSpec] = {
    # The embedded default: scikit-learn's UCI optical digits, real 8x8 grey images (see ring.datasets).
    "digits": DatasetSpec(
        display="Digits", num_classes=10,
        # Mean/std of the training split's 0..255 pixels (asserted by tests/test_datasets.py).
        mean=(0.3053,) * 3, std=(0.3758,) * 3,
        required=(), how_to_get="it ships inside scikit-learn; install scikit-learn",
    ),
    "cifar10": DatasetSpec(
        display="CIFAR10", num_classes=10,
        mean=(0.4914, 0.4822, 0.4465), std=(0.2470, 0.2435, 0.2616),
        required=("cifar-10-batches-py/data_batch_1", "cifar-10-batches-py/data_batch_5", "cifar-10-batches-py/test_batch"),
        how_to_get=_torchvision_hint("CIFAR10", "cifar10"),
    ),
    "cifar100": DatasetSpec(
        display="CIFAR100", num_classes=100,
        mean=(0.5071, 0.4865, 0.4409), std=(0.2673, 0.2564, 0.2762),
        required=("cifar-100-python/train", "cifar-100-python/test"),
        how_to_get=_torchvision_hint("CIFAR100", "cifar100"),
    ),
    "stl10": DatasetSpec(
        display="STL10", num_classes=10,
        mean=(0.4467, 0.4398, 0.4066), std=(0.2603, 0.2566, 0.2713),
        required=("stl10_binary/train_X.bin", "stl10_binary/test_X.bin", "stl10_binary/unlabeled_X.bin"),
        how_to_get=_torchvision_hint("STL10", "stl10", ", split='train+unlabeled'"),
    ),
    "imagenet": DatasetSpec(
        display="ImageNet", num_classes=1000,
        mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
        required=("train", "val"),
        how_to_get="download ILSVRC2012 from image-net.org and lay it out as <data_root>/imagenet/{train,val}/<wnid>/*.JPEG "
                   "(validation images sorted into class folders)",
    ),
}


@dataclass(frozen=True)
class TransferSpec:
    """A dataset that CIFAR10 encoders are transferred to (Table 3).  Its input normalisation is not
    a constant: it is computed from the training split (:mod:`ring.metadataset`)."""

    display: str  # column name in Table 3
    num_classes: int
    required: tuple[str, ...]  # annotation files (and image folders) below <data_root>/<name>
    how_to_get: str
    split: str  # the documented, deterministic train/test split
    publisher_counts: tuple[int, int] | None  # (train, test) images of the full release; None: depends on filters


_FUNGI_HINT = (
    "the FGVCx Fungi 2018 release (fungi_train_val.tgz and train_val_annotations.tgz) has moved from its original "
    "labs.gbif.org links: find the current links in the README of github.com/visipedia/fgvcx_fungi_comp (or Meta-Dataset's "
    "conversion instructions), then extract both archives into <data_root>/fungi so that it holds train.json, val.json "
    "and images/"
)

def _idx_spec(cls: str, name: str) -> TransferSpec:
    """MNIST and FashionMNIST: the publisher's idx files, where torchvision puts them (<root>/<cls>/raw)."""
    return TransferSpec(
        display=cls, num_classes=10,
        required=tuple(f"{cls}/raw/{split}-{kind}" for split in ("train", "t10k") for kind in ("images-idx3-ubyte", "labels-idx1-ubyte")),
        how_to_get=_torchvision_hint(cls, name),
        split="the publisher's 60,000 train / 10,000 t10k images",
        publisher_counts=(60000, 10000),
    )


TRANSFER: dict[str, TransferSpec] = {
    # The nine Meta-Dataset image sets of Table 3, each in the layout its publisher (or torchvision's
    # downloader with root=<data_root>/<name>) produces.  README "Transfer (Table 3)" lists them.
    "aircraft": TransferSpec(
        display="Aircraft", num_classes=100,
        required=("fgvc-aircraft-2013b/data/variants.txt", "fgvc-aircraft-2013b/data/images_variant_trainval.txt",
                  "fgvc-aircraft-2013b/data/images_variant_test.txt", "fgvc-aircraft-2013b/data/images"),
        how_to_get=_torchvision_hint("FGVCAircraft", "aircraft"),
        split="the publisher's variant-level images_variant_trainval.txt / images_variant_test.txt",
        publisher_counts=(6667, 3333),
    ),
    "cub": TransferSpec(
        display="CUBirds", num_classes=200,
        required=("CUB_200_2011/images.txt", "CUB_200_2011/image_class_labels.txt",
                  "CUB_200_2011/train_test_split.txt", "CUB_200_2011/images"),
        how_to_get="download CUB_200_2011.tgz from data.caltech.edu/records/65de6-vzc43 and extract it into <data_root>/cub",
        split="the publisher's CUB_200_2011/train_test_split.txt (1 = train, 0 = test)",
        publisher_counts=(5994, 5794),
    ),
    "dtd": TransferSpec(
        display="DTD", num_classes=47,
        required=("dtd/dtd/labels/train1.txt", "dtd/dtd/labels/val1.txt", "dtd/dtd/labels/test1.txt", "dtd/dtd/images"),
        how_to_get=_torchvision_hint("DTD", "dtd"),
        split="the publisher's split 1: labels/train1.txt + val1.txt for training, labels/test1.txt for testing",
        publisher_counts=(3760, 1880),
    ),
    "fungi": TransferSpec(
        display="Fungi", num_classes=1394,
        required=("train.json", "val.json", "images"),
        how_to_get=_FUNGI_HINT,
        split="the FGVCx 2018 competition's train.json for training and val.json for testing (its test labels are private)",
        publisher_counts=(85578, 4182),
    ),
    "mnist": _idx_spec("MNIST", "mnist"),
    "fashion_mnist": _idx_spec("FashionMNIST", "fashion_mnist"),
    "traffic_sign": TransferSpec(
        display="TrafficSign", num_classes=43,
        required=("gtsrb/GT-final_test.csv", "gtsrb/GTSRB/Training", "gtsrb/GTSRB/Final_Test/Images"),
        how_to_get=_torchvision_hint("GTSRB", "traffic_sign", ", split='test'") + " (and again with split='train')",
        split="GTSRB's training images (GTSRB/Training/<class>/*.ppm) / its final test set (GT-final_test.csv)",
        publisher_counts=(26640, 12630),
    ),
    "vgg_flower": TransferSpec(
        display="VGGFlower", num_classes=102,
        required=("flowers-102/imagelabels.mat", "flowers-102/setid.mat", "flowers-102/jpg"),
        how_to_get=_torchvision_hint("Flowers102", "vgg_flower"),
        split="the publisher's setid.mat: trnid + valid for training, tstid for testing",
        publisher_counts=(2040, 6149),
    ),
    "mscoco": TransferSpec(
        display="MSCOCO", num_classes=80,
        required=("annotations/instances_train2017.json", "annotations/instances_val2017.json", "train2017", "val2017"),
        how_to_get="download train2017.zip, val2017.zip and annotations_trainval2017.zip from cocodataset.org/#download "
                   "and extract them into <data_root>/mscoco",
        split="object crops (non-crowd boxes of at least 32x32 pixels) of train2017 for training, of val2017 for "
              "testing, at most 500 / 100 per class drawn with seed 0",
        publisher_counts=None,
    ),
    # The embedded default's transfer column: procedurally generated shapes (ring.metadataset),
    # written as PNG class folders plus generated.json, split 80/20 per class with seed 0 as for a
    # dataset that ships no split.
    "shapes": TransferSpec(
        display="Shapes", num_classes=6,
        required=("generated.json",),
        how_to_get="generate it with `python -m ring.metadataset generate shapes --data-root <data_root>` "
                   "(the smoke workflow does this itself)",
        split="80/20 per class with seed 0",
        publisher_counts=(288, 72),
    ),
}
assert not TRANSFER.keys() & DATASETS.keys()


def spec(name: str) -> DatasetSpec | TransferSpec:
    if name in TRANSFER:
        return TRANSFER[name]
    if name not in DATASETS:
        raise ValueError(f"Unknown dataset {name!r}; choose one of {', '.join([*DATASETS, *TRANSFER])}.")
    return DATASETS[name]


def folder(name: str, data_root: str | Path) -> Path:
    return Path(data_root) / name


def check(name: str, data_root: str | Path) -> None:
    """Raise :class:`DatasetMissing` with one sentence if ``name`` is not usable under ``data_root``."""
    s = spec(name)
    if not s.required:
        return
    root = Path(data_root)
    hint = s.how_to_get.replace("<data_root>", str(root))
    if not root.is_dir():
        raise DatasetMissing(
            f"Data root {root} does not exist; create it and put the datasets below it, or set data_root in the config."
        )
    base = folder(name, root)
    for rel in s.required:
        if not (base / rel).exists():
            raise DatasetMissing(f"Dataset {name} is missing {base / rel}; {hint}.")
    if name in TRANSFER:
        from ring import metadataset  # torch-free; parses the annotation files

        metadataset.check_listing(name, root, hint)
    if name == "imagenet":
        for split in ("train", "val"):
            if not any(p.is_dir() for p in (base / split).iterdir()):
                raise DatasetMissing(f"{base / split} has no class folders; {hint}.")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["fetch"]:  # downloading lives in ring.fetch (README "Datasets")
        from ring import fetch

        return fetch.main(argv[1:])
    parser = argparse.ArgumentParser(description="Check that a dataset is present under the data root.")
    parser.add_argument("command", choices=["check"])
    parser.add_argument("dataset")
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--touch", help="file to create when the check passes")
    args = parser.parse_args(argv)
    try:
        check(args.dataset, args.data_root)
    except (DatasetMissing, ValueError) as err:
        print(f"ring: {err}", file=sys.stderr)
        return 1
    if args.touch:
        Path(args.touch).parent.mkdir(parents=True, exist_ok=True)
        Path(args.touch).write_text(f"{args.dataset} present under {args.data_root}\n")
    print(f"{args.dataset}: present under {args.data_root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
