"""A grid's price before it runs: predicted GPU-hours per stage and dataset from committed throughput figures.

    ring estimate --grid paper [--device H100]

Torch-free (seconds).  The figures are the committed results of ``benchmarks/throughput.py`` (one
file per method, ``ring/resources/figures/throughput_<IR|MoCo|CMC|LA>-<device>.json``) and, when
present, ``ring/resources/figures/ring_selection-<device>.json`` (Ring's step-time ratios), both written
for a GPU by ``benchmarks/gpu_suite.sh``.  ``--device`` picks the device whose name contains it;
by default the most recent GPU figures, else the CPU's.  The model of a cell's cost:

* pretraining: ``epochs x images / images_per_s`` of the method's family (IR, MoCo, CMC, LA; the
  pipeline that ``augment: auto`` uses on that device), times Ring's measured step-time ratio for
  Ring methods (at the nearest measured bank or queue size; a Ring kind without a measured ratio is
  refused).  Where the cell's ``compile`` resolves to on (``auto`` on a GPU, as
  ``ring.engine.encoder.resolve_compile``), the family's compiled figures
  (``throughput_<family>_compile-<device>.json``): their device pipeline where measured, else their
  device-tensor step plus the eager file's view cost (device pipeline minus device tensors, in
  seconds per image); the eager figures where no compiled file exists.  JPEG datasets (ImageNet, read
  from image folders) on a GPU take the JPEG path of ``jpeg_decode-<device>.json`` instead of the
  in-memory views: the device-tensor step plus one batched decode per image and the path's view cost
  per view (the path's views/s less its decode); plus the kNN monitors (labelled train
  and test images through the encoder, forward only, every ``knn_every`` epochs) and, for k-means
  methods, one reclustering per epoch after the warm-up, scaled linearly in bank size, clusters,
  clusterings and iterations from the measured one;
* linear evaluation: the training images through the frozen encoder once per epoch (once in all
  with ``augmentation: none``, whose features are cached) and the test images once; CMC's two trunks
  count twice.

Throughput is scaled to the cell's crop by pixel count (a ResNet-18's cost per image is
proportional to its pixels); one GPU-hour per hour of one GPU (data-parallel cells scale linearly).
Transfer, detection and study cells are not priced.  The report's header names every file each figure came from.

The figures are read from the package's own folder (``ring/resources/figures``, package data), then from each folder
a plug-in names under the ``ring.figures`` entry point group (a package whose folder holds its method's
``throughput_<family>-<device>.json``: docs/adding-a-method.md), then from each ``--figures DIR``; a later folder's
file of the same kind, family and device takes the place of an earlier one's.  Nothing is read from a checkout.
"""

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
from ring.core import config as C
from ring.core.methods import METHODS
from ring.core.methods import method as method_spec

if TYPE_CHECKING:  # importlib.resources.abc is 3.11's; the package supports 3.10
    from importlib.resources.abc import Traversable

RESULTS = resources.FIGURES  # the committed figures (benchmarks/*.py write them there)
# Plug-ins' figures: an entry point of this group names a package whose folder holds a method's throughput files.
FIGURES_GROUP = "ring.figures"
# The paper's methods' families: a device's figures are complete with these four (a plug-in method may bring its own
# family's file beside them; ring.core.methods.Objective.family names the one that prices a method).
FAMILIES = ("IR", "MoCo", "CMC", "LA")

