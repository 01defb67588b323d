"""End-to-end figures: each pass timed through its stage's own entry point (``benchmarks/price.py``), and the rules a
figure keeps to, checked where it is written and again where it is read.

A figure comes from one cell's segment run with :data:`ring.engine.clock.TRACE_ENV` set (every batch stamped): per
call of the pass (an epoch, a monitor run), the first ``workers x prefetch_factor + warm-up`` batches are left out
(they were decoded before the clock could see them, or they compiled), and the time over the remaining batches,
split where a gap is over :data:`GAP` times the call's median one (another activity in between: the linear
classifier's epochs on cached features, the switch from the training split's loader to the test split's), divided by
their images gives the seconds per image.  What the pass spent beyond that, over its calls, is its cost per call (the
loader's start, the left-out batches' excess, the classifier's epochs).  The fixed costs are the segment's own seconds:
the interpreter's start and imports, the data check, the setup, the compile warm-up per job, and a checkpoint write.

A figure is timed on one of the segment's clocks (:data:`CLOCKS`): the wall, or the process's CPU time, which a host's
other work does not change for a one-thread job with its loader in process (the CPU suite's,
:mod:`ring.engine.clock`).  Each figure records what it measured (:data:`RECORD`): a cell is priced from it only
where the cell would run the same way (:func:`mismatch`), else the price says why it read no figure.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

from ring.plan.estimate.figures import positive

# What a figure's record holds; the keys a cell must share with it to be priced from it.  The dataset is recorded, not
# matched: the price counts the cell's own images.  The crop is matched: at small crops the fixed work per image (the
# loader, the optimizer) does not scale with pixels, so no scaling from another crop is trusted; nor from another bank
# (the negatives per query: the objectives' work per image grows with it).
RECORD = ("device", "workers", "prefetch_factor", "compile", "store", "threads", "batch", "bank", "crop", "dataset")
MATCHED = ("device", "workers", "compile", "store", "threads", "batch", "crop", "bank")
GAP = 5.0  # a gap over GAP x the call's median gap between batches is not the pass's work per image
MIN_TIMED = 8  # batches timed, at least, over all calls
FIXED_PER_JOB = ("start and imports", "data check", "setup", "compile warm-up")
# A clock's seconds per pass in a segment, and where its time is in a batch's stamp.
CLOCKS = {"wall": ("passes_s", 2), "cpu": ("passes_cpu_s", 4)}


def seconds_of(segment: dict, clock: str) -> dict:
    """A segment's seconds per pass and fixed cost on ``clock``; {} where it recorded none on it."""
    return segment.get(CLOCKS[clock][0]) or {}


def excluded(record: dict, warmup: int) -> int:
    """Batches left out of each call: those the loader's workers prefetch before the first step, and the warm-up."""
    return int(record["workers"]) * int(record["prefetch_factor"] if record["workers"] else 0) + warmup


def _runs(times: list[float]) -> list[list[float]]:
    """A call's batch stamps cut where a gap is over GAP x the median gap."""
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    if not gaps:
        return [times]
    limit = GAP * statistics.median(gaps)
    runs, run = [], [times[0]]
    for gap, t in zip(gaps, times[1:], strict=True):
        if gap > limit:
            runs.append(run)
            run = []
        run.append(t)
    return [*runs, run]


def per_image(stamps: Iterable, name: str, skip: int, clock: str = "wall") -> tuple[float, int, int]:
    """(seconds per image, images timed, batches timed) of pass ``name`` from a segment's ``pass_stamps``."""
    at = CLOCKS[clock][1]
    calls: dict[int, list[tuple[float, int]]] = {}
    for stamp in stamps:
        if stamp[0] == name:
            calls.setdefault(stamp[1], []).append((stamp[at], stamp[3]))
    seconds, images, batches = 0.0, 0, 0
    for rows in calls.values():
        rows = rows[skip - 1 :] if skip >= 1 else rows  # the last left-out batch's end starts the clock
        times, counts = [t for t, _ in rows], dict(rows)
        for run in _runs(times):
            seconds += run[-1] - run[0]
            images += sum(counts[t] for t in run[1:])
            batches += len(run) - 1
    return (seconds / images if images else math.nan), images, batches


