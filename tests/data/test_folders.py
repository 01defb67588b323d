"""ring.data.folders: a dataset folder against the catalog: the one-sentence refusals of a missing or damaged
dataset, the fetch stamp it trusts, the fingerprint, the listings' checks and the split manifest."""

import hashlib
import json
import os
import re
import subprocess
import sys

import pytest

from ring.core import catalog
from ring.data import folders, listings
from tests import ROOT
from tests.data.test_metadataset import WRITERS, _text, write_aircraft, write_cub, write_dtd


@pytest.mark.parametrize("name", ["cifar10", "cifar100", "stl10", "imagenet"])
def test_missing_dataset_fails_with_where_to_get_it(tmp_path, name):
    # What fetch gets, the fetch command (then the steps by hand); ImageNet, behind a login, the steps by hand.
    how = "fetch it with `ring fetch" if name != "imagenet" else "log in at image-net.org"
    with pytest.raises(catalog.DatasetMissing, match=f"Dataset {name} is missing .*; {re.escape(how)}"):
        folders.check(name, tmp_path)


def test_missing_data_root_and_unknown_dataset(tmp_path):
    with pytest.raises(catalog.DatasetMissing, match="Data root .* does not exist"):
        folders.check("cifar10", tmp_path / "nope")
    with pytest.raises(ValueError, match="Unknown dataset 'mnist_m'"):
        folders.check("mnist_m", tmp_path)


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_incomplete_dataset_fails_the_check_with_one_sentence(tmp_path, name):
    WRITERS[name](tmp_path)
    items = folders.listing(name, tmp_path)["train"]
    first = catalog.folder(name, tmp_path) / items[0][0].partition(listings.PART)[0]
    first.unlink()
    folders._listing.cache_clear()
    with pytest.raises(catalog.DatasetMissing) as err:
        folders.check(name, tmp_path)
    message = str(err.value)
    assert f"Dataset {name} " in message and message.count(". ") == 0 and message.endswith(".")
    # A missing idx or annotation file is named; a missing image is counted against the listing.
    assert str(first) in message


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_missing_annotation_file_is_named_with_where_to_get_the_dataset(tmp_path, name):
    WRITERS[name](tmp_path)
    required = catalog.folder(name, tmp_path) / catalog.TRANSFER[name].required[0]
    required.unlink()
    with pytest.raises(catalog.DatasetMissing, match=f"Dataset {name} is missing {required}; "):
        folders.check(name, tmp_path)


def test_fungi_sentence_says_the_download_moved(tmp_path):
    (tmp_path / "fungi").mkdir()
    with pytest.raises(
        catalog.DatasetMissing, match="has moved from its original labs.gbif.org links: find the current"
    ):
        folders.check("fungi", tmp_path)


def test_manifest_checksum_follows_files_and_labels_not_the_data_root(tmp_path):
    write_cub(tmp_path / "a")
    write_cub(tmp_path / "b")
    a, b = folders.manifest("cub", tmp_path / "a"), folders.manifest("cub", tmp_path / "b")
    assert a["sha256"] == b["sha256"] and a["folder"] != b["folder"]
    _text(tmp_path / "b" / "cub" / "CUB_200_2011" / "image_class_labels.txt", ["1 1", "2 1", "3 3", "4 200"])
    folders._listing.cache_clear()
    assert folders.manifest("cub", tmp_path / "b")["sha256"] != a["sha256"]
    assert a["publisher_counts"] == {"train": 5994, "test": 5794} and a["matches_publisher"] is False