# Images per split of each dataset (the public datasets' sizes; digits and digits_colour: ring.data.datasets' fixed
# split):
# (pretraining images, labelled training images, test images).  STL10 pretrains on train+unlabeled.
SIZES = {
    "digits": (1347, 1347, 450),
    "digits_colour": (1347, 1347, 450),
    "cifar10": (50_000, 50_000, 10_000),
    "cifar100": (50_000, 50_000, 10_000),
    "stl10": (105_000, 5_000, 8_000),
    "imagenet": (1_281_167, 1_281_167, 50_000),
}
# Datasets read as JPEG files from image folders (ring.data.datasets): augment: device decodes them on the GPU
# (ring.data.augment.JpegViews), the path benchmarks/jpeg_decode.py measures.  The others live in memory.
JPEG_DATASETS = frozenset({"imagenet"})


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
    # Compiled figures per family: {"pipeline": images/s with the views, "step": device tensors, "source": ...}.
    compiled: dict[str, dict] = field(default_factory=dict)
    # The JPEG path (jpeg_decode-<device>.json): {"views_per_s", "decode_per_s", "image_size", "file"}.
    jpeg: dict | None = None
    files: list[str] = field(default_factory=list)
    gpu_devices: list[str] = field(default_factory=list)  # every device with complete GPU figures under results
    eager_files: dict[str, str] = field(default_factory=dict)  # family -> its eager throughput file
    ring_files: dict[str, str] = field(default_factory=dict)  # Ring kind -> its ratios' ring_selection-<device>.json

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

    def sources(self) -> list[str]:
        """One line per figure the price reads, naming its file: what `estimate`'s header shows."""
        lines = []
        for fam in sorted(self.images_per_s):
            eager = (
                f"eager '{self.feed}' pipeline {self.images_per_s[fam]:,.0f} images/s"
                f"{' (' + self.eager_files[fam] + ')' if fam in self.eager_files else ''}"
            )
            c = self.compiled.get(fam)
            if not self.gpu:
                lines.append(f"{fam}: {eager} (compile: auto is off on a CPU)")
            elif c:
                lines.append(
                    f"{fam}: compiled {c['pipeline']:,.0f} images/s with the views ({c['source']}); "
                    f"compile: off cells {eager}"
                )
            else:
                lines.append(
                    f"{fam}: {eager} (no throughput_{fam}_compile file for this device: compile: auto "
                    "cells priced eager)"
                )
        if self.jpeg:
            j = self.jpeg
            lines.append(
                f"JPEG datasets ({', '.join(sorted(JPEG_DATASETS))}): the JPEG path {j['views_per_s']:,.0f} "
                f"views/s, decoding {j['decode_per_s'] or 0:,.0f} images/s ({j['file']}), after the "
                "device-tensor step (compiled where the family's is)"
            )
        elif self.gpu:
            lines.append("JPEG datasets: no jpeg_decode file for this device, priced as in-memory views")
        for kind, rows in sorted(self.ring_ratios.items()):
            lines.append(
                f"{kind}: step-time ratio {', '.join(f'{r:.3g} at {n:,}' for n, r in sorted(rows))} "
                f"({self.ring_files[kind]})"
            )
        return lines


def _read(path: Traversable) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(
            f"Throughput file {path} is unreadable ({err}); rerun benchmarks/gpu_suite.sh and copy it again."
        ) from None


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


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


def _folders(results: Path | None, extra: Iterable[Path]) -> list[Traversable]:
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


def _last(folders: list[Traversable], name: str) -> Traversable | None:
    """The file ``name`` of the last folder that has one."""
    found = [folder / name for folder in folders if (folder / name).is_file()]
    return found[-1] if found else None


def _label(path: Traversable, primary: Traversable) -> str:
    """How the report names a file: the first folder's (the package's) by its name, another folder's by its path."""
    return path.name if str(path) == str(primary / path.name) else str(path)


def _throughput_files(folders: list[Traversable]) -> tuple[dict, dict]:
    """{device: {family: (path, doc)}} of the eager files and of the compiled ones, each by its exact file name
    (``throughput_<family>-`` or ``throughput_<family>_compile-``; other variants are not what a cell runs)."""
    eager: dict[str, dict[str, tuple[Traversable, dict]]] = {}
    compiled: dict[str, dict[str, tuple[Traversable, dict]]] = {}
    for path in _matching(folders, "throughput_*-*.json"):
        doc = _read(path)
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
    if not _positive(step):
        return None
    if doc.get("image_size") != image_size:
        raise ValueError(
            f"{path} was measured at {doc.get('image_size')} px, the eager figures at {image_size} px; "
            f"rerun benchmarks/throughput.py --method {fam} --compile on that device."
        )
    if _positive(rates.get("device")):
        return {"pipeline": float(rates["device"]), "step": float(step), "source": f"{path.name}"}
    eager_path, eager_doc = eager
    e = eager_doc["images_per_s"]
    if _positive(e.get("device")) and _positive(e.get("synthetic")):
        # The views run in the training stream: their seconds per image add to the compiled step's.
        views_s = max(1.0 / e["device"] - 1.0 / e["synthetic"], 0.0)
        return {
            "pipeline": 1.0 / (1.0 / step + views_s),
            "step": float(step),
            "source": f"{path.name}'s device tensors {step:,.0f} + the views of {eager_path.name}",
        }
    return {"pipeline": float(step), "step": float(step), "source": f"{path.name}'s device tensors, views not measured"}


