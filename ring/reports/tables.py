"""Aggregation of finished cells into the paper's tables (CSV, Markdown, LaTeX).

    python -m ring.reports.tables table1 --out results/<grid>/tables/table1 --methods ... --datasets ... --metrics M1
    M2 ...

Each cell of a table is the mean +- std over seeds of the cells' metric; a Ring row also shows its
difference to its base method (IRing vs IR, ...), recomputed from our numbers, marked ``*`` where it
exceeds the seed noise by Welch's t-test (:data:`SIGNIFICANCE`, :func:`welch_p`); and each cell
stands beside the paper's published number (``ring/data/published-results.yaml``) and our
difference to it.  A cell whose linear evaluation diverged (``metrics.json`` holds ``diverged``, no
accuracy: :func:`ring.engine.health.divergence`, a non-finite loss or a top-1 at chance) shows "diverged" and its
sentence, never a number; one whose probe's loss stayed high but whose top-1 is above chance (``loss_note``:
:func:`ring.engine.health.loss_note`) shows its number marked ``[hN]``, its footnote the loss and the protocol.
The CSV is long-format (one row per method x dataset) for further analysis.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from ring import resources
from ring.core import config as C
from ring.core import gaussian
from ring.core.catalog import DATASETS, TRANSFER
from ring.core.config import to_dict
from ring.core.files import FileError, atomic_write
from ring.core.methods import METHODS, display_name
from ring.core.metrics import NonFinite, check_metrics
from ring.plan import estimate, lineage
from ring.plan.detection_tasks import COLUMNS
from ring.plan.rerun import RUNS

PUBLISHED = Path(__file__).resolve().parents[1] / "data" / "published-results.yaml"

# table name -> (key in the published-results file, metric key in metrics.json, caption)
TABLES = {
    "table1": ("table1_linear_eval", "top1", "Linear evaluation top-1 (%) on frozen ResNet-18 features"),
    "table3": (
        "table3_meta_dataset_transfer",
        "top1",
        "Transfer of encoders pretrained on the source dataset: linear evaluation top-1 (%) on each new image "
        "distribution (frozen ResNet-18 features, each dataset's own normalisation)",
    ),
    # Table 4's cells hold several metrics each: metrics.json["columns"] of ring.detection.
    "table4": (
        "table4_detection",
        "columns",
        "Frozen ResNet-18 backbones in Detectron2: COCO detection and instance segmentation (Mask R-CNN R18-FPN 1x), "
        "COCO keypoints (Keypoint R-CNN R18-FPN 1x), VOC07 detection (Faster R-CNN R18-C4), AP / AP50 / AP75",
    ),
    "table2": (
        "table2_lesions",
        "top1",
        "Lesioning the effects of annealing and choice of w_u (linear evaluation top-1, %)",
    ),
    "table_la_variants": (
        "table_la_variants",
        "top1",
        "Variants of Ring: Cave and +C_i beside LA (linear evaluation top-1, %)",
    ),
}
# Column name of every dataset a table can show: pretraining and transfer datasets.
DISPLAY = {name: s.display for name, s in {**DATASETS, **TRANSFER}.items()}

# Published tables with a single column print no column names: the one they report.
SINGLE_COLUMN = {"table_la_variants": "CIFAR10"}


@cache
def published() -> dict:
    return C.read_yaml(PUBLISHED, "Published results file")


def published_value(table_key: str, method: str, column: str) -> float:
    """The paper's number for (method, column), NaN where the paper has none."""
    table = published()[table_key]
    row = table["rows"].get(display_name(method) if method in METHODS else method)
    columns = table.get("columns") or [SINGLE_COLUMN[table_key]]
    if row is None or column not in columns:
        return math.nan
    return float(row[columns.index(column)] if isinstance(row, list) else row)


# The paper's protocol: its grid's config of the same cell, compared in the keys the paper fixes
# (Sec. 5 and the appendix); runtime knobs and our own additions (monitoring, k-means sizes) are not.
PAPER_GRID = resources.GRIDS / "paper.yaml"
PAPER_KEYS = {
    "pretrain": (
        "epochs",
        "batch_size",
        "lr",
        "momentum",
        "weight_decay",
        "lr_milestones",
        "lr_gamma",
        "resize",
        "crop",
        "crop_scale_min",
        "head",
        "out_dim",
        "temperature",
        "bank_negatives",
        "bank_momentum",
        "queue_size",
        "key_momentum",
        "ring_w_l",
        "ring_anneal",
        "ring_anneal_epochs",
        "ring_inner",
        "ring_w_u",
    ),
    "lincls": ("epochs", "batch_size", "lr", "momentum", "weight_decay", "resize", "crop", "augmentation"),
}


