"""A cell's price pass by pass from the end-to-end figures (``price-<device>.json``, ``benchmarks/price.py``).

Each pass's calls and images are counted from the cell's config as its stage makes them (:func:`counts`): pretraining
an epoch per call over ``(n // batch) x batch`` images; the kNN monitor each epoch it is due or a validation-adaptive
Ring policy reads it (and once before training where it validates first), the training split each time and the test
split when the monitor is due; LA's k-means once per epoch after its warm-up; linear evaluation and transfer one call
over the training split once per epoch (once in all with ``augmentation: none``, whose features are cached) and the
test split once.  A pass costs ``calls x seconds_per_call + images x seconds_per_image`` of the figure its method made
on the device (:mod:`ring.plan.estimate.measured`), a cell's fixed costs are its stage's per job (the interpreter's
start and imports, the data check, the setup, the compile warm-up) once per process and a checkpoint write per epoch.

A pass with no figure of its own, or whose figure was measured running otherwise (another worker count, store,
compile, thread count, batch or crop), is not priced here: :func:`price` says why, and the caller prices it by the
component model (:mod:`ring.plan.estimate.passes`) and prints the reason.  Transfer with no figure of its own is
priced from the linear-evaluation figure of the same method (the same stage code, ``ring.lincls.LinearEval``),
which the price says.  A file's seconds are on one clock (``clock``: the CPU's are its jobs' CPU seconds,
:mod:`ring.engine.clock`), which ``ring estimate --check`` reads the spent seconds on; a file mixing clocks is refused.
Table 4's figures (``price_detection-<device>.json``, :mod:`ring.plan.estimate.detection`) are read from the price
file's own folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ring.core.methods import method as method_spec
from ring.core.stages import STAGES
from ring.engine.anneal import VALIDATION_POLICIES
from ring.plan.estimate.figures import label, last, read
from ring.plan.estimate.measured import check_written, mismatch

FIXED_ROW = "fixed costs"


@dataclass
class Measured:
    """One device's end-to-end figures: (pass, method) -> figure, stage -> fixed figure, method -> k-means figure."""

    device: str
    date: str
    file: str
    clock: str = "wall"  # the segments' clock its seconds are on (ring.plan.estimate.measured.CLOCKS)
    figures: dict[tuple[str, str], dict] = field(default_factory=dict)
    fixed: dict[str, dict] = field(default_factory=dict)
    kmeans: dict[str, dict] = field(default_factory=dict)
    # Table 4's figures (price_detection-<device>.json, ring.plan.estimate.detection): {"tasks", "fixed"}, or {}.
    detection: dict = field(default_factory=dict)
    detection_file: str = ""

    def describe(self) -> str:
        return f"end-to-end figures {self.file} (measured {self.date} on {self.device})"


def load(folders, device: str) -> Measured | None:
    """The device's ``price-<device>.json`` (the last folder's), each figure checked as the suite checked it."""
    path = last(folders, f"price-{device.replace(' ', '_')}.json")
    if path is None:
        return None
    doc = read(path)
    found = Measured(
        doc["machine"]["device"], doc["machine"]["date"], label(path, folders[0]), doc.get("clock", "wall")
    )
    for fig in [*doc["passes"], *doc["fixed"].values(), *doc.get("kmeans", {}).values()]:
        if fig.get("clock", "wall") != found.clock:
            raise ValueError(
                f"{path} mixes clocks: a figure on the {fig.get('clock', 'wall')} clock in a file on the {found.clock} "
                "clock; rerun benchmarks/price.py."
            )
    for fig in doc["passes"]:
        check_written(fig)
        found.figures[(fig["pass"], fig["method"])] = fig
    found.fixed = dict(doc["fixed"])
    found.kmeans = dict(doc.get("kmeans", {}))
    # The detection figures of the price file's own folder: figures measured together, on one clock.
    home = [folder for folder in folders if str(folder / path.name) == str(path)][-1]
    detection = last([home], f"price_detection-{device.replace(' ', '_')}.json")
    if detection is not None:
        found.detection, found.detection_file = read(detection), label(detection, folders[0])
        clocks = {fig["clock"] for fig in [*found.detection["tasks"].values(), found.detection["fixed"]]}
        if clocks != {found.clock}:
            raise ValueError(
                f"{detection} is on the {', '.join(sorted(clocks))} clock, its device's price file on the "
                f"{found.clock} clock; rerun benchmarks/price.py --detection."
            )
    return found


