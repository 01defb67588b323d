"""The transfer datasets' listings (Table 3, Meta-Dataset's nine image sets): splits and manifests,
parsed from the publishers' annotation files without torch (the data check and the workflow client
read them on a login node): the parsers here, :func:`ring.data.folders.listing` and
:func:`ring.data.folders.manifest` over them; the loaders are :mod:`ring.data.metadataset`.

A dataset's **listing** is its documented, deterministic train/test split as ``(file, label)``
pairs.  Items that are not whole files name their part: ``MNIST/raw/train-images-idx3-ubyte#17``
(the 18th image of an idx file), ``train2017/000000000009.jpg#1,187,613,474`` (a COCO box,
left,top,right,bottom).  The **split manifest** is the listing plus a SHA-256 over it (paths
relative to the dataset folder, so two labs with different data roots get the same checksum when
they evaluate the same images with the same labels)..
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import struct
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ring.core.files import read_record, write_json

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
    return {
        split: [(f"dtd/dtd/images/{line}", classes[line.split("/")[0]]) for part in parts for line in lines[part]]
        for split, parts in DTD_PARTS.items()
    }


def _list_fungi(base: Path) -> Listing:
    docs = {
        split: json.loads((base / name).read_text()) for split, name in (("train", "train.json"), ("test", "val.json"))
    }
    # Labels number the training release's category ids in increasing order.
    classes = {c: i for i, c in enumerate(sorted(cat["id"] for cat in docs["train"]["categories"]))}
    out = {}
    for split, doc in docs.items():
        category = {ann["image_id"]: ann["category_id"] for ann in doc["annotations"]}
        out[split] = [
            (img["file_name"], classes[category[img["id"]]]) for img in sorted(doc["images"], key=lambda i: i["id"])
        ]
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
            images, labels = (
                base / folder / "raw" / f"{prefix}-images-idx3-ubyte",
                base / folder / "raw" / f"{prefix}-labels-idx1-ubyte",
            )
            (n_labels,) = _idx_header(labels, 2049)
            n_images, rows, cols = _idx_header(images, 2051)
            if n_images != n_labels or images.stat().st_size != 16 + n_images * rows * cols:
                raise ValueError(
                    f"{images} holds {n_images} images of {rows}x{cols} in {images.stat().st_size} bytes "
                    f"for {n_labels} labels"
                )
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
            names = [
                str((Path(root) / n).relative_to(training / cls))
                for root, _, files in os.walk(training / cls)
                for n in files
                if n.lower().endswith(".ppm")
            ]
        train += [(f"gtsrb/GTSRB/Training/{cls}/{name}", label) for name in sorted(names)]
    test = [
        (f"gtsrb/GTSRB/Final_Test/Images/{name}", int(label))
        for name, label in _csv_column(base / "gtsrb" / "GT-final_test.csv", "ClassId")
    ]
    return {"train": train, "test": test}


def _list_flowers(base: Path) -> Listing:
    from scipy.io import loadmat

    root = base / "flowers-102"
    sets = loadmat(root / "setid.mat", squeeze_me=True)
    labels = dict(enumerate((loadmat(root / "imagelabels.mat", squeeze_me=True)["labels"] - 1).tolist(), 1))
    ids = {
        "train": [*np.atleast_1d(sets["trnid"]), *np.atleast_1d(sets["valid"])],
        "test": list(np.atleast_1d(sets["tstid"])),
    }
    return {
        split: [(f"flowers-102/jpg/image_{int(i):05d}.jpg", int(labels[int(i)])) for i in image_ids]
        for split, image_ids in ids.items()
    }


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
    for split, (annotation_file, images) in COCO_FILES.items():
        with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress
            coco = COCO(str(base / "annotations" / annotation_file))
        classes = classes or sorted(coco.getCatIds())  # train2017's 80 category ids, numbered in order
        items = []
        for label, cat in enumerate(classes):
            anns = sorted(
                (
                    a
                    for a in coco.loadAnns(coco.getAnnIds(catIds=[cat], iscrowd=False))
                    if min(a["bbox"][2], a["bbox"][3]) >= COCO_MIN_SIDE
                ),
                key=lambda a: a["id"],
            )
            keep = np.sort(np.random.default_rng([0, label]).permutation(len(anns))[: COCO_PER_CLASS[split]])
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
    return per_class_split(
        [
            (f"{cls}/{cls}_{i:03d}.png", label)
            for label, cls in enumerate(marker["classes"])
            for i in range(marker["images_per_class"])
        ]
    )


# -- the embedded default's transfer column: generated shapes ------------------------------------
SHAPES = ("circle", "square", "triangle", "cross", "ring", "diamond")
# 1200 images: 960 train, 240 test, so that the chance bar of a transfer (ring.engine.health.chance_bar) is 23.9%; at
# 60 a class its 72 test images set it at 29.8%, which the smoke encoders' transfers (12.5-29.2%) did not clear.
SHAPES_PER_CLASS = 200
SHAPES_SIZE = 32
# Light shapes on a dark, noisy background, as the tinted digits the smoke encoders learn from are drawn: on random
# background colours the colour, not the shape, set the features, and no probe of a digits encoder read the shape
# (IR 29.2%, IRing 23.6%); on these, 75.0% and 75.4%, the seven methods 71.7-81.7%.  Radii in pixels.
SHAPES_BACKGROUND = 16  # grey level of every channel
SHAPES_NOISE = 6.0  # the background noise's standard deviation, grey levels
SHAPES_RADIUS = (9.0, 14.0)
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


def shapes_spec(seed: int = 0) -> dict:
    """What generate_shapes writes as generated.json: the parameters that make the images, so that a folder another
    version generated is made again rather than read."""
    return {
        "generator": "ring.data.metadataset.generate_shapes",
        "seed": seed,
        "classes": list(SHAPES),
        "images_per_class": SHAPES_PER_CLASS,
        "size": SHAPES_SIZE,
        "background": SHAPES_BACKGROUND,
        "noise": SHAPES_NOISE,
        "radius": list(SHAPES_RADIUS),
    }


def generate_shapes(base: Path, seed: int = 0) -> None:
    """Six shape classes at random sizes, places and light colours on a noisy dark background, as PNG class
    folders: a small image set unlike the digits, generated identically on every machine."""
    from PIL import Image, ImageDraw

    base = Path(base)
    spec = shapes_spec(seed)
    if read_record(base / GENERATED) == spec:
        return
    (base / GENERATED).unlink(missing_ok=True)  # written again last: until then the folder is an interrupted one
    rng = np.random.default_rng(seed)
    background = np.full(3, SHAPES_BACKGROUND)
    for shape in SHAPES:
        (base / shape).mkdir(parents=True, exist_ok=True)
        for i in range(SHAPES_PER_CLASS):
            noise = rng.normal(0, SHAPES_NOISE, (SHAPES_SIZE, SHAPES_SIZE, 3))
            image = Image.fromarray(np.clip(background + noise, 0, 255).astype(np.uint8))
            # A light colour, 96 to 159 grey levels above the background in each channel, so the shape is visible.
            fill = background + rng.integers(96, 160, 3)
            r = rng.uniform(*SHAPES_RADIUS)
            cx, cy = rng.uniform(r, SHAPES_SIZE - r, 2)
            _draw_shape(ImageDraw.Draw(image), shape, cx, cy, r, tuple(int(v) for v in fill))
            image.save(base / shape / f"{shape}_{i:03d}.png")
    write_json(base / GENERATED, spec)


GENERATORS: dict[str, Callable[[Path], None]] = {"shapes": generate_shapes}
# What each generator writes as its marker: a workflow param, so that a new version's dataset is generated again.
GENERATOR_SPECS: dict[str, Callable[[], dict]] = {"shapes": shapes_spec}


_list_mnist = _list_idx("MNIST")  # named: the catalog names each transfer dataset's listing
_list_fashion_mnist = _list_idx("FashionMNIST")
