"""Every transfer loader on a tiny fixture in its publisher's on-disk format, written here."""

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy.io import savemat

from ring.core import catalog
from ring.data import folders, listings, metadataset
from tests import ROOT


def _image(path: Path, size=(12, 10), seed=0, mode="RGB") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(pixels).convert(mode).save(path)


def _text(path: Path, lines) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))


# Each writer lays out <root>/<name> as the publisher does and returns the labels each split must have.
def write_aircraft(root: Path) -> dict:
    data = root / "aircraft" / "fgvc-aircraft-2013b" / "data"
    _text(data / "variants.txt", ["707-320", "A300B4", "Cessna 172"])  # variant names may hold spaces
    splits = {
        "trainval": [("1000001", "707-320"), ("1000002", "Cessna 172"), ("1000003", "A300B4")],
        "test": [("1000004", "Cessna 172"), ("1000005", "707-320")],
    }
    for split, rows in splits.items():
        _text(data / f"images_variant_{split}.txt", [f"{i} {v}" for i, v in rows])
        for k, (i, _) in enumerate(rows):
            _image(data / "images" / f"{i}.jpg", seed=k)
    return {"train": [0, 2, 1], "test": [2, 0]}


def write_cub(root: Path) -> dict:
    base = root / "cub" / "CUB_200_2011"
    files = [
        "001.Black_footed_Albatross/Black_Footed_Albatross_0001_796111.jpg",
        "001.Black_footed_Albatross/Black_Footed_Albatross_0002_55.jpg",
        "002.Laysan_Albatross/Laysan_Albatross_0001_545.jpg",
        "200.Common_Yellowthroat/Common_Yellowthroat_0003_190521.jpg",
    ]
    _text(base / "images.txt", [f"{i} {f}" for i, f in enumerate(files, 1)])
    _text(base / "image_class_labels.txt", ["1 1", "2 1", "3 2", "4 200"])
    _text(base / "train_test_split.txt", ["1 1", "2 0", "3 1", "4 0"])
    for k, f in enumerate(files):
        _image(base / "images" / f, seed=k)
    return {"train": [0, 1], "test": [0, 199]}


def write_dtd(root: Path) -> dict:
    base = root / "dtd" / "dtd" / "dtd"
    files = {
        "train": ["banded/banded_0002.jpg", "zigzagged/zigzagged_0001.jpg"],
        "val": ["zigzagged/zigzagged_0004.jpg", "banded/banded_0005.jpg"],
        "test": ["banded/banded_0003.jpg", "zigzagged/zigzagged_0002.jpg", "banded/banded_0009.jpg"],
    }
    for split, names in files.items():
        _text(base / "labels" / f"{split}1.txt", names)
        for k, name in enumerate(names):
            _image(base / "images" / name, seed=k)
    _text(base / "labels" / "train2.txt", files["test"])  # other partitions exist and are not read
    return {"train": [0, 1, 1, 0], "test": [0, 1, 0]}


def write_fungi(root: Path) -> dict:
    base = root / "fungi"
    categories = [
        {"id": 9, "name": "Amanita muscaria"},
        {"id": 2, "name": "Boletus edulis"},
        {"id": 5, "name": "Xylaria"},
    ]
    docs = {
        "train.json": [
            (11, "images/9_Amanita/AM1.JPG", 9),
            (3, "images/2_Boletus/BE1.JPG", 2),
            (7, "images/5_Xylaria/XY1.JPG", 5),
        ],
        "val.json": [(40, "images/5_Xylaria/XY9.JPG", 5), (41, "images/9_Amanita/AM9.JPG", 9)],
    }
    for name, rows in docs.items():
        doc = {
            "images": [{"id": i, "file_name": f, "width": 12, "height": 10} for i, f, _ in rows],
            "annotations": [{"id": 100 + i, "image_id": i, "category_id": c} for i, _, c in rows],
            "categories": categories,
            "info": {"year": 2018},
        }
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_text(json.dumps(doc))
        for k, (_, f, _) in enumerate(rows):
            _image(base / f, seed=k)
    # Ordered by image id; labels number the category ids 2, 5, 9.
    return {"train": [0, 1, 2], "test": [1, 2]}


def _write_idx(root: Path, folder: str) -> dict:
    raw = root / folder / "raw"
    raw.mkdir(parents=True)
    labels = {"train": [3, 1, 4, 1, 5], "t10k": [9, 2]}
    for prefix, values in labels.items():
        images = np.random.default_rng(len(values)).integers(0, 256, (len(values), 6, 6), dtype=np.uint8)
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(
            struct.pack(">IIII", 2051, len(values), 6, 6) + images.tobytes()
        )
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 2049, len(values)) + bytes(values))
    return {"train": labels["train"], "test": labels["t10k"]}


def write_mnist(root: Path) -> dict:
    return _write_idx(root / "mnist", "MNIST")


def write_fashion_mnist(root: Path) -> dict:
    return _write_idx(root / "fashion_mnist", "FashionMNIST")


def write_traffic_sign(root: Path) -> dict:
    base = root / "traffic_sign" / "gtsrb"
    for cls, names in (("00000", ["00000_00000.ppm", "00000_00001.ppm"]), ("00001", ["00003_00000.ppm"])):
        for k, name in enumerate(names):
            _image(base / "GTSRB" / "Training" / cls / name, seed=k)
        _text(
            base / "GTSRB" / "Training" / cls / f"GT-{cls}.csv",  # the class's annotation file, not an image
            [
                "Filename;Width;Height;Roi.X1;Roi.Y1;Roi.X2;Roi.Y2;ClassId",
                *[f"{n};12;10;1;1;11;9;{int(cls)}" for n in names],
            ],
        )
    _text(
        base / "GT-final_test.csv",
        [
            "Filename;Width;Height;Roi.X1;Roi.Y1;Roi.X2;Roi.Y2;ClassId",
            "00000.ppm;12;10;1;1;11;9;1",
            "00001.ppm;12;10;1;1;11;9;0",
        ],
    )
    for k in range(2):
        _image(base / "GTSRB" / "Final_Test" / "Images" / f"{k:05d}.ppm", seed=k)
    return {"train": [0, 0, 1], "test": [1, 0]}