@cache
def _paper_grid():
    from ring.plan import grid  # torch-free

    return grid.load(PAPER_GRID)


def _paper_methods() -> set[str]:
    """Every method a table of the paper grid runs: Table 1's rows, the lesions and the LA variants."""
    paper = _paper_grid()
    return {*paper.methods, *(m for table in paper.tables.values() for m in table.get("methods", ()))}


def _read_yaml(path: Path) -> dict | None:
    if not path.is_file():
        return None
    return C.read_yaml(path, "Cell config") or {}


def protocol_differences(metrics_path: str | Path) -> list[str]:
    """``stage.key`` of every paper-fixed key in which this evaluation cell (and the pretraining cell
    whose encoder it evaluates) differs from the paper grid's cell; empty when unknown (no configs)."""
    path = Path(metrics_path)
    evaluation = _read_yaml(path.parent / "config.yaml")
    if evaluation is None or len(path.parts) < 6:
        return []
    if "task" in evaluation:  # a Table 4 cell: .../detection/<source>/<method>/<task>/seed<k>/metrics.json
        return detection_differences(path, evaluation)
    source = evaluation.get("source", evaluation["dataset"])  # a transfer cell's encoder is the source's
    seed_dir, method_dir = path.parts[-2], path.parts[-3]
    pretrain = _read_yaml(Path(*path.parts[:-5], "pretrain", source, method_dir, seed_dir, "config.yaml"))
    paper = _paper_grid()
    if evaluation.get("method") not in _paper_methods():  # a method the paper never ran has no protocol to differ from
        return []
    try:
        ours_paper = [
            (pretrain, C_dict(paper.pretrain_config(source, evaluation["method"], 0, "data")), "pretrain"),
            (evaluation, C_dict(paper.lincls_config(source, evaluation["method"], 0, "data")), "lincls"),
        ]
    except ValueError:
        return []
    return [
        f"{stage}.{key}"
        for ours, theirs, stage in ours_paper
        if ours is not None
        for key in PAPER_KEYS[stage]
        if key in ours and ours[key] != theirs[key]
    ]


def detection_differences(path: Path, cell: dict) -> list[str]:
    """A detection cell against the paper grid's: its datasets, every Detectron2 override either sets
    (the appendix's schedule and solver live there), and the ImageNet pretraining cell it starts from."""
    paper = _paper_grid()
    if len(path.parts) < 7 or not paper.detection or cell.get("method") not in paper.detection["methods"]:
        return []
    try:
        theirs = C_dict(paper.detection_config(cell["method"], cell["task"], int(cell.get("seed", 0)), "datasets"))
        paper_pretrain = C_dict(paper.pretrain_config(paper.detection["source"], cell["method"], 0, "data"))
    except ValueError:
        return []
    ours_overrides, paper_overrides = cell.get("overrides") or {}, theirs["overrides"]
    keys = ["detection.datasets"] if cell.get("datasets", theirs["datasets"]) != theirs["datasets"] else []
    keys += [
        f"detection.{key}"
        for key in sorted({*ours_overrides, *paper_overrides})
        if ours_overrides.get(key) != paper_overrides.get(key)
    ]
    if cell.get("source", theirs["source"]) != theirs["source"]:
        keys.append("detection.source")
    seed_dir, method_dir, source_dir = path.parts[-2], path.parts[-4], path.parts[-5]  # [-3] is the task
    pretrain = _read_yaml(Path(*path.parts[:-6], "pretrain", source_dir, method_dir, seed_dir, "config.yaml"))
    keys += [
        f"pretrain.{key}"
        for key in PAPER_KEYS["pretrain"]
        if pretrain is not None and key in pretrain and pretrain[key] != paper_pretrain[key]
    ]
    return keys


def C_dict(cfg) -> dict:

    return to_dict(cfg)


class MetricsError(ValueError):
    """A cell's metrics.json that a table cannot use."""


# The keys that name an evaluation cell; a diverged cell's metrics.json holds them and no accuracy.
IDENTITY_KEYS = ("dataset", "method", "seed")


def diverged_reason(m: dict) -> str:
    """The sentence of a linear evaluation that diverged (ring.lincls writes it instead of an accuracy), or ''."""
    reason = m.get("diverged") if isinstance(m, dict) else None
    return reason if isinstance(reason, str) and reason else ""


def loss_note(m: dict) -> str:
    """The note of a linear probe whose accuracy is reported although its training loss stayed high, or ''."""
    note = m.get("loss_note") if isinstance(m, dict) else None
    return note if isinstance(note, str) and note else ""