def _jpeg_figures(path: Traversable, label: str) -> dict | None:
    doc = _read(path)
    views = doc.get("views_per_s", {})
    if not _positive(views.get("device")):
        return None
    decode = views.get("decode_only")
    return {
        "views_per_s": float(views["device"]),
        "decode_per_s": float(decode) if _positive(decode) else None,
        "image_size": int(doc.get("image_size", 224)),
        "file": label,
    }


def load_figures(device: str | None = None, results: Path | None = None, extra: Iterable[Path] = ()) -> Figures:
    """The throughput figures of one device (name containing ``device``; default the newest GPU, else the CPU), from
    ``results`` (default the package's), the plug-ins' folders and the ``extra`` folders (``--figures``)."""
    folders = _folders(results, extra)
    by_device, compiled_by_device = _throughput_files(folders)
    complete = {d: docs for d, docs in by_device.items() if set(FAMILIES) <= set(docs)}
    gpu_devices = sorted(d for d in complete if d != "cpu")
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

    def newest(d):
        return max(doc["machine"].get("date", "") for _, doc in complete[d].values())

    gpus = [d for d in complete if d != "cpu"]
    name = max(gpus, key=newest) if gpus else max(complete, key=newest)
    docs = complete[name]
    feed = "pil" if name == "cpu" else "device"  # what augment: auto uses on that device (ring.data.augment.resolve)
    rates, steps = {}, {}
    for fam, (path, doc) in docs.items():
        rate = doc["images_per_s"].get(feed) or doc["images_per_s"].get("synthetic")
        if not _positive(rate):
            raise ValueError(
                f"{path} has no positive images/s for the {feed} pipeline; rerun benchmarks/throughput.py --method "
                f"{fam}."
            )
        rates[fam] = float(rate)
        step = doc["images_per_s"].get("synthetic")
        steps[fam] = float(step) if _positive(step) else float(rate)  # no device-tensor figure: the pipeline bounds it
    sizes = {doc["image_size"] for _, doc in docs.values()}
    if len(sizes) != 1:
        raise ValueError(
            f"The {name} throughput files were measured at different image sizes {sorted(sizes)}; rerun them together."
        )
    image_size = sizes.pop()
    la = docs["LA"][1]
    eval_rates = [doc["eval_images_per_s"] for _, doc in docs.values() if doc.get("eval_images_per_s")]
    machine = docs["IR"][1]["machine"]
    versions = f"torch {machine['torch']}" + (f", CUDA {machine['cuda']}" if machine.get("cuda") else "")
    figures = Figures(
        device=name,
        date=newest(name),
        versions=versions,
        image_size=image_size,
        feed=feed,
        images_per_s=rates,
        step_images_per_s=steps,
        # Forward-only passes; where not measured, a training step's rate bounds them from below.
        eval_images_per_s=max(eval_rates) if eval_rates else rates["IR"],
        kmeans={**la["kmeans"], "seconds": la["kmeans_recluster_s"]} if la.get("kmeans") else None,
        files=[_label(p, folders[0]) for p, _ in docs.values()],
        gpu_devices=gpu_devices,
        eager_files={fam: _label(p, folders[0]) for fam, (p, _) in docs.items()},
    )
    if name != "cpu":  # compile: auto compiles on CUDA only (ring.engine.encoder.resolve_compile)
        for fam, (path, doc) in sorted(compiled_by_device.get(name, {}).items()):
            if fam in docs and (c := _compiled_figures(fam, path, doc, docs[fam], image_size)):
                figures.compiled[fam] = c
                figures.files.append(_label(path, folders[0]))
    # Ring's ratios, kind by kind: the package's file, then a plug-in's (its own kind) or --figures' (a remeasured one).
    ring_name = f"ring_selection-{name.replace(' ', '_')}.json"
    for ring_file in (folder / ring_name for folder in folders if (folder / ring_name).is_file()):
        ratios: dict[str, list[tuple[int, float]]] = {}
        for row in _read(ring_file)["steps"]:
            ratios.setdefault(row["ring"], []).append((int(row["n"]), float(row["ratio"])))
        figures.ring_ratios.update(ratios)
        figures.ring_files.update(dict.fromkeys(ratios, _label(ring_file, folders[0])))
        figures.files.append(_label(ring_file, folders[0]))
    jpeg_file = _last(folders, f"jpeg_decode-{name.replace(' ', '_')}.json")
    if jpeg_file and name != "cpu":  # on a CPU, augment: auto decodes in the PIL workers
        figures.jpeg = _jpeg_figures(jpeg_file, _label(jpeg_file, folders[0]))
        if figures.jpeg:
            figures.files.append(_label(jpeg_file, folders[0]))
    return figures


