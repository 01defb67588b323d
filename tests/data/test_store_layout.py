"""ring.data.store_layout: where a store lies, which cells read one, the room it needs, what ring status says of it, and
the check that stops a cell before it reads a damaged, truncated, miscounted, stale or missing store."""

import json
import os
import shlex
import shutil

import pytest

from ring import cli, prepare
from ring.core import catalog
from ring.data import datasets, store, store_layout
from tests.data.test_store import SIZE, root  # noqa: F401  (the fixture: digits_folder and its two stores)


@pytest.fixture(scope="module")
def built(tmp_path_factory, root):
    """A data root holding digits_folder and its raw store as the prepare stage builds it (the catalog's shards)."""
    data = tmp_path_factory.mktemp("built")
    shutil.copytree(root / "digits_folder", data / "digits_folder", ignore=shutil.ignore_patterns("store"))
    prepare.build(prepare.Target("digits_folder", data, "raw"), workers=1)
    return data


def _copy(built, tmp_path):
    """A copy of ``built`` (times kept, as copytree keeps them), its store and the cell source reading it."""
    data = shutil.copytree(built, tmp_path / "data")
    where = store_layout.store_dir(data / "digits_folder", "raw", SIZE)
    return data, where, datasets.source(catalog.spec("digits_folder"), data, "raw", SIZE)


def _flip(path, at=100):
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def _refusal(source) -> str:
    with pytest.raises(catalog.DatasetMissing) as err:
        source.check()
    return str(err.value)


def _run_named(sentence: str) -> None:
    """Run the command a sentence names (the one between backquotes) as a user would type it."""
    command = shlex.split(sentence.split("`")[1])
    assert command[0] == "ring"
    assert cli.main(command[1:]) == 0


def test_a_cell_reads_a_store_only_of_an_image_folder_at_its_store_size():
    size = catalog.DATASETS["imagenet"].store_size
    assert store_layout.cell_store("d/imagenet", size, "jpeg95", 256) == store_layout.store_dir(
        "d/imagenet", "jpeg95", 256
    )
    assert store_layout.cell_store("d/imagenet", size, "none", 256) is None
    assert store_layout.cell_store("d/imagenet", size, "raw", 224) is None
    assert store_layout.cell_store("d/cifar10", catalog.DATASETS["cifar10"].store_size, "raw", 256) is None
    with pytest.raises(ValueError, match=r"^Unknown store format 'png'; choose jpeg95, raw, none\.$"):
        store_layout.cell_store("d/imagenet", size, "png", 256)
    # ImageNet's shards and room, as docs/datasets.md states them.
    assert store_layout.n_shards(1_281_167) + store_layout.n_shards(50_000) == 267
    assert round(store_layout.needed_bytes(1_331_167, "jpeg95", 256) / 1e9) == 73
    assert round(store_layout.needed_bytes(1_331_167, "raw", 256) / 1e9) == 262


def test_too_little_room_and_a_wrong_count_are_one_sentence(tmp_path, monkeypatch, root):
    monkeypatch.setattr(store_layout.shutil, "disk_usage", lambda _: type("U", (), {"free": 10**6})())
    with pytest.raises(
        store_layout.StoreError,
        match=r"^The raw store of 1,797 images at 32x32 needs about 5.5 MB under .*, which has 1.0 MB free; free "
        r"space there, or choose store: jpeg95 \(about a quarter of raw\)\.$",
    ):
        store_layout.check_room(tmp_path / "x", 1797, "raw", 32)
    with pytest.raises(
        store_layout.StoreError,
        match=r"needs about 1.5 MB .*, which has 1.0 MB free; free space there, or build it on another disk\.$",
    ):
        store_layout.check_room(tmp_path / "x", 1797, "jpeg95", 32)
    monkeypatch.undo()
    with pytest.raises(
        store_layout.StoreError, match=r"holds 1,347 images, the catalog expects 1,348; complete the dataset"
    ):
        store.write_listing(tmp_path / "train", root / "digits_folder" / "train", 1348)


def test_ring_status_names_each_store_and_how_far_it_got(tmp_path, root):
    import shutil

    from ring.cluster.batch import store_lines
    from ring.plan import grid as grid_plan

    path = tmp_path / "g.yaml"
    path.write_text(
        "datasets: [digits_folder, digits_colour]\nmethods: [IR]\nseeds: [0]\n"
        "pretrain: {all: {resize: 32, crop: 32, bank_negatives: 256, queue_size: 256},\n"
        "           by_dataset: {digits_folder: {store: raw}}}\n"
        "lincls: {all: {resize: 32, crop: 32}, by_dataset: {digits_folder: {store: raw}}}\n"
    )
    grid = grid_plan.load(path)
    data = tmp_path / "data"
    shutil.copytree(root / "digits_folder", data / "digits_folder", ignore=shutil.ignore_patterns("store"))
    built = store_layout.store_dir(data / "digits_folder", "raw", SIZE)
    build = f"`ring prepare build digits_folder --data-root {data} --format raw`"
    assert store_lines(grid, str(data)) == [
        f"store {built}: not built ({build} builds it; `ring run all_tables` builds it first on its own)"
    ]  # digits_colour is held in memory: no store
    prepare.build(prepare.Target("digits_folder", data, "raw"), workers=1)  # the catalog's shards: one per split
    assert store_lines(grid, str(data)) == [f"store {built}: built, 5.5 MB, every file matching its recorded SHA-256"]
    shard = built / "train" / "shard-00000" / store_layout.SHARD_DATA
    _flip(shard)  # the size unchanged: status tells by the checksum
    assert store_lines(grid, str(data)) == [
        f"store {built}: damaged: {shard} does not match its recorded SHA-256 (damaged or edited since the store was "
        f"built); run {build}, which builds that file again."
    ]
    prepare.build(prepare.Target("digits_folder", data, "raw"), workers=1)  # what it names
    assert store_lines(grid, str(data))[0].endswith("built, 5.5 MB, every file matching its recorded SHA-256")
    (built / store_layout.MANIFEST).unlink()  # an interrupted build: one shard done, the other and the manifest not yet
    (built / "test" / "shard-00000" / store_layout.SHARD_RECORD).unlink()
    assert store_lines(grid, str(data)) == [f"store {built}: building: 1 of 2 shards done ({build} resumes from them)"]