def read_metrics(path: str | Path, keys: tuple[str, ...], diverged_ok: bool = False) -> dict:
    """A cell's metrics as JSON (never unpickled), holding ``keys`` with finite values; one sentence naming the file.
    With ``diverged_ok``, a diverged cell's file (:func:`diverged_reason`) needs only the keys that name the cell."""
    path = Path(path)
    try:
        m = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise MetricsError(
            f"The metrics file {path} is unreadable or corrupt ({reason}); rerun the cell that writes it "
            "(delete the file first)."
        ) from None
    if diverged_ok and diverged_reason(m):
        keys = tuple(k for k in keys if k in IDENTITY_KEYS)
    missing = [k for k in keys if not isinstance(m, dict) or k not in m]
    if missing:
        raise MetricsError(f"The metrics file {path} lacks {', '.join(missing)}; rerun the cell that writes it.")
    check_metrics(m, path, keys)
    check_contents(m, path)
    return m


# Metrics that are percentages of test images: a value outside [0, 100] was not computed by a stage.
PERCENT_KEYS = ("top1", "top5")


def check_contents(m: dict, path: Path) -> None:
    """Numbers in range, and the keys that name the cell equal to the folder it lies in
    (.../<dataset>/<method>/seed<k>/metrics.json): a mislabelled file never fills another row."""
    for key in PERCENT_KEYS:
        if key in m and not (isinstance(m[key], (int, float)) and not isinstance(m[key], bool) and 0 <= m[key] <= 100):
            raise MetricsError(
                f"The metrics file {path} holds {key}={m[key]!r}, not a percentage in [0, 100]; "
                "rerun the cell that writes it."
            )
    parts = path.parts
    if len(parts) >= 5 and parts[-2].startswith("seed") and parts[-2][4:].isdigit() and "task" not in m:
        folder = {"dataset": parts[-4], "method": parts[-3], "seed": int(parts[-2][4:])}
        wrong = [f"{k}={m[k]!r} (its folder says {v!r})" for k, v in folder.items() if k in m and m[k] != v]
        if wrong:
            raise MetricsError(
                f"The metrics file {path} is labelled {', '.join(wrong)}; it belongs to another cell: "
                "rerun the cell that writes it."
            )


def stale_reason(path: str | Path, m: dict) -> str:
    """Why a cell's chain (metrics <- encoder <- config, ring.plan.lineage) no longer holds, said on stderr too; ''
    when it holds.  A stale cell is kept in the table with that sentence, never as a number."""
    stale = lineage.stale_reason(path, m) or ""
    if stale:
        print(f"ring: stale: {stale}", file=sys.stderr)
    return stale


def collect(metric_files: list[str | Path], metric: str) -> pd.DataFrame:
    """One row per cell, a stale one (:func:`stale_reason`) or a diverged one (:func:`diverged_reason`) without a value,
    one whose probe's loss stayed high with its value and its :func:`loss_note`."""
    rows = []
    for path in metric_files:
        m = read_metrics(path, (*IDENTITY_KEYS, metric), diverged_ok=True)
        stale = stale_reason(path, m)
        diverged = "" if stale else diverged_reason(m)
        rows.append(
            {
                "dataset": m["dataset"],
                "method": m["method"],
                "seed": int(m["seed"]),
                "value": math.nan if stale or diverged else float(m[metric]),
                "differs": ", ".join(protocol_differences(path)),
                "stale": stale,
                "diverged": diverged,
                "loss_note": "" if stale or diverged else loss_note(m),
            }
        )
    return pd.DataFrame(
        rows, columns=["dataset", "method", "seed", "value", "differs", "stale", "diverged", "loss_note"]
    )


def dataset_display(name: str) -> str:
    return DISPLAY[name]