def write_vgg_flower(root: Path) -> dict:
    base = root / "vgg_flower" / "flowers-102"
    base.mkdir(parents=True)
    savemat(base / "imagelabels.mat", {"labels": np.array([[77, 77, 1, 102, 1, 5]])})
    savemat(base / "setid.mat", {"trnid": np.array([[3, 1]]), "valid": np.array([[6]]), "tstid": np.array([[2, 4, 5]])})
    for i in range(1, 7):
        _image(base / "jpg" / f"image_{i:05d}.jpg", seed=i)
    return {"train": [0, 76, 4], "test": [76, 101, 0]}


def write_mscoco(root: Path) -> dict:
    base = root / "mscoco"
    categories = [
        {"id": 1, "name": "person", "supercategory": "person"},
        {"id": 3, "name": "car", "supercategory": "vehicle"},
    ]
    # (annotation id, image id, category, box, crowd): crowd and sub-32-pixel boxes are left out.
    splits = {
        "train2017": [
            (5, 1, 3, [10.5, 4.2, 40.0, 33.0], 0),
            (2, 1, 1, [0, 0, 32, 50], 0),
            (9, 2, 1, [5, 5, 60, 40], 1),
            (7, 2, 1, [1, 2, 20, 40], 0),
            (8, 2, 1, [3, 4, 50, 45], 0),
        ],
        "val2017": [(30, 3, 3, [0, 0, 79, 59], 0), (31, 3, 1, [2, 2, 33, 33], 0)],
    }
    for split, anns in splits.items():
        images = sorted({a[1] for a in anns})
        doc = {
            "images": [{"id": i, "file_name": f"{i:012d}.jpg", "width": 80, "height": 60} for i in images],
            "annotations": [
                {
                    "id": a,
                    "image_id": i,
                    "category_id": c,
                    "bbox": b,
                    "iscrowd": crowd,
                    "area": b[2] * b[3],
                    "segmentation": [],
                }
                for a, i, c, b, crowd in anns
            ],
            "categories": categories,
        }
        _text(base / "annotations" / f"instances_{split}.json", [json.dumps(doc)])
        for i in images:
            _image(base / split / f"{i:012d}.jpg", size=(80, 60), seed=i)
    return {"train": [0, 0, 1], "test": [0, 1]}


def write_shapes(root: Path) -> dict:
    listings.generate_shapes(root / "shapes")
    per_class = {"train": listings.SHAPES_PER_CLASS * 4 // 5, "test": listings.SHAPES_PER_CLASS // 5}
    return {split: [label for label in range(len(listings.SHAPES)) for _ in range(n)] for split, n in per_class.items()}


WRITERS = {name: globals()[f"write_{name}"] for name in catalog.TRANSFER}


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_loader_reads_the_publishers_layout(tmp_path, name):
    expected = WRITERS[name](tmp_path)
    folders.check(name, tmp_path)
    for split in listings.SPLITS:
        dataset = metadataset.load(name, tmp_path, split)
        pairs = [dataset[i] for i in range(len(dataset))]
        assert [label for _, label in pairs] == expected[split], split
        assert all(img.mode == "RGB" for img, _ in pairs)  # grayscale sets become 3-channel
    doc = folders.manifest(name, tmp_path)
    assert doc["counts"] == {split: len(expected[split]) for split in listings.SPLITS}
    assert [[label for _, label in doc["files"][s]] for s in listings.SPLITS] == [expected[s] for s in listings.SPLITS]
    assert len(doc["sha256"]) == 64 and doc["split"] == catalog.TRANSFER[name].split


def test_mscoco_crops_are_the_boxes(tmp_path):
    write_mscoco(tmp_path)
    train = metadataset.load("mscoco", tmp_path, "train")
    assert [rel for rel, _ in train.items] == [
        "train2017/000000000001.jpg#0,0,32,50",
        "train2017/000000000002.jpg#3,4,53,49",
        "train2017/000000000001.jpg#10,4,51,38",
    ]
    assert train[2][0].size == (41, 34)  # floor/ceil of the float box [10.5, 4.2, 40, 33]


def test_data_check_command_reports_content_errors_in_one_sentence(tmp_path):
    # `python -m ring.data.verify` runs the data check as __main__; the DatasetMissing that
    # ring.data.metadataset raises is ring.core.catalog's and must still be caught.
    write_dtd(tmp_path)
    image = tmp_path / "dtd" / "dtd" / "dtd" / "images" / "banded" / "banded_0003.jpg"
    image.unlink()
    result = subprocess.run(
        [sys.executable, "-m", "ring.data.verify", "check", "dtd", "--data-root", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("ring: Dataset dtd lists 3 test image files but 1 are missing (first: ")
    # Complete, the tiny fixture is not the publisher's release: counted, and skippable for a copy of one's own.
    write_dtd(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "ring.data.verify", "check", "dtd", "--data-root", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert (
        result.returncode == 1
        and "holds 4 train, 3 test images, the publisher's release has 3760 and 1880" in result.stderr
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ring.data.verify",
            "check",
            "dtd",
            "--data-root",
            str(tmp_path),
            "--skip-checksums",
            "--touch",
            str(tmp_path / "dtd.ok"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "dtd.ok").read_text())["checksums"].startswith("skipped")
