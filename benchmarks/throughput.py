"""Pretraining images/s of one method on a ResNet-18: the device pipeline, device tensors, the PIL loader.

    python benchmarks/throughput.py --method MoCo [--compile] [--tiny]

One training step is the real one (``ring.engine.objectives`` through ``ring.engine.encoder.Precision`` and
``Grouped``, bf16 and channels-last on CUDA), on CIFAR-layout data (50,000 random uint8 images of
32x32, resized to 256 and cropped to 224 as in the paper's CIFAR cells; batch 256).  Three feeds:

* ``synthetic``: the same random views, already on the device, every step (the ceiling);
* ``device``: ``augment: device`` -- the images live on the device, the loader's workers draw the
  views' parameters, ``ring.data.augment`` makes the views there in batches;
* ``pil``: ``augment: cpu`` -- today's PIL views made by the loader's workers;
* ``store``: ImageNet's path with its prepared store (``ring.data.store``): photo-like JPEGs
  (``benchmarks/store_loader.py``) prepared at ``resize`` in ``jpeg95``, the loader's workers decode records into one
  uint8 batch (``ring.data.views.StoreViews``), the device makes the views from it (compiled with ``--compile``).
* ``store_gpu``: the same store with ``store_decode: gpu``: the workers read the records' bytes, a decoder thread
  decodes them on the GPU's JPEG decoder into a ring of device buffers (``ring.data.gpu_decode``); CUDA only (on a
  CPU it is skipped, and ``skipped_feeds`` says why).

Also: the views alone (views/s), made by the device path in batches and by PIL in one process, the
evaluation passes' PIL centre crops in one process (what ``ring.plan.estimate`` prices the kNN monitor's and linear
evaluation's loader workers from), and for LA one k-means reclustering of the bank.  On a CPU the views are the
smoke grid's 32 px.
Images/s count images, not views (MoCo's two views of an image count once).  Steps:
``RING_BENCH_WARMUP`` (default 3) then ``RING_BENCH_STEPS`` (default 10) timed ones per feed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import LAB_CONVERSION, items_per_second, machine, sync, write  # noqa: E402
from ring.core.catalog import spec  # noqa: E402
from ring.core.config import PretrainConfig  # noqa: E402
from ring.core.methods import method as method_spec  # noqa: E402
from ring.data import augment, datasets  # noqa: E402
from ring.engine.encoder import Precision, resolve_precision  # noqa: E402
from ring.engine.grouped_bn import Grouped  # noqa: E402
from ring.engine.objectives import build_encoder, build_objective, views_per_image  # noqa: E402
from ring.engine.objectives.ring import chunk_elements  # noqa: E402
from ring.engine.runtime import epoch_batches, make_loader  # noqa: E402
from ring.pretrain import objective_settings  # noqa: E402

# The paper's four throughput families, each measured by its base method; any registered method (a plug-in's
# included) can be measured, and its file is named by its objective's family, what ring.plan.estimate looks up.
METHODS = ("IR", "MoCo", "CMC", "LA")
# --channels-last other than auto: (file name suffix, the result's "variant", which ring.plan.estimate skips: a cell
# runs auto's layout).  MoCo's 8 BatchNorm groups with "on" against auto's NCHW are what decides auto for grouped cells.
LAYOUTS = {"auto": ("", None), "on": ("_channels_last", "channels-last forced on"), "off": ("_nchw", "NCHW forced")}


def build(name: str, n: int, batch: int, resize: int, crop: int, device, compile_: bool, channels_last: str = "auto"):
    overrides = {"bn_groups": 8, "queue_size": 65_536} if name == "MoCo" else {}
    if name == "LA":
        overrides["kmeans_warmup_epochs"] = 0  # LA's own step (background neighbours, close positives)
        overrides["kmeans_k"] = min(PretrainConfig.kmeans_k, n // 8)  # the tiny run's 512 images
    cfg = PretrainConfig(
        method=name,
        dataset="cifar10",
        batch_size=batch,
        resize=resize,
        crop=crop,
        bank_negatives=min(4096, n // 2),
        channels_last=channels_last,
        **overrides,
    )
    if name == "MoCo":
        cfg.queue_size = max(batch, min(cfg.queue_size, n))
    spec_ = method_spec(name)
    bf16, channels_last = resolve_precision(cfg.precision, cfg.channels_last, device, cfg.bn_groups)
    settings = objective_settings(cfg, spec_, spec(cfg.dataset))
    encoder = build_encoder(settings).to(device)
    net = Precision(encoder, bf16, channels_last, compile_)  # as ring.pretrain with compile: on (auto on CUDA)
    model = Grouped(net, cfg.bn_groups)
    objective = build_objective(settings, model, n, chunk_elements(cfg.max_chunk_elements, device)).to(device)
    optimizer = torch.optim.SGD(encoder.parameters(), lr=0.03, momentum=0.9, foreach=True)  # as ring.pretrain
    return cfg, spec_, model, objective, optimizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--method", required=True, help=f"a registered method; the paper's families: {', '.join(METHODS)}"
    )
    parser.add_argument(
        "--compile", action="store_true", help="torch.compile the encoder and the device views (default mode)"
    )
    parser.add_argument("--feeds", default="synthetic,device,pil", help="comma-separated subset")
    parser.add_argument(
        "--channels-last",
        default="auto",
        choices=("auto", "on", "off"),
        help="the encoder's memory format (auto: on for CUDA, NCHW with BatchNorm groups); 'on' is "
        "written as a _channels_last result, 'off' as a _nchw one",
    )
    parser.add_argument("--workers", type=int, default=None, help="loader processes (default: 0 on CPU, 8 on GPU)")
    parser.add_argument("--tiny", action="store_true", help="seconds-long run for the test suite")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gpu = device.type == "cuda"
    workers = args.workers if args.workers is not None else (min(8, os.cpu_count() or 1) if gpu else 0)
    warmup = int(os.environ.get("RING_BENCH_WARMUP", 1 if args.tiny else 3))
    steps = int(os.environ.get("RING_BENCH_STEPS", 2 if args.tiny else 10 if gpu else 4))
    # On a CPU the paper's 224-pixel steps take minutes each: the CPU measures the smoke grid's 32-pixel views.
    n, batch, resize, crop = (
        (512, 16, 32, 32) if args.tiny else (50_000, 256, 256, 224) if gpu else (50_000, 256, 32, 32)
    )
    if args.tiny or not gpu:
        torch.backends.cudnn.benchmark = False
    else:
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    spec_ = method_spec(args.method)  # one sentence for an unknown name
    family = spec_.objective.family(spec_)
    cfg, spec_, model, objective, optimizer = build(
        args.method, n, batch, resize, crop, device, args.compile, args.channels_last
    )
    n_views = views_per_image(spec_)
    s = spec("cifar10")
    extra = {}
    if spec_.uses_kmeans:
        sync(device)
        start = time.perf_counter()
        objective.start_epoch(0)
        sync(device)
        extra["kmeans_recluster_s"] = time.perf_counter() - start

    def step(views, index):
        first = "first_step_s" not in extra  # with --compile, the compilation: what gpu_suite.sh budgets
        start = time.perf_counter()
        loss = objective(model, views, index, None)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if first:
            sync(device)
            extra["first_step_s"] = time.perf_counter() - start

    def timed(batches) -> float:
        return items_per_second(batches, lambda b: step(*b), device, warmup, count=lambda b: len(b[1]))

    order = epoch_batches(n, batch, 0, 0)[: warmup + steps]
    on_device = augment.device_images(images, device)
    make = augment.DeviceViews(on_device, device, resize, crop, s.mean, s.std, args.compile)  # views compiled too

    def synthetic():
        views = [torch.randn(batch, 3, crop, crop, device=device) for _ in range(n_views)]
        index = torch.arange(batch, device=device)
        return timed((views, index) for _ in range(warmup + steps))

    def device_feed():
        views = datasets.Views(augment.Labels(np.zeros(n)), augment.ViewParams(resize, cfg.crop_scale_min), n_views)
        loader = make_loader(views, order, workers, device)

        def batches():
            for *params, _labels, index in loader:
                yield make(params, index), index.to(device, non_blocking=True)

        return timed(batches())

    def pil_feed():
        views = datasets.Views(
            datasets.ArrayImages(images, np.zeros(n)),
            datasets.pretrain_view(resize, crop, cfg.crop_scale_min, datasets.normalize(spec("cifar10"))),
            n_views,
        )
        loader = make_loader(views, order, workers, device)

        def batches():
            for *v, _labels, index in loader:
                yield [x.to(device, non_blocking=True) for x in v], index.to(device, non_blocking=True)

        return timed(batches())

    def augment_only() -> float:
        g = torch.Generator().manual_seed(0)
        draw = augment.ViewParams(resize, cfg.crop_scale_min)
        params = torch.stack([draw(None) for _ in range(batch)])
        index = torch.randint(0, n, (batch,), generator=g)
        make([params], index)
        sync(device)
        start = time.perf_counter()
        for _ in range(steps):
            make([params], index)
        sync(device)
        return steps * batch / (time.perf_counter() - start)

    def pil_only() -> float:
        view = datasets.Views(
            datasets.ArrayImages(images, np.zeros(n)),
            datasets.pretrain_view(resize, crop, cfg.crop_scale_min, datasets.normalize(spec("cifar10"))),
        )
        start = time.perf_counter()
        for i in range(batch):
            view[i]
        return batch / (time.perf_counter() - start)

    def eval_pil_only() -> float:
        """The evaluation passes' input in one process (resize, centre crop, tensor, normalisation of an array image),
        images/s: what the kNN monitor's and linear evaluation's loader workers pay per in-memory image."""
        view = datasets.Views(
            datasets.ArrayImages(images, np.zeros(n)),
            datasets.eval_view(resize, crop, datasets.normalize(spec("cifar10"))),
        )
        start = time.perf_counter()
        for i in range(batch):
            view[i]
        return batch / (time.perf_counter() - start)

    def eval_only() -> float:
        """Forward passes without gradients (kNN monitors, linear evaluation's features), images/s."""
        x = torch.randn(batch, 3, crop, crop, device=device)
        net = model.module
        with torch.no_grad():
            for _ in range(warmup):
                net(x)
            sync(device)
            start = time.perf_counter()
            for _ in range(steps):
                net(x)
            sync(device)
        return steps * batch / (time.perf_counter() - start)

    stored = {}

    def store_reader(timed_steps: int):
        """ImageNet's path: photo-like JPEGs prepared at ``resize`` in jpeg95, built once for both store feeds."""
        from benchmarks.store_loader import make_photos
        from ring import prepare
        from ring.data import store, store_layout

        if "reader" not in stored:
            folder = Path(scratch.name) / "photos"
            make_photos(folder, (warmup + timed_steps) * batch, 16, max(workers, 1))
            prepare.build(prepare.Target.of_folder(folder, "jpeg95", resize, 1000), max(workers, 1))
            stored["reader"] = store.StoreReader(store_layout.store_dir(folder, "jpeg95", resize), "train")
        return stored["reader"]

    def store_feed(place: str):
        """The store's records decoded by the loader's workers (``cpu``) or by the GPU decoder's thread (``gpu``),
        the views made on the device from the uint8 batch (compiled with ``--compile``)."""
        from ring.data.views import store_views

        # The loader's workers decode ahead (2 batches each): timed over 10 steps, a fast step would be fed from
        # batches decoded during the warm-up.  Three times that depth is timed, so the loader's own rate shows.
        timed_steps = max(steps, 3 * 2 * workers)
        reader = store_reader(timed_steps)
        make_store = augment.DeviceViews(None, device, resize, crop, s.mean, s.std, args.compile)
        params = augment.ViewParams(resize, cfg.crop_scale_min)
        tv = store_views(reader, params, n_views, 0, make_store, batch, place)
        order = epoch_batches(len(reader), batch, 0, 0)
        loader = make_loader(tv.dataset, order, workers, device, collate_fn=tv.collate)

        def batches():
            for b in tv.feed(loader):
                yield tv.batch(b, 0, 0)

        extra["store_timed_steps"] = timed_steps  # ring.plan.estimate trusts a store rate timed past the prefetch
        rate = timed(batches())
        if place == "gpu":
            extra["store_gpu_cpu_fallback_batches"] = tv.device_views.cpu_fallback_batches
        return rate

    feeds = {
        "synthetic": synthetic,
        "device": device_feed,
        "pil": pil_feed,
        "store": lambda: store_feed("cpu"),
        "store_gpu": lambda: store_feed("gpu"),  # store_decode: gpu (ring.data.gpu_decode)
    }
    chosen = [f for f in args.feeds.split(",") if f]
    unknown = sorted(set(chosen) - feeds.keys())
    if unknown:
        parser.error(f"unknown feeds {', '.join(unknown)}; choose from {', '.join(feeds)}")
    images_per_s, skipped = {}, {}
    scratch = tempfile.TemporaryDirectory()  # the photo-like store of the store feeds
    for name in chosen:
        if name == "store_gpu" and not gpu:
            skipped[name] = (
                "no CUDA device: the GPU's JPEG decoder needs one (tests/data/test_gpu_decode.py runs its "
                "pipeline on the CPU)"
            )
            print(f"throughput {args.method}: {name} skipped, {skipped[name]}", file=sys.stderr, flush=True)
            continue
        print(f"throughput {args.method}: feed {name} ...", file=sys.stderr, flush=True)
        images_per_s[name] = feeds[name]()
        print(f"throughput {args.method}: {name} {images_per_s[name]:.1f} images/s", file=sys.stderr, flush=True)
    payload = {
        "machine": machine(),
        "method": family,
        "measured_method": args.method,
        "views_per_image": n_views,
        "image_size": crop,
        "resize": resize,
        "batch": batch,
        "workers": workers,
        "warmup_steps": warmup,
        "timed_steps": steps,
        "compile": args.compile,
        "bf16": model.module.bf16 if hasattr(model.module, "bf16") else None,
        "channels_last": resolve_precision(cfg.precision, cfg.channels_last, device, cfg.bn_groups)[1],
        "bn_groups": cfg.bn_groups,
        "lab_conversion": LAB_CONVERSION if args.method == "CMC" else None,
        "images_per_s": images_per_s,
        "ratio_device_to_synthetic": images_per_s["device"] / images_per_s["synthetic"]
        if {"device", "synthetic"} <= images_per_s.keys()
        else None,
        # The store's path against the in-memory device pipeline: issue 39's target is >= 0.9.
        "ratio_store_to_device": images_per_s["store"] / images_per_s["device"]
        if {"store", "device"} <= images_per_s.keys()
        else None,
        "ratio_store_gpu_to_device": images_per_s["store_gpu"] / images_per_s["device"]
        if {"store_gpu", "device"} <= images_per_s.keys()
        else None,
        "skipped_feeds": skipped,
        "ratio_pil_to_synthetic": images_per_s["pil"] / images_per_s["synthetic"]
        if {"pil", "synthetic"} <= images_per_s.keys()
        else None,
        "device_augment_views_per_s": augment_only(),
        "pil_views_per_s_one_process": pil_only(),
        "eval_pil_images_per_s_one_process": eval_pil_only(),
        # Not with --compile: a no-grad forward would compile the encoder a second time.
        "eval_images_per_s": None if args.compile else eval_only(),
        "kmeans": {"n": n, "k": cfg.kmeans_k, "clusterings": cfg.kmeans_clusterings, "iters": cfg.kmeans_iters}
        if spec_.uses_kmeans
        else None,
        **extra,
    }
    scratch.cleanup()
    layout, variant = LAYOUTS[args.channels_last]
    if variant:
        payload["variant"] = variant
    suffix = ("_compile" if args.compile else "") + layout
    write(f"throughput_{family}{suffix}", payload, tiny=args.tiny)


if __name__ == "__main__":
    main()
