"""ring.data.stores: where a store lies, which cells read one, the room it needs, and what ring status says of it."""

import pytest

from ring import prepare
from ring.core import catalog
from ring.data import store, stores
from tests.data.test_store import SIZE, root  # noqa: F401  (the fixture: digits_folder and its two stores)


def test_a_cell_reads_a_store_only_of_an_image_folder_at_its_store_size():
    size = catalog.DATASETS["imagenet"].store_size
    assert stores.cell_store("d/imagenet", size, "jpeg95", 256) == stores.store_dir("d/imagenet", "jpeg95", 256)
    assert stores.cell_store("d/imagenet", size, "none", 256) is None
    assert stores.cell_store("d/imagenet", size, "raw", 224) is None
    assert stores.cell_store("d/cifar10", catalog.DATASETS["cifar10"].store_size, "raw", 256) is None
    with pytest.raises(ValueError, match=r"^Unknown store format 'png'; choose jpeg95, raw, none\.$"):
        stores.cell_store("d/imagenet", size, "png", 256)
    # ImageNet's shards and room, as docs/datasets.md states them.
    assert stores.n_shards(1_281_167) + stores.n_shards(50_000) == 267
    assert round(stores.needed_bytes(1_331_167, "jpeg95", 256) / 1e9) == 73
    assert round(stores.needed_bytes(1_331_167, "raw", 256) / 1e9) == 262


def test_too_little_room_and_a_wrong_count_are_one_sentence(tmp_path, monkeypatch, root):
    monkeypatch.setattr(stores.shutil, "disk_usage", lambda _: type("U", (), {"free": 10**6})())
    with pytest.raises(
        store.StoreError,
        match=r"^The raw store of 1,797 images at 32x32 needs about 0.0 GB under .* "
        r"which has 0.0 GB free; free space there",
    ):
        store.check_room(tmp_path / "x", 1797, "raw", 32)
    monkeypatch.undo()
    with pytest.raises(store.StoreError, match=r"holds 1,347 images, the catalog expects 1,348; complete the dataset"):
        store.write_listing(tmp_path / "train", root / "digits_folder" / "train", 1348)


def test_ring_status_names_each_store_and_how_far_it_got(tmp_path, root):
    import shutil

    from ring.cluster.batch import store_lines
    from ring.plan import grid as G

    path = tmp_path / "g.yaml"
    path.write_text(
        "datasets: [digits_folder, digits_colour]\nmethods: [IR]\nseeds: [0]\n"
        "pretrain: {all: {resize: 32, crop: 32, store: raw, bank_negatives: 256, queue_size: 256}}\n"
        "lincls: {all: {resize: 32, crop: 32, store: raw}}\n"
    )
    grid = G.load(path)
    data = tmp_path / "data"
    shutil.copytree(root / "digits_folder", data / "digits_folder", ignore=shutil.ignore_patterns("store"))
    built = store.store_dir(data / "digits_folder", "raw", SIZE)
    assert store_lines(grid, str(data)) == [
        f"store {built}: not built (snakemake prepare_stores builds it, all_tables on its own)"
    ]  # digits_colour is held in memory: no store
    prepare.build(prepare.Target("digits_folder", data, "raw"), workers=1)  # the catalog's shards: one per split
    assert store_lines(grid, str(data)) == [f"store {built}: built, 5.5 MB, every shard at its recorded size"]
    (built / store.MANIFEST).unlink()  # an interrupted build: one shard done, the other and the manifest not yet
    (built / "test" / "shard-00000" / store.SHARD_RECORD).unlink()
    assert store_lines(grid, str(data)) == [
        f"store {built}: building: 1 of 2 shards done (the prepare stage resumes from them)"
    ]