def pass_figure(name: str, segment: dict, record: dict, warmup: int, clock: str = "wall") -> dict:
    """The figure of pass ``name`` from a traced segment; refused (ValueError) when it cannot be honest: warm-up
    shorter than one batch, fewer than MIN_TIMED batches timed past the prefetch, or a non-finite rate."""
    missing = [k for k in RECORD if k not in record]
    if missing:
        raise ValueError(f"The {name} figure's record lacks {missing}; the suite records {RECORD}.")
    if warmup < 1:
        raise ValueError(f"warm-up {warmup}: at least one batch must be left out so that the clock starts at its end.")
    skip = excluded(record, warmup)
    spi, images, batches = per_image(segment.get("pass_stamps", []), name, skip, clock)
    if batches < MIN_TIMED or not positive(spi):
        raise ValueError(
            f"The {name} pass timed {batches} batches past its {skip} left out (workers x prefetch_factor + warm-up); "
            f"it needs {MIN_TIMED}: run it on more images or more epochs."
        )
    calls = int(segment["pass_calls"][name])
    spent, counted = float(seconds_of(segment, clock)[name]), int(segment["pass_images"][name])
    return {
        "pass": name,
        "clock": clock,
        "record": {k: record[k] for k in RECORD},
        "warmup_batches": warmup,
        "excluded_batches": skip,
        "timed_batches": batches,
        "timed_images": images,
        "seconds_per_image": spi,
        # The rest of what the pass spent, per call; never below zero (a faster timed stretch is no credit).
        "seconds_per_call": max(spent - counted * spi, 0.0) / calls,
        "calls": calls,
        "images": counted,
    }


def fixed_figure(segment: dict, record: dict, clock: str = "wall") -> dict:
    """The job's fixed costs (per job, and per checkpoint written) from a segment."""
    seconds, calls = seconds_of(segment, clock), segment["pass_calls"]
    writes = calls.get("checkpoint writes", 0)
    return {
        "record": {k: record[k] for k in RECORD},
        "clock": clock,
        "per_job_s": {k: float(seconds.get(k, 0.0)) for k in FIXED_PER_JOB},
        "checkpoint_write_s": float(seconds.get("checkpoint writes", 0.0)) / writes if writes else 0.0,
    }


def check_written(fig: dict) -> None:
    """What the estimate checks of a figure it reads, and the suite of one it writes: timed past the prefetch."""
    rec = fig["record"]
    warmup = max(fig["warmup_batches"], 1)
    if fig["excluded_batches"] < excluded(rec, warmup):
        raise ValueError(
            f"The {fig['pass']} figure left out {fig['excluded_batches']} batches, fewer than its {rec['workers']} "
            f"workers x prefetch_factor {rec['prefetch_factor']} + warm-up {warmup}: it was timed inside the "
            "prefetch; rerun benchmarks/price.py."
        )
    if not (positive(fig["seconds_per_image"]) and math.isfinite(fig["seconds_per_call"])):
        raise ValueError(
            f"The {fig['pass']} figure's rates are not finite positive numbers; rerun benchmarks/price.py."
        )


def mismatch(record: dict, cell: dict, name: str = "pretraining") -> str:
    """Why a figure of pass ``name`` measured as ``record`` cannot price a cell that runs as ``cell`` (same keys), or
    '' when it can.  The bank is pretraining's alone: the other passes are the encoder's forward, which reads none."""
    keys = MATCHED if name == "pretraining" else tuple(k for k in MATCHED if k != "bank")
    diffs = [f"{k} {record[k]!r} (the cell's {cell[k]!r})" for k in keys if record.get(k) != cell.get(k)]
    return "measured at " + ", ".join(diffs) if diffs else ""