def _ring_ratio(figures: Figures, method: str, kind: str, n: int) -> float:
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


def _family(name: str, figures: Figures) -> str:
    m = method_spec(name)
    family = m.objective.family(m)
    if family not in figures.images_per_s:
        raise ValueError(
            f"Method {name} is priced by the throughput of {family}, which the {figures.device} figures do "
            f"not have (they have {', '.join(sorted(figures.images_per_s))}); run benchmarks/throughput.py "
            f"--method {family} on that device and put its JSON in the folder your plug-in's {FIGURES_GROUP} entry "
            "point names, or pass --figures DIR (docs/adding-a-method.md, Pricing it)."
        )
    return family


def _compiles(cfg, figures: Figures) -> bool:
    """ring.engine.encoder.resolve_compile, torch-free: "on", or "auto" on a GPU."""
    if cfg.compile not in ("auto", "on", "off"):
        raise ValueError(f"Unknown compile {cfg.compile!r}; choose auto, on or off.")
    return cfg.compile == "on" or (cfg.compile == "auto" and figures.gpu)


def _rate(figures: Figures, name: str, compiled: bool = False) -> float:
    """Images/s of method ``name``'s family with its views (compiled where asked and measured); one sentence when
    the figures have none for it."""
    family = _family(name, figures)
    if compiled and family in figures.compiled:
        return figures.compiled[family]["pipeline"]
    return figures.images_per_s[family]


def _step_rate(figures: Figures, name: str, compiled: bool) -> float:
    """Images/s of the family's step on device tensors, without views (compiled where asked and measured)."""
    family = _family(name, figures)
    if compiled and family in figures.compiled:
        return figures.compiled[family]["step"]
    return figures.step_images_per_s.get(family, figures.images_per_s[family])


def _jpeg_seconds(figures: Figures, n_views: int, crop: int) -> float:
    """Seconds per image of the JPEG path: one batched decode, then each view (the path's seconds per view less
    its decode, scaled to the cell's crop by pixels)."""
    j = figures.jpeg
    decode = 1.0 / j["decode_per_s"] if j["decode_per_s"] else 0.0
    view = max(1.0 / j["views_per_s"] - decode, 0.0) * (crop / j["image_size"]) ** 2
    return decode + n_views * view


def _scale(figures: Figures, crop: int) -> float:
    return (figures.image_size / crop) ** 2


def _sizes(dataset: str) -> tuple[int, int, int]:
    if dataset not in SIZES:
        raise ValueError(f"No image counts for dataset {dataset!r} in ring.plan.estimate.SIZES; add its split sizes.")
    return SIZES[dataset]