def test_data_check_of_a_transfer_dataset_never_imports_torch(tmp_path):
    write_dtd(tmp_path)
    code = (
        "import sys; from ring.data import folders; folders.check('dtd', sys.argv[1]); "
        "print(sorted(m for m in ('torch', 'torchvision', 'PIL') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert result.stdout.strip() == "[]"


def test_an_embedded_dataset_needs_no_data_root(tmp_path):
    folders.check("digits", tmp_path / "nowhere")  # it ships inside scikit-learn: nothing to find on disk
    assert folders.fingerprint("digits", tmp_path) == ""


def test_imagenet_without_class_folders_is_refused(tmp_path):
    for split in ("train", "val"):
        (tmp_path / "imagenet" / split).mkdir(parents=True)
    (tmp_path / "imagenet" / "train" / "n01440764").mkdir()
    with pytest.raises(catalog.DatasetMissing, match=f"^{re.escape(str(tmp_path / 'imagenet' / 'val'))} has no class"):
        folders.check("imagenet", tmp_path)


def test_a_label_outside_the_classes_or_an_empty_split_is_refused_in_one_sentence(tmp_path):
    write_cub(tmp_path)
    labels = tmp_path / "cub" / "CUB_200_2011" / "image_class_labels.txt"
    _text(labels, ["1 1", "2 1", "3 2", "4 201"])
    folders._listing.cache_clear()
    with pytest.raises(catalog.DatasetMissing, match=r"^Dataset cub has test label 200 outside 0\.\.199; fetch it"):
        folders.check("cub", tmp_path)
    _text(labels, ["1 1", "2 1", "3 2", "4 200"])
    _text(tmp_path / "cub" / "CUB_200_2011" / "train_test_split.txt", ["1 0", "2 0", "3 0", "4 0"])
    folders._listing.cache_clear()
    with pytest.raises(catalog.DatasetMissing, match=r"^Dataset cub lists no train images under .*cub; fetch it"):
        folders.check("cub", tmp_path)


def test_an_unreadable_annotation_file_is_named_with_its_error(tmp_path):
    write_aircraft(tmp_path)
    _text(tmp_path / "aircraft" / "fgvc-aircraft-2013b" / "data" / "images_variant_test.txt", ["1000004 Boeing 787"])
    with pytest.raises(catalog.DatasetMissing) as err:
        folders.listing("aircraft", tmp_path)
    assert str(err.value).startswith(
        f"Dataset aircraft under {tmp_path / 'aircraft'} has an unreadable annotation file (KeyError: 'Boeing 787'); "
    )


def _stamp(tmp_path, name="dtd", **changes):
    """ring.data.download's stamp as it writes it after a verified fetch (ring/data/download.py's docstring)."""
    base = catalog.folder(name, tmp_path)
    stamp = {
        "format": 1,
        "dataset": name,
        "folder": str(base),
        "fetched_at": "2026-01-01T00:00:00+00:00",
        "files": [{"file": "dtd-r1.0.1.tar.gz", "publisher_md5": "a" * 32, "md5": "a" * 32, "sha256": "b" * 64}],
        "fingerprint": folders.fingerprint(name, tmp_path),
        **changes,
    }
    (base / catalog.FETCH_STAMP).write_text(json.dumps(stamp))
    return stamp


def test_a_fetch_stamp_vouches_for_the_folder_only_under_every_rule(tmp_path):
    write_dtd(tmp_path)
    assert folders.fetched_from_publisher("dtd", tmp_path) is None  # no stamp
    stamp = _stamp(tmp_path)
    assert folders.fetched_from_publisher("dtd", tmp_path) == {
        "stamp": str(tmp_path / "dtd" / catalog.FETCH_STAMP),
        "fetched_at": stamp["fetched_at"],
        "archives": {"dtd-r1.0.1.tar.gz": "a" * 32},
    }
    archive = stamp["files"][0]
    for changes in (
        {"dataset": "cub"},  # another dataset's stamp
        {"folder": str(tmp_path / "elsewhere")},  # copied here from another folder
        {"files": [{**archive, "md5": "c" * 32}]},  # an archive that is not the publisher's
        {"files": [{**archive, "publisher_md5": None}]},  # a publisher with no checksum verifies nothing
        {"files": []},
        {"fingerprint": "0" * 16},  # the folder changed since the fetch
        {"files": "dtd.tar.gz"},  # foreign shapes: no verdict, no crash
    ):
        _stamp(tmp_path, **changes)
        assert folders.fetched_from_publisher("dtd", tmp_path) is None, changes
    (tmp_path / "dtd" / catalog.FETCH_STAMP).write_text('{"dataset": "dtd", "fol')  # torn
    assert folders.fetched_from_publisher("dtd", tmp_path) is None


def test_the_fingerprint_follows_sizes_and_entries_but_not_the_stamp(tmp_path):
    assert folders.fingerprint("dtd", tmp_path) == ""  # not there yet
    write_dtd(tmp_path)
    first = folders.fingerprint("dtd", tmp_path)
    assert re.fullmatch(r"[0-9a-f]{16}", first) and folders.fingerprint("dtd", tmp_path) == first
    _stamp(tmp_path)
    assert folders.fingerprint("dtd", tmp_path) == first  # written after the fingerprint it holds
    (tmp_path / "dtd" / "dtd" / "dtd" / "images" / "braided").mkdir()  # a new entry of a required folder
    second = folders.fingerprint("dtd", tmp_path)
    assert second != first
    with open(tmp_path / "dtd" / "dtd" / "dtd" / "labels" / "train2.txt", "a") as fh:  # a sibling of a required file
        fh.write("extra\n")
    assert folders.fingerprint("dtd", tmp_path) != second


def test_md5_of_reads_a_file_in_blocks_to_the_whole_files_digest(tmp_path):
    data = os.urandom(3 * (1 << 20) + 5)  # three full 1 MiB blocks and a partial one
    (tmp_path / "f.bin").write_bytes(data)
    assert folders.md5_of(tmp_path / "f.bin") == hashlib.md5(data, usedforsecurity=False).hexdigest()


def test_the_manifest_lists_both_splits_and_compares_with_the_publishers_counts(tmp_path):
    write_dtd(tmp_path)
    doc = folders.manifest("dtd", tmp_path)
    assert doc["counts"] == {"train": 4, "test": 3} and doc["publisher_counts"] == {"train": 3760, "test": 1880}
    assert doc["matches_publisher"] is False and doc["split"] == catalog.TRANSFER["dtd"].split
    files = {
        split: [[rel, label] for rel, label in folders.listing("dtd", tmp_path)[split]] for split in listings.SPLITS
    }
    assert doc["files"] == files
    assert doc["sha256"] == hashlib.sha256(json.dumps(files, separators=(",", ":")).encode()).hexdigest()
