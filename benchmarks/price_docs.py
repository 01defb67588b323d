"""docs/performance.md's section on the measured price, generated from the committed files of ``benchmarks/price.py``
(``python -m benchmarks.price --docs`` prints it; tests/project/test_benchmarks.py checks the page holds it).
Torch-free: it reads JSON and the estimate."""

from __future__ import annotations

import json
from pathlib import Path

from ring import resources
from ring.plan import estimate as E
from ring.plan import grid as G
from ring.plan.estimate import blocks

BEGIN, END = "<!-- price:begin (python -m benchmarks.price --docs) -->", "<!-- price:end -->"
RECORD_SHOWN = ("workers", "compile", "store", "threads", "batch", "crop", "bank")


def _passes(doc: dict) -> list[str]:
    lines = [
        "| pass | method | ms per image | s per call | batches timed (left out per call) | measured at |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for fig in doc["passes"]:
        rec = ", ".join(f"{k} {fig['record'][k]}" for k in RECORD_SHOWN)
        lines.append(
            f"| {fig['pass']} | {fig['method']} | {fig['seconds_per_image'] * 1e3:.3f} | {fig['seconds_per_call']:.3f} "
            f"| {fig['timed_batches']} ({fig['excluded_batches']}) | {rec}, {fig['record']['dataset']} |"
        )
    for method, fig in doc.get("kmeans", {}).items():
        lines.append(
            f"| k-means | {method} | - | {fig['seconds_per_call']:.3f} | - | {fig['bank_entries']:,} entries, "
            f"work {fig['work']:,} (n k clusterings (iters + 1)) |"
        )
    return lines


def _fixed(doc: dict) -> list[str]:
    keys = list(next(iter(doc["fixed"].values()))["per_job_s"])
    lines = [f"| stage | {' | '.join(keys)} | a checkpoint write | cells |", "| --- |" + " ---: |" * (len(keys) + 2)]
    for stage, fig in doc["fixed"].items():
        values = " | ".join(f"{fig['per_job_s'][k]:.2f}" for k in keys)
        lines.append(f"| {stage} | {values} | {fig['checkpoint_write_s']:.3f} | {fig['cells']} |")
    return lines


def _check(doc: dict) -> list[str]:
    lines = ["| pass | cells | predicted s | spent s | predicted / spent |", "| --- | ---: | ---: | ---: | ---: |"]
    rows = doc["rows"]
    for row, r in rows.items():
        lines.append(
            f"| {row} | {r['cells']} | {r['predicted_s']:.1f} | {r['spent_s']:.1f} | "
            f"{r['predicted_s'] / r['spent_s']:.2f} |"
        )
    predicted, spent = sum(r["predicted_s"] for r in rows.values()), sum(r["spent_s"] for r in rows.values())
    lines.append(f"| total | {doc['cells']} | {predicted:.1f} | {spent:.1f} | {predicted / spent:.2f} |")
    return lines


def _load(machine: dict) -> str:
    """The host's 1-minute load average before and after the run: what else its cores were doing."""
    before, after = machine["load_average_before"][0], machine["load_average_after"][0]
    return f"load average {before:.1f} before and {after:.1f} after"


def section(price_file: Path, check_file: Path) -> str:
    price, check = json.loads(Path(price_file).read_text()), json.loads(Path(check_file).read_text())
    m = price["machine"]
    paper, figures = G.load(resources.GRIDS / "paper.yaml"), E.load_figures()
    lines = [
        BEGIN,
        f"The CPU's end-to-end figures (`{Path(price_file).name}`, measured {m['date']} on {m['cpu_count']} cores, "
        f"torch {m['torch']}, {_load(m)}): each pass of the calibration grid's cells, run one job at a time by "
        "`ring.cluster.launch` as the workflow runs them, timed past its warm-up and its loader's prefetch.",
        "",
        *_passes(price),
        "",
        "Fixed costs per job, seconds (medians over the calibration cells):",
        "",
        *_fixed(price),
        "",
        f"Predicted against spent on the held-out grid (`{Path(check_file).name}`, measured "
        f"{check['machine']['date']}, {_load(check['machine'])}: {', '.join(check['grid']['methods'])} on 16-px "
        f"digits, one epoch, no kNN monitor), priced from `{check['figures']}`:",
        "",
        *_check(check),
        "",
        f"The paper grid, every block, from the default figures ({figures.device}: {', '.join(figures.files)}), "
        "`ring estimate --grid paper`'s last lines (their age left out here):",
        "",
        "```",
        *(line for line in blocks.lines(paper, figures) if not line.startswith("  figures: ")),
        "```",
        END,
    ]
    return "\n".join(lines)
