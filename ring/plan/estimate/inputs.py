"""What a pass pays to read its images, beside the GPU: the original JPEG files and the prepared store.

Two files, by device, each optional:

* ``jpeg_decode-<device>.json`` (``benchmarks/jpeg_decode.py``): the GPU's JPEG path of ``augment: device`` (a
  batched decode, then each image's resize and its views, in the training stream) and PIL's pretraining views in
  ``workers`` loader processes;
* ``store_loader-<device>.json`` (``benchmarks/store_loader.py``; the CPU's file stands in for a GPU without one: the
  loader workers run on the host's cores): per-core and per-loader images/s of the original files and of the store's
  ``jpeg95`` and ``raw`` records, for pretraining's loader (decode into the batch) and for the evaluation passes
  (file or record to a normalised centre-crop tensor, what kNN and linear evaluation pay per image).

Loader workers run beside the GPU, so a pass's seconds per image are the larger of the GPU's and the loader's; a
loader figure measured with ``workers`` processes is scaled linearly to a cell's ``num_workers`` (each worker is one
core's process).  Every rate names the file it came from; a missing key falls back to a named older figure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ring.data import decode_place
from ring.plan.estimate.figures import _matching as folders_matching
from ring.plan.estimate.figures import label, last, positive, read

# The prepared store's side (ring.data.store): the paper's "We resize input images to be 256 by 256 pixels".
STORE_SIZE = 256
STORES = ("none", "jpeg95", "raw")
# Which per-core figure each path's loader and evaluation read (store_loader's per_core_images_per_s keys).
LOADER_KEYS = {"jpeg95": "store_jpeg95_decode", "raw": "store_raw_read"}
EVAL_KEYS = {"none": "eval_original", "jpeg95": "eval_store_jpeg95", "raw": "eval_store_raw"}
LOADER_MEASURED = {"jpeg95": "store_jpeg95", "raw": "store_raw"}


@dataclass(frozen=True)
class Rate:
    """Images/s of one input path at ``workers`` loader processes, and where the figure came from."""

    per_s: float
    workers: int
    source: str

    def seconds(self, workers: int) -> float:
        """Seconds per image with ``workers`` processes (0: the main process, one core)."""
        return self.workers / (self.per_s * max(workers, 1))


def jpeg_figures(path, name: str) -> dict | None:
    """The JPEG path's figures, or None without the device path's views/s (a decoding figure alone is no path)."""
    doc = read(path)
    views = doc.get("views_per_s", {})
    if not positive(views.get("device")):
        return None
    decode, pil = views.get("decode_only"), views.get("pil")
    return {
        "views_per_s": float(views["device"]),
        "decode_per_s": float(decode) if positive(decode) else None,
        "pil_per_s": float(pil) if positive(pil) else None,
        "workers": int(doc.get("workers") or 0),
        "image_size": int(doc.get("image_size", 224)),
        "resize": int(doc.get("resize", STORE_SIZE)),
        "file": name,
    }


@dataclass
class StoreFigures:
    """``store_loader-<device>.json``'s rates (see the module's docstring)."""

    file: str
    workers: int
    per_core: dict[str, float]
    loader: dict[str, float]
    views: dict[str, float]
    # jpeg95 pretraining measured end to end (throughput_<family>_compile's "store" feed, timed past the loader's
    # prefetch) where the loader, not the step, bounded it: the loader's own rate, (images/s, workers, file).
    end_to_end: tuple[float, int, str] | None = None
    # Per family, the compiled jpeg95 store feeds timed past the prefetch, by where the records were decoded
    # ({"cpu": images/s, "gpu": images/s}, ring.data.decode_place.measured), and the file they came from.
    decode: dict[str, tuple[dict[str, float], str]] = field(default_factory=dict)

    @classmethod
    def read(cls, path, name: str) -> StoreFigures:
        doc = read(path)

        def rates(key: str) -> dict[str, float]:
            return {k: float(v) for k, v in (doc.get(key) or {}).items() if positive(v)}

        workers = int(doc.get("workers") or 1)
        # Loader rates timed within the workers' prefetch (2 batches each) measure batches decoded before the clock
        # started (the first H200 run's: 7,547 images/s against 3,674 end to end); they are not read.
        past_prefetch = int(doc.get("timed_batches") or 0) >= 3 * 2 * workers
        return cls(
            name,
            workers,
            rates("per_core_images_per_s"),
            rates("loader_images_per_s") if past_prefetch else {},
            rates("views_per_s") if past_prefetch else {},
        )


def loader_bound(folders, tag: str) -> tuple[float, int, str] | None:
    """The slowest jpeg95 store feed of the device's compiled throughput files that its loader bounded (below 0.9 of
    the family's own step on device tensors) and that was timed past the prefetch: the loader's rate end to end."""
    found = []
    for path in folders_matching(folders, f"throughput_*_compile-{tag}.json"):
        doc = read(path)
        rates, workers = doc.get("images_per_s") or {}, int(doc.get("workers") or 1)
        store, step = rates.get("store"), rates.get("synthetic")
        timed = int(doc.get("store_timed_steps") or 0) >= 3 * 2 * workers
        if positive(store) and positive(step) and timed and store < 0.9 * step:
            found.append((float(store), workers, label(path, folders[0])))
    return min(found) if found else None


def load(figures, folders) -> None:
    """Adds the device's JPEG path and store figures to ``figures`` (the CPU's store file where the device has none;
    on a CPU, ``augment: auto`` decodes in the PIL workers: no device JPEG path)."""
    tag = figures.device.replace(" ", "_")
    jpeg_file = last(folders, f"jpeg_decode-{tag}.json")
    if jpeg_file:
        figures.jpeg = jpeg_figures(jpeg_file, label(jpeg_file, folders[0]))
        if figures.jpeg:
            figures.files.append(figures.jpeg["file"])
        if figures.jpeg and not figures.gpu:
            figures.jpeg = {**figures.jpeg, "views_per_s": None}  # PIL figures only
    store_file = last(folders, f"store_loader-{tag}.json") or last(folders, "store_loader-cpu.json")
    if store_file:
        figures.store = StoreFigures.read(store_file, label(store_file, folders[0]))
        figures.store.end_to_end = loader_bound(folders, tag)
        for path in folders_matching(folders, f"throughput_*_compile-{tag}.json"):
            doc = read(path)
            if doc.get("method") and (rates := decode_place.measured(doc)):
                figures.store.decode[doc["method"]] = (rates, label(path, folders[0]))
        figures.files.append(figures.store.file)


def eval_rate(figures, store: str) -> Rate | None:
    """The evaluation passes' input path for an image-folder dataset read through ``store`` ("none": the original
    JPEGs through PIL); None where nothing measured it."""
    s = figures.store
    if s and store == "none" and "original_eval" in s.loader:
        return Rate(s.loader["original_eval"], s.workers, f"{s.file}: original files, {s.workers} loader workers")
    if s and EVAL_KEYS[store] in s.per_core:
        return Rate(s.per_core[EVAL_KEYS[store]], 1, f"{s.file}: {EVAL_KEYS[store]} per core")
    if store != "none":
        raise ValueError(_missing(figures, EVAL_KEYS[store]))
    j = figures.jpeg
    if j and j["pil_per_s"]:  # pretraining views, but decoding and resizing the file is most of their cost
        return Rate(j["pil_per_s"], max(j["workers"], 1), f"{j['file']}: PIL pretraining views (decode + resize)")
    return None


def loader_rate(figures, store: str) -> Rate:
    """Pretraining's loader reading ``store`` records into a uint8 batch (decode or copy), images/s."""
    s = figures.store
    if s and store == "jpeg95" and s.end_to_end:
        rate, workers, file = s.end_to_end
        return Rate(rate, workers, f"{file}: the jpeg95 store feed end to end, bound by its {workers} loader workers")
    if s and LOADER_MEASURED[store] in s.loader:
        return Rate(s.loader[LOADER_MEASURED[store]], s.workers, f"{s.file}: {store} loader, {s.workers} workers")
    if s and LOADER_KEYS[store] in s.per_core:
        return Rate(s.per_core[LOADER_KEYS[store]], 1, f"{s.file}: {LOADER_KEYS[store]} per core")
    raise ValueError(_missing(figures, LOADER_KEYS[store]))


