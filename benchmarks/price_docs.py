"""docs/performance.md's section on the measured price, generated from the committed files of ``benchmarks/price.py``
(``python -m benchmarks.price --docs`` prints it; tests/project/test_benchmarks.py checks the page holds it).
Torch-free: it reads JSON and the estimate."""

from __future__ import annotations

import json
from pathlib import Path

from ring import resources
from ring.plan import grid
from ring.plan.estimate import blocks, inputs, load_figures

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


def _clocks(doc: dict) -> str:
    """What the held-out cells spent on each clock: the busier the host, the further apart."""
    spent = doc["spent_s_by_clock"]
    return (
        f"The same {doc['cells']} jobs' passes and fixed costs took {spent['wall']:,.1f} s on the wall clock and "
        f"{spent['cpu']:,.1f} s on the CPU clock; the table reads the {doc['clock']} clock, the figures'."
    )


def _detection(doc: dict) -> list[str]:
    lines = [
        "| task | s per iteration | s per job (build, evaluation) | images per batch | pixels per image | "
        "iterations run | measured at |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for task, fig in doc["tasks"].items():
        rec = ", ".join(f"{k} {fig['record'][k]}" for k in ("workers", "threads"))
        lines.append(
            f"| {task} | {fig['seconds_per_iteration']:.3f} | {fig['seconds_per_job']:.2f} | "
            f"{fig['shape']['ims_per_batch']} | {fig['shape']['pixels']:,.0f} | "
            f"{' and '.join(map(str, fig['iterations']))} | {rec}, {fig['test_images']} test images, "
            f"{fig['record']['dataset']} |"
        )
    per_job = ", ".join(f"{k} {v:.2f}" for k, v in doc["fixed"]["per_job_s"].items())
    return [*lines, "", f"Fixed costs per detection job, seconds (medians over the tasks): {per_job}."]


def _stores(paper, figures) -> list[str]:
    """The paper grid's blocks on each store: what it costs today, reading the original files or a prepared store."""
    by_store = {store: blocks.price_grid(paper, figures, store) for store in inputs.STORES}
    names = list(by_store["none"])
    lines = [f"| store | {' | '.join(names)} | grid total |", "| --- |" + " ---: |" * (len(names) + 1)]
    for store, priced in by_store.items():
        hours = [priced[name]["seconds"] / 3600.0 for name in names]
        lines.append(f"| {store} | {' | '.join(f'{h:,.1f}' for h in hours)} | {sum(hours):,.0f} |")
    return lines


def _load(machine: dict) -> str:
    """The host's 1-minute load average before and after the run: what else its cores were doing."""
    before, after = machine["load_average_before"][0], machine["load_average_after"][0]
    return f"load average {before:.1f} before and {after:.1f} after"


def _at_once(jobs: int) -> str:
    return "one job at a time" if jobs == 1 else f"{jobs} jobs at a time"


def section(price_file: Path, check_file: Path) -> str:
    price, check = json.loads(Path(price_file).read_text()), json.loads(Path(check_file).read_text())
    detection_file = Path(price_file).with_name(Path(price_file).name.replace("price-", "price_detection-"))
    detection = json.loads(detection_file.read_text())
    m, dm = price["machine"], detection["machine"]
    paper, figures = grid.load(resources.GRIDS / "paper.yaml"), load_figures()
    lines = [
        BEGIN,
        f"The CPU's end-to-end figures (`{Path(price_file).name}`, measured {m['date']} on {m['cpu_count']} cores, "
        f"torch {m['torch']}, {_load(m)}, on the {price.get('clock', 'wall')} clock): each pass of the calibration "
        f"grid's cells, run {_at_once(price.get('jobs_at_once', 1))} by `ring.cluster.launch` as the workflow runs "
        "them, timed past its warm-up and its loader's prefetch.",
        "",
        *_passes(price),
        "",
        "Fixed costs per job, seconds (medians over the calibration cells):",
        "",
        *_fixed(price),
        "",
        f"Table 4's models (`{detection_file.name}`, measured {dm['date']}, {_load(dm)}, on the "
        f"{detection['clock']} clock): each task's paper model (the smoke grid's input, batch and embedded dataset) "
        "run by `ring.cluster.launch detection` for two numbers of iterations; an iteration is their difference's "
        "share:",
        "",
        *_detection(detection),
        "",
        f"Predicted against spent on the held-out grid (`{Path(check_file).name}`, measured "
        f"{check['machine']['date']}, {_load(check['machine'])}: {', '.join(check['grid']['methods'])} on 16-px "
        f"digits, one epoch, no kNN monitor), priced from `{check['figures']}`:",
        "",
        *_check(check),
        "",
        _clocks(check),
        "",
        f"The paper grid, every block, from the default figures ({figures.device}: {', '.join(figures.files)}), "
        "`ring estimate --grid paper`'s last lines (their age left out here):",
        "",
        "```",
        *(line for line in blocks.lines(paper, figures) if not line.startswith("  figures: ")),
        "```",
        "",
        f"The paper grid on each store today ({'GPU' if figures.gpu else 'CPU'}-hours per block, {figures.device}; "
        "`ring estimate --grid paper --store S`):",
        "",
        *_stores(paper, figures),
        END,
    ]
    return "\n".join(lines)