def summarize(
    cells: pd.DataFrame, table_key: str, methods: list[str], datasets: list[str], display=dataset_display
) -> pd.DataFrame:
    """One row per (method, dataset): n, mean, std, delta to the base method, paper, diff to paper.

    ``display`` names a ``dataset`` value's column in the paper (Table 4's values are its columns).
    """
    stats = cells.groupby(["method", "dataset"])["value"].agg(n="count", mean="mean", std="std").reset_index()
    # Their sentences (a stale or diverged cell's value is NaN, so n counts only the others; a noted one counts).
    for why in ("stale", "diverged", "loss_note"):
        if why in cells:
            reasons = cells.groupby(["method", "dataset"])[why].agg(lambda v: " ".join(t for t in v if t)).reset_index()
            stats = stats.merge(reasons, on=["method", "dataset"], how="left")
    if "differs" in cells:  # paper-fixed keys in which any seed's cell differs from the paper's protocol
        keys = (
            cells.groupby(["method", "dataset"])["differs"]
            .agg(lambda v: ", ".join(sorted({k for text in v for k in text.split(", ") if k})))
            .reset_index()
        )
        stats = stats.merge(keys, on=["method", "dataset"], how="left")
    grid = pd.MultiIndex.from_product([methods, datasets], names=["method", "dataset"]).to_frame(index=False)
    out = grid.merge(stats, on=["method", "dataset"], how="left")
    out["differs"] = out["differs"].fillna("") if "differs" in out else ""
    out["stale"] = out["stale"].fillna("") if "stale" in out else ""
    out["diverged"] = out["diverged"].fillna("") if "diverged" in out else ""
    out["loss_note"] = out["loss_note"].fillna("") if "loss_note" in out else ""
    # No number from a partly stale or diverged entry, nor a delta to it.
    out.loc[(out.stale != "") | (out.diverged != ""), ["mean", "std"]] = math.nan
    out["n"] = out["n"].fillna(0).astype(int)
    by_cell = out.set_index(["method", "dataset"])

    def base_row(row):
        spec = METHODS[row.method]
        return (
            by_cell.loc[(spec.base, row.dataset)] if spec.ring and (spec.base, row.dataset) in by_cell.index else None
        )

    out["delta_to_base"] = [
        row["mean"] - base["mean"] if (base := base_row(row)) is not None else math.nan for _, row in out.iterrows()
    ]
    # Welch's p of each Ring - base difference (NaN with fewer than 2 seeds on a side: no spread to test against).
    out["delta_p"] = [
        welch_p(row["mean"], row["std"], row.n, base["mean"], base["std"], base.n)
        if (base := base_row(row)) is not None
        else math.nan
        for _, row in out.iterrows()
    ]
    out["delta_significant"] = out["delta_p"] < SIGNIFICANCE
    out["paper"] = [published_value(table_key, m, display(d)) for m, d in zip(out.method, out.dataset, strict=True)]
    out["diff_to_paper"] = out["mean"] - out["paper"]
    out.insert(2, "column", [display(d) for d in out.dataset])
    return out


# A Ring - base difference is marked (*) where Welch's two-sided t-test over the two methods' seeds gives p below
# this: the difference exceeds what the seeds' spread explains.  Welch, not Student: the two methods' seed spreads
# differ (ring_digits: 1.6 vs 3.9 points).  With 3 seeds a side it needs the difference beyond roughly 2.8 to 4.3
# standard errors (the t quantile at Welch's 2 to 4 degrees of freedom), so a gain within the seed noise is unmarked.
SIGNIFICANCE = 0.05
SIGNIFICANCE_NOTE = (
    f"* after a difference: it exceeds the seed noise, Welch's two-sided t-test over the seeds of the "
    f"Ring method and of its base at p < {SIGNIFICANCE:g}; no mark: within the noise, or a side with "
    "one seed, which has no spread to test against."
)


def welch_p(mean_a: float, std_a: float, n_a: int, mean_b: float, std_b: float, n_b: int) -> float:
    """Two-sided p of Welch's t-test from two samples' mean, std (ddof 1) and size; NaN unless both have 2+ values.
    Two samples without spread: 0 where the means differ, 1 where they agree (no noise for a difference to exceed)."""
    values = (mean_a, std_a, mean_b, std_b)
    if n_a < 2 or n_b < 2 or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
        return math.nan
    if std_a == 0 and std_b == 0:
        return 0.0 if mean_a != mean_b else 1.0
    from scipy import stats  # scikit-learn's dependency; imported here to keep ring.reports.tables light

    return float(stats.ttest_ind_from_stats(mean_a, std_a, n_a, mean_b, std_b, n_b, equal_var=False).pvalue)


def _fmt(x: float, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:+.1f}" if signed else f"{x:.1f}"


def cell_text(
    row, stale_notes: dict | None = None, diverged_notes: dict | None = None, loss_notes: dict | None = None
) -> str:
    if row.stale:  # one stale seed makes the whole entry stale: a mean over the rest would be another number
        mark = (stale_notes if stale_notes is not None else {}).setdefault(
            row.stale, f"[s{len(stale_notes or {}) + 1}]"
        )
        return f"stale {mark}"
    if getattr(row, "diverged", ""):  # likewise one diverged seed: its evaluation has no accuracy to average
        notes = diverged_notes if diverged_notes is not None else {}
        return f"diverged {notes.setdefault(row.diverged, f'[d{len(notes) + 1}]')}"
    if row.n == 0:
        return "—"
    text = _fmt(row["mean"]) + (f" ± {row['std']:.1f}" if row.n > 1 else "")
    if getattr(row, "loss_note", ""):  # a measured number, marked: its probe's training loss stayed high
        notes = loss_notes if loss_notes is not None else {}
        text += f" {notes.setdefault(row.loss_note, f'[h{len(notes) + 1}]')}"
    if not math.isnan(row.delta_to_base):
        mark = "*" if row.get("delta_significant", False) else ""
        text += f" ({_fmt(row.delta_to_base, signed=True)}{mark})"
    return text