def gpu_decode_rate(cfg, figures, fam: str) -> Rate | None:
    """The jpeg95 store's pretraining end to end with its records decoded by the GPU decoder, where the cell decodes
    there (``store_decode``: ``gpu``, or ``auto`` where the device measured it faster for ``fam``, as the run
    chooses: :func:`ring.data.decode_place.pick`); None where the loader's workers decode."""
    # The decoder the plan recorded, else the choice (a config without either decodes in the workers).
    choice = getattr(cfg, "store_decoder", "") or getattr(cfg, "store_decode", "auto")
    rates, file = (figures.store.decode.get(fam) if figures.store else None) or ({}, None)
    place = decode_place.pick(rates) if choice == "auto" else choice
    if place != "gpu":
        return None
    if "gpu" not in rates:
        raise ValueError(
            f"The {figures.device} figures have no store_gpu rate for {fam} (store_decode: gpu); run "
            "benchmarks/gpu_suite.sh --quick on that device and commit its JSON, or price with store_decode: auto."
        )
    return Rate(rates["gpu"], 1, f"{file}: the jpeg95 store decoded by the GPU decoder, end to end")


def store_views(figures, compiled: bool) -> tuple[float, str] | None:
    """The store loader and the device views measured together on the GPU (images/s), if they were."""
    s = figures.store
    key = "store_device_compiled" if compiled else "store_device"
    if s and figures.gpu and key in s.views:
        return s.views[key], f"{s.file}: {key}"
    return None


