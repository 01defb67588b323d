"""ring.data.store and ring.prepare: the prepared store is the PIL resize, in ImageFolder's order, and says so."""

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import datasets as tvd
from torchvision import transforms as T

from ring import prepare
from ring.core import catalog
from ring.data import augment, datasets, store, store_layout
from ring.data.digits import generate_folder
from ring.data.views import StoreViews
from ring.plan import checks

SIZE = catalog.DATASETS["digits_folder"].store_size


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """digits_folder and its raw and jpeg95 stores, in shards of 500 images (three training shards, one test)."""
    data = tmp_path_factory.mktemp("data")
    generate_folder(data / "digits_folder")
    for fmt in store.FORMATS:
        prepare.build(prepare.Target("digits_folder", data, fmt, shard_images=500), workers=1)
    return data


def folder(root: Path, split: str) -> tvd.ImageFolder:
    return tvd.ImageFolder(str(root / "digits_folder" / store_layout.SPLIT_FOLDERS[split]))


def stored(root: Path, fmt: str) -> Path:
    return store_layout.store_dir(root / "digits_folder", fmt, SIZE)


def test_the_listing_is_imagefolders_order(root):
    classes, samples = store.list_folder(root / "digits_folder" / "train")
    reference = folder(root, "train")
    assert classes == reference.classes
    assert [(str(root / "digits_folder" / "train" / p), label) for p, label in samples] == reference.samples
    assert store.IMG_EXTENSIONS == tuple(tvd.folder.IMG_EXTENSIONS)


@pytest.mark.parametrize("split", ["train", "test"])
def test_the_raw_store_is_the_pil_resize_bit_for_bit(root, split):
    reference, reader = folder(root, split), store.StoreReader(stored(root, "raw"), split)
    assert len(reader) == len(reference) and reader.targets == reference.targets
    resize = T.Resize((SIZE, SIZE))
    for i in range(len(reference)):
        assert np.array_equal(reader.array(i), np.asarray(resize(reference[i][0]))), i


