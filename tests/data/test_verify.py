"""ring.data.verify: the data check (``ring check``): the catalog's layout, then the publisher's md5s and counts.

The checks against the publisher are README's "Datasets"."""

import dataclasses
import json
import os
import pickle

import numpy as np
import pytest

from ring.core import catalog
from ring.core.refs import resolve
from ring.data import datasets, folders, verify


def _publish_fake(name, root, monkeypatch) -> dict:
    """Small files in the publisher's format at every path torchvision lists for ``name``, and
    torchvision's md5 lists patched to theirs, as if the publisher had released these files."""
    from torchvision import datasets as tvd

    cls = {"cifar10": tvd.CIFAR10, "cifar100": tvd.CIFAR100, "stl10": tvd.STL10}[name]
    rng = np.random.default_rng(0)
    md5 = {}
    for i, (file, _) in enumerate([*cls.train_list, *cls.test_list]):
        path = catalog.folder(name, root) / cls.base_folder / file
        path.parent.mkdir(parents=True, exist_ok=True)
        if name == "stl10":  # raw uint8 pixels (X) or 1-based labels (y), 4 images
            data = (
                rng.integers(0, 256, 4 * 3 * 96 * 96, dtype=np.uint8)
                if file.endswith("X.bin")
                else np.arange(1, 5, dtype=np.uint8)
            )
            path.write_bytes(data.tobytes())
        else:  # a CIFAR batch: a pickled dict of N x 3072 uint8 pixels and labels
            key = "labels" if name == "cifar10" else "fine_labels"
            path.write_bytes(
                pickle.dumps({"data": rng.integers(0, 256, (4, 3072), dtype=np.uint8), key: [i % 10, 1, 2, 3]})
            )
        md5[file] = folders.md5_of(path)
    monkeypatch.setattr(cls, "train_list", [[f, md5[f]] for f, _ in cls.train_list])
    monkeypatch.setattr(cls, "test_list", [[f, md5[f]] for f, _ in cls.test_list])
    if hasattr(cls, "meta"):
        meta = catalog.folder(name, root) / cls.base_folder / cls.meta["filename"]
        meta.write_bytes(pickle.dumps({cls.meta["key"]: [f"class{c}" for c in range(100)]}))
        monkeypatch.setattr(cls, "meta", {**cls.meta, "md5": folders.md5_of(meta)})
    return verify.published_md5(name)


@pytest.mark.parametrize("name", ["cifar10", "cifar100", "stl10"])
def test_data_check_verifies_torchvisions_md5_once_and_names_a_truncated_file(tmp_path, monkeypatch, capsys, name):
    files = _publish_fake(name, tmp_path / "data", monkeypatch)
    stamps, ok = tmp_path / "results" / "data", tmp_path / "results" / "data" / f"{name}.ok"
    args = ["check", name, "--data-root", str(tmp_path / "data"), "--stamp-dir", str(stamps), "--touch", str(ok)]
    assert verify.main(args) == 0
    record = json.loads((stamps / f"{name}{folders.VERIFIED_SUFFIX}").read_text())
    assert record["checksums"] == "verified against the publisher" and record["md5"] == files
    if name != "stl10":
        assert len(datasets.load(name, tmp_path / "data", "train")) == 4 * len(
            resolve(catalog.DATASETS[name].loader)(catalog.folder(name, tmp_path / "data"), "train").train_list
        )  # torchvision reads the files
    # The stamp stands in for the md5s while no file changes.
    monkeypatch.setattr(verify, "md5_of", lambda path: pytest.fail(f"{path} hashed again"))
    assert verify.main(args) == 0
    monkeypatch.undo()
    files = _publish_fake(name, tmp_path / "data", monkeypatch)
    # A truncated file: the stamp no longer matches, the check fails naming the file, writes no .ok.
    ok.unlink()
    bad = catalog.folder(name, tmp_path / "data") / sorted(files)[-1]
    bad.write_bytes(bad.read_bytes()[:-100])
    capsys.readouterr()
    assert verify.main(args) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"ring: Dataset {name} file {bad} is corrupted or truncated: its md5 is ") and "\n" not in err
    assert "--skip-checksums" not in err and not ok.exists()
    # A modified copy cannot skip the md5s here: torchvision's loader would refuse it in the job (and CIFAR's files
    # are pickles, never read unverified), so the check refuses in one sentence instead of passing.
    assert verify.main([*args, "--skip-checksums"]) == 1
    assert capsys.readouterr().err.strip() == f"ring: {catalog.skip_refusal(name)}" and not ok.exists()


