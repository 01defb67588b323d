"""Where a prepared store's jpeg95 records are decoded (``store_decode``), torch-free: the run and ``ring estimate``
choose alike.

``cpu``: the loader's workers decode each record with PIL into the uint8 batch (:class:`ring.data.views.StoreViews`).
``gpu``: the workers hand over the records' bytes and a decoder thread decodes them on the GPU's hardware JPEG decoder
(:mod:`ring.data.gpu_decode`).  ``auto``: what the committed measurement of this device says for the cell's method
family -- ``throughput_<family>_compile-<device>.json``'s ``store_gpu`` feed against its ``store`` feed
(``benchmarks/throughput.py``), both timed past the loader's prefetch -- and the CPU's decode where nothing measured
both (no figure, a CPU).  ``auto`` is resolved once, when the cell is planned, and the cell records the result
(``store_decoder``, hashed when it is ``gpu``): a job never reads the figures, so committing one changes no existing or
resumed cell's pixels.
"""

from __future__ import annotations

import json
from pathlib import Path

from ring import resources

CHOICES = ("auto", "cpu", "gpu")
FEEDS = {"cpu": "store", "gpu": "store_gpu"}  # benchmarks/throughput.py's feed of each place


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


DECODERS = ("", "cpu", "gpu")  # store_decoder: what a planned cell records ("": a config written by hand)


def planned(
    choice: str, reads_jpeg95: bool, family: str, recorded: str | None = None, folder: Path | None = None
) -> str:
    """The decoder a cell records when it is planned (``store_decoder``): ``choice`` where it names one; for ``auto``,
    the decoder the cell recorded at an earlier plan (``recorded``), else ``gpu`` where the cell reads the jpeg95 store
    into device views on a GPU and a committed figure of a GPU measured its decoder faster for ``family``, else
    ``cpu``.  The device a job will get is not known when it is planned, so any GPU's figure counts."""
    if choice not in CHOICES:
        raise ValueError(f"Unknown store_decode {choice!r}; choose {', '.join(CHOICES)}.")
    if choice != "auto":
        return choice
    if recorded in ("cpu", "gpu"):
        return recorded
    if not reads_jpeg95:
        return "cpu"
    for path in sorted(Path(folder or resources.FIGURES).glob(f"throughput_{family}_compile-*.json")):
        if path.stem.endswith("-cpu"):
            continue
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if pick(measured(doc)) == "gpu":
            return "gpu"
    return "cpu"


def run_place(choice: str, decoder: str) -> str:
    """Where a job decodes: the decoder its plan recorded, else ``choice`` (``auto``: the workers').  Nothing is read
    from the figures at run time, so a figure committed after a cell began cannot change its pixels."""
    return decoder or ("cpu" if choice == "auto" else choice)
