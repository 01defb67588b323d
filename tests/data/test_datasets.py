import dataclasses
import json
import os
import pickle

import numpy as np
import pytest
import torch

from ring.data import datasets, verify
from ring.plan import catalog


def test_digits_split_is_fixed_and_stratified():
    images, targets, splits = datasets._digits_arrays()
    assert images.dtype == np.uint8 and images.shape == (1797, 8, 8)
    assert len(splits["train"]) == 1347 and len(splits["test"]) == 450
    assert not set(splits["train"]) & set(splits["test"])
    assert np.bincount(targets[splits["test"]]).tolist() == [45, 46, 44, 46, 45, 46, 45, 45, 43, 45]


def test_digits_catalog_statistics_match_the_training_split():
    images, _, splits = datasets._digits_arrays()
    pixels = images[splits["train"]] / 255.0
    spec = catalog.spec("digits")
    assert spec.mean[0] == pytest.approx(pixels.mean(), abs=1e-4)
    assert spec.std[0] == pytest.approx(pixels.std(), abs=1e-4)


def test_colour_digits_statistics_match_the_training_split():
    images, _, splits = datasets._digits_colour_arrays()
    pixels = images[splits["train"]].reshape(-1, 3) / 255.0
    spec = catalog.spec("digits_colour")
    assert spec.mean == pytest.approx(tuple(pixels.mean(axis=0)), abs=1e-4)
    assert spec.std == pytest.approx(tuple(pixels.std(axis=0)), abs=1e-4)
    assert not spec.grey


def test_colour_digits_are_the_digits_tinted_deterministically_with_ab_channels_that_draw_the_digit():
    from ring.engine.encoder import lab_views

    grey, targets, splits = datasets._digits_arrays()
    colour, colour_targets, colour_splits = datasets._digits_colour_arrays()
    assert colour.shape == (*grey.shape, 3) and (colour_targets == targets).all()
    assert all((colour_splits[k] == splits[k]).all() for k in splits)
    # Deterministic for a seed (a fresh generator each call), another seed another tint; the background stays black.
    assert (datasets.tint(grey, seed=0) == colour).all() and not (datasets.tint(grey, seed=1) == colour).all()
    assert (colour[grey == 0] == 0).all()
    # CMC's views, as it computes them (kornia's Lab of the normalised batch): the ab view varies within an image
    # and between images, where on the grey digits it is one constant (the test's guard against a vacuous pass).
    for name, threshold in (("digits_colour", 0.05), ("digits", None)):
        base = datasets.load(name, "unused", "test")
        view = datasets.eval_view(name, 32, 32)
        batch = torch.stack([view(base[i][0]) for i in range(64)])
        _, ab = lab_views(batch, catalog.spec(name).mean, catalog.spec(name).std)
        if threshold is None:
            # Grey: a = b = 0 up to float32 rounding in kornia (2e-5 measured); colour: 0.14 and more (measured).
            assert float(ab.transpose(0, 1).flatten(1).std(dim=1).max()) < 1e-3
        else:
            # Every image: its strokes apart from its background in a or b (a hue near yellow-green moves a little).
            assert float(ab.flatten(2).std(dim=2).sum(dim=1).min()) > threshold
            assert float(ab.mean(dim=(2, 3)).std(dim=0).min()) > threshold  # and the hues differ between images


def test_views_are_reproducible_per_sample_and_epoch():
    base = datasets.load("digits", "unused", "pretrain")
    views = datasets.Views(base, datasets.pretrain_view("digits", 32, 32, 0.2), n_views=2, seed=3)
    a1, a2, label, index = views[5]
    assert a1.shape == (3, 32, 32) and index == 5 and 0 <= label < 10
    assert not torch.equal(a1, a2)  # two different views of one image
    assert torch.equal(views[5][0], a1)  # same (seed, epoch, index) -> same view
    state = torch.get_rng_state()
    views.set_epoch(1)
    assert not torch.equal(views[5][0], a1)
    assert torch.equal(torch.get_rng_state(), state)  # the global RNG is untouched


def test_corrupt_cifar10_files_fail_with_one_sentence(tmp_path):
    # Files in the right places whose contents do not match torchvision's checksums.
    folder = tmp_path / "cifar10" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]:
        (folder / name).write_bytes(b"not a pickle")
    catalog.check("cifar10", tmp_path)  # the layout is complete ...
    with pytest.raises(
        catalog.DatasetMissing, match=r"Dataset cifar10 under .* is incomplete or corrupted .*; fetch it with"
    ):
        datasets.load("cifar10", tmp_path, "pretrain")  # ... but the contents are not CIFAR-10


# -- the data check verifies contents against the publisher (README "Datasets") ----------------------


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
        md5[file] = catalog.md5_of(path)
    monkeypatch.setattr(cls, "train_list", [[f, md5[f]] for f, _ in cls.train_list])
    monkeypatch.setattr(cls, "test_list", [[f, md5[f]] for f, _ in cls.test_list])
    if hasattr(cls, "meta"):
        meta = catalog.folder(name, root) / cls.base_folder / cls.meta["filename"]
        meta.write_bytes(pickle.dumps({cls.meta["key"]: [f"class{c}" for c in range(100)]}))
        monkeypatch.setattr(cls, "meta", {**cls.meta, "md5": catalog.md5_of(meta)})
    return verify.published_md5(name)


@pytest.mark.parametrize("name", ["cifar10", "cifar100", "stl10"])
def test_data_check_verifies_torchvisions_md5_once_and_names_a_truncated_file(tmp_path, monkeypatch, capsys, name):
    files = _publish_fake(name, tmp_path / "data", monkeypatch)
    stamps, ok = tmp_path / "results" / "data", tmp_path / "results" / "data" / f"{name}.ok"
    args = ["check", name, "--data-root", str(tmp_path / "data"), "--stamp-dir", str(stamps), "--touch", str(ok)]
    assert verify.main(args) == 0
    record = json.loads((stamps / f"{name}{catalog.VERIFIED_SUFFIX}").read_text())
    assert record["checksums"] == "verified against the publisher" and record["md5"] == files
    if name != "stl10":
        assert len(datasets.load(name, tmp_path / "data", "train")) == 4 * len(
            datasets.BUILDERS[name](catalog.folder(name, tmp_path / "data"), "train").train_list
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
        monkeypatch.setattr(catalog.os, "access", lambda path, mode: bool(os.stat(path).st_mode & 0o200))
    try:
        status = verify.main(
            ["check", "digits", "--data-root", str(tmp_path), "--writable", str(tmp_path / "results" / "smoke")]
        )
    finally:
        cell.chmod(0o755)
    assert status == 1
    assert capsys.readouterr().err.strip() == (
        f"ring: Results folder {cell} is not writable by this user; fix its "
        "permissions (chmod u+w) or move it away before training."
    )
