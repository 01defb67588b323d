"""When will a grid end: GPU-hours spent and left, and a time range left, from the grid's own cells.

Each cell of the grid's pretraining and linear evaluation is done, running or to run (pending, failed, missing or
stale: each will run).  What a cell costs is ring.plan.estimate's price (``predict_cell``) calibrated on the grid's
own finished cells: the ratio of the GPU-hours they spent (provenance.json) to their price, per stage and dataset
(else per stage; uncalibrated where nothing of the stage has finished), its lowest and highest over those cells
giving the range.  A running cell with a measured rate (``progress.json``, rank 0's epochs per wall second of the
running segment) is extrapolated from that rate instead.

The time left is a range, each end a bound.  At least the longest remaining pretrain -> lincls chain of one dataset,
method and seed (no scheduler can run a chain's two stages side by side) and the GPU-hours left over every GPU the
grid's cells left can hold at once (all of them running side by side); at most the grid run one cell at a time, each
on its own GPUs (a pretraining cell on 8, its evaluation on 1: the GPU-hours of each over its own count, added up;
a running or queued cell's measured time left counted whole).  A cell left that cannot be priced leaves the time
unknown: the line says so instead of a figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DONE, RUNNING = "done", "running"  # every other state runs again before the grid ends


@dataclass(frozen=True)
class Cell:
    """One stage run of the grid as ``ring status`` sees it."""

    stage: str
    dataset: str
    chain: tuple  # (dataset, method, seed): the pretrain -> lincls chain it belongs to
    state: str
    spent: float  # GPU-hours spent (finished segments, and the running segment so far)
    price: float | None  # ring.plan.estimate's GPU-hours of the whole cell (None: not priced)
    gpus: int  # GPUs its job holds (nodes x gpus_per_node)
    wall_left_h: float | None = None  # running: wall hours left at its measured rate, when measured


def ratios(cells: list[Cell]) -> dict[tuple[str, str | None], tuple[float, float]]:
    """(lowest, highest) spent / price over the finished priced cells, per (stage, dataset) and per (stage, None)."""
    found: dict[tuple[str, str | None], list[float]] = {}
    for c in cells:
        if c.state == DONE and c.price and c.spent > 0:
            for key in ((c.stage, c.dataset), (c.stage, None)):
                found.setdefault(key, []).append(c.spent / c.price)
    return {key: (min(r), max(r)) for key, r in found.items()}


def left(cell: Cell, calibration: dict) -> tuple[float, float] | None:
    """(low, high) GPU-hours the cell still needs, or None when it cannot be priced."""
    if cell.state == DONE:
        return 0.0, 0.0
    if cell.state == RUNNING and cell.wall_left_h is not None:
        hours = cell.wall_left_h * max(cell.gpus, 1)
        return hours, hours
    if cell.price is None:
        return None
    low, high = calibration.get((cell.stage, cell.dataset)) or calibration.get((cell.stage, None)) or (1.0, 1.0)
    spent = cell.spent if cell.state == RUNNING else 0.0  # a failed cell's spent hours are its past, not its future
    return max(cell.price * low - spent, 0.0), max(cell.price * high - spent, 0.0)


@dataclass
class Summary:
    """Counts and GPU-hours of one stage (or of the grid): ``left`` is (low, high); ``unpriced`` cells have none."""

    done: int = 0
    running: int = 0
    pending: int = 0
    spent: float = 0.0
    left: tuple[float, float] = (0.0, 0.0)
    unpriced: int = 0

    def add(self, cell: Cell, hours: tuple[float, float] | None) -> None:
        kind = cell.state if cell.state in (DONE, RUNNING) else "pending"
        setattr(self, kind, getattr(self, kind) + 1)
        self.spent += cell.spent
        if hours is None:
            self.unpriced += 1
        else:
            self.left = (self.left[0] + hours[0], self.left[1] + hours[1])

    def line(self, name: str) -> str:
        unpriced = f" (+{self.unpriced} cells not priced)" if self.unpriced else ""
        counts = f"{self.done} done, {self.running} running, {self.pending} pending"
        return f"{name}: {counts}; {_num(self.spent)} GPU-h spent, {_range(self.left)} GPU-h left{unpriced}"


def _duration(low: float, high: float) -> str:
    """Wall hours ``low``-``high`` in the unit that reads best for ``high``: days, hours, minutes or seconds."""
    for unit, size in (("d", 24.0), ("h", 1.0), ("min", 1 / 60), ("s", 1 / 3600)):
        if high >= 2 * size or unit == "s":
            return f"{_range((low / size, high / size))} {unit}"
    raise AssertionError("unreachable")


def _num(x: float) -> str:
    return f"{x:,.0f}" if x >= 1000 else f"{x:.3g}"


def _range(pair: tuple[float, float]) -> str:
    low, high = pair
    return _num(low) if math.isclose(low, high, rel_tol=1e-3) else f"{_num(low)}-{_num(high)}"


@dataclass
class Outlook:
    """What ``ring status`` and the gpu_hours table say about a grid's end."""

    stages: dict[str, Summary]
    grid: Summary
    hours: tuple[float, float] | None  # wall hours left (low, high); None when a cell left is not priced
    chain_h: float  # the longest remaining pretrain -> lincls chain, wall hours (a floor)
    gpus_all: int  # GPUs the cells left hold when all run at once (the other floor's width)
    calibrated_on: int  # finished priced cells the prices were calibrated on

    def lines(self, grid_name: str) -> list[str]:
        calibration = (
            f"prices calibrated on the grid's {self.calibrated_on} finished cells"
            if self.calibrated_on
            else "prices uncalibrated (no finished cell has spent GPU-hours yet: ring.plan.estimate's model as it is)"
        )
        if self.hours is None:
            when = f"time left unknown ({self.grid.unpriced} cells left are not priced)"
        else:
            spread = self.grid.left[0] / max(self.gpus_all, 1)
            when = (
                f"{_duration(*self.hours)} left (at least the longest pretrain->lincls chain, "
                f"{_duration(self.chain_h, self.chain_h)}, and the work over the {self.gpus_all} GPUs its cells left "
                f"hold at once, {_duration(spread, spread)}; at most one cell at a time on its own GPUs)"
            )
        return [
            *(summary.line(stage) for stage, summary in self.stages.items()),
            f"{self.grid.line(f'grid {grid_name}')}; {when}; {calibration}",
        ]


def outlook(cells: list[Cell]) -> Outlook:
    calibration = ratios(cells)
    stages: dict[str, Summary] = {}
    grid = Summary()
    chains: dict[tuple, float] = {}
    one_at_a_time_h, gpus_all = 0.0, 0
    for cell in cells:
        hours = left(cell, calibration)
        stages.setdefault(cell.stage, Summary()).add(cell, hours)
        grid.add(cell, hours)
        gpus = max(cell.gpus, 1)
        gpus_all += gpus if cell.state != DONE else 0
        if hours is not None:  # a chain runs its stages one after the other, each on its own GPUs
            chains[cell.chain] = chains.get(cell.chain, 0.0) + hours[0] / gpus
            one_at_a_time_h += hours[1] / gpus
    chain_h = max(chains.values(), default=0.0)
    low = max(chain_h, grid.left[0] / max(gpus_all, 1))
    hours = None if grid.unpriced else (low, max(one_at_a_time_h, low))
    calibrated_on = sum(1 for c in cells if c.state == DONE and c.price and c.spent > 0)
    return Outlook(stages, grid, hours, chain_h, gpus_all, calibrated_on)
