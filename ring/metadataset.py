"""The transfer datasets of Table 3 (Meta-Dataset's nine image sets): splits, manifests, loaders.

Each dataset is read in the layout its publisher distributes (``ring.catalog.TRANSFER`` says where
it goes and how to get it).  A dataset's **listing** is its documented, deterministic train/test
split as ``(file, label)`` pairs, parsed from the publisher's annotation files without torch, so
that the data check (``python -m ring.catalog check``) and the workflow client stay light.  Items
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
import contextlib
import functools
import hashlib
import io
import json
import os
import struct
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ring import catalog
from ring.catalog import DatasetMissing
from ring.files import write_json

Item = tuple[str, int]
Listing = dict[str, list[Item]]
SPLITS = ("train", "test")
PART = "#"  # separates a file from the part of it an item is (an idx index, a COCO box)


# -- listings: the publisher's annotation files -> {"train": [(file, label)], "test": [...]} -----------
def _lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def _list_aircraft(base: Path) -> Listing:
    data = base / "fgvc-aircraft-2013b" / "data"
    classes = {name: i for i, name in enumerate(_lines(data / "variants.txt"))}
    out = {}
    for split, name in (("train", "trainval"), ("test", "test")):
        pairs = [line.split(" ", 1) for line in _lines(data / f"images_variant_{name}.txt")]
        out[split] = [(f"fgvc-aircraft-2013b/data/images/{image}.jpg", classes[variant]) for image, variant in pairs]
    return out


def _list_cub(base: Path) -> Listing:
    root = base / "CUB_200_2011"
    files = dict(line.split(" ", 1) for line in _lines(root / "images.txt"))
    labels = dict(line.split() for line in _lines(root / "image_class_labels.txt"))
    is_train = dict(line.split() for line in _lines(root / "train_test_split.txt"))
    out = {"train": [], "test": []}
    for image_id in sorted(files, key=int):
        split = "train" if is_train[image_id] == "1" else "test"
        out[split].append((f"CUB_200_2011/images/{files[image_id]}", int(labels[image_id]) - 1))
    return out


DTD_PARTS = {"train": ("train", "val"), "test": ("test",)}  # split 1; training uses train + val


def _list_dtd(base: Path) -> Listing:
    labels = base / "dtd" / "dtd" / "labels"
    lines = {part: _lines(labels / f"{part}1.txt") for parts in DTD_PARTS.values() for part in parts}
    # torchvision numbers DTD's classes in sorted order, per file; every file of split 1 has all 47.
    classes = {c: i for i, c in enumerate(sorted({line.split("/")[0] for part in lines.values() for line in part}))}
    return {split: [(f"dtd/dtd/images/{line}", classes[line.split("/")[0]]) for part in parts for line in lines[part]]
            for split, parts in DTD_PARTS.items()}


def _list_fungi(base: Path) -> Listing:
    docs = {split: json.loads((base / name).read_text()) for split, name in (("train", "train.json"), ("test", "val.json"))}
    # Labels number the training release's category ids in increasing order.
    classes = {c: i for i, c in enumerate(sorted(cat["id"] for cat in docs["train"]["categories"]))}
    out = {}
    for split, doc in docs.items():
        category = {ann["image_id"]: ann["category_id"] for ann in doc["annotations"]}
        out[split] = [(img["file_name"], classes[category[img["id"]]]) for img in sorted(doc["images"], key=lambda i: i["id"])]
    return out


def _idx_header(path: Path, magic: int) -> tuple[int, ...]:
    with open(path, "rb") as fh:
        head = fh.read(16 if magic == 2051 else 8)
    values = struct.unpack(">IIII" if magic == 2051 else ">II", head)
    if values[0] != magic:
        raise ValueError(f"{path} is not an idx file (magic {values[0]}, expected {magic})")
    return values[1:]


def _list_idx(folder: str) -> Callable[[Path], Listing]:
    """MNIST and FashionMNIST: the idx files torchvision reads from <root>/<folder>/raw/."""

    def listing(base: Path) -> Listing:
        out = {}
        for split, prefix in (("train", "train"), ("test", "t10k")):
            images, labels = base / folder / "raw" / f"{prefix}-images-idx3-ubyte", base / folder / "raw" / f"{prefix}-labels-idx1-ubyte"
            (n_labels,) = _idx_header(labels, 2049)
            n_images, rows, cols = _idx_header(images, 2051)
            if n_images != n_labels or images.stat().st_size != 16 + n_images * rows * cols:
                raise ValueError(f"{images} holds {n_images} images of {rows}x{cols} in {images.stat().st_size} bytes "
                                 f"for {n_labels} labels")
            values = np.fromfile(labels, dtype=np.uint8, offset=8)
            rel = images.relative_to(base).as_posix()
            out[split] = [(f"{rel}{PART}{i}", int(v)) for i, v in enumerate(values)]
        return out

    return listing


def _csv_column(path: Path, column: str) -> list[tuple[str, str]]:
    """(Filename, column) of every row of a GTSRB annotation file (';'-separated, with a header)."""
    rows = [line.split(";") for line in _lines(path)]
    index = {name: i for i, name in enumerate(rows[0])}
    return [(r[index["Filename"]], r[index[column]]) for r in rows[1:]]


def _list_gtsrb(base: Path) -> Listing:
    training = base / "gtsrb" / "GTSRB" / "Training"
    # As torchvision's make_dataset: class folders in sorted order, .ppm files sorted within each.
    # A class folder's GT-<class>.csv, where the release ships it, lists its images (so a missing one
    # is noticed); otherwise the folder's .ppm files are the list.
    train = []
    for label, cls in enumerate(sorted(d.name for d in training.iterdir() if d.is_dir())):
        annotations = training / cls / f"GT-{cls}.csv"
        if annotations.is_file():
            names = [name for name, _ in _csv_column(annotations, "ClassId")]
        else:
            names = [str((Path(root) / n).relative_to(training / cls)) for root, _, files in os.walk(training / cls)
                     for n in files if n.lower().endswith(".ppm")]
        train += [(f"gtsrb/GTSRB/Training/{cls}/{name}", label) for name in sorted(names)]
    test = [(f"gtsrb/GTSRB/Final_Test/Images/{name}", int(label))
            for name, label in _csv_column(base / "gtsrb" / "GT-final_test.csv", "ClassId")]
    return {"train": train, "test": test}


def _list_flowers(base: Path) -> Listing:
    from scipy.io import loadmat

    root = base / "flowers-102"
    sets = loadmat(root / "setid.mat", squeeze_me=True)
    labels = dict(enumerate((loadmat(root / "imagelabels.mat", squeeze_me=True)["labels"] - 1).tolist(), 1))
    ids = {"train": [*np.atleast_1d(sets["trnid"]), *np.atleast_1d(sets["valid"])], "test": list(np.atleast_1d(sets["tstid"]))}
    return {split: [(f"flowers-102/jpg/image_{int(i):05d}.jpg", int(labels[int(i)])) for i in image_ids]
            for split, image_ids in ids.items()}


# MSCOCO has no classification split: Table 3's column classifies object crops.  Crowd boxes are
# left out; so are boxes under 32 pixels a side, which are mostly blur once upsampled to 224.
COCO_MIN_SIDE = 32
# At most this many crops per class, drawn with seed 0 (train2017 alone has ~600k boxes, 41% of them
# "person"): the linear protocol then sees at most 40,000 training and 8,000 test crops.
COCO_PER_CLASS = {"train": 500, "test": 100}
COCO_FILES = {"train": ("instances_train2017.json", "train2017"), "test": ("instances_val2017.json", "val2017")}


def _list_mscoco(base: Path) -> Listing:
    from pycocotools.coco import COCO

    out, classes = {}, None
    for split, (annotations, images) in COCO_FILES.items():
        with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress
            coco = COCO(str(base / "annotations" / annotations))
        classes = classes or sorted(coco.getCatIds())  # train2017's 80 category ids, numbered in order
        items = []
        for label, cat in enumerate(classes):
            anns = sorted((a for a in coco.loadAnns(coco.getAnnIds(catIds=[cat], iscrowd=False))
                           if min(a["bbox"][2], a["bbox"][3]) >= COCO_MIN_SIDE), key=lambda a: a["id"])
            keep = np.sort(np.random.default_rng([0, label]).permutation(len(anns))[:COCO_PER_CLASS[split]])
            for a in (anns[i] for i in keep):
                x, y, w, h = a["bbox"]
                box = f"{int(np.floor(x))},{int(np.floor(y))},{int(np.ceil(x + w))},{int(np.ceil(y + h))}"
                items.append((f"{images}/{coco.imgs[a['image_id']]['file_name']}{PART}{box}", label))
        out[split] = items
    return out


def per_class_split(items: list[Item], test_fraction: float = 0.2, seed: int = 0) -> Listing:
    """The split of a dataset that ships none: per class, a seeded ``test_fraction`` of its sorted
    files is the test split.  Each class draws from its own stream, so adding a class moves nothing else."""
    by_class = defaultdict(list)
    for item in items:
        by_class[item[1]].append(item)
    out = {"train": [], "test": []}
    for label in sorted(by_class):
        group = sorted(by_class[label])
        order = np.random.default_rng([seed, label]).permutation(len(group))
        n_test = int(round(test_fraction * len(group)))
        test = set(order[:n_test].tolist())
        out["test"] += [it for i, it in enumerate(group) if i in test]
        out["train"] += [it for i, it in enumerate(group) if i not in test]
    return out


def _list_shapes(base: Path) -> Listing:
    """The generated shapes: generated.json names the classes and the images per class (its
    annotation file); the dataset ships no split, so it is split 80/20 per class with seed 0."""
    marker = json.loads((base / GENERATED).read_text())
    return per_class_split([(f"{cls}/{cls}_{i:03d}.png", label) for label, cls in enumerate(marker["classes"])
                            for i in range(marker["images_per_class"])])


# -- the embedded default's transfer column: generated shapes ------------------------------------
SHAPES = ("circle", "square", "triangle", "cross", "ring", "diamond")
SHAPES_PER_CLASS = 60  # 360 images: 288 train, 72 test
SHAPES_SIZE = 32
GENERATED = "generated.json"  # written last: a folder without it is an interrupted generation


def _draw_shape(draw, shape: str, cx: float, cy: float, r: float, fill) -> None:
    if shape == "circle":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill)
    elif shape == "square":
        draw.rectangle([cx - r, cy - r, cx + r, cy + r], fill=fill)
    elif shape == "triangle":
        draw.polygon([(cx, cy - r), (cx + r, cy + r), (cx - r, cy + r)], fill=fill)
    elif shape == "cross":
        w = r / 3
        draw.rectangle([cx - r, cy - w, cx + r, cy + w], fill=fill)
        draw.rectangle([cx - w, cy - r, cx + w, cy + r], fill=fill)
    elif shape == "ring":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], outline=fill, width=max(2, int(r / 3)))
    elif shape == "diamond":
        draw.polygon([(cx, cy - r), (cx + r, cy), (cx, cy + r), (cx - r, cy)], fill=fill)
    else:
        raise ValueError(f"Unknown shape {shape!r}")


def generate_shapes(base: Path, seed: int = 0) -> None:
    """Six shape classes at random sizes, places and colours on noisy backgrounds, as PNG class
    folders: a small image set unlike the digits, generated identically on every machine."""
    from PIL import Image, ImageDraw

    base = Path(base)
    if (base / GENERATED).exists():
        return
    rng = np.random.default_rng(seed)
    for shape in SHAPES:
        (base / shape).mkdir(parents=True, exist_ok=True)
        for i in range(SHAPES_PER_CLASS):
            background = rng.integers(0, 256, 3)
            noise = rng.normal(0, 12, (SHAPES_SIZE, SHAPES_SIZE, 3))
            image = Image.fromarray(np.clip(background + noise, 0, 255).astype(np.uint8))
            # A foreground at least 96 grey levels away from the background, so the shape is visible.
            fill = (background + rng.integers(96, 160, 3) * rng.choice([-1, 1], 3)) % 256
            r = rng.uniform(6, 13)
            cx, cy = rng.uniform(r, SHAPES_SIZE - r, 2)
            _draw_shape(ImageDraw.Draw(image), shape, cx, cy, r, tuple(int(v) for v in fill))
            image.save(base / shape / f"{shape}_{i:03d}.png")
    marker = {"generator": "ring.metadataset.generate_shapes", "seed": seed, "classes": list(SHAPES),
              "images_per_class": SHAPES_PER_CLASS, "size": SHAPES_SIZE}
    write_json(base / GENERATED, marker)


GENERATORS: dict[str, Callable[[Path], None]] = {"shapes": generate_shapes}


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
                pairs = ds._samples if hasattr(ds, "_samples") else zip(ds._image_files, ds._labels)
                out += [(Path(p).relative_to(base).as_posix(), int(label)) for p, label in pairs]
        return out


def _torchvision(make_parts: Callable[[Path, str], list]) -> Callable[[Path, str, list[Item]], RGBParts]:
    def build(base: Path, split: str, listing: list[Item]) -> RGBParts:
        dataset = RGBParts(make_parts(base, split))
        got = dataset.items(base)
        # Array datasets have no per-image file to compare: their labels must agree.
        want = [(None if path is None else rel, label) for (path, _), (rel, label) in zip(got, listing)]
        if len(got) != len(listing) or got != want:
            raise DatasetMissing(f"torchvision reads {len(got)} {split} images (or other labels) from {base} where its "
                                 f"annotation files list {len(listing)}; extract the dataset again from its publisher's archives.")
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
    "aircraft": TransferDataset(_list_aircraft, _torchvision(_tv_aircraft)),
    "cub": TransferDataset(_list_cub, _files),
    "dtd": TransferDataset(_list_dtd, _torchvision(_tv_dtd)),
    "fungi": TransferDataset(_list_fungi, _files),
    "mnist": TransferDataset(_list_idx("MNIST"), _torchvision(_tv_idx("MNIST"))),
    "fashion_mnist": TransferDataset(_list_idx("FashionMNIST"), _torchvision(_tv_idx("FashionMNIST"))),
    "traffic_sign": TransferDataset(_list_gtsrb, _torchvision(_tv_gtsrb)),
    "vgg_flower": TransferDataset(_list_flowers, _files),
    "mscoco": TransferDataset(_list_mscoco, _files),
    "shapes": TransferDataset(_list_shapes, _files),
}
assert TRANSFER_DATASETS.keys() == catalog.TRANSFER.keys()


@functools.lru_cache(maxsize=4)
def _listing(name: str, base: str) -> Listing:
    return TRANSFER_DATASETS[name].listing(Path(base))


def listing(name: str, data_root: str | Path) -> Listing:
    """The dataset's train/test split; one sentence naming the problem if an annotation file is bad."""
    base = catalog.folder(name, data_root)
    hint = catalog.hint(name, data_root)
    try:
        return _listing(name, str(base))
    except FileNotFoundError as err:
        raise DatasetMissing(f"Dataset {name} is missing {err.filename}; {hint}.") from None
    except (OSError, ValueError, KeyError, IndexError, TypeError) as err:
        raise DatasetMissing(f"Dataset {name} under {base} has an unreadable annotation file "
                             f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); {hint}.") from None


