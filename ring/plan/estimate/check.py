"""Predicted against spent: what the price says each finished cell of a grid costs, pass by pass, beside the seconds
its provenance.json recorded (ring.engine.clock, summed over its segments: a restarted cell pays its fixed costs
again, and is priced so).

    ring estimate --grid NAME --check [--results results] [--device cpu]

A finished cell is one whose stage output is written and whose last segment completed; a cell whose segments hold
no pass seconds (run before ring.engine.clock) is counted apart.  The spent fixed costs are the segments' start and
imports, data check, setup, compile warm-up and checkpoint writes.  The spent seconds are read on the clock the
figures were measured on (``price-<device>.json``'s ``clock``): the CPU's are the jobs' own CPU time, so that a price
measured on a quiet host checks against cells run on a busy one, and the other way round.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ring.core import config
from ring.core.stages import stages_with
from ring.engine.clock import FIXED, PASSES
from ring.plan.estimate.blocks import price_cell
from ring.plan.estimate.figures import Figures
from ring.plan.estimate.measured import CLOCKS, seconds_of
from ring.plan.estimate.pricing import FIXED_ROW

ROWS = (*PASSES, FIXED_ROW)
CPU_CLOCK = ": the jobs' own CPU time, which the host's other work leaves alone"


@dataclass
class Check:
    """Per row: [cells, predicted s, spent s]; the cells priced; the rows' sources and what was not priced."""

    rows: dict[str, list] = field(default_factory=dict)
    cells: int = 0
    unrecorded: int = 0
    sources: dict[str, set] = field(default_factory=dict)
    unpriced: dict[str, set] = field(default_factory=dict)
    clock: str = "wall"  # the figures' clock, the one the spent seconds are read on

    def add(self, row: str, predicted: float, spent: float) -> None:
        entry = self.rows.setdefault(row, [0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += predicted
        entry[2] += spent

    def total(self) -> tuple[float, float]:
        return sum(r[1] for r in self.rows.values()), sum(r[2] for r in self.rows.values())


def spent(segments: list[dict], clock: str = "wall") -> dict[str, float] | None:
    """Seconds per row over a cell's segments on ``clock`` (the figures'), None where a segment recorded none."""
    if any(CLOCKS[clock][0] not in s for s in segments):
        return None
    out: dict[str, float] = {}
    for segment in segments:
        for name, seconds in seconds_of(segment, clock).items():
            row = FIXED_ROW if name in FIXED else name
            out[row] = out.get(row, 0.0) + seconds
    return out


def finished(results: Path, grid_name: str):
    """(stage, cell folder, config, segments) of every finished cell of the grid under ``results``."""
    for stage, declared in stages_with("priced").items():  # its folder, config class and the file it writes last
        for path in sorted((results / grid_name / stage).rglob("provenance.json")):
            cell = path.parent
            if not (cell / declared.output).is_file() or not (cell / "config.yaml").is_file():
                continue
            segments = json.loads(path.read_text()).get("segments") or []
            if segments and segments[-1].get("outcome") == "completed":
                yield stage, cell, config.load(declared.config, cell / "config.yaml"), segments


def ran_on(results: Path, grid_name: str) -> str | None:
    """The device the grid's finished cells ran on (the first one's GPU model, "cpu" without one), None before any
    finished: the figures ``--check`` prices them from, unless ``--device`` names others."""
    for *_, segments in finished(results, grid_name):
        return segments[-1].get("gpu_model") or "cpu"
    return None


def check(grid, results: Path, figures: Figures) -> Check:
    measured = figures.measured if figures is not None else None  # None: only cells that recorded nothing
    out = Check(clock=measured.clock if measured is not None else "wall")
    for stage, _cell, cfg, segments in finished(results, grid.name):
        used = spent(segments, out.clock)
        if used is None:
            out.unrecorded += 1
            continue
        threads = grid.resources.get("pretrain" if stage == "study" else stage, {}).get("threads", 1)
        price = price_cell(stage, cfg, figures, None, threads, restarts=len(segments) - 1)
        out.cells += 1
        for row, reason in price.unpriced.items():
            out.unpriced.setdefault(row, set()).add(reason)
        for row in ROWS:
            if price.seconds.get(row) or used.get(row):  # a pass neither priced nor spent (IR's k-means) is no row
                out.add(row, price.seconds.get(row, 0.0), used.get(row, 0.0))
            if row in price.sources:
                out.sources.setdefault(row, set()).add(price.sources[row])
    return out


def lines(result: Check, grid_name: str, figures: Figures) -> list[str]:
    """The table: per row, the cells, the predicted and the spent seconds and their ratio; then the total."""
    head = f"ring: predicted against spent of the {result.cells} finished cells of grid {grid_name}, {figures.device}"
    head += f" (seconds on the {result.clock} clock{CPU_CLOCK if result.clock == 'cpu' else ''})"
    out = [head, f"{'pass':18} {'cells':>6} {'predicted s':>12} {'spent s':>12} {'ratio':>7}"]
    for row in ROWS:
        if row in result.rows:
            cells, predicted, used = result.rows[row]
            out.append(f"{row:18} {cells:6d} {predicted:12.1f} {used:12.1f} {_ratio(predicted, used):>7}")
    predicted, used = result.total()
    out.append(f"{'total':18} {result.cells:6d} {predicted:12.1f} {used:12.1f} {_ratio(predicted, used):>7}")
    for row in ROWS:
        for source in sorted(result.sources.get(row, ())):
            out.append(f"  {row}: priced from {source}")
        for reason in sorted(result.unpriced.get(row, ())):
            out.append(f"  {row}: not priced: {reason}")
    if result.unrecorded:
        out.append(f"  {result.unrecorded} finished cells recorded no pass seconds (run before ring.engine.clock)")
    return out


def _ratio(predicted: float, used: float) -> str:
    return f"{predicted / used:.2f}" if used > 0 else "-"


def command(grid, results: Path, load, device: str | None, extra) -> list[str]:
    """``ring estimate --check``'s lines: priced from the figures of ``device``, else of the device the finished cells
    ran on; ``load``: ring.plan.estimate.load_figures."""
    figures = load(device or ran_on(results, grid.name), extra=extra)
    return lines(check(grid, results, figures), grid.name, figures)


def status_lines(grid, results: Path, load) -> list[str]:
    """``ring status``'s line once a cell has finished: the finished cells' price beside what they spent, from the
    figures of the device they ran on (none without finished cells or figures of that device)."""
    device = ran_on(results, grid.name)
    try:
        figures = load(device) if device else None
    except ValueError:
        return []
    done = check(grid, results, figures) if figures else None
    if not done or not done.cells:
        return []
    predicted, used = done.total()
    return [
        f"predicted against spent ({done.cells} finished cells, {figures.device} figures): predicted "
        f"{predicted / 3600:.3g} h, spent {used / 3600:.3g} h on the {done.clock} clock (ring estimate --check: per "
        "pass)"
    ]
