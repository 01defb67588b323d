"""The committed benchmark figures one device's price reads: throughput per family (eager and compiled), Ring's
step-time ratios and LA's k-means run.  The input paths' figures (JPEG files, the prepared store) are
:mod:`ring.plan.estimate.inputs`'."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fnmatch import fnmatch
from importlib.metadata import entry_points
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from ring import resources

if TYPE_CHECKING:  # importlib.resources.abc is 3.11's; the package supports 3.10
    from importlib.resources.abc import Traversable

RESULTS = resources.FIGURES  # the committed figures (benchmarks/*.py write them there)
# Plug-ins' figures: an entry point of this group names a package whose folder holds a method's throughput files.
FIGURES_GROUP = "ring.figures"
# The paper's methods' families: a device's figures are complete with these four (a plug-in method may bring its own
# family's file beside them; ring.core.methods.Objective.family names the one that prices a method).
FAMILIES = ("IR", "MoCo", "CMC", "LA")


@dataclass
class Figures:
    device: str
    date: str
    versions: str
    image_size: int
    feed: str
    images_per_s: dict[str, float]
    eval_images_per_s: float
    kmeans: dict | None
    ring_ratios: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    # Device tensors only (no views), eager, images/s: the JPEG path adds its own views to it.
    step_images_per_s: dict[str, float] = field(default_factory=dict)
    # Compiled figures per family: {"pipeline": images/s with the views, "step": device tensors, "views_per_s": ...,
    # "source": ...}.
    compiled: dict[str, dict] = field(default_factory=dict)
    # The JPEG path (jpeg_decode-<device>.json): {"views_per_s", "decode_per_s", "pil_per_s", "workers",
    # "image_size", "file"}.
    jpeg: dict | None = None
    files: list[str] = field(default_factory=list)
    gpu_devices: list[str] = field(default_factory=list)  # every device with complete GPU figures under results
    eager_files: dict[str, str] = field(default_factory=dict)  # family -> its eager throughput file
    ring_files: dict[str, str] = field(default_factory=dict)  # Ring kind -> its ratios' ring_selection-<device>.json
    # Per family, from its eager file: the forward pass's images/s (kNN, linear evaluation), the batch the step was
    # measured at, and the eager device views' views/s (of 32-px images resized to the crop's 256).
    family_eval_per_s: dict[str, float] = field(default_factory=dict)
    batch: dict[str, int] = field(default_factory=dict)
    views_per_s: dict[str, float] = field(default_factory=dict)
    # The prepared store's and the original files' input figures (ring.plan.estimate.inputs.StoreFigures).
    store: object | None = None
    # In-memory datasets' evaluation input: PIL's centre crop of one array image in one process (images/s, its file).
    memory_eval: tuple[float, str] | None = None
    # The end-to-end figures (ring.plan.estimate.pricing.Measured) of this device, and of the nearest measured host
    # (the CPU's) that stands in for a device without its own fixed costs.
    measured: object | None = None
    host: object | None = None
    # The host's (the CPU's) ResNet-18 training step, pixels per second, and its file: a GPU without a figure of its
    # own is priced from the host's at the ratio of the two steps (ring.plan.estimate.detection).
    host_step_px_per_s: tuple[float, str] | None = None

    @property
    def gpu(self) -> bool:
        return self.device != "cpu"

    def age_days(self, now: datetime | None = None) -> float:
        measured = datetime.fromisoformat(self.date.replace("Z", "+00:00"))
        return ((now or datetime.now(timezone.utc)) - measured).total_seconds() / 86400.0

    def describe(self) -> str:
        return (
            f"{self.device} figures measured {self.date} ({self.age_days():.0f} days old; {self.versions}; "
            f"'{self.feed}' pipeline at {self.image_size} px; {', '.join(self.files)})"
        )


def read(path: Traversable) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(
            f"Throughput file {path} is unreadable ({err}); rerun benchmarks/gpu_suite.sh and copy it again."
        ) from None


def positive(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def plugin_folders() -> list[Traversable]:
    """The folders the installed plug-ins name for their figures (:data:`FIGURES_GROUP`), in name order.  A broken
    one is a warning line, not a refusal: grids that name none of its methods are priced as before."""
    folders = []
    for ep in sorted(entry_points(group=FIGURES_GROUP), key=lambda ep: ep.name):
        try:
            folder = files(ep.value)
            if not folder.is_dir():
                raise ValueError(f"{ep.value} is not a package with a folder")
        except Exception as err:  # a broken plug-in names itself, not a traceback deep in ours
            print(
                f"ring: warning: the {FIGURES_GROUP} entry point {ep.name} ({ep.value}) failed to load ({err}); "
                "its figures are left out until that package is fixed or uninstalled.",
                file=sys.stderr,
            )
            continue
        folders.append(folder)
    return folders


def folders_of(results: Path | None, extra: Iterable[Path]) -> list[Traversable]:
    """Where the figures are read, earliest first: the package's (or ``results``), the plug-ins', the user's."""
    folders: list[Traversable] = [Path(results or RESULTS), *plugin_folders()]
    for folder in map(Path, extra):
        if not folder.is_dir():
            raise ValueError(f"--figures {folder} is not a folder; give the folder that holds the throughput JSON.")
        folders.append(folder)
    return folders


