"""The price suite: every pass of a cell timed end to end through its stage's own entry point.

    python -m benchmarks.price --device cpu          # the CPU figures: about 10 minutes on 2 busy cores
    python -m benchmarks.price --device cpu --out mine  # this host's, for `ring estimate --figures mine`
    python -m benchmarks.price --device cpu --check  # then the held-out grid, priced against what it spent
    python -m benchmarks.price --device cpu --detection  # Table 4's models per iteration (price_detection.py)
    python -m benchmarks.price --docs                # docs/performance.md's section from the three files

Each cell of the calibration grid (:data:`CALIBRATION`: the workflow tests' grid of 16-pixel digits, with two epochs
and the kNN monitor every epoch so that every pass is made more than once) runs as the workflow's job runs it,
``python -m ring.cluster.launch pretrain`` then ``lincls``, each in a process of its own, with its own loader, workers,
store, views and compile setting, and with ``RING_CLOCK_TRACE=1``: its provenance.json then holds every batch's stamp
(:mod:`ring.engine.clock`).  Each pass's figure is timed past its warm-up and its loader's prefetch and refused when
it could not be (:mod:`ring.plan.estimate.measured`); the fixed costs per job are the segments' own (the medians over
the cells).  Every job runs one thread (:data:`THREADS`, as the workflow tests' cells) and the CPU's figures are on
its CPU clock (:func:`clock_of`): the host's other work is not charged to them, but a CPU second is one host's
(docs/performance.md, "The CPU's clock"), so a CPU grid is priced from its own host's run of this suite.
``ring estimate`` prices from ``ring/resources/figures/price-<device>.json`` (:mod:`ring.plan.estimate.pricing`), and
``ring estimate --check`` compares the price with what finished cells spent.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks import price_detection, price_docs
from benchmarks.common import RESULTS, machine, write
from ring.core import catalog, config
from ring.plan import estimate
from ring.plan import grid as grid_plan
from ring.plan.estimate import measured, pricing

# torch's DataLoader default (ring.engine.runtime.make_loader sets none): batches each worker decodes ahead.
PREFETCH_FACTOR = 2
WARMUP = 2  # batches of each call left out beyond the prefetch: the first allocations, a compile's first step
THREADS = 1  # the calibration grid's resources (one thread per job, as the workflow tests run it)
# tests/workflow/runs.py's SMALL grid (the grid tests/workflow/test_workflow.py's finished_grid trains), with two
# epochs and the kNN monitor every epoch; IR, IRing and MoCo are that grid's methods, CMC and LA the other families.
# CMC on the grey digits learns nothing in its ab trunk (ring warns so): the suite times its passes, not its accuracy.
CALIBRATION = {
    "datasets": ["digits"],
    "methods": ["IR", "IRing", "MoCo", "CMC", "LA"],
    "seeds": [0],
    "pretrain": {
        "all": {
            "epochs": 2,
            "batch_size": 64,
            "lr_milestones": [],
            "resize": 16,
            "crop": 16,
            "bank_negatives": 256,
            "queue_size": 256,
            "bn_groups": 2,
            "ring_anneal_epochs": 1,
            "knn_every": 1,
            "num_workers": 0,
        },
        "by_method": {"LA": {"kmeans_k": 25, "kmeans_clusterings": 2, "kmeans_warmup_epochs": 1}},
    },
    "lincls": {
        "all": {"epochs": 2, "batch_size": 64, "resize": 16, "crop": 16, "augmentation": "none", "num_workers": 0}
    },
}


# The held-out grid ``--check`` prices: the finished grid of the workflow tests (tests/workflow/test_workflow.py's
# FINISHED: IR, IRing and MoCo on 16-pixel digits, one epoch, no kNN monitor), run one job at a time.
HELD_OUT = {
    **CALIBRATION,
    "methods": ["IR", "IRing", "MoCo"],
    "pretrain": {"all": {**CALIBRATION["pretrain"]["all"], "epochs": 1, "knn_every": 0}},
    "resources": {"pretrain": {"threads": THREADS}, "lincls": {"threads": THREADS}},
}


def run_stage(stage: str, cfg, cell: Path, *extra: str) -> dict:
    """The cell run as the workflow's job runs it (``ring.cluster.launch``, which calls the stage's ``main`` in its
    process) in a process of its own, every batch stamped: its last segment."""
    cell.mkdir(parents=True, exist_ok=True)
    config.save(cfg, cell / "config.yaml")
    env = {**os.environ, "RING_CLOCK_TRACE": "1", "OMP_NUM_THREADS": str(THREADS)}
    stage_argv = ["--config", str(cell / "config.yaml"), "--out", str(cell), *extra]
    argv = [sys.executable, "-m", "ring.cluster.launch", stage, "--cell", str(cell), "--", *stage_argv]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"ring.cluster.launch {stage} failed on {cell}:\n{done.stderr[-2000:]}")
    return json.loads((cell / "provenance.json").read_text())["segments"][-1]


def record(stage: str, cfg, device: str) -> dict:
    rec = pricing.cell_record(
        stage, cfg, device, compiled=getattr(cfg, "compile", "off") == "on", store="none", threads=THREADS
    )
    return {**rec, "prefetch_factor": PREFETCH_FACTOR}


def clock_of(device: str) -> str:
    """The CPU's figures are its jobs' CPU seconds (one thread, the loader in process: the host's other work leaves
    them alone, ring.engine.clock); a GPU's are wall seconds (the card is the job's own)."""
    return "cpu" if device == "cpu" else "wall"


def detection_record(cfg) -> dict:
    """What a detection cell ran as (benchmarks/price_detection.py's record; its input's sides are its "crop")."""
    return {
        "device": machine()["device"],
        "workers": cfg.num_workers,
        "prefetch_factor": PREFETCH_FACTOR,
        "compile": False,
        "store": "none",
        "threads": THREADS,
        "batch": cfg.overrides["SOLVER.IMS_PER_BATCH"],
        "bank": 0,
        "crop": cfg.overrides["INPUT.MIN_SIZE_TRAIN"],
        "dataset": cfg.datasets,
    }


def figures_of(stage: str, cfg, segment: dict, device: str) -> list[dict]:
    """The pass figures of one cell's segment (refused, with the suite, when any cannot be honest)."""
    rec = record(stage, cfg, device)
    names = [n for n in segment["pass_images"] if n != "k-means"]
    clock = clock_of(cfg.device)
    figs = [{**measured.pass_figure(name, segment, rec, WARMUP, clock), "method": cfg.method} for name in names]
    for fig in figs:
        measured.check_written(fig)
    return figs