def test_data_check_counts_imagenet_against_the_publisher(tmp_path, monkeypatch, capsys):
    base = tmp_path / "imagenet"
    for split, n in (("train", 3), ("val", 2)):
        for i in range(n):
            (base / split / f"n0{i % 2}").mkdir(parents=True, exist_ok=True)
            (base / split / f"n0{i % 2}" / f"{i}.JPEG").write_bytes(b"jpeg")
    # A two-class release of 3 train / 2 val images stands in for ILSVRC2012's numbers.
    release = dataclasses.replace(catalog.DATASETS["imagenet"], num_classes=2, publisher_counts=(3, 2))
    monkeypatch.setitem(catalog.DATASETS, "imagenet", release)
    assert verify.verify("imagenet", tmp_path)["counts"] == {"train": 3, "val": 2}
    (base / "train" / "n00" / "0.JPEG").unlink()
    assert verify.main(["check", "imagenet", "--data-root", str(tmp_path)]) == 1
    assert (
        f"Dataset imagenet under {base} holds 2 train, 2 val images, the publisher's release has 3 and 2"
        in capsys.readouterr().err
    )
    (base / "val" / "n02").mkdir()
    assert verify.main(["check", "imagenet", "--data-root", str(tmp_path)]) == 1
    assert (
        f"Dataset imagenet's {base / 'val'} holds 3 class folders, the publisher's release has 2"
        in capsys.readouterr().err
    )


def test_data_check_finds_an_unwritable_results_folder_before_any_job(tmp_path, monkeypatch, capsys):
    cell = tmp_path / "results" / "smoke" / "pretrain" / "digits" / "IR" / "seed0"
    cell.mkdir(parents=True)
    cell.chmod(0o555)
    if os.geteuid() == 0:  # root writes whatever the mode bits say: judge by them, as for any other user
        monkeypatch.setattr(folders.os, "access", lambda path, mode: bool(os.stat(path).st_mode & 0o200))
    check = ["check", "digits", "--data-root", str(tmp_path), "--writable"]
    try:
        status = verify.main([*check, str(tmp_path / "results" / "smoke")])
        # A folder still to be created (its nearest existing parent decides), and a sibling tree, pass.
        assert verify.main([*check, str(tmp_path / "results" / "other" / "new")]) == 0
    finally:
        cell.chmod(0o755)
    assert status == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        f"ring: The cell folder {cell} is not writable by this user; fix its permissions (chmod -R u+w {cell}) or move "
        "it away, and rerun."
    )


def test_a_dataset_without_torchvisions_lists_has_no_published_md5():
    assert verify.published_md5("digits") == {}


def test_the_check_command_writes_its_record_and_says_where_the_data_is(tmp_path, capsys):
    ok = tmp_path / "results" / "data" / "digits.ok"  # its folder is created
    assert verify.main(["check", "digits", "--data-root", str(tmp_path), "--touch", str(ok)]) == 0
    assert capsys.readouterr().out == f"digits: present under {tmp_path}; checksums verified against the publisher\n"
    record = json.loads(ok.read_text())
    assert (record["dataset"], record["folder"], record["skip_checksums"]) == (
        "digits",
        str((tmp_path / "digits").resolve()),
        False,
    )


def test_a_stamp_of_a_layout_only_check_does_not_stand_in_for_a_full_one(tmp_path):
    stamps = tmp_path / "stamps"
    skipped = verify.verify("digits", tmp_path, skip_checksums=True, stamp_dir=stamps)
    assert skipped["checksums"].startswith("skipped (skip_checksums)")
    full = verify.verify("digits", tmp_path, stamp_dir=stamps)  # verified again, not the skipped stamp
    assert full["checksums"] == "verified against the publisher"
    assert json.loads((stamps / f"digits{folders.VERIFIED_SUFFIX}").read_text()) == full
    # A torn stamp (a write cut short) is no record: verified again and rewritten whole.
    (stamps / f"digits{folders.VERIFIED_SUFFIX}").write_text('{"folder": ')
    assert verify.verify("digits", tmp_path, stamp_dir=stamps) == full
    assert json.loads((stamps / f"digits{folders.VERIFIED_SUFFIX}").read_text()) == full


@pytest.mark.parametrize(
    "args, sentence",
    [
        (["cifar10", "--data-root", "{root}"], "ring: Dataset cifar10 is missing "),
        (["cifar10", "--data-root", "{root}/nope"], "ring: Data root {root}/nope does not exist"),
        (["mnist_m", "--data-root", "{root}"], "ring: Unknown dataset 'mnist_m'"),
    ],
    ids=["missing", "no-root", "unknown"],
)
def test_a_failed_check_is_one_sentence_and_touches_nothing(tmp_path, capsys, args, sentence):
    ok = tmp_path / "x.ok"
    argv = ["check", *(a.format(root=tmp_path) for a in args), "--touch", str(ok)]
    assert verify.main(argv) == 1
    out = capsys.readouterr()
    assert out.err.startswith(sentence.format(root=tmp_path)) and out.err.count("\n") == 1 and out.out == ""
    assert not ok.exists()
