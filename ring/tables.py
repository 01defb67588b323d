"""Aggregation of finished cells into the paper's tables (CSV, Markdown, LaTeX).

    python -m ring.tables table1 --out results/<grid>/tables/table1 --methods ... --datasets ... --metrics M1 M2 ...

Each cell of a table is the mean +- std over seeds of the cells' metric; a Ring row also shows its
difference to its base method (IRing vs IR, ...), recomputed from our numbers; and each cell
stands beside the paper's published number (``ring/data/published-results.yaml``) and our
difference to it.  The CSV is long-format (one row per method x dataset) for further analysis.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from functools import lru_cache
from pathlib import Path

import pandas as pd
import yaml

from ring.catalog import DATASETS
from ring.methods import METHODS, display_name

PUBLISHED = Path(__file__).parent / "data" / "published-results.yaml"

# table name -> (key in the published-results file, metric key in metrics.json, caption)
TABLES = {
    "table1": ("table1_linear_eval", "top1", "Linear evaluation top-1 (%) on frozen ResNet-18 features"),
    "table2": ("table2_lesions", "top1", "Lesioning the effects of annealing and choice of w_u (linear evaluation top-1, %)"),
    "table_la_variants": ("table_la_variants", "top1", "Variants of Ring: Cave and +C_i beside LA (linear evaluation top-1, %)"),
}

# Published tables with a single column print no column names: the one they report.
SINGLE_COLUMN = {"table_la_variants": "CIFAR10"}


@lru_cache(maxsize=None)
def published() -> dict:
    with open(PUBLISHED) as fh:
        return yaml.safe_load(fh)


def published_value(table_key: str, method: str, column: str) -> float:
    """The paper's number for (method, column), NaN where the paper has none."""
    table = published()[table_key]
    row = table["rows"].get(display_name(method) if method in METHODS else method)
    columns = table.get("columns") or [SINGLE_COLUMN[table_key]]
    if row is None or column not in columns:
        return math.nan
    return float(row[columns.index(column)] if isinstance(row, list) else row)


def collect(metric_files: list[str | Path], metric: str) -> pd.DataFrame:
    rows = []
    for path in metric_files:
        with open(path) as fh:
            m = json.load(fh)
        rows.append({"dataset": m["dataset"], "method": m["method"], "seed": int(m["seed"]), "value": float(m[metric])})
    return pd.DataFrame(rows, columns=["dataset", "method", "seed", "value"])


def summarize(cells: pd.DataFrame, table_key: str, methods: list[str], datasets: list[str]) -> pd.DataFrame:
    """One row per (method, dataset): n, mean, std, delta to the base method, paper, diff to paper."""
    stats = cells.groupby(["method", "dataset"])["value"].agg(n="count", mean="mean", std="std").reset_index()
    grid = pd.MultiIndex.from_product([methods, datasets], names=["method", "dataset"]).to_frame(index=False)
    out = grid.merge(stats, on=["method", "dataset"], how="left")
    out["n"] = out["n"].fillna(0).astype(int)
    means = out.set_index(["method", "dataset"])["mean"]

    def base_delta(row) -> float:
        spec = METHODS[row.method]
        if not spec.ring or (spec.base, row.dataset) not in means.index:
            return math.nan
        return row["mean"] - means[(spec.base, row.dataset)]

    out["delta_to_base"] = out.apply(base_delta, axis=1)
    out["paper"] = [published_value(table_key, m, DATASETS[d].display) for m, d in zip(out.method, out.dataset)]
    out["diff_to_paper"] = out["mean"] - out["paper"]
    out.insert(2, "column", [DATASETS[d].display for d in out.dataset])
    return out


def _fmt(x: float, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:+.1f}" if signed else f"{x:.1f}"


def cell_text(row) -> str:
    if row.n == 0:
        return "—"
    text = _fmt(row["mean"]) + (f" ± {row['std']:.1f}" if row.n > 1 else "")
    if not math.isnan(row.delta_to_base):
        text += f" ({_fmt(row.delta_to_base, signed=True)})"
    return text