def paper_text(row, footnotes: dict | None = None) -> str:
    if math.isnan(row.paper):
        return "—"
    if row.n and row.differs and footnotes is not None:
        # Another protocol: no difference to the paper, a footnote naming the keys instead.
        mark = footnotes.setdefault(row.differs, f"[{len(footnotes) + 1}]")
        return f"{row.paper:.1f} {mark}"
    return f"{row.paper:.1f} ({_fmt(row.diff_to_paper, signed=True)})" if row.n else f"{row.paper:.1f}"


def layout(summary: pd.DataFrame, methods: list[str], datasets: list[str], display=dataset_display) -> pd.DataFrame:
    """The paper's layout: methods as rows; per dataset our cell, then the paper's number and our difference."""
    wide = pd.DataFrame(index=pd.Index([display_name(m) for m in methods], name="Method"))
    footnotes: dict[str, str] = {}  # differing keys -> their mark, in order of appearance
    stale_notes: dict[str, str] = {}  # why a cell is stale -> its mark
    diverged_notes: dict[str, str] = {}  # a diverged evaluation's sentence -> its mark
    loss_notes: dict[str, str] = {}  # a high-loss probe's note -> its mark
    for d in datasets:
        col = display(d)
        part = summary[summary.dataset == d].set_index("method")
        wide[col] = [cell_text(part.loc[m], stale_notes, diverged_notes, loss_notes) for m in methods]
        wide[f"{col} paper (ours − paper)"] = [paper_text(part.loc[m], footnotes) for m in methods]
    wide.attrs["footnotes"] = [
        *(
            f"{mark} protocol differs from the paper's in {keys}: no difference to the paper shown."
            for keys, mark in footnotes.items()
        ),
        *(f"{mark} stale: {reason}" for reason, mark in stale_notes.items()),
        *(f"{mark} diverged, no accuracy: {reason}" for reason, mark in diverged_notes.items()),
        *(f"{mark} accuracy measured, training loss high: {note}" for note, mark in loss_notes.items()),
    ]
    return wide


def write(name: str, summary: pd.DataFrame, wide: pd.DataFrame, prefix: str | Path) -> list[Path]:
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    caption = TABLES[name][2]
    paths = [prefix.with_suffix(".csv"), prefix.with_suffix(".md"), prefix.with_suffix(".tex")]
    note = (
        "mean ± std over seeds; (±x) after a Ring method: difference to its base method; "
        f"{SIGNIFICANCE_NOTE} paper: the published number, in brackets ours minus the paper's."
    )
    note = " ".join([note, *wide.attrs.get("footnotes", [])])
    write_texts(
        {
            paths[0]: summary.to_csv(index=False, float_format="%.4f"),
            paths[1]: f"**{name}**: {caption}\n\n{wide.to_markdown()}\n\n{note}\n",
            paths[2]: wide.to_latex(caption=f"{caption}. {note}", label=f"tab:{name}", escape=True),
        }
    )
    return paths


def write_texts(texts: dict[Path, str]) -> None:
    """Every table file rendered first, then each replaced atomically: a failure leaves the old tables in place."""
    for path, text in texts.items():
        atomic_write(path, lambda fh, text=text: fh.write(text.encode()))


def build(
    name: str, metric_files: list[str | Path], methods: list[str], datasets: list[str], prefix: str | Path
) -> pd.DataFrame:
    table_key, metric, _ = TABLES[name]
    summary = summarize(collect(metric_files, metric), table_key, methods, datasets)
    wide = layout(summary, methods, datasets)
    write(name, summary, wide, prefix)
    return wide


def collect_columns(metric_files: list[str | Path]) -> pd.DataFrame:
    """Cells that report several columns (ring.detection's metrics.json): one row per column."""
    rows = []
    for path in metric_files:
        m = read_metrics(path, ("method", "seed", "columns"))
        differs = ", ".join(protocol_differences(path))
        stale = stale_reason(path, m)
        rows.extend(
            {
                "dataset": column,
                "method": m["method"],
                "seed": int(m["seed"]),
                "value": math.nan if stale else float(value),
                "differs": differs,
                "stale": stale,
            }
            for column, value in m["columns"].items()
        )
    return pd.DataFrame(rows, columns=["dataset", "method", "seed", "value", "differs", "stale"])


