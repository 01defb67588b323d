"""The dataset catalog, free of torch so that the workflow client can read it.

Every dataset lives under ``<data_root>/<name>/`` in the layout its publisher (or torchvision's
downloader, given that folder as ``root``) produces.  Nothing is ever downloaded: a missing
dataset is reported by :func:`check` with one sentence saying where to put it.  Loaders live in
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


def spec(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise ValueError(f"Unknown dataset {name!r}; choose one of {', '.join(DATASETS)}.")
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
    if name == "imagenet":
        for split in ("train", "val"):
            if not any(p.is_dir() for p in (base / split).iterdir()):
                raise DatasetMissing(f"{base / split} has no class folders; {hint}.")


def main(argv=None) -> int:
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