def check_listing(name: str, data_root: str | Path, hint: str) -> None:
    """Every split non-empty, labels in range, every listed file present (called by catalog.check)."""
    spec = catalog.spec(name)
    base = catalog.folder(name, data_root)
    for split, items in listing(name, data_root).items():
        if not items:
            raise DatasetMissing(f"Dataset {name} lists no {split} images under {base}; {hint}.")
        bad = [label for _, label in items if not 0 <= label < spec.num_classes]
        if bad:
            raise DatasetMissing(f"Dataset {name} has {split} label {bad[0]} outside 0..{spec.num_classes - 1}; {hint}.")
        files = dict.fromkeys(rel.partition(PART)[0] for rel, _ in items)
        missing = [f for f in files if not (base / f).is_file()]
        if missing:
            raise DatasetMissing(f"Dataset {name} lists {len(files)} {split} image files but {len(missing)} are missing "
                                 f"(first: {base / missing[0]}); {hint}.")


def manifest(name: str, data_root: str | Path) -> dict:
    """The split manifest: every (file, label) of both splits and a SHA-256 over them."""
    splits = listing(name, data_root)
    files = {split: [[rel, label] for rel, label in splits[split]] for split in SPLITS}
    spec = catalog.spec(name)
    counts = [len(files[s]) for s in SPLITS]
    return {
        "dataset": name,
        "folder": str(catalog.folder(name, data_root)),
        "split": spec.split,
        "counts": dict(zip(SPLITS, counts)),
        "publisher_counts": None if spec.publisher_counts is None else dict(zip(SPLITS, spec.publisher_counts)),
        "matches_publisher": None if spec.publisher_counts is None else tuple(counts) == spec.publisher_counts,
        "sha256": hashlib.sha256(json.dumps(files, separators=(",", ":")).encode()).hexdigest(),
        "files": files,
    }


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
        raise DatasetMissing(f"Dataset {name} under {base} is incomplete or corrupted "
                             f"({str(err).splitlines()[0]}); {hint}.") from None


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
