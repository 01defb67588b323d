"""The per-pass model: a cell's seconds in each pass over its images, from what that pass reads and how.

* **pretraining**: the step on device tensors (compiled where the cell's ``compile`` resolves to on), times Ring's
  measured step-time ratio (the ratio is of steps: it never multiplies the decode or the views), plus the input:
  in-memory datasets the device pipeline's seconds beyond its step; image folders read as today (``store: none``)
  the device JPEG path in the training stream (one batched decode and one resize per image, then each view:
  MoCo's two views share the decode and the resize); image folders read from the prepared store the device views
  on the training stream beside a loader whose workers decode (``jpeg95``) or copy (``raw``) 256 x 256 records:
  the larger of the two.
* **kNN monitor** (at the epochs of ``knn_schedule``: ring.engine.knn_schedule) and **linear evaluation**: each
  image through the encoder, forward only, beside the loader workers that decode and crop it: the larger of the
  forward's and the input's seconds per image.
* **k-means** (LA and its variants, one reclustering per epoch after the warm-up): the distance GEMMs' work,
  ``clusterings x (iters + 1) x 2 n k d`` flops (the last assignment included): up to the LA file's measured run's
  work at that run's rate, beyond it at the device's stated FP32 rate (the clustering runs in fp32), never under the
  measured run's seconds; a device without a stated rate at its measured run's rate.

Throughput is scaled to the cell's crop by pixel count (a ResNet-18's cost per image is proportional to its
pixels); one GPU-hour per hour of one GPU (data-parallel cells scale linearly).
"""

from __future__ import annotations

import math

from ring.core import catalog
from ring.core.config import LinclsConfig, PretrainConfig
from ring.core.methods import METHODS
from ring.core.methods import method as method_spec
from ring.engine import COMPILE
from ring.engine.knn_schedule import knn_epochs
from ring.plan.estimate import inputs
from ring.plan.estimate.figures import FIGURES_GROUP, Figures

# Images per split of each dataset, the catalog's (ring.core.catalog, the publisher's counts): (pretraining images,
# labelled training images, test images).  STL10 pretrains on train+unlabeled.
SIZES = {name: (s.bank_images(), s.train_images, s.test_images) for name, s in catalog.DATASETS.items()}
# Datasets read as JPEG files from image folders (ring.data.datasets): the ones a prepared store can serve.
JPEG_DATASETS = frozenset({"imagenet"})
# Stated dense FP32 rates (flop/s, NVIDIA's data sheets; SXM parts) for the k-means GEMMs, by a part of the device's
# name: the clustering runs in fp32 at torch's default matmul precision (no TF32).  Its argmin passes over the
# n x k distances are memory-bound and not counted, so the price is a lower bound of the clustering's time.
FP32_FLOPS = {"H200": 67e12, "H100 80GB HBM3": 67e12, "A100": 19.5e12}
PASSES = ("pretraining", "kNN monitor", "k-means", "linear evaluation")


def ring_ratio(figures: Figures, method: str, kind: str, n: int) -> float:
    """Ring's measured step-time ratio at the measured size nearest to n (in log scale); one sentence when the
    figures have no ratio for ``method``'s kind of Ring (pricing it at 1.0 would hide its selection's cost)."""
    rows = figures.ring_ratios.get(kind)
    if not rows:
        have = ", ".join(sorted(figures.ring_ratios)) or "none"
        where = "its plug-in's figures folder" if method in METHODS.plugins else "ring/resources/figures"
        raise ValueError(
            f"{method}'s Ring kind {kind} has no measured step-time ratio in the {figures.device} figures (they have "
            f"{have}); measure it on that device with `RING_BENCH_RESULTS=DIR python benchmarks/ring_selection.py "
            f"--method {method}` (DIR: {where}), or price the grid with figures that have it (`--device cpu` reads the "
            "CPU's)."
        )
    return min(rows, key=lambda row: abs(math.log(row[0] / n)))[1]


def family(name: str, figures: Figures) -> str:
    m = method_spec(name)
    fam = m.objective.family(m)
    if fam not in figures.images_per_s:
        raise ValueError(
            f"Method {name} is priced by the throughput of {fam}, which the {figures.device} figures do "
            f"not have (they have {', '.join(sorted(figures.images_per_s))}); run benchmarks/throughput.py "
            f"--method {fam} on that device and put its JSON in the folder your plug-in's {FIGURES_GROUP} entry "
            "point names, or pass --figures DIR (docs/adding-a-method.md, Pricing it)."
        )
    return fam


def compiles(cfg, figures: Figures) -> bool:
    """ring.engine.encoder.resolve_compile, torch-free: "on", or "auto" on a GPU."""
    if cfg.compile not in COMPILE:
        raise ValueError(f"Unknown compile {cfg.compile!r}; choose auto, on or off.")
    return cfg.compile == "on" or (cfg.compile == "auto" and figures.gpu)


