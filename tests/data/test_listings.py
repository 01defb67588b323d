"""ring.data.listings: the transfer datasets' splits parsed from the publishers' annotation files (torch-free), the
seeded per-class split and the generated shapes."""

import json
import struct

import pytest

from ring.core import catalog
from ring.core.refs import resolve
from ring.data import folders, listings
from tests.data.test_metadataset import WRITERS, write_mnist, write_traffic_sign


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_each_parser_lists_the_publishers_split_with_its_labels_and_files(tmp_path, name):
    expected = WRITERS[name](tmp_path)
    base = tmp_path / name
    split = resolve(catalog.TRANSFER[name].listing)(base)
    assert sorted(split) == sorted(listings.SPLITS)
    assert {s: [label for _, label in split[s]] for s in listings.SPLITS} == expected
    assert all((base / rel.partition(listings.PART)[0]).is_file() for s in listings.SPLITS for rel, _ in split[s])


def test_an_idx_item_is_its_file_and_index_and_a_damaged_idx_file_is_refused(tmp_path):
    write_mnist(tmp_path)
    base = tmp_path / "mnist"
    split = resolve(catalog.TRANSFER["mnist"].listing)(base)
    assert split["test"] == [("MNIST/raw/t10k-images-idx3-ubyte#0", 9), ("MNIST/raw/t10k-images-idx3-ubyte#1", 2)]
    images = base / "MNIST" / "raw" / "t10k-images-idx3-ubyte"
    images.write_bytes(images.read_bytes()[:-1])  # one byte short of 2 images of 6x6
    with pytest.raises(ValueError, match=r"t10k-images-idx3-ubyte holds 2 images of 6x6 in 87 bytes for 2 labels$"):
        resolve(catalog.TRANSFER["mnist"].listing)(base)
    labels = base / "MNIST" / "raw" / "train-labels-idx1-ubyte"
    labels.write_bytes(struct.pack(">II", 2051, 5) + bytes(5))  # an images header where labels belong
    with pytest.raises(ValueError, match=r"train-labels-idx1-ubyte is not an idx file \(magic 2051, expected 2049\)"):
        resolve(catalog.TRANSFER["mnist"].listing)(base)


def test_a_gtsrb_class_folder_without_its_annotation_file_lists_its_images(tmp_path):
    write_traffic_sign(tmp_path)
    training = tmp_path / "traffic_sign" / "gtsrb" / "GTSRB" / "Training"
    with_csv = resolve(catalog.TRANSFER["traffic_sign"].listing)(tmp_path / "traffic_sign")
    (training / "00000" / "GT-00000.csv").unlink()
    (training / "00001" / "GT-00001.csv").unlink()
    (training / "00001" / "notes.txt").write_text("not an image")
    assert resolve(catalog.TRANSFER["traffic_sign"].listing)(tmp_path / "traffic_sign") == with_csv


def test_a_per_class_split_rounds_each_classs_test_share():
    items = [(f"a/{i}.png", 0) for i in range(7)] + [(f"b/{i}.png", 1) for i in range(2)]
    split = listings.per_class_split(items, test_fraction=0.3, seed=4)
    # round(0.3 x 7) = 2 and round(0.3 x 2) = 1 test images (Python rounds 0.6 up).
    assert [label for _, label in split["test"]] == [0, 0, 1] and len(split["train"]) == 6
    assert listings.per_class_split(items, 0.3, seed=5) != split  # the seed draws which ones


def test_per_class_split_is_seeded_per_class_and_stable_when_classes_are_added():
    items = [(f"c{c}/{i:02d}.png", c) for c in range(3) for i in range(10)]
    split = listings.per_class_split(items)
    assert len(split["train"]) == 24 and len(split["test"]) == 6
    assert sorted(split["train"] + split["test"]) == sorted(items)
    assert listings.per_class_split(items) == split
    more = listings.per_class_split(items + [(f"c3/{i:02d}.png", 3) for i in range(5)])
    assert [it for it in more["test"] if it[1] < 3] == split["test"]


def test_shapes_are_generated_identically(tmp_path):
    listings.generate_shapes(tmp_path / "a" / "shapes")
    listings.generate_shapes(tmp_path / "b" / "shapes")
    a = tmp_path / "a" / "shapes" / "ring" / "ring_007.png"
    assert a.read_bytes() == (tmp_path / "b" / "shapes" / "ring" / "ring_007.png").read_bytes()
    assert folders.manifest("shapes", tmp_path / "a")["matches_publisher"] is True


def test_a_finished_generation_is_never_redone_and_another_versions_is_made_again(tmp_path):
    base = tmp_path / "shapes"
    listings.generate_shapes(base)
    image = base / "circle" / "circle_000.png"
    image.write_bytes(b"kept")
    listings.generate_shapes(base)  # generated.json names these parameters: nothing is drawn again
    assert image.read_bytes() == b"kept"
    assert sum(1 for _ in base.rglob("*.png")) == len(listings.SHAPES) * listings.SHAPES_PER_CLASS
    # Issue 51: a folder an earlier version generated (60 a class on random colours) was read as it was, and the
    # data check then refused its counts; its marker differs from this version's, so the images are made again.
    old = {**listings.shapes_spec(), "images_per_class": 60}
    for key in ("background", "noise", "radius"):
        old.pop(key)
    (base / listings.GENERATED).write_text(json.dumps(old))
    listings.generate_shapes(base)
    assert image.read_bytes() != b"kept" and folders.manifest("shapes", tmp_path)["matches_publisher"] is True
    assert json.loads((base / listings.GENERATED).read_text()) == listings.shapes_spec()
