"""The GPU-hours table: compute spent per stage from the cells' provenance, beside what ring.plan.estimate predicts,
opened by when the grid will end: the lines ``ring status`` ends with, which :mod:`ring.cluster.outlook` computes
with ``ring status``'s own code (ring.plan.eta's arithmetic) and prints as JSON for this table to read.

    python -m ring.cluster.outlook --grid G | ring table gpu_hours --out results/G/tables/gpu_hours --provenance FILE \
        ... --outlook -
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ring.core import config
from ring.core.cell_paths import cell_values
from ring.core.cell_runs import RUNS
from ring.core.stages import STAGES
from ring.plan import estimate
from ring.reports.captions import outlook_block
from ring.reports.tables.entry import out_argument
from ring.reports.tables.layout import write_texts

# Markdown number formats of the per-stage columns: cells, segments, requeues, wall_h, gpu_hours, predicted.
FLOATFMT = ("", "g", "g", "g", ".3f", ".3f", "")
# The stages whose cells ring.plan.estimate.predict_cell prices from their config.
PREDICTED = ("pretrain", "lincls")
CELL_COLUMNS = ["stage", "cell", "run", "segments", "requeues", "wall_h", "gpu_hours", "predicted_gpu_hours"]


class OutlookError(ValueError):
    """An outlook the table cannot read (one sentence naming it)."""


def _predicted_hours(stage: str, cell: Path, figures) -> float | None:
    """The cell's GPU-hours as ring.plan.estimate predicts them from its config, or None where it cannot."""
    if figures is None or stage not in PREDICTED or not (cell / "config.yaml").exists():
        return None
    try:
        return estimate.predict_cell(stage, config.load(STAGES[stage].config, cell / "config.yaml"), figures)
    except ValueError:  # a dataset the estimate has no sizes for
        return None


def run_rows(provenance_files: list[str | Path], figures) -> pd.DataFrame:
    """One row per run: its cell, segments, requeues, wall hours, GPU-hours spent and predicted."""
    rows = []
    for path in map(Path, provenance_files):
        doc = json.loads(path.read_text())
        # results/<grid>/<stage>/<dataset>/<method>/seed<seed>/provenance.json, or a run an edit set aside in the cell,
        # .../seed<seed>/runs/<key>/provenance.json: its jobs count (once: a run moves whole), its cell once.
        cell = path.parents[2] if path.parent.parent.name == RUNS else path.parent
        if (found := cell_values(cell)) is None:
            raise ValueError(f"{path} lies in no cell folder (results/<grid>/<stage>/.../seed<N>/).")
        stage = found.stage
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
    return pd.DataFrame(rows, columns=CELL_COLUMNS)


def per_stage(runs: pd.DataFrame) -> pd.DataFrame:
    """Cells, segments, requeues, wall hours and GPU-hours per stage and in total, and the predicted GPU-hours of
    the cells the model prices ("n/a", never NaN, where none of a stage's cells is priced)."""
    summary = runs.groupby("stage").agg(
        cells=("cell", "nunique"),
        segments=("segments", "sum"),
        requeues=("requeues", "sum"),
        wall_h=("wall_h", "sum"),
        gpu_hours=("gpu_hours", "sum"),
    )
    summary.loc["total"] = summary.sum()
    summary[["cells", "segments", "requeues"]] = summary[["cells", "segments", "requeues"]].astype(int)
    priced = runs.dropna(subset=["predicted_gpu_hours"])
    predicted = priced.groupby("stage")["predicted_gpu_hours"].sum()
    predicted.loc["total"] = predicted.sum() if len(priced) else None
    summary["predicted_gpu_hours"] = [
        f"{predicted[s]:.3f}" if s in predicted and predicted[s] is not None else "n/a" for s in summary.index
    ]
    return summary


def gpu_hours(provenance_files: list[str | Path], prefix: str | Path, outlook: dict | None = None) -> pd.DataFrame:
    """results/<grid>/tables/gpu_hours.{csv,md}: one CSV row per run, the Markdown per stage, opened by ``outlook``
    (``ring status``'s lines on when the grid will end and the time they were computed, :func:`read_outlook`)."""
    try:
        figures = estimate.load_figures()
    except ValueError:
        figures = None
    runs = run_rows(provenance_files, figures)
    summary = per_stage(runs)
    source = (
        f"; predicted from {figures.describe()} (ring.plan.estimate)"
        if figures is not None
        else "; no throughput figures committed, nothing predicted"
    )
    top = f"{outlook_block(outlook['lines'], outlook['when'])}\n" if outlook else ""
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    write_texts(
        {
            prefix.with_suffix(".csv"): runs.to_csv(index=False, float_format="%.6f"),
            prefix.with_suffix(".md"): "**gpu_hours**: compute spent per stage (from the provenance.json of each cell "
            f"and of each run an edit set aside in it, requeued segments included){source}\n\n{top}"
            f"{summary.to_markdown(floatfmt=FLOATFMT)}\n",
        }
    )
    return summary


def read_outlook(source: str) -> dict:
    """The outlook ring.cluster.outlook printed (JSON, never unpickled), from a file or ``-`` (stdin), checked."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
        doc = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise OutlookError(
            f"The outlook {source} is unreadable ({err}); make it with python -m ring.cluster.outlook."
        ) from None
    doc = doc if isinstance(doc, dict) else {}
    lines, when = doc.get("lines"), doc.get("when")
    if not (isinstance(lines, list) and lines and all(isinstance(x, str) for x in lines) and isinstance(when, str)):
        raise OutlookError(
            f'The outlook {source} is not python -m ring.cluster.outlook\'s JSON ({{"when": ..., "lines": [...]}}); '
            "make it with that command."
        )
    return doc


@dataclass(frozen=True)
class CostTable:
    name: str = "gpu_hours"
    help: str = "GPU-hours spent per stage, beside the predicted, opened by when the grid will end"

    def arguments(self, parser: argparse.ArgumentParser) -> None:
        out_argument(parser, ".csv and .md")
        parser.add_argument("--provenance", nargs="*", default=[], help="provenance.json files of the cells and runs")
        parser.add_argument(
            "--outlook",
            metavar="FILE",
            help="when the grid will end, the JSON of python -m ring.cluster.outlook (- reads it from stdin)",
        )

    def run(self, args: argparse.Namespace) -> str:
        outlook = read_outlook(args.outlook) if args.outlook else None
        summary = gpu_hours(args.provenance, args.out, outlook)
        return "\n\n".join(
            [*(["\n".join(outlook["lines"])] if outlook else []), summary.to_markdown(floatfmt=FLOATFMT)]
        )


TABLE = CostTable()