def _missing(figures, key: str) -> str:
    where = (
        figures.store.file
        if figures.store
        else f"no store_loader-{figures.device.replace(' ', '_')}.json nor jpeg_decode PIL figure"
    )
    return (
        f"The {figures.device} figures have no {key} rate for the prepared store ({where}); run "
        "benchmarks/store_loader.py and commit its JSON under ring/resources/figures, or price today's code with "
        "--store none."
    )


def sources(figures) -> list[str]:
    """The header's lines on the input paths."""
    lines = []
    if figures.jpeg and figures.jpeg["views_per_s"]:
        j = figures.jpeg
        lines.append(
            f"JPEG datasets, store: none: the device JPEG path {j['views_per_s']:,.0f} views/s, decoding "
            f"{j['decode_per_s'] or 0:,.0f} images/s ({j['file']}): one decode and one resize per image, then each "
            "view (compiled where the cell compiles), in the training stream after the device-tensor step"
        )
    elif figures.gpu:
        lines.append("JPEG datasets: no jpeg_decode file for this device, pretraining priced as in-memory views")
    if not figures.store:
        lines.append(
            f"no store_loader-{figures.device.replace(' ', '_')}.json nor store_loader-cpu.json: cells that would read "
            "the prepared store are priced reading the original files, as today's code (run benchmarks/store_loader.py)"
        )
    for store in STORES:
        try:
            rate = eval_rate(figures, store)
        except ValueError:
            rate = None
        lines.append(
            f"evaluation input, store: {store}: "
            + (
                f"{rate.per_s:,.0f} images/s at {rate.workers} worker{'s' * (rate.workers != 1)} ({rate.source})"
                if rate
                else "not measured"
            )
        )
    if figures.memory_eval:
        rate, file = figures.memory_eval
        lines.append(f"in-memory datasets' evaluation input: {rate:,.0f} images/s per core ({file})")
    else:
        lines.append("in-memory datasets' evaluation input: not measured, the forward alone (a lower bound)")
    for store in ("jpeg95", "raw"):
        try:
            rate = loader_rate(figures, store)
            lines.append(
                f"pretraining loader, store: {store}: {rate.per_s:,.0f} images/s at {rate.workers} workers "
                f"({rate.source})"
            )
        except ValueError:
            lines.append(f"pretraining loader, store: {store}: not measured (cells reading it are refused)")
    return lines
