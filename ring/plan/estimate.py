"""A grid's price before it runs: predicted GPU-hours per stage and dataset from committed throughput figures.

    python -m ring.cluster.batch estimate --grid paper [--device H100]

Torch-free (seconds).  The figures are the committed results of ``benchmarks/throughput.py`` (one
file per method, ``benchmarks/results/throughput_<IR|MoCo|CMC|LA>-<device>.json``) and, when
present, ``benchmarks/results/ring_selection-<device>.json`` (Ring's step-time ratios), both written
for a GPU by ``benchmarks/gpu_suite.sh``.  ``--device`` picks the device whose name contains it;
by default the most recent GPU figures, else the CPU's.  The model of a cell's cost:

* pretraining: ``epochs x images / images_per_s`` of the method's family (IR, MoCo, CMC, LA; the
  pipeline that ``augment: auto`` uses on that device; on a GPU, ImageNet adds the measured batched
  JPEG decoding of ``jpeg_decode-<device>.json``), times Ring's measured step-time ratio for
  Ring methods (at the nearest measured bank or queue size); plus the kNN monitors (labelled train
  and test images through the encoder, forward only, every ``knn_every`` epochs) and, for k-means
  methods, one reclustering per epoch after the warm-up, scaled linearly in bank size, clusters,
  clusterings and iterations from the measured one;
* linear evaluation: the training images through the frozen encoder once per epoch (once in all
  with ``augmentation: none``, whose features are cached) and the test images once; CMC's two trunks
  count twice.

Throughput is scaled to the cell's crop by pixel count (a ResNet-18's cost per image is
proportional to its pixels); one GPU-hour per hour of one GPU (data-parallel cells scale linearly).
Transfer, detection and study cells are not priced.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ring.core import config as C
from ring.core.methods import method as method_spec

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
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
    jpeg_decode_per_s: float | None = None  # batched decode_jpeg on the device, images/s (ImageNet)
    files: list[str] = field(default_factory=list)

    def age_days(self, now: datetime | None = None) -> float:
        measured = datetime.fromisoformat(self.date.replace("Z", "+00:00"))
        return ((now or datetime.now(timezone.utc)) - measured).total_seconds() / 86400.0

    def describe(self) -> str:
        return (f"{self.device} figures measured {self.date} ({self.age_days():.0f} days old; {self.versions}; "
                f"'{self.feed}' pipeline at {self.image_size} px; {', '.join(self.files)})")


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"Throughput file {path} is unreadable ({err}); rerun benchmarks/gpu_suite.sh and copy it again.") from None


def load_figures(device: str | None = None, results: Path | None = None) -> Figures:
    """The throughput figures of one device (name containing ``device``; default the newest GPU, else the CPU)."""
    results = Path(results or RESULTS)
    by_device: dict[str, dict[str, tuple[Path, dict]]] = {}
    for path in sorted(results.glob("throughput_*-*.json")):
        doc = _read(path)
        if doc.get("compile") or doc.get("variant") or not doc.get("method"):  # not what a cell runs
            continue
        by_device.setdefault(doc["machine"]["device"], {})[doc["method"]] = (path, doc)
    complete = {d: docs for d, docs in by_device.items() if set(FAMILIES) <= set(docs)}
    if device:
        complete = {d: docs for d, docs in complete.items() if device.lower() in d.lower()}
    if not complete:
        known = ", ".join(sorted(by_device)) or "none"
        raise ValueError(f"No complete throughput figures (IR, MoCo, CMC and LA) {'for device ' + repr(device) + ' ' if device else ''}"
                         f"under {results} (devices with figures: {known}); run benchmarks/gpu_suite.sh and commit its JSON there.")

    def newest(d):
        return max(doc["machine"].get("date", "") for _, doc in complete[d].values())

    gpus = [d for d in complete if d != "cpu"]
    name = max(gpus, key=newest) if gpus else max(complete, key=newest)
    docs = complete[name]
    feed = "pil" if name == "cpu" else "device"  # what augment: auto uses on that device (ring.data.augment.resolve)
    rates = {}
    for fam, (path, doc) in docs.items():
        rate = doc["images_per_s"].get(feed) or doc["images_per_s"].get("synthetic")
        if not rate or not math.isfinite(rate) or rate <= 0:
            raise ValueError(f"{path} has no positive images/s for the {feed} pipeline; rerun benchmarks/throughput.py --method {fam}.")
        rates[fam] = float(rate)
    sizes = {doc["image_size"] for _, doc in docs.values()}
    if len(sizes) != 1:
        raise ValueError(f"The {name} throughput files were measured at different image sizes {sorted(sizes)}; rerun them together.")
    la = docs["LA"][1]
    eval_rates = [doc["eval_images_per_s"] for _, doc in docs.values() if doc.get("eval_images_per_s")]
    machine = docs["IR"][1]["machine"]
    versions = f"torch {machine['torch']}" + (f", CUDA {machine['cuda']}" if machine.get("cuda") else "")
    figures = Figures(device=name, date=newest(name), versions=versions, image_size=sizes.pop(), feed=feed,
                      images_per_s=rates,
                      # Forward-only passes; where not measured, a training step's rate bounds them from below.
                      eval_images_per_s=max(eval_rates) if eval_rates else rates["IR"],
                      kmeans={**la["kmeans"], "seconds": la["kmeans_recluster_s"]} if la.get("kmeans") else None,
                      files=[p.name for p, _ in docs.values()])
    ring_file = results / f"ring_selection-{name.replace(' ', '_')}.json"
    if ring_file.exists():
        for row in _read(ring_file)["steps"]:
            figures.ring_ratios.setdefault(row["ring"], []).append((int(row["n"]), float(row["ratio"])))
        figures.files.append(ring_file.name)
    jpeg_file = results / f"jpeg_decode-{name.replace(' ', '_')}.json"
    if jpeg_file.exists() and name != "cpu":  # on a CPU, augment: auto decodes in the PIL workers
        rate = _read(jpeg_file)["views_per_s"].get("decode_only")
        if rate and math.isfinite(rate) and rate > 0:
            figures.jpeg_decode_per_s = float(rate)
            figures.files.append(jpeg_file.name)
    return figures


def _ring_ratio(figures: Figures, kind: str, n: int) -> float:
    """Ring's measured step-time ratio at the measured size nearest to n (in log scale); 1 when not measured."""
    rows = figures.ring_ratios.get(kind)
    if not rows:
        return 1.0
    return min(rows, key=lambda row: abs(math.log(row[0] / n)))[1]


