"""ImageNet's input from its prepared store (ring.data.store) against its original JPEGs: per core, per loader, per GPU.

    python benchmarks/store_loader.py [--tiny] [--workers 8]

Generates photo-like originals (:func:`make_photos`: smooth random content with sensor-like noise, 400-500 x
300-375 px at quality 90, about 110 KB each, as ImageNet's average file), builds their ``jpeg95`` and ``raw`` stores at
256 px with the prepare stage's own code (``ring.prepare``), then measures, in images/s:

* ``prepare_images_per_s``: the build itself (decode, resize, encode) on ``--workers`` processes;
* ``per_core_images_per_s`` (one process, one thread): what pretraining's loader pays per image before its
  views (``original_decode_resize``: PIL decode + Resize((256, 256)) of an original; ``store_jpeg95_decode``;
  ``store_raw_read``) and what the kNN monitor and linear evaluation pay per image (``eval_*``: to a normalised
  centre-crop tensor);
* ``loader_images_per_s``: batches of 256 through ``--workers`` loader processes: the store's pretraining batches
  (``ring.data.views.StoreViews``: records decoded into one uint8 batch, the views' parameters drawn) and the
  original files through the evaluation view (``original_eval``, what kNN and linear evaluation read today);
* ``views_per_s`` (a GPU only): the store's loader and the device views, eager and compiled (MoCo's two views of an
  image, counted once); ``store_decode: gpu``'s decoder thread alone (``gpu_decode``: the workers read the records'
  bytes, nvJPEG decodes each batch into the ring of device buffers, ``ring.data.gpu_decode``) and with the compiled
  views (``store_gpu_device_compiled``);

``ring.plan.estimate`` prices every pass from these figures (``store_loader-<device>.json``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import items_per_second, loader_header, loader_run, write  # noqa: E402
from ring import prepare  # noqa: E402
from ring.core.catalog import spec  # noqa: E402
from ring.data import augment, datasets, store, store_layout  # noqa: E402
from ring.data.views import StoreViews, store_views  # noqa: E402
from ring.engine.runtime import epoch_batches, make_loader  # noqa: E402

RESIZE, CROP, BATCH = 256, 224, 256
# views_per_s's rates, each measured on a GPU only (null on a CPU; ``skipped`` says why).
GPU_VIEWS = ("store_device", "store_device_compiled", "gpu_decode", "store_gpu_device_compiled")
NOISE = 27.0  # sensor-like noise (grey levels, sigma) over smooth content: ~110 KB files at quality 90, as ImageNet's


def _photo(args: tuple[Path, int]) -> int:
    path, seed = args
    rng = np.random.default_rng(seed)
    w, h = int(rng.integers(400, 501)), int(rng.integers(300, 376))
    smooth = Image.fromarray(rng.integers(0, 256, (h // 8, w // 8, 3), dtype=np.uint8)).resize((w, h), Image.BICUBIC)
    noisy = np.clip(np.asarray(smooth) + rng.normal(0, NOISE, (h, w, 3)), 0, 255).astype(np.uint8)
    Image.fromarray(noisy).save(path, quality=90)
    return path.stat().st_size


def make_photos(folder: Path, train: int, val: int, workers: int, classes: int = 4) -> float:
    """``train/`` and ``val/`` image folders of photo-like JPEGs under ``folder``; their mean size in bytes."""
    jobs = []
    for split, n in (("train", train), ("val", val)):
        for c in range(classes):
            (folder / split / f"c{c}").mkdir(parents=True, exist_ok=True)
        jobs += [
            (folder / split / f"c{i % classes}" / f"{i:06d}.jpg", i + (0 if split == "train" else 10**6))
            for i in range(n)
        ]
    with ProcessPoolExecutor(workers) as pool:
        sizes = list(pool.map(_photo, jobs, chunksize=32))
    return float(np.mean(sizes))


def build_stores(folder: Path, workers: int, shard_images: int) -> dict[str, float]:
    """Both stores of ``folder`` at 256 px; the build's images/s of each."""
    rates = {}
    for fmt in store.FORMATS:
        target = prepare.Target.of_folder(folder, fmt, RESIZE, shard_images)
        start = time.perf_counter()
        manifest = prepare.build(target, workers)
        rates[fmt] = sum(s["images"] for s in manifest["splits"].values()) / (time.perf_counter() - start)
    return rates


def per_core(folder: Path, n: int) -> dict[str, float]:
    """Images/s of one process on one thread, for each thing a pass pays per image."""
    torch.set_num_threads(1)
    files = datasets._build_image_folder(folder, "train")
    readers = {fmt: store.StoreReader(store_layout.store_dir(folder, fmt, RESIZE), "train") for fmt in store.FORMATS}
    norm = datasets.normalize(spec("imagenet"))
    view = datasets.eval_view(RESIZE, CROP, norm)
    images = {fmt: store.StoreImages(store_layout.store_dir(folder, fmt, RESIZE), "train") for fmt in store.FORMATS}
    work = {
        "original_decode_resize": lambda i: store.resized(Path(files.samples[i][0]), RESIZE),
        "store_jpeg95_decode": lambda i: readers["jpeg95"].array(i),
        "store_raw_read": lambda i: readers["raw"].array(i),
        "eval_original": lambda i: view(files[i][0]),
        "eval_store_jpeg95": lambda i: view(images["jpeg95"][i][0]),
        "eval_store_raw": lambda i: view(images["raw"][i][0]),
    }
    rates = {}
    for name, fn in work.items():
        fn(0)
        start = time.perf_counter()
        for i in range(n):
            fn(i)
        rates[name] = n / (time.perf_counter() - start)
    torch.set_num_threads(os.cpu_count() or 1)
    return rates