def cell_record(stage: str, cfg, device: str, compiled: bool, store: str, threads: int) -> dict:
    """What a cell runs as, in a figure's record's terms (ring.plan.estimate.measured.RECORD); ``threads``: its
    job's (``cfg.threads``, else its grid's resources: the workflow sets OMP_NUM_THREADS from them)."""
    m = method_spec(cfg.method, require_implemented=False)
    queue = m.objective.family(m) == "MoCo"  # its negatives are its queue's; the others draw them from the bank
    bank = getattr(cfg, "queue_size", 0) if queue else getattr(cfg, "bank_negatives", 0)
    return {
        "device": device,
        "workers": cfg.num_workers,
        "compile": compiled,
        "store": store,
        "threads": cfg.threads or threads,
        "batch": cfg.batch_size,
        "crop": cfg.crop,
        "bank": bank if stage in ("pretrain", "study") else 0,
        "dataset": cfg.dataset,
    }


def knn_calls(cfg, n_train: int, n_test: int) -> tuple[int, int]:
    """(calls, images) of the kNN monitor over a pretraining cell's run (ring.pretrain's _end_epoch)."""
    m = method_spec(cfg.method)
    validation = bool(m.ring) and cfg.ring_anneal in VALIDATION_POLICIES
    calls = images = 0
    if validation and cfg.ring_val_before_training:
        calls, images = 1, n_train
    for epoch in range(cfg.epochs):
        due = cfg.knn_every > 0 and ((epoch + 1) % cfg.knn_every == 0 or epoch + 1 == cfg.epochs)
        if due or validation or cfg.log_window_classes:
            calls += 1
            images += n_train + (n_test if due else 0)
    return calls, images


def counts(stage: str, cfg, sizes: tuple[int, int, int]) -> dict[str, tuple[int, int]]:
    """(calls, images) of each pass the cell makes."""
    n_pre, n_train, n_test = sizes
    if stage in ("pretrain", "study"):
        out = {"pretraining": (cfg.epochs, (n_pre // cfg.batch_size) * cfg.batch_size * cfg.epochs)}
        out["kNN monitor"] = knn_calls(cfg, n_train, n_test)
        if method_spec(cfg.method).uses_kmeans:
            out["k-means"] = (max(cfg.epochs - cfg.kmeans_warmup_epochs, 0), 0)
        return out
    passes = cfg.epochs if cfg.augmentation == "crop_flip" else 1
    return {STAGES[stage].price_pass: (1, passes * n_train + n_test)}


def _figure(measured: Measured, name: str, method: str, record: dict) -> tuple[dict | None, str]:
    fig = measured.figures.get((name, method))
    if fig is None and name == "transfer":  # the same stage code (LinearEval) as linear evaluation
        fig = measured.figures.get(("linear evaluation", method))
    if fig is None:
        return None, f"no end-to-end {name} figure of {method} in {measured.file}"
    if why := mismatch(fig["record"], record, name):
        return None, f"the {name} figure of {method} in {measured.file} was {why}"
    return fig, ""


def _kmeans_s(measured: Measured, cfg, n_pre: int, calls: int) -> tuple[float | None, str]:
    """k-means at the figure's seconds per reclustering, scaled by its GEMMs' work n x k x clusterings x iters."""
    fig = measured.kmeans.get(cfg.method)
    if fig is None:
        return None, f"no end-to-end k-means figure of {cfg.method} in {measured.file}"
    work = n_pre * cfg.kmeans_k * cfg.kmeans_clusterings * (cfg.kmeans_iters + 1)
    return calls * fig["seconds_per_call"] * work / fig["work"], ""


def price(stage: str, cfg, sizes, measured: Measured, record: dict, restarts: int = 0) -> tuple[dict, dict]:
    """({row: seconds} of what the figures price, {row: why not} of what they cannot) of one cell; ``restarts``:
    the processes after the first (each pays the fixed costs per job again)."""
    seconds, why = {}, {}
    for name, (calls, images) in counts(stage, cfg, sizes).items():
        if not calls:
            continue
        if name == "k-means":
            value, reason = _kmeans_s(measured, cfg, sizes[0], calls)
        else:
            fig, reason = _figure(measured, name, cfg.method, record)
            value = None if fig is None else calls * fig["seconds_per_call"] + images * fig["seconds_per_image"]
        if value is None:
            why[name] = reason
        else:
            seconds[name] = value
    kind = STAGES[stage].fixed_costs or stage  # the fixed costs of the stage code its jobs run
    fixed = measured.fixed.get(kind)
    if fixed is None or fixed["record"]["device"] != record["device"]:  # the host's costs: only its device matters
        why[FIXED_ROW] = f"no {kind} fixed costs of {record['device']} in {measured.file}"
    else:
        per_job = sum(fixed["per_job_s"].values())
        seconds[FIXED_ROW] = per_job * (1 + restarts) + cfg.epochs * fixed["checkpoint_write_s"]
    return seconds, why
