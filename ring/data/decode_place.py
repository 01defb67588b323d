"""Where a prepared store's jpeg95 records are decoded (``store_decode``), torch-free: the run and ``ring estimate``
choose alike.

``cpu``: the loader's workers decode each record with PIL into the uint8 batch (:class:`ring.data.views.StoreViews`).
``gpu``: the workers hand over the records' bytes and a decoder thread decodes them on the GPU's hardware JPEG decoder
(:mod:`ring.data.gpu_decode`).  ``auto``: what the committed measurement of this device says for the cell's method
family -- ``throughput_<family>_compile-<device>.json``'s ``store_gpu`` feed against its ``store`` feed
(``benchmarks/throughput.py``), both timed past the loader's prefetch -- and the CPU's decode where nothing measured
both (no figure, another device, a CPU).
"""

from __future__ import annotations

import json
from pathlib import Path

from ring import resources

CHOICES = ("auto", "cpu", "gpu")
FEEDS = {"cpu": "store", "gpu": "store_gpu"}  # benchmarks/throughput.py's feed of each place


def device_tag(device_name: str) -> str:
    """A device's name as the figures' file names write it (benchmarks.common.write)."""
    return device_name.replace(" ", "_")


def measured(doc: dict) -> dict[str, float]:
    """The store feeds' images/s of one compiled throughput result, by place, where they were timed past the loader's
    prefetch (2 batches a worker: a shorter run measures batches decoded before the clock started)."""
    rates, workers = doc.get("images_per_s") or {}, int(doc.get("workers") or 1)
    if int(doc.get("store_timed_steps") or 0) < 3 * 2 * workers:
        return {}
    return {
        place: float(rates[feed])
        for place, feed in FEEDS.items()
        if isinstance(rates.get(feed), int | float) and rates[feed] > 0
    }


def pick(rates: dict[str, float]) -> str:
    """``auto``'s choice from :func:`measured`: the GPU decoder only where both were measured and it was faster."""
    return "gpu" if {"cpu", "gpu"} <= rates.keys() and rates["gpu"] > rates["cpu"] else "cpu"


def figure_file(family: str, device_name: str, folder: Path | None = None) -> Path:
    return Path(folder or resources.FIGURES) / f"throughput_{family}_compile-{device_tag(device_name)}.json"


def resolve(choice: str, device_name: str | None, family: str, folder: Path | None = None) -> str:
    """``cpu`` or ``gpu`` for ``choice`` on the device named ``device_name`` (None: a CPU), for ``family``."""
    if choice not in CHOICES:
        raise ValueError(f"Unknown store_decode {choice!r}; choose {', '.join(CHOICES)}.")
    if choice != "auto":
        return choice
    if device_name is None:
        return "cpu"
    path = figure_file(family, device_name, folder)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return "cpu"  # nothing measured on this device: the workers' decode, as before the option existed
    return pick(measured(doc))