def paper_text(row) -> str:
    if math.isnan(row.paper):
        return "—"
    return f"{row.paper:.1f} ({_fmt(row.diff_to_paper, signed=True)})" if row.n else f"{row.paper:.1f}"


def layout(summary: pd.DataFrame, methods: list[str], datasets: list[str]) -> pd.DataFrame:
    """The paper's layout: methods as rows; per dataset our cell, then the paper's number and our difference."""
    wide = pd.DataFrame(index=pd.Index([display_name(m) for m in methods], name="Method"))
    for d in datasets:
        col = DATASETS[d].display
        part = summary[summary.dataset == d].set_index("method")
        wide[col] = [cell_text(part.loc[m]) for m in methods]
        wide[f"{col} paper (ours − paper)"] = [paper_text(part.loc[m]) for m in methods]
    return wide


def write(name: str, summary: pd.DataFrame, wide: pd.DataFrame, prefix: str | Path) -> list[Path]:
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    caption = TABLES[name][2]
    paths = [prefix.with_suffix(".csv"), prefix.with_suffix(".md"), prefix.with_suffix(".tex")]
    summary.to_csv(paths[0], index=False, float_format="%.4f")
    note = ("mean ± std over seeds; (±x) after a Ring method: difference to its base method; "
            "paper: the published number, in brackets ours minus the paper's.")
    paths[1].write_text(f"**{name}**: {caption}\n\n{wide.to_markdown()}\n\n{note}\n")
    paths[2].write_text(wide.to_latex(caption=f"{caption}. {note}", label=f"tab:{name}", escape=True))
    return paths


def build(name: str, metric_files: list[str | Path], methods: list[str], datasets: list[str], prefix: str | Path) -> pd.DataFrame:
    table_key, metric, _ = TABLES[name]
    summary = summarize(collect(metric_files, metric), table_key, methods, datasets)
    wide = layout(summary, methods, datasets)
    write(name, summary, wide, prefix)
    return wide


def gpu_hours(provenance_files: list[str | Path], prefix: str | Path) -> pd.DataFrame:
    """Cost per stage from the cells' provenance: cells, segments, requeues, wall hours and GPU-hours."""
    rows = []
    for path in map(Path, provenance_files):
        doc = json.loads(path.read_text())
        stage = path.parts[-5]  # results/<grid>/<stage>/<dataset>/<method>/seed<seed>/provenance.json
        rows.append({"stage": stage, "cell": str(path.parent), "segments": len(doc["segments"]),
                     "requeues": doc["requeues"], "wall_h": doc["wall_s"] / 3600.0, "gpu_hours": doc["gpu_hours"]})
    cells = pd.DataFrame(rows, columns=["stage", "cell", "segments", "requeues", "wall_h", "gpu_hours"])
    summary = cells.groupby("stage").agg(cells=("cell", "count"), segments=("segments", "sum"),
                                         requeues=("requeues", "sum"), wall_h=("wall_h", "sum"),
                                         gpu_hours=("gpu_hours", "sum"))
    summary.loc["total"] = summary.sum()
    summary[["cells", "segments", "requeues"]] = summary[["cells", "segments", "requeues"]].astype(int)
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    cells.to_csv(prefix.with_suffix(".csv"), index=False, float_format="%.6f")
    prefix.with_suffix(".md").write_text(
        "**gpu_hours**: compute spent per stage (from each cell's provenance.json, requeued segments included)\n\n"
        f"{summary.to_markdown(floatfmt=('', 'g', 'g', 'g', '.3f', '.3f'))}\n")
    return summary


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["gpu_hours"]:
        parser = argparse.ArgumentParser(description="Aggregate the cells' provenance into GPU-hours per stage.")
        parser.add_argument("--out", required=True)
        parser.add_argument("--provenance", nargs="*", default=[])
        args = parser.parse_args(argv[1:])
        print(gpu_hours(args.provenance, args.out).to_markdown(floatfmt=("", "g", "g", "g", ".3f", ".3f")))
        return 0
    parser = argparse.ArgumentParser(description="Aggregate finished cells into a paper table.")
    parser.add_argument("table", choices=sorted(TABLES))
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