def _matching(folders: list[Traversable], pattern: str) -> list[Traversable]:
    """The files named by ``pattern`` in every folder, in folder order (a later one overrides), by name within one."""
    return [f for folder in folders for f in sorted(folder.iterdir(), key=lambda f: f.name) if fnmatch(f.name, pattern)]


def last(folders: list[Traversable], name: str) -> Traversable | None:
    """The file ``name`` of the last folder that has one."""
    found = [folder / name for folder in folders if (folder / name).is_file()]
    return found[-1] if found else None


def label(path: Traversable, primary: Traversable) -> str:
    """How the report names a file: the first folder's (the package's) by its name, another folder's by its path."""
    return path.name if str(path) == str(primary / path.name) else str(path)


def _throughput_files(folders: list[Traversable]) -> tuple[dict, dict]:
    """{device: {family: (path, doc)}} of the eager files and of the compiled ones, each by its exact file name
    (``throughput_<family>-`` or ``throughput_<family>_compile-``; other variants are not what a cell runs)."""
    eager: dict[str, dict[str, tuple[Traversable, dict]]] = {}
    compiled: dict[str, dict[str, tuple[Traversable, dict]]] = {}
    for path in _matching(folders, "throughput_*-*.json"):
        doc = read(path)
        if doc.get("variant") or not doc.get("method"):
            continue
        stem = path.name.split("-", 1)[0]
        if stem == f"throughput_{doc['method']}" and not doc.get("compile"):
            eager.setdefault(doc["machine"]["device"], {})[doc["method"]] = (path, doc)
        elif stem == f"throughput_{doc['method']}_compile" and doc.get("compile"):
            compiled.setdefault(doc["machine"]["device"], {})[doc["method"]] = (path, doc)
    return eager, compiled


def _compiled_figures(
    fam: str, path: Traversable, doc: dict, eager: tuple[Traversable, dict], image_size: int
) -> dict | None:
    """A family's compiled rates: its measured device pipeline, else its device tensors plus the eager views' cost."""
    rates = doc.get("images_per_s", {})
    step = rates.get("synthetic")
    if not positive(step):
        return None
    if doc.get("image_size") != image_size:
        raise ValueError(
            f"{path} was measured at {doc.get('image_size')} px, the eager figures at {image_size} px; "
            f"rerun benchmarks/throughput.py --method {fam} --compile on that device."
        )
    views = doc.get("device_augment_views_per_s")
    compiled = {"step": float(step), "views_per_s": float(views) if positive(views) else None}
    if positive(rates.get("device")):
        return {**compiled, "pipeline": float(rates["device"]), "source": f"{path.name}"}
    eager_path, eager_doc = eager
    e = eager_doc["images_per_s"]
    if positive(e.get("device")) and positive(e.get("synthetic")):
        # The views run in the training stream: their seconds per image add to the compiled step's.
        views_s = max(1.0 / e["device"] - 1.0 / e["synthetic"], 0.0)
        return {
            **compiled,
            "pipeline": 1.0 / (1.0 / step + views_s),
            "source": f"{path.name}'s device tensors {step:,.0f} + the views of {eager_path.name}",
        }
    return {**compiled, "pipeline": float(step), "source": f"{path.name}'s device tensors, views not measured"}


def _complete(by_device: dict, device: str | None, folders: list) -> dict:
    """{device: docs} of the devices whose figures have every family (named by ``device`` when given)."""
    complete = {d: docs for d, docs in by_device.items() if set(FAMILIES) <= set(docs)}
    if device:
        complete = {d: docs for d, docs in complete.items() if device.lower() in d.lower()}
    if not complete:
        known = ", ".join(sorted(by_device)) or "none"
        raise ValueError(
            f"No complete throughput figures (IR, MoCo, CMC and LA) "
            f"{'for device ' + repr(device) + ' ' if device else ''}"
            f"under {', '.join(map(str, folders))} (devices with figures: {known}); run benchmarks/gpu_suite.sh and "
            "commit its JSON there, or pass --figures DIR."
        )
    return complete