def test_jpeg95_stays_within_its_stated_psnr_on_photo_like_images(tmp_path):
    """docs/fidelity.md's row: 38-39 dB on smooth content with sensor-like noise (sigma 12), the hardest case for JPEG;
    a bound of 37 dB leaves room for libjpeg builds that round differently."""
    rng = np.random.default_rng(0)
    psnr = []
    for _ in range(6):
        w, h = (int(v) for v in rng.integers(300, 501, 2))
        smooth = Image.fromarray(rng.integers(0, 256, (h // 8, w // 8, 3), dtype=np.uint8)).resize(
            (w, h), Image.BICUBIC
        )
        photo = Image.fromarray(np.clip(np.asarray(smooth) + rng.normal(0, 12, (h, w, 3)), 0, 255).astype(np.uint8))
        path = tmp_path / "photo.jpg"
        photo.save(path, quality=90)
        reference = store.resized(path, 256)
        back = store.FORMATS["jpeg95"].decode(store.FORMATS["jpeg95"].encode(reference), 256).astype(float)
        psnr.append(10 * np.log10(255.0**2 / np.mean((back - np.asarray(reference)) ** 2)))
    assert min(psnr) > 37.0, psnr


def test_the_store_is_readable_with_numpy_alone(root):
    """docs/datasets.md's recipe: index.npy names the shard, offset and length of each record."""
    base = stored(root, "jpeg95") / "train"
    row = np.load(base / store_layout.INDEX, allow_pickle=False)[1234]
    record = np.fromfile(base / f"shard-{row['shard']:05d}" / "data.bin", np.uint8, row["length"], offset=row["offset"])
    image = np.asarray(Image.open(io.BytesIO(record.tobytes())))
    assert image.shape == (SIZE, SIZE, 3) and row["label"] == folder(root, "train").targets[1234]
    assert np.array_equal(image, store.StoreReader(stored(root, "jpeg95"), "train").array(1234))


def test_views_from_the_store_are_todays_views(root):
    """The CPU path: the store's image through pretrain_view is the file's (its Resize is then a copy); the device
    path: the store's batch, as the loader stacks it, gives the views apply() makes of the resized images."""
    view = datasets.pretrain_view(SIZE, SIZE, 0.2, datasets.normalize(catalog.spec("digits_folder")))
    from_files = datasets.Views(folder(root, "train"), view, n_views=2, seed=3)
    from_store = datasets.Views(store.StoreImages(stored(root, "raw"), "train"), view, n_views=2, seed=3)
    for i in (0, 700, 1346):
        for a, b in zip(from_files[i][:2], from_store[i][:2], strict=True):
            assert torch.equal(a, b)
    params = augment.ViewParams(SIZE, 0.2)
    items = [StoreViews(store.StoreReader(stored(root, "raw"), "train"), params, 2, seed=3)[i] for i in (5, 600, 1200)]
    batch = torch.utils.data.default_collate(items)
    maker = augment.DeviceViews(None, torch.device("cpu"), SIZE, SIZE, (0.5,) * 3, (0.25,) * 3)
    views = maker(batch[1:3], batch[-1], batch[0])
    resized = torch.stack(
        [torch.from_numpy(np.array(T.Resize((SIZE, SIZE))(folder(root, "train")[i][0]))) for i in (5, 600, 1200)]
    )
    for got, p in zip(views, batch[1:3], strict=True):
        assert torch.equal(got, augment.apply(resized.permute(0, 3, 1, 2), p, SIZE, SIZE, (0.5,) * 3, (0.25,) * 3))


def test_a_cell_reads_the_store_only_at_its_size_and_format(root):
    assert datasets.source(catalog.spec("digits_folder"), root, "jpeg95", SIZE).store == stored(root, "jpeg95")
    assert datasets.source(catalog.spec("digits_folder"), root, "none", SIZE).store is None
    assert (
        datasets.source(catalog.spec("digits_folder"), root, "jpeg95", SIZE + 8).store is None
    )  # another resize: the files
    assert datasets.source(catalog.spec("digits_colour"), root, "jpeg95", SIZE).store is None  # in memory: no store
    assert isinstance(datasets.load("digits_folder", root, "test", "raw", SIZE), store.StoreImages)
    assert checks.STORE_FORMATS is store_layout.CHOICES  # the plan refuses what the store cannot read, by its own list


def test_a_missing_store_is_one_sentence(tmp_path, root):
    source = datasets.source(
        catalog.spec("digits_folder"), tmp_path, "jpeg95", SIZE
    )  # no store was built under tmp_path
    with pytest.raises(
        catalog.DatasetMissing,
        match=rf"^No prepared store at .*jpeg95-32 .*; build it with `ring prepare build digits_folder --data-root "
        rf"{tmp_path} --format jpeg95`, or set store: none",
    ):
        datasets.Source(source.name, source.spec, root, source.build, source.store).check()


def test_verify_names_a_truncated_or_altered_shard(tmp_path, root):
    import shutil

    copy = tmp_path / "jpeg95-32"
    shutil.copytree(stored(root, "jpeg95"), copy)
    assert store_layout.verify(copy, "jpeg95", SIZE)["splits"]["train"]["images"] == 1347
    shard = copy / "train" / "shard-00001" / "data.bin"
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF
    shard.write_bytes(bytes(data))
    store_layout.verify(copy, "jpeg95", SIZE, checksums=False)  # the size still matches
    with pytest.raises(
        store_layout.StoreError, match=r"shard-00001/data.bin does not match its recorded SHA-256 \(damaged"
    ):
        store_layout.verify(copy, "jpeg95", SIZE)
    shard.write_bytes(bytes(data[:-10]))
    with pytest.raises(store_layout.StoreError, match=r"shard-00001/data.bin is missing or truncated"):
        store_layout.verify(copy, "jpeg95", SIZE, checksums=False)
    with pytest.raises(store_layout.StoreError, match=r"holds jpeg95 at 32 px, not raw at 32"):
        store_layout.verify(copy, "raw", SIZE)


def test_dali_with_a_store_is_refused_at_plan_time():
    """DALI decodes the original files itself: a cell that reads the store cannot use it, and the plan says so."""
    from ring.core.config import PretrainConfig

    with pytest.raises(
        checks.ConfigError, match=r"^cell: augment='dali' reads the original files, and this cell reads "
    ):
        checks.check(PretrainConfig(method="IR", dataset="imagenet", augment="dali"), "cell")
    checks.check(PretrainConfig(method="IR", dataset="imagenet", augment="dali", store="none"), "cell")
    checks.check(PretrainConfig(method="IR", dataset="imagenet", augment="dali", resize=288), "cell")  # no store
