"""ring.core.catalog: the ground floor's dataset catalog: every entry's sizes and statistics, the choices named when a
name is unknown, the hint that says how to get a dataset, and which datasets refuse to skip checksums."""

import sys
import types
from dataclasses import replace

import pytest

from ring.core import catalog
from ring.core.refs import resolve


def test_an_unknown_dataset_is_refused_with_every_choice():
    with pytest.raises(ValueError) as err:
        catalog.spec("mnist_m")
    choices = ", ".join([*catalog.DATASETS, *catalog.TRANSFER])
    assert str(err.value) == f"Unknown dataset 'mnist_m'; choose one of {choices}."
    assert catalog.spec("dtd") is catalog.TRANSFER["dtd"] and catalog.spec("cifar10") is catalog.DATASETS["cifar10"]


def test_the_hint_is_the_fetch_command_then_the_steps_by_hand_or_only_the_steps_where_nothing_fetches(tmp_path):
    cifar = catalog.hint("cifar10", tmp_path)
    assert cifar.startswith(f"fetch it with `ring fetch cifar10 --data-root {tmp_path}` (or every dataset of the grid")
    assert (
        f"or by hand: run `python -c \"import torchvision; torchvision.datasets.CIFAR10('{tmp_path}/cifar10'" in cifar
    )
    imagenet = catalog.hint("imagenet", tmp_path)
    assert (
        imagenet.startswith("log in at image-net.org")
        and "<data_root>" not in imagenet
        and "ring fetch" not in imagenet
    )
    assert catalog.hint("shapes", tmp_path) == f"generate it with `ring generate shapes --data-root {tmp_path}` " + (
        "(the smoke workflow does this itself)"
    )


def test_only_torchvisions_md5_checked_datasets_refuse_to_skip_checksums():
    assert [n for n in [*catalog.DATASETS, *catalog.TRANSFER] if catalog.loader_verifies(n)] == [
        "cifar10",
        "cifar100",
        "stl10",
    ]
    assert "(torchvision's; CIFAR files are never read unverified)" in catalog.skip_refusal("cifar100")
    assert catalog.skip_refusal("stl10").startswith("skip_checksums cannot be honoured for stl10: ")
    assert "its files are never read unverified" in catalog.skip_refusal("stl10")


def test_every_dataset_has_its_split_sizes_and_its_bank_is_what_pretraining_reads():
    """The publisher's counts, written once here (the estimate and the plan's checks read them)."""
    sizes = {n: (s.bank_images(), s.train_images, s.test_images) for n, s in catalog.DATASETS.items()}
    assert sizes == {
        "digits": (1347, 1347, 450),
        "digits_colour": (1347, 1347, 450),
        "cifar10": (50_000, 50_000, 10_000),
        "cifar100": (50_000, 50_000, 10_000),
        "stl10": (105_000, 5_000, 8_000),  # pretraining adds the 100k unlabeled images
        "imagenet": (1_281_167, 1_281_167, 50_000),
        "digits_folder": (1347, 1347, 450),
    }
    for s in catalog.DATASETS.values():  # a folder dataset's split sizes are its publisher's counts
        assert s.publisher_counts in (None, (s.train_images, s.test_images))
        assert len(s.mean) == len(s.std) == 3 and all(0 < v < 1 for v in (*s.mean, *s.std))


def test_a_dataset_declared_in_the_catalog_alone_is_checked_listed_and_loaded(monkeypatch, tmp_path):
    """A pretraining dataset and a transfer dataset whose entries name their loader and listing by "module:name":
    the data side finds them there (no table of its own to keep in step)."""
    from ring.data import datasets, folders, metadataset

    code = types.ModuleType("toy_dataset_code")
    code.build = lambda folder, split: ("images", folder.name, split)
    code.listing = lambda base: {"train": [("a.png", 0)], "test": [("b.png", 1)]}
    code.load = lambda base, split, listing: (split, listing)
    monkeypatch.setitem(sys.modules, "toy_dataset_code", code)
    spec = catalog.DatasetSpec("Toy", 2, (0.5,) * 3, (0.2,) * 3, (), "", 4, name="toy", loader="toy_dataset_code:build")
    monkeypatch.setitem(catalog.DATASETS, "toy", spec)
    transfer = catalog.TransferSpec(
        "ToyT", 2, ("a.png",), "", "", None, "toy_dataset_code:listing", "toy_dataset_code:load"
    )
    monkeypatch.setitem(catalog.TRANSFER, "toy_t", replace(transfer, name="toy_t"))
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy_t").mkdir()
    for name in ("a.png", "b.png"):
        (tmp_path / "toy_t" / name).write_bytes(b"")
    assert datasets.source(catalog.spec("toy"), tmp_path).load("train") == ("images", "toy", "train")
    folders.check("toy_t", tmp_path)  # its listing's files are there, its labels in range
    assert folders.listing("toy_t", tmp_path)["test"] == [("b.png", 1)]
    assert metadataset.load("toy_t", tmp_path, "train") == ("train", [("a.png", 0)])
    (tmp_path / "toy_t" / "b.png").unlink()
    with pytest.raises(catalog.DatasetMissing, match="b.png"):
        folders.check("toy_t", tmp_path)


def test_every_entry_names_code_that_is_there():
    """Each loader and listing an entry names is a callable where it says."""
    for name, entry in {**catalog.DATASETS, **catalog.TRANSFER}.items():
        assert entry.loader and ":" in entry.loader, name
        for ref in filter(None, (entry.loader, getattr(entry, "listing", None))):
            assert callable(resolve(ref)), (name, ref)