def loader_rates(folder: Path, batches: int, batch: int, workers: int, device: torch.device) -> tuple[dict, dict]:
    """Loader images/s (store batches, original files through the evaluation view) and, on a GPU, views/s."""
    order = epoch_batches(
        len(store.StoreReader(store_layout.store_dir(folder, "jpeg95", RESIZE), "train")), batch, 0, 0
    )
    order = order[:batches]
    params = augment.ViewParams(RESIZE, 0.2)
    s = spec("imagenet")
    loaders, views = {}, {}
    for fmt in store.FORMATS:
        reader = store.StoreReader(store_layout.store_dir(folder, fmt, RESIZE), "train")
        data = StoreViews(reader, params, n_views=2, seed=0)
        loaders[f"store_{fmt}"] = items_per_second(
            make_loader(data, order, workers, device), lambda b: None, device, 1, count=lambda b: len(b[-1])
        )
    files = datasets.Views(
        datasets._build_image_folder(folder, "train"),
        datasets.eval_view(RESIZE, CROP, datasets.normalize(spec("imagenet"))),
    )
    loaders["original_eval"] = items_per_second(
        make_loader(files, order, workers, device), lambda b: None, device, 1, count=lambda b: len(b[-1])
    )
    if device.type != "cuda":
        return loaders, dict.fromkeys(GPU_VIEWS)
    reader = store.StoreReader(store_layout.store_dir(folder, "jpeg95", RESIZE), "train")
    for name, compiled in (("store_device", False), ("store_device_compiled", True)):
        make = augment.DeviceViews(None, device, RESIZE, CROP, s.mean, s.std, compiled)
        loader = make_loader(StoreViews(reader, params, n_views=2, seed=0), order, workers, device)
        views[name] = items_per_second(
            loader, lambda b, make=make: make(list(b[1:3]), b[-1], b[0]), device, 2, count=lambda b: len(b[-1])
        )
    # store_decode: gpu -- the workers read bytes, the decoder thread decodes into the ring of device buffers: the
    # decode alone (each buffer released at once) and with MoCo's two compiled views.
    for name, with_views in (("gpu_decode", False), ("store_gpu_device_compiled", True)):
        make = augment.DeviceViews(None, device, RESIZE, CROP, s.mean, s.std, compiled=True)
        tv = store_views(reader, params, 2, 0, make, batch, "gpu")
        loader = make_loader(tv.dataset, order, workers, device, collate_fn=tv.collate)

        def step(b, tv=tv, with_views=with_views):
            if with_views:
                tv.batch(b, 0, 0)
            else:
                tv.device_views.ring.release(b[0].slot)

        views[name] = items_per_second(tv.feed(loader), step, device, 2, count=lambda b: len(b[-1]))
    return loaders, views


def main() -> None:
    args, device, batches = loader_run(__doc__.splitlines()[0])
    batch = 32 if args.tiny else BATCH  # --tiny: seconds on a 2-core CPU
    train, val, per_core_n = (batch * batches, 16, 16) if args.tiny else (batch * batches, 256, 200)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "photos"
        mean_bytes = make_photos(folder, train, val, args.workers)
        print(f"store_loader: {train + val} photo-like JPEGs, {mean_bytes / 1e3:.0f} KB each", file=sys.stderr)
        build = build_stores(folder, args.workers, shard_images=1000)
        cores = per_core(folder, per_core_n)
        loaders, views = loader_rates(folder, batches, batch, args.workers, device)
        stored = {
            fmt: store_layout.read_manifest(store_layout.store_dir(folder, fmt, RESIZE))["bytes"]
            for fmt in store.FORMATS
        }
    payload = {
        **loader_header(args.workers, batch, batches, RESIZE, CROP),
        "original": f"photo-like JPEGs (smooth content, noise sigma {NOISE:g}), 400-500 x 300-375 px, quality 90, "
        f"{mean_bytes / 1e3:.0f} KB on average",
        "store_bytes_per_image": {fmt: b / (train + val) for fmt, b in stored.items()},
        "prepare_images_per_s": build,
        "per_core_images_per_s": cores,
        "loader_images_per_s": loaders,
        "views_per_s": views,
        "skipped": None
        if device.type == "cuda"
        else "views_per_s: no CUDA device (the device views and the GPU's JPEG decoder are measured on a GPU)",
    }
    for key in ("per_core_images_per_s", "loader_images_per_s"):
        print(f"store_loader: {key} " + ", ".join(f"{k} {v:,.0f}" for k, v in payload[key].items()), file=sys.stderr)
    write("store_loader", payload, tiny=args.tiny)


if __name__ == "__main__":
    main()