def build_table4(metric_files: list[str | Path], methods: list[str], prefix: str | Path) -> pd.DataFrame:
    """Table 4: methods x the paper's 12 columns (4 tasks x AP/AP50/AP75), columns without cells shown empty."""

    same = str  # Table 4's column names are the published file's own
    summary = summarize(collect_columns(metric_files), TABLES["table4"][0], methods, COLUMNS, display=same)
    wide = layout(summary, methods, COLUMNS, display=same)
    write("table4", summary, wide, prefix)
    return wide


def _predicted_hours(stage: str, cell: Path, figures) -> float | None:
    """The cell's GPU-hours as ring.plan.estimate predicts them from its config, or None where it cannot."""
    from ring.plan import estimate  # torch-free

    kinds = {"pretrain": C.PretrainConfig, "lincls": C.LinclsConfig}
    if figures is None or stage not in kinds or not (cell / "config.yaml").exists():
        return None
    try:
        return estimate.predict_cell(stage, C.load(kinds[stage], cell / "config.yaml"), figures)
    except ValueError:  # a dataset the estimate has no sizes for
        return None


def gpu_hours(provenance_files: list[str | Path], prefix: str | Path) -> pd.DataFrame:
    """Cost per stage from the cells' provenance: cells, segments, requeues, wall hours and GPU-hours, and the
    GPU-hours ring.plan.estimate predicts from the committed throughput figures (n/a where it cannot)."""

    try:
        figures = estimate.load_figures()
    except ValueError:
        figures = None
    rows = []
    for path in map(Path, provenance_files):
        doc = json.loads(path.read_text())
        # results/<grid>/<stage>/<dataset>/<method>/seed<seed>/provenance.json, or a run an edit set aside in the cell,
        # .../seed<seed>/runs/<key>/provenance.json: its jobs count (once: a run moves whole), its cell once.
        cell = path.parents[2] if path.parent.parent.name == RUNS else path.parent
        stage = cell.parts[-4]
        rows.append(
            {
                "stage": stage,
                "cell": str(cell),
                "run": str(path.parent),
                "segments": len(doc["segments"]),
                "requeues": doc["requeues"],
                "wall_h": doc["wall_s"] / 3600.0,
                "gpu_hours": doc["gpu_hours"],
                "predicted_gpu_hours": _predicted_hours(stage, path.parent, figures),
            }
        )
    cells = pd.DataFrame(
        rows, columns=["stage", "cell", "run", "segments", "requeues", "wall_h", "gpu_hours", "predicted_gpu_hours"]
    )
    summary = cells.groupby("stage").agg(
        cells=("cell", "nunique"),
        segments=("segments", "sum"),
        requeues=("requeues", "sum"),
        wall_h=("wall_h", "sum"),
        gpu_hours=("gpu_hours", "sum"),
    )
    summary.loc["total"] = summary.sum()
    summary[["cells", "segments", "requeues"]] = summary[["cells", "segments", "requeues"]].astype(int)
    # Predicted hours of the cells the model prices; "n/a" (never NaN) where none of a stage's cells is priced.
    priced = cells.dropna(subset=["predicted_gpu_hours"])
    predicted = priced.groupby("stage")["predicted_gpu_hours"].sum()
    predicted.loc["total"] = predicted.sum() if len(priced) else None
    summary["predicted_gpu_hours"] = [
        f"{predicted[s]:.3f}" if s in predicted and predicted[s] is not None else "n/a" for s in summary.index
    ]
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    source = (
        f"; predicted from {figures.describe()} (ring.plan.estimate)"
        if figures is not None
        else "; no throughput figures committed, nothing predicted"
    )
    write_texts(
        {
            prefix.with_suffix(".csv"): cells.to_csv(index=False, float_format="%.6f"),
            prefix.with_suffix(".md"): "**gpu_hours**: compute spent per stage (from the provenance.json of each cell "
            f"and of each run an edit set aside in it, requeued segments included){source}\n\n"
            f"{summary.to_markdown(floatfmt=('', 'g', 'g', 'g', '.3f', '.3f', ''))}\n",
        }
    )
    return summary


# ---- the appendix's toy table: "Looseness of CNCE as w_l increases" -----------------------------

TOY_PROTOCOLS = {
    "nce_critic": "ours, NCE's critic",  # one NCE-trained critic, every bound evaluated on it (held out)
    "own_critics": "ours, own critics",  # each estimator's critic trained with its own bound (held out)
    # The same critics on the training pairs and the training bank at the end of training: what a
    # training log shows, the protocol closest to the appendix's (README, "Fidelity").
    "nce_critic_train": "training data, NCE's critic",
    "own_critics_train": "training data, own critics",
}