def sizes(dataset: str) -> tuple[int, int, int]:
    if dataset not in SIZES:
        raise ValueError(f"No image counts for dataset {dataset!r} in the catalog (ring.core.catalog); add its entry.")
    return SIZES[dataset]


def store_size(dataset: str) -> int:
    """The side of the dataset's prepared store (0: none): the catalog's ``store_size``, the prepare stage's; a
    catalog without it (before ring.data.store) stores ImageNet at the paper's 256."""
    size = getattr(catalog.DATASETS.get(dataset), "store_size", None)
    if size is None:
        return inputs.STORE_SIZE if dataset in JPEG_DATASETS else 0
    return size


def store_of(cfg, figures: Figures, store: str | None) -> str:
    """The store a cell reads: ``store`` (the command's override) or its own key, where it applies (an image-folder
    dataset at its store's resize), else "none"."""
    chosen = store or getattr(cfg, "store", "none")  # a config without the key (before ring.data.store) reads files
    if chosen not in inputs.STORES:
        raise ValueError(f"Unknown store {chosen!r}; choose {', '.join(inputs.STORES)}.")
    size = store_size(cfg.dataset)
    # Without any store figure the store cannot be priced: such cells are priced as today's code (the header says).
    return chosen if size and cfg.resize == size and figures.store else "none"


def _scale(figures: Figures, crop: int) -> float:
    return (crop / figures.image_size) ** 2  # seconds per image grow with the pixels


def _step_s(cfg, figures: Figures, fam: str, compiled: bool) -> float:
    """Seconds per image of the family's step on device tensors, at the cell's crop, times Ring's ratio."""
    rate = figures.compiled[fam]["step"] if compiled and fam in figures.compiled else figures.step_images_per_s[fam]
    m = method_spec(cfg.method)
    ratio = ring_ratio(figures, cfg.method, *m.objective.ring_selection(cfg, sizes(cfg.dataset)[0])) if m.ring else 1.0
    return ratio * _scale(figures, cfg.crop) / rate


def _pipeline_views_s(cfg, figures: Figures, fam: str, compiled: bool) -> float:
    """Seconds per image the in-memory device pipeline spends beyond its step (its views), at the cell's crop."""
    if compiled and fam in figures.compiled:
        c = figures.compiled[fam]
        pipeline, step = c["pipeline"], c["step"]
    else:
        pipeline, step = figures.images_per_s[fam], figures.step_images_per_s[fam]
    return max(1.0 / pipeline - 1.0 / step, 0.0) * _scale(figures, cfg.crop)


def _view_s(cfg, figures: Figures, fam: str, compiled: bool) -> float:
    """Seconds of one device view at the cell's crop: the compiled views where the cell compiles and they were
    measured, else the eager ones, else the in-memory pipeline's views per view."""
    c = figures.compiled.get(fam) if compiled else None
    rate = (c or {}).get("views_per_s") or figures.views_per_s.get(fam)
    if rate:
        return _scale(figures, cfg.crop) / rate
    return _pipeline_views_s(cfg, figures, fam, compiled) / method_spec(cfg.method).objective.n_views


def _jpeg_path_s(cfg, figures: Figures, fam: str, compiled: bool) -> float:
    """Seconds per image of today's device JPEG path: one decode and one resize, then each view (compiled where the
    cell compiles).  The benchmark's one eager view per image gives the resize: its seconds per view less the decode
    and the eager view."""
    j = figures.jpeg
    decode = 1.0 / j["decode_per_s"] if j["decode_per_s"] else 0.0
    eager_view = _view_s(cfg, figures, fam, False) * (j["image_size"] / cfg.crop) ** 2
    resize = max(1.0 / j["views_per_s"] - decode - eager_view, 0.0) * (cfg.resize / j["resize"]) ** 2
    return decode + resize + method_spec(cfg.method).objective.n_views * _view_s(cfg, figures, fam, compiled)


def _store_path_s(cfg, figures: Figures, fam: str, compiled: bool, store: str, gpu_s: float) -> float:
    """Seconds per image when the loader reads the store: the training stream's step and views beside the loader
    workers (and, where measured on the GPU, the store loader with the device views together)."""
    n_views = method_spec(cfg.method).objective.n_views
    view = _view_s(cfg, figures, fam, compiled)
    if store == "jpeg95" and (decoded := inputs.gpu_decode_rate(cfg, figures, fam)):  # store_decode: gpu, measured
        return max(gpu_s + n_views * view, decoded.seconds(1))
    seconds = max(gpu_s + n_views * view, inputs.loader_rate(figures, store).seconds(cfg.num_workers))
    if measured := inputs.store_views(figures, compiled):
        seconds = max(seconds, 1.0 / measured[0] + (n_views - 1) * view)
    return seconds