def kmeans_figure(cfg, segment: dict, device: str) -> dict:
    n = catalog.spec(cfg.dataset).bank_images()
    clock = clock_of(cfg.device)
    return {
        "record": record("pretrain", cfg, device),
        "clock": clock,
        "seconds_per_call": measured.seconds_of(segment, clock)["k-means"] / segment["pass_calls"]["k-means"],
        "work": n * cfg.kmeans_k * cfg.kmeans_clusterings * (cfg.kmeans_iters + 1),
        "bank_entries": n,
    }


def fixed_of(fixed: list[dict]) -> dict:
    """The medians over the cells of one stage's fixed costs (each cell's process pays them once)."""
    keys = fixed[0]["per_job_s"]
    return {
        "record": fixed[0]["record"],
        "clock": fixed[0]["clock"],
        "per_job_s": {k: statistics.median(f["per_job_s"][k] for f in fixed) for k in keys},
        "checkpoint_write_s": statistics.median(f["checkpoint_write_s"] for f in fixed),
        "cells": len(fixed),
    }


def measure_method(grid, method: str, device: str, root: Path) -> dict:
    """One method's pretraining cell, then its linear evaluation: their pass figures, fixed costs and k-means."""
    name, clock = machine()["device"], clock_of(device)
    pre = grid.pretrain_config("digits", method, 0, str(root / "data"))
    pre = config.from_dict(config.PretrainConfig, {**config.to_dict(pre), "device": device})
    segment = run_stage("pretrain", pre, root / "pretrain" / method)
    lin = grid.lincls_config("digits", method, 0, str(root / "data"))
    lin = config.from_dict(config.LinclsConfig, {**config.to_dict(lin), "device": device})
    encoder = root / "pretrain" / method / "encoder.pt"
    lin_segment = run_stage("lincls", lin, root / "lincls" / method, "--encoder", str(encoder))
    k_means = measured.seconds_of(segment, clock).get("k-means")
    return {
        "passes": figures_of("pretrain", pre, segment, name) + figures_of("lincls", lin, lin_segment, name),
        "fixed": {
            "pretrain": measured.fixed_figure(segment, record("pretrain", pre, name), clock),
            "lincls": measured.fixed_figure(lin_segment, record("lincls", lin, name), clock),
        },
        "kmeans": kmeans_figure(pre, segment, name) if k_means else None,
        "cells": [
            {"stage": "pretrain", "method": method, "wall_s": segment["wall_s"]},
            {"stage": "lincls", "method": method, "wall_s": lin_segment["wall_s"]},
        ],
    }