def toy_paper(estimator: str) -> tuple[float, float]:
    """The paper's (mean, stdev) of an estimator of the toy table ("NCE", "CNCE10", ...)."""
    table = published()["table_toy_cnce"]
    if estimator == "NCE":
        entry = table["nce"]
    else:
        entry = {float(p): v for p, v in table["cnce"].items()}.get(float(estimator[len("CNCE") :]))
    return (float(entry["mean"]), float(entry["stdev"])) if entry else (math.nan, math.nan)


def toy_summary(metric_files: list[str | Path]) -> pd.DataFrame:
    """One row per (protocol, estimator): seeds, mean and std over seeds, the paper's, the true MI."""
    rows = []
    for path in metric_files:
        m = read_metrics(path, ("seed", "true_mi"))
        check_metrics(m, path, TOY_PROTOCOLS)  # the estimates it shows (a protocol not run is absent)
        for protocol in TOY_PROTOCOLS:
            for estimator, value in m.get(protocol, {}).items():
                rows.append(
                    {
                        "protocol": protocol,
                        "estimator": estimator,
                        "seed": m["seed"],
                        "value": value,
                        "true_mi": m["true_mi"],
                    }
                )
    cells = pd.DataFrame(rows, columns=["protocol", "estimator", "seed", "value", "true_mi"])
    out = (
        cells.groupby(["protocol", "estimator"], sort=False)
        .agg(n=("value", "count"), mean=("value", "mean"), std=("value", "std"), true_mi=("true_mi", "first"))
        .reset_index()
    )
    out["percentile"] = [0.0 if e == "NCE" else float(e[len("CNCE") :]) for e in out.estimator]
    out["paper_mean"], out["paper_std"] = zip(*map(toy_paper, out.estimator), strict=True) if len(out) else ([], [])
    # How far our mean lies from the paper's, in units of the paper's stdev (its own seed spread).
    out["paper_stds_away"] = (out["mean"] - out["paper_mean"]) / out["paper_std"] if len(out) else []
    out["ceiling_k"], out["ceiling_inf"] = zip(*map(toy_ceiling, out.estimator), strict=True) if len(out) else ([], [])
    out["paper_above_ceiling"] = out["paper_mean"] > out["ceiling_inf"] if len(out) else []
    return out


def _g(x: float) -> str:
    return "—" if x is None or math.isnan(x) else f"{x:.4g}"


def toy_layout(summary: pd.DataFrame) -> pd.DataFrame:
    """The paper's layout: columns True, NCE, CNCE at each w_l; rows mean and stdev, ours then the paper's."""
    estimators = list(dict.fromkeys(summary.estimator))
    columns = ["True"] + [("NCE" if e == "NCE" else f"CNCE w_l={e[len('CNCE') :]}") for e in estimators]
    true = _g(summary.true_mi.iloc[0]) if len(summary) else "—"
    rows = {}
    for protocol, label in TOY_PROTOCOLS.items():
        part = summary[summary.protocol == protocol].set_index("estimator")
        if len(part):
            n = int(part.n.min())
            rows[f"{label}: mean ({n} seed{'s' * (n != 1)})"] = [true] + [_g(part.loc[e, "mean"]) for e in estimators]
            rows[f"{label}: std"] = ["—"] + [_g(part.loc[e, "std"]) for e in estimators]
            rows[f"{label}: (mean - paper) / paper stdev"] = ["—"] + [
                _g(round(part.loc[e, "paper_stds_away"], 1)) for e in estimators
            ]
    paper = summary.drop_duplicates("estimator").set_index("estimator")
    # A published mean above the k -> inf ceiling (the larger one) is marked: no critic reaches it.
    rows["paper: mean († above the ceiling)"] = [_g(published()["table_toy_cnce"]["true_mi"])] + [
        _g(paper.loc[e, "paper_mean"]) + (" †" if paper.loc[e, "paper_above_ceiling"] else "") for e in estimators
    ]
    rows["paper: stdev"] = ["—"] + [_g(paper.loc[e, "paper_std"]) for e in estimators]
    k = C.ToyCNCEConfig().negatives + 1
    rows[f"ceiling, k = {k} (any critic)"] = ["—"] + [_g(paper.loc[e, "ceiling_k"]) for e in estimators]
    rows["ceiling, k → ∞ (any critic)"] = ["—"] + [_g(paper.loc[e, "ceiling_inf"]) for e in estimators]
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns).rename_axis("")