def pretrain_seconds_per_image(cfg: PretrainConfig, figures: Figures, store: str | None = None) -> float:
    fam = family(cfg.method, figures)
    compiled = compiles(cfg, figures)
    step = _step_s(cfg, figures, fam, compiled)
    reads = store_of(cfg, figures, store)
    if reads != "none":
        return _store_path_s(cfg, figures, fam, compiled, reads, step)
    if cfg.dataset in JPEG_DATASETS and figures.jpeg and figures.jpeg["views_per_s"]:
        return step + _jpeg_path_s(cfg, figures, fam, compiled)
    return step + _pipeline_views_s(cfg, figures, fam, compiled)


def forward_s(cfg, figures: Figures) -> float:
    """Seconds per image of the encoder's forward pass: the method's family's own figure (CMC's both trunks), else
    the fastest measured one, per trunk."""
    m = method_spec(cfg.method, require_implemented=False) if cfg.method else None
    fam = m.objective.family(m) if m else None
    if fam in figures.family_eval_per_s:
        return _scale(figures, cfg.crop) / figures.family_eval_per_s[fam]
    trunks = len(m.encoder_files) if m else 1
    return trunks * _scale(figures, cfg.crop) / figures.eval_images_per_s


def eval_seconds_per_image(cfg, figures: Figures, store: str | None = None) -> float:
    """An evaluation pass's seconds per image: the forward beside the loader workers making the centre crops."""
    forward = forward_s(cfg, figures)
    if cfg.dataset in JPEG_DATASETS:
        rate = inputs.eval_rate(figures, store_of(cfg, figures, store))
    elif figures.memory_eval:
        rate = inputs.Rate(figures.memory_eval[0], 1, figures.memory_eval[1])
    else:
        rate = None
    if rate is None:
        return forward
    if cfg.num_workers == 0:  # the main process decodes, then runs the forward
        return forward + rate.seconds(0)
    return max(forward, rate.seconds(cfg.num_workers))


def knn_hours(cfg: PretrainConfig, figures: Figures, store: str | None = None) -> float:
    folders = catalog.spec(cfg.dataset).store_size > 0
    passes = len(knn_epochs(cfg.knn_schedule, cfg.knn_every, cfg.epochs, folders))
    if not passes:
        return 0.0
    _, n_train, n_test = sizes(cfg.dataset)
    return passes * (n_train + n_test) * eval_seconds_per_image(cfg, figures, store) / 3600.0


def measured_kmeans(figures: Figures) -> tuple[float, float] | None:
    """(flops, seconds) of the LA file's measured reclustering."""
    k = figures.kmeans
    if not k:
        return None
    return k["clusterings"] * (k["iters"] + 1) * 2 * k["n"] * k["k"] * k.get("dim", PretrainConfig.out_dim), k[
        "seconds"
    ]


def stated_flops(figures: Figures) -> tuple[float, str] | None:
    """The device's stated FP32 rate and its name, if :data:`FP32_FLOPS` has one."""
    for part, rate in FP32_FLOPS.items():
        if part in figures.device:
            return rate, part
    return None


def kmeans_seconds(flops: float, figures: Figures) -> float:
    """Seconds of one epoch's reclusterings of ``flops`` GEMM work: at the measured run's rate up to its size (a
    small clustering runs below the GEMM rate: what was measured is what it costs), beyond it at the device's stated
    rate but never less than the measured run took; the measured rate where no rate is stated."""
    measured, stated = measured_kmeans(figures), stated_flops(figures)
    if measured and (flops <= measured[0] or not stated):
        return flops * measured[1] / measured[0]
    if not stated:
        return 0.0
    return max(flops / stated[0], measured[1] if measured else 0.0)


def kmeans_hours(cfg: PretrainConfig, figures: Figures) -> float:
    if not method_spec(cfg.method).uses_kmeans:
        return 0.0
    n = sizes(cfg.dataset)[0]
    flops = cfg.kmeans_clusterings * (cfg.kmeans_iters + 1) * 2 * n * cfg.kmeans_k * cfg.out_dim
    return max(cfg.epochs - cfg.kmeans_warmup_epochs, 0) * kmeans_seconds(flops, figures) / 3600.0


def pretrain_passes(cfg: PretrainConfig, figures: Figures, store: str | None = None) -> dict[str, float]:
    """Hours of each pass of a pretraining cell."""
    n_pre = sizes(cfg.dataset)[0]
    return {
        "pretraining": cfg.epochs * n_pre * pretrain_seconds_per_image(cfg, figures, store) / 3600.0,
        "kNN monitor": knn_hours(cfg, figures, store),
        "k-means": kmeans_hours(cfg, figures),
    }


def lincls_passes(cfg: LinclsConfig, figures: Figures, store: str | None = None) -> dict[str, float]:
    """Hours of a linear evaluation: the training images once per epoch (once in all with ``augmentation: none``,
    whose features are cached) and the test images once."""
    _, n_train, n_test = sizes(cfg.dataset)
    passes = cfg.epochs if cfg.augmentation == "crop_flip" else 1
    images = passes * n_train + n_test
    return {"linear evaluation": images * eval_seconds_per_image(cfg, figures, store) / 3600.0}
