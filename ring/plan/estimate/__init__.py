"""A grid's price before it runs: predicted GPU-hours per stage and dataset, or per pass, from committed figures.

    ring estimate --grid paper [--device H100] [--by pass] [--store none|jpeg95|raw]

Torch-free (seconds).  The figures are the committed results of ``benchmarks/throughput.py`` (one
file per method, ``ring/resources/figures/throughput_<IR|MoCo|CMC|LA>-<device>.json``, and the compiled
``throughput_<family>_compile-<device>.json``), ``ring_selection-<device>.json`` (Ring's step-time ratios),
``jpeg_decode-<device>.json`` (today's JPEG path) and ``store_loader-<device>.json`` (the prepared store's and the
original files' loaders), written by ``benchmarks/gpu_suite.sh`` and ``benchmarks/store_loader.py``.  ``--device``
picks the device whose name contains it; by default the most recent GPU figures, else the CPU's.

Each cell is priced pass by pass (:mod:`ring.plan.estimate.passes`: pretraining, the kNN monitor, LA's k-means,
linear evaluation), each through what it reads and how (:mod:`ring.plan.estimate.inputs`); ``--by pass`` shows
them.  A cell reads the prepared store where its dataset is an image folder, its ``store`` is not ``none`` and its
``resize`` is the store's 256; ``--store`` prices every such cell as reading the one named (``none``: today's code,
the original JPEGs).  The report's header names every file each figure came from (:mod:`ring.plan.estimate.report`).

Below the table, every block of the grid (pretraining, linear evaluation, transfer, each study, detection:
:mod:`ring.plan.estimate.detection`) is priced cell by cell with the fixed costs of each job
(:mod:`ring.plan.estimate.blocks`): from the
end-to-end figures of ``benchmarks/price.py`` (``price-<device>.json``: each pass timed through its stage's own entry
point, :mod:`ring.plan.estimate.measured`, :mod:`ring.plan.estimate.pricing`) where one's record matches the cell, else
by the component model above, each block's sources and the figures' age printed.  ``ring estimate --check``
(:mod:`ring.plan.estimate.check`) sets the price of the finished cells beside the seconds they spent.

The figures are read from the package's own folder (``ring/resources/figures``, package data), then from each folder
a plug-in names under the ``ring.figures`` entry point group (a package whose folder holds its method's
``throughput_<family>-<device>.json``: docs/adding-a-method.md), then from each ``--figures DIR``; a later folder's
file of the same kind, family and device takes the place of an earlier one's.  Nothing is read from a checkout.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ring.plan.estimate import check, inputs, pricing
from ring.plan.estimate import figures as _figures
from ring.plan.estimate.figures import FAMILIES, FIGURES_GROUP, RESULTS, Figures, plugin_folders
from ring.plan.estimate.passes import (
    JPEG_DATASETS,
    PASSES,
    SIZES,
    kmeans_hours,
    knn_hours,
    lincls_passes,
    pretrain_passes,
    ring_ratio,
)
from ring.plan.estimate.report import cell_passes, estimate, estimate_passes, predict_cell, report

__all__ = [
    "FAMILIES",
    "FIGURES_GROUP",
    "JPEG_DATASETS",
    "PASSES",
    "RESULTS",
    "SIZES",
    "Figures",
    "cell_passes",
    "check",
    "estimate",
    "estimate_passes",
    "kmeans_hours",
    "knn_hours",
    "lincls_hours",
    "load_figures",
    "plugin_folders",
    "predict_cell",
    "pretrain_hours",
    "report",
    "ring_ratio",
]


def load_figures(device: str | None = None, results: Path | None = None, extra: Iterable[Path] = ()) -> Figures:
    """The figures of one device (name containing ``device``; default the newest GPU, else the CPU), from
    ``results`` (default the package's, :data:`RESULTS`), the plug-ins' folders and the ``extra`` folders
    (``--figures``)."""
    folders = _figures.folders_of(results or RESULTS, extra)
    figures = _figures.load(device, folders)
    inputs.load(figures, folders)
    figures.measured = pricing.load(folders, figures.device)
    figures.host = figures.measured if not figures.gpu else pricing.load(folders, "cpu")
    if figures.gpu and figures.host is not None:
        host = _figures.load("cpu", folders)
        figures.host_step_px_per_s = (host.step_images_per_s["IR"] * host.image_size**2, host.eager_files["IR"])
    if figures.measured:
        figures.files.append(figures.measured.file)
    return figures


def pretrain_hours(cfg, figures: Figures, store: str | None = None) -> float:
    """A pretraining cell's GPU-hours, every pass included."""
    return sum(pretrain_passes(cfg, figures, store).values())


def lincls_hours(cfg, figures: Figures, store: str | None = None) -> float:
    return sum(lincls_passes(cfg, figures, store).values())