def toy_ceiling(estimator: str) -> tuple[float, float]:
    """(at the paper's k, as k -> inf) the largest value the estimator's bound takes for any critic on the
    paper's Gaussian (ring.core.gaussian.cnce_ceiling); NCE's at k -> inf is the true MI, at finite k not computed."""
    cfg = C.ToyCNCEConfig()  # the paper's Gaussian and its 100 negatives, whatever a grid overrides
    cov = np.add(cfg.cov_z, cfg.cov_eps)  # the joint covariance (ring.toy_cnce.joint_covariance)
    rho = gaussian.correlation(cov)
    if estimator == "NCE":
        return math.nan, gaussian.true_mi(cov)
    percentile = float(estimator[len("CNCE") :])
    return gaussian.cnce_ceiling(rho, percentile, cfg.negatives + 1), gaussian.cnce_ceiling(rho, percentile)


def toy_cnce(metric_files: list[str | Path], prefix: str | Path) -> pd.DataFrame:
    """results/<grid>/tables/table_toy_cnce.{csv,md,tex} from the toy cells' metrics.json."""
    summary = toy_summary(metric_files)
    wide = toy_layout(summary)
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    caption = "Looseness of CNCE as w_l increases (appendix toy example), estimates in nats"
    note = (
        "ours: held-out estimates of each bound (fresh pairs, independent fresh bank); training data: the same "
        "critics on the training pairs and training bank at the end of training; CNCE w_l = p draws the 100 "
        "negatives from the closest (100 - p)% of the bank; NCE's critic: one critic trained with NCE, every bound "
        "evaluated on it (Theorem 1's fixed f); own critics: each estimator trained its own critic; "
        "(mean - paper) / paper stdev: the distance to the paper's mean in units of the paper's seed spread; "
        "ceiling: the largest value the bound takes for any critic on the paper's Gaussian, at the paper's k "
        "(100 negatives + the positive) and as k → ∞ (ring.toy_cnce.cnce_ceiling; NCE's is the true MI); "
        "† a published mean above the k → ∞ ceiling, which no critic reaches."
    )
    write_texts(
        {
            prefix.with_suffix(".csv"): summary.to_csv(index=False, float_format="%.6g"),
            prefix.with_suffix(".md"): f"**table_toy_cnce**: {caption}\n\n{wide.to_markdown()}\n\n{note}\n",
            prefix.with_suffix(".tex"): wide.to_latex(caption=f"{caption}. {note}", label="tab:toy_cnce", escape=True),
        }
    )
    return wide


def main(argv=None) -> int:
    try:
        return _main(argv)
    except (MetricsError, NonFinite, FileError) as err:  # one sentence naming the file; old tables untouched
        print(f"ring: {err}", file=sys.stderr)
        return 1


def _main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["table_toy_cnce"]:
        parser = argparse.ArgumentParser(description="The appendix's toy CNCE table from the toy cells.")
        parser.add_argument("--out", required=True, help="path prefix; .csv, .md and .tex are written")
        parser.add_argument("--metrics", nargs="+", required=True, help="metrics.json files of the toy cells")
        args = parser.parse_args(argv[1:])
        print(toy_cnce(args.metrics, args.out).to_markdown())
        return 0
    if argv[:1] == ["table4"]:
        parser = argparse.ArgumentParser(description="Aggregate detection cells into Table 4.")
        parser.add_argument("--out", required=True, help="path prefix; .csv, .md and .tex are written")
        parser.add_argument("--methods", nargs="+", required=True, help="row order")
        parser.add_argument("--metrics", nargs="+", required=True, help="metrics.json files of the detection cells")
        args = parser.parse_args(argv[1:])
        print(build_table4(args.metrics, args.methods, args.out).to_markdown())
        return 0
    if argv[:1] == ["gpu_hours"]:
        parser = argparse.ArgumentParser(description="Aggregate the cells' provenance into GPU-hours per stage.")
        parser.add_argument("--out", required=True)
        parser.add_argument("--provenance", nargs="*", default=[])
        args = parser.parse_args(argv[1:])
        print(gpu_hours(args.provenance, args.out).to_markdown(floatfmt=("", "g", "g", "g", ".3f", ".3f", "")))
        return 0
    parser = argparse.ArgumentParser(description="Aggregate finished cells into a paper table.")
    parser.add_argument("table", choices=sorted(set(TABLES) - {"table4"}))
    parser.add_argument("--out", required=True, help="path prefix; .csv, .md and .tex are written")
    parser.add_argument("--methods", nargs="+", required=True, help="row order")
    parser.add_argument("--datasets", nargs="+", required=True, help="column order")
    parser.add_argument("--metrics", nargs="+", required=True, help="metrics.json files of the cells")
    args = parser.parse_args(argv)
    wide = build(args.table, args.metrics, args.methods, args.datasets, args.out)
    print(wide.to_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