def measure(device: str, root: Path, methods: list[str], pretrain: dict | None = None, jobs: int = 1) -> dict:
    """The figures of the calibration grid's ``methods`` (``pretrain``: values that replace its pretraining ones),
    ``jobs`` methods at a time.  On a CPU, a job's CPU seconds depend on whether the other cores are busy (on this
    project's 2-vCPU machines a job beside another spent 1.8 times the CPU seconds it spent alone), so figures that
    price cells run two at a time are measured two at a time."""
    calibration = {**CALIBRATION, "methods": methods}
    if pretrain:
        base = CALIBRATION["pretrain"]
        calibration["pretrain"] = {**base, "all": {**base["all"], **pretrain}}
    grid = grid_plan.from_dict("price", calibration)
    with ThreadPoolExecutor(max_workers=jobs) as pool:  # each cell is a process of its own: threads only wait
        done = list(pool.map(lambda method: measure_method(grid, method, device, root), methods))
    return {
        "suite": "benchmarks/price.py",
        "clock": clock_of(device),
        "calibration_grid": calibration,
        "jobs_at_once": jobs,
        "warmup_batches": WARMUP,
        "passes": [fig for one in done for fig in one["passes"]],
        "fixed": {stage: fixed_of([one["fixed"][stage] for one in done]) for stage in ("pretrain", "lincls")},
        "kmeans": {method: one["kmeans"] for method, one in zip(methods, done, strict=True) if one["kmeans"]},
        "cells": [cell for one in done for cell in one["cells"]],
    }


def held_out(device: str, root: Path) -> dict:
    """The held-out grid (:data:`HELD_OUT`: other epochs and no kNN monitor, as the workflow tests run it) run cell by
    cell as the workflow runs it, then priced from the committed figures against what its cells spent."""
    grid = grid_plan.from_dict("held_out", HELD_OUT)
    results = root / "results"
    for dataset, method, seed in grid.cells():
        pre = grid.pretrain_config(dataset, method, seed, str(root / "data"))
        pre_cell = results / grid.name / "pretrain" / dataset / method / f"seed{seed}"
        run_stage(
            "pretrain", config.from_dict(config.PretrainConfig, {**config.to_dict(pre), "device": device}), pre_cell
        )
        lin = grid.lincls_config(dataset, method, seed, str(root / "data"))
        lin_cell = results / grid.name / "lincls" / dataset / method / f"seed{seed}"
        lin = config.from_dict(config.LinclsConfig, {**config.to_dict(lin), "device": device})
        run_stage("lincls", lin, lin_cell, "--encoder", str(pre_cell / "encoder.pt"))
    figures = estimate.load_figures(machine()["device"] if device != "cpu" else "cpu")
    result = estimate.check.check(grid, results, figures)
    # What the same cells spent on each clock: the busier the host, the further apart.
    cells = list(estimate.check.finished(results, grid.name))
    spent = {clock: sum(sum(estimate.check.spent(c[3], clock).values()) for c in cells) for clock in measured.CLOCKS}
    return {
        "suite": "benchmarks/price.py --check",
        "grid": HELD_OUT,
        "figures": figures.measured.file,
        "cells": result.cells,
        "clock": result.clock,
        "spent_s_by_clock": spent,
        "rows": {row: {"cells": c, "predicted_s": p, "spent_s": s} for row, (c, p, s) in result.rows.items()},
        "sources": {row: sorted(s) for row, s in result.sources.items()},
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="the cells' device")
    parser.add_argument("--methods", nargs="+", default=CALIBRATION["methods"])
    parser.add_argument("--jobs", type=int, default=1, help="methods measured at once (as the priced cells will run)")
    parser.add_argument("--check", action="store_true", help="run the held-out grid and price it against its spent")
    parser.add_argument("--detection", action="store_true", help="time Table 4's Detectron2 models per iteration")
    parser.add_argument("--docs", action="store_true", help="print docs/performance.md's section from the files")
    parser.add_argument("--tiny", action="store_true", help="write a scratch file, not the committed figures")
    parser.add_argument(
        "--out", type=Path, help="write price-<device>.json into this folder (`ring estimate --figures`)"
    )
    args = parser.parse_args(argv)
    if args.docs:
        print(price_docs.section(RESULTS / "price-cpu.json", RESULTS / "price_check-cpu.json"))
        return 0
    # The host's load average before and after: on a shared machine the wall times it measures are this busy.
    before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="ring-price-") as tmp:
        if args.detection:
            run = {"suite": "benchmarks/price_detection.py", "clock": clock_of(args.device)}
            run.update(price_detection.measure(run_stage, detection_record, Path(tmp), run["clock"]))
        else:
            run = (
                held_out(args.device, Path(tmp))
                if args.check
                else measure(args.device, Path(tmp), args.methods, jobs=args.jobs)
            )
    load = {"load_average_before": before, "load_average_after": os.getloadavg()}
    name = "price_detection" if args.detection else "price_check" if args.check else "price"
    # --out: this host's figures, for `ring estimate --figures` (a CPU second is one host's).
    write(name, {"machine": {**machine(), **load}, **run}, args.tiny, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