def _family_rates(docs: dict, feed: str) -> tuple[dict, dict, dict, dict, dict]:
    """Per family: the pipeline's images/s, the device tensors', the forward pass's, the batch and the eager views'."""
    rates, steps, evals, batches, views = {}, {}, {}, {}, {}
    for fam, (path, doc) in docs.items():
        rate = doc["images_per_s"].get(feed) or doc["images_per_s"].get("synthetic")
        if not positive(rate):
            raise ValueError(
                f"{path} has no positive images/s for the {feed} pipeline; rerun benchmarks/throughput.py --method "
                f"{fam}."
            )
        rates[fam] = float(rate)
        step = doc["images_per_s"].get("synthetic")
        steps[fam] = float(step) if positive(step) else float(rate)  # no device-tensor figure: the pipeline bounds it
        if positive(doc.get("eval_images_per_s")):
            evals[fam] = float(doc["eval_images_per_s"])
        if isinstance(doc.get("batch"), int):
            batches[fam] = doc["batch"]
        if positive(doc.get("device_augment_views_per_s")):
            views[fam] = float(doc["device_augment_views_per_s"])
    return rates, steps, evals, batches, views


def _base_figures(name: str, docs: dict, gpu_devices: list[str], primary: Traversable, newest: str) -> Figures:
    feed = "pil" if name == "cpu" else "device"  # what augment: auto uses on that device (ring.data.augment.resolve)
    rates, steps, evals, batches, views = _family_rates(docs, feed)
    sizes = {doc["image_size"] for _, doc in docs.values()}
    if len(sizes) != 1:
        raise ValueError(
            f"The {name} throughput files were measured at different image sizes {sorted(sizes)}; rerun them together."
        )
    la = docs["LA"][1]
    memory_eval = [
        (float(doc["eval_pil_images_per_s_one_process"]), label(path, primary))
        for path, doc in docs.values()
        if positive(doc.get("eval_pil_images_per_s_one_process"))
    ]
    machine = docs["IR"][1]["machine"]
    versions = f"torch {machine['torch']}" + (f", CUDA {machine['cuda']}" if machine.get("cuda") else "")
    return Figures(
        device=name,
        date=newest,
        versions=versions,
        image_size=sizes.pop(),
        feed=feed,
        images_per_s=rates,
        step_images_per_s=steps,
        # Forward-only passes of a family without its own figure; where none is measured, a training step's rate
        # bounds them from below.
        eval_images_per_s=max(evals.values()) if evals else rates["IR"],
        family_eval_per_s=evals,
        batch=batches,
        views_per_s=views,
        memory_eval=max(memory_eval, default=None),
        kmeans={**la["kmeans"], "seconds": la["kmeans_recluster_s"]} if la.get("kmeans") else None,
        files=[label(p, primary) for p, _ in docs.values()],
        gpu_devices=gpu_devices,
        eager_files={fam: label(p, primary) for fam, (p, _) in docs.items()},
    )


def load(device: str | None, folders: list[Traversable]) -> Figures:
    """The throughput figures of one device (name containing ``device``; default the newest GPU, else the CPU) from
    ``folders`` (a later folder's file of the same kind, family and device replaces an earlier one's)."""
    by_device, compiled_by_device = _throughput_files(folders)
    gpu_devices = sorted(d for d, docs in by_device.items() if set(FAMILIES) <= set(docs) and d != "cpu")
    complete = _complete(by_device, device, folders)

    def newest(d):
        return max(doc["machine"].get("date", "") for _, doc in complete[d].values())

    gpus = [d for d in complete if d != "cpu"]
    name = max(gpus, key=newest) if gpus else max(complete, key=newest)
    docs = complete[name]
    figures = _base_figures(name, docs, gpu_devices, folders[0], newest(name))
    if name != "cpu":  # compile: auto compiles on CUDA only (ring.engine.encoder.resolve_compile)
        for fam, (path, doc) in sorted(compiled_by_device.get(name, {}).items()):
            if fam in docs and (c := _compiled_figures(fam, path, doc, docs[fam], figures.image_size)):
                figures.compiled[fam] = c
                figures.files.append(label(path, folders[0]))
    # Ring's ratios, kind by kind: the package's file, then a plug-in's (its own kind) or --figures' (a remeasured one).
    ring_name = f"ring_selection-{name.replace(' ', '_')}.json"
    for ring_file in (folder / ring_name for folder in folders if (folder / ring_name).is_file()):
        ratios: dict[str, list[tuple[int, float]]] = {}
        for row in read(ring_file)["steps"]:
            ratios.setdefault(row["ring"], []).append((int(row["n"]), float(row["ratio"])))
        figures.ring_ratios.update(ratios)
        figures.ring_files.update(dict.fromkeys(ratios, label(ring_file, folders[0])))
        figures.files.append(label(ring_file, folders[0]))
    return figures