def pretrain_hours(cfg: C.PretrainConfig, figures: Figures) -> float:
    m = method_spec(cfg.method)
    n_pre, n_train, n_test = _sizes(cfg.dataset)
    compiled = _compiles(cfg, figures)
    if cfg.dataset in JPEG_DATASETS and figures.jpeg:
        # JPEG files: decoded and made into views on the device, in the training stream, before each step.
        per_image = 1.0 / (_step_rate(figures, cfg.method, compiled) * _scale(figures, cfg.crop)) + _jpeg_seconds(
            figures, m.objective.n_views, cfg.crop
        )
    else:
        per_image = 1.0 / (_rate(figures, cfg.method, compiled) * _scale(figures, cfg.crop))
    seconds = cfg.epochs * n_pre * per_image
    if m.ring:
        seconds *= _ring_ratio(figures, cfg.method, *m.objective.ring_selection(cfg, n_pre))
    if cfg.knn_every > 0:
        passes = cfg.epochs // cfg.knn_every + (cfg.epochs % cfg.knn_every != 0)
        seconds += passes * (n_train + n_test) / (figures.eval_images_per_s * _scale(figures, cfg.crop))
    if m.uses_kmeans and figures.kmeans:
        k = figures.kmeans
        per_epoch = (
            k["seconds"]
            * (n_pre / k["n"])
            * (cfg.kmeans_k / k["k"])
            * (cfg.kmeans_clusterings / k["clusterings"])
            * (cfg.kmeans_iters / k["iters"])
        )
        seconds += max(cfg.epochs - cfg.kmeans_warmup_epochs, 0) * per_epoch
    return seconds / 3600.0


def lincls_hours(cfg: C.LinclsConfig, figures: Figures) -> float:
    _, n_train, n_test = _sizes(cfg.dataset)
    passes = cfg.epochs if cfg.augmentation == "crop_flip" else 1
    trunks = len(method_spec(cfg.method, require_implemented=False).encoder_files) if cfg.method else 1
    images = (passes * n_train + n_test) * trunks
    return images / (figures.eval_images_per_s * _scale(figures, cfg.crop)) / 3600.0


def predict_cell(stage: str, cfg, figures: Figures) -> float | None:
    """Predicted GPU-hours of one cell from its config, or None for a stage this model does not price."""
    if stage == "pretrain":
        return pretrain_hours(cfg, figures)
    if stage == "lincls":
        return lincls_hours(cfg, figures)
    return None


def estimate(grid, figures: Figures) -> list[tuple[str, str, int, float]]:
    """(stage, dataset, cells, predicted GPU-hours) of every dataset of the grid's pretrain and lincls stages."""
    rows: dict[tuple[str, str], list] = {}
    for dataset, name, seed in grid.cells():
        for stage, build in (("pretrain", grid.pretrain_config), ("lincls", grid.lincls_config)):
            row = rows.setdefault((stage, dataset), [0, 0.0])
            row[0] += 1
            row[1] += predict_cell(stage, build(dataset, name, seed, "data"), figures)
    return [(stage, dataset, cells, hours) for (stage, dataset), (cells, hours) in rows.items()]


def report(grid, figures: Figures) -> str:
    rows = sorted(estimate(grid, figures), key=lambda r: (r[0] != "pretrain", r[1]))
    if figures.gpu:
        unit = "GPU-hours"
    elif figures.gpu_devices:
        unit = f"CPU-hours (GPU figures are committed too, for {', '.join(figures.gpu_devices)}: pass --device)"
    else:
        unit = "CPU-hours (no GPU figures committed)"
    lines = [
        f"ring: predicted {unit} of grid {grid.name} from {figures.describe()}",
        *(f"  {line}" for line in figures.sources()),
        f"{'stage':10} {'dataset':10} {'cells':>6} {'hours':>12}",
    ]
    for stage, dataset, cells, hours in rows:
        lines.append(f"{stage:10} {dataset:10} {cells:6d} {hours:12.4g}")
    for stage in ("pretrain", "lincls"):
        sel = [r for r in rows if r[0] == stage]
        lines.append(f"{stage:10} {'all':10} {sum(r[2] for r in sel):6d} {sum(r[3] for r in sel):12.4g}")
    lines.append(f"{'total':10} {'':10} {sum(r[2] for r in rows):6d} {sum(r[3] for r in rows):12.4g}")
    lines.append("(transfer, detection and study cells are not priced)")
    return "\n".join(lines)