def _rate(figures: Figures, name: str) -> float:
    """Images/s of method ``name``'s throughput family; one sentence when the figures have none for it."""
    m = method_spec(name)
    family = m.objective.family(m)
    if family not in figures.images_per_s:
        raise ValueError(f"Method {name} is priced by the throughput of {family}, which the {figures.device} figures do "
                         f"not have (they have {', '.join(sorted(figures.images_per_s))}); run benchmarks/throughput.py "
                         f"--method {family} on that device and commit its JSON under benchmarks/results.")
    return figures.images_per_s[family]


def _scale(figures: Figures, crop: int) -> float:
    return (figures.image_size / crop) ** 2


def _sizes(dataset: str) -> tuple[int, int, int]:
    if dataset not in SIZES:
        raise ValueError(f"No image counts for dataset {dataset!r} in ring.plan.estimate.SIZES; add its split sizes.")
    return SIZES[dataset]


def pretrain_hours(cfg: C.PretrainConfig, figures: Figures) -> float:
    m = method_spec(cfg.method)
    n_pre, n_train, n_test = _sizes(cfg.dataset)
    rate = _rate(figures, cfg.method) * _scale(figures, cfg.crop)
    seconds = cfg.epochs * n_pre / rate
    if cfg.dataset == "imagenet" and figures.jpeg_decode_per_s:
        # JPEG files: each image is decoded once per epoch on the device, in the training stream.
        seconds += cfg.epochs * n_pre / figures.jpeg_decode_per_s
    if m.ring:
        seconds *= _ring_ratio(figures, *m.objective.ring_selection(cfg, n_pre))
    if cfg.knn_every > 0:
        passes = cfg.epochs // cfg.knn_every + (cfg.epochs % cfg.knn_every != 0)
        seconds += passes * (n_train + n_test) / (figures.eval_images_per_s * _scale(figures, cfg.crop))
    if m.uses_kmeans and figures.kmeans:
        k = figures.kmeans
        per_epoch = (k["seconds"] * (n_pre / k["n"]) * (cfg.kmeans_k / k["k"]) * (cfg.kmeans_clusterings / k["clusterings"])
                     * (cfg.kmeans_iters / k["iters"]))
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
    unit = "GPU-hours" if figures.device != "cpu" else "CPU-hours (no GPU figures committed)"
    lines = [f"ring: predicted {unit} of grid {grid.name} from {figures.describe()}",
             f"{'stage':10} {'dataset':10} {'cells':>6} {'hours':>12}"]
    for stage, dataset, cells, hours in rows:
        lines.append(f"{stage:10} {dataset:10} {cells:6d} {hours:12.4g}")
    for stage in ("pretrain", "lincls"):
        sel = [r for r in rows if r[0] == stage]
        lines.append(f"{stage:10} {'all':10} {sum(r[2] for r in sel):6d} {sum(r[3] for r in sel):12.4g}")
    lines.append(f"{'total':10} {'':10} {sum(r[2] for r in rows):6d} {sum(r[3] for r in rows):12.4g}")
    lines.append("(transfer, detection and study cells are not priced)")
    return "\n".join(lines)