def test_a_damaged_truncated_miscounted_or_deleted_store_stops_its_cell_and_the_named_command_rebuilds_it(
    tmp_path, built
):
    """Issue 52 item 1: one byte flipped, a shard cut short, the manifest's count edited, the store deleted: the check a
    cell runs before reading (Source.check) is one sentence naming the file and a command, and that command makes the
    store whole again (a flipped shard used to be kept by the build, which looked at sizes only)."""
    data, where, source = _copy(built, tmp_path)
    build = f"`ring prepare build digits_folder --data-root {data} --format raw`"
    source.check()
    shard = where / "train" / "shard-00000" / store_layout.SHARD_DATA
    _flip(shard)
    assert _refusal(source) == (
        f"{shard} does not match its recorded SHA-256 (damaged or edited since the store was built); run {build}, "
        "which builds that file again."
    )
    _run_named(_refusal(source))
    source.check()
    shard.write_bytes(shard.read_bytes()[:-7])
    assert _refusal(source) == f"{shard} is missing or truncated; run {build}, which builds that file again."
    _run_named(_refusal(source))
    source.check()
    manifest = json.loads((where / store_layout.MANIFEST).read_text())
    manifest["splits"]["train"]["images"] += 1
    (where / store_layout.MANIFEST).write_text(json.dumps(manifest))
    assert _refusal(source) == (
        f"The manifest of {where} says its train split holds 1,348 images, but its listing 1,347, its index 1,347, "
        f"its shards 1,347; run {build}, which writes the index and the manifest again from the shards."
    )
    _run_named(_refusal(source))
    source.check()
    shutil.rmtree(where)
    assert _refusal(source).startswith(
        f"No prepared store at {where} (no readable manifest.json); build it with {build}"
    )
    _run_named(_refusal(source))
    source.check()
    assert (
        store.StoreReader(where, "train").array(5).tobytes()
        == store.StoreReader(store_layout.store_dir(built / "digits_folder", "raw", SIZE), "train").array(5).tobytes()
    )


def test_a_store_older_than_its_images_is_stale_until_built_again(tmp_path, built):
    """An image replaced in the folder after the build (its folder's time changes): the cell's check names the store
    as stale; an image rewritten in place (its folder untouched) is found by the full check, which stats every image
    (ring prepare check, the workflow's store_check)."""
    data, where, source = _copy(built, tmp_path)
    image = next((data / "digits_folder" / "train" / "3").iterdir())
    tmp = image.with_name("new.png")
    shutil.copyfile(next((data / "digits_folder" / "train" / "4").iterdir()), tmp)
    os.replace(tmp, image)  # another digit under this one's name: the folder's time changes
    build = f"`ring prepare build digits_folder --data-root {data} --format raw`"
    assert store_layout.state(where, 2) == f"stale: {_refusal(source)}"  # ring status says so too
    assert _refusal(source) == (
        f"The store at {where} was built from {data / 'digits_folder' / 'train'} before its images changed (an image "
        f"added, removed or rewritten since); delete {where} and run {build}, which builds it from the images as they "
        "are now."
    )
    shutil.rmtree(where)
    _run_named(_refusal(source))
    source.check()
    st = image.stat()
    image.write_bytes(image.read_bytes())  # rewritten in place, the folder untouched
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    source.check()  # the cell's check: a few stats of the folders
    with pytest.raises(store_layout.StoreStale, match=r"before its images changed"):
        store_layout.verify(where, "raw", SIZE, every_image=True)


def test_a_shard_is_hashed_again_only_after_its_size_or_time_changed(tmp_path, built, monkeypatch):
    """The check a cell runs hashes no file of a store the build just recorded, and then only the file whose time
    changed; the (size, mtime, SHA-256) it recomputed is recorded for the next check."""
    data, where, source = _copy(built, tmp_path)
    hashed = []
    real = store_layout.sha256_file
    monkeypatch.setattr(store_layout, "sha256_file", lambda path: hashed.append(path) or real(path))
    source.check()
    assert hashed == []
    shard = where / "test" / "shard-00000" / store_layout.SHARD_DATA
    os.utime(shard, ns=(shard.stat().st_atime_ns, shard.stat().st_mtime_ns + 10**9))
    source.check()
    assert hashed == [shard]
    source.check()
    assert hashed == [shard]
    checked = json.loads((where / store_layout.CHECKED).read_text())
    assert checked["test/shard-00000/data.bin"] == [shard.stat().st_size, shard.stat().st_mtime_ns, real(shard)]
