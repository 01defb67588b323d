"""Every block of a grid priced cell by cell: pretraining, linear evaluation, transfer and the studies' cells pass by
pass from the end-to-end figures where one matches the cell (:mod:`ring.plan.estimate.pricing`), else by the component
model (:mod:`ring.plan.estimate.passes`) with the reason kept, the fixed costs per job from the device's own figures or
the nearest measured host's (the CPU's: they are the host's start-up, check and write costs, so at ratio 1, which the
price states).  Detection is priced from the end-to-end Detectron2 figures (:mod:`ring.plan.estimate.detection`), the
nearest measured device's at a stated ratio where the device has none; a cell no figure prices is counted and named
as not priced, never dropped from the total silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from ring.core import catalog
from ring.core.stages import STAGES
from ring.data.listings import COCO_PER_CLASS
from ring.plan.estimate import detection, passes, pricing
from ring.plan.estimate.figures import Figures


@dataclass
class CellPrice:
    """Seconds per row (a pass or the fixed costs) of one cell, and where each came from."""

    seconds: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # row -> "end-to-end" | "component model: why" | ...
    unpriced: dict[str, str] = field(default_factory=dict)  # row -> why nothing priced it


def sizes(stage: str, dataset: str) -> tuple[int, int, int] | None:
    """(pretraining, labelled training, test) images of the dataset a cell reads, None where no count is known."""
    if stage == "transfer":
        spec = catalog.TRANSFER.get(dataset)
        if spec is not None and dataset == "mscoco":  # its object crops, capped per class: at most these
            return (0, spec.num_classes * COCO_PER_CLASS["train"], spec.num_classes * COCO_PER_CLASS["test"])
        counts = spec.publisher_counts if spec is not None else None
        return (0, *counts) if counts else None
    return passes.SIZES.get(dataset)


def _component(stage: str, cfg, figures: Figures, store: str | None) -> dict[str, float]:
    """The component model's seconds per pass, where it prices the stage; transfer by the encoder's forward alone
    (its datasets' input, 28-px arrays to megapixel JPEGs, is not measured: a lower bound, which its source says)."""
    if stage in ("pretrain", "study"):
        hours = passes.pretrain_passes(cfg, figures, store)
    elif stage == "lincls":
        hours = passes.lincls_passes(cfg, figures, store)
    elif stage == "transfer":
        _, images = pricing.counts(stage, cfg, sizes(stage, cfg.dataset))["transfer"]
        return {"transfer": images * passes.forward_s(cfg, figures)}
    else:
        return {}
    return {name: h * 3600.0 for name, h in hours.items() if h > 0}


def price_cell(
    stage: str, cfg, figures: Figures, store: str | None = None, threads: int = 1, restarts: int = 0
) -> CellPrice:
    """One cell's price: the end-to-end figures where they match it, the component model for the other passes, the
    nearest host's fixed costs where the device has none."""
    out = CellPrice()
    if stage == "detection":
        out.seconds, out.sources, out.unpriced = detection.price(cfg, figures, restarts)
        return out
    n = sizes(stage, cfg.dataset)
    if n is None:
        out.unpriced[STAGES[stage].price_pass] = f"no image count for {cfg.dataset} in ring.core.catalog"
        return out
    compiled = passes.compiles(cfg, figures) if hasattr(cfg, "compile") else False
    reads = passes.store_of(cfg, figures, store) if stage != "transfer" else "none"
    record = pricing.cell_record(stage, cfg, figures.device, compiled, reads, threads)
    if figures.measured is not None:
        seconds, missing = pricing.price(stage, cfg, n, figures.measured, record, restarts)
        source = f"end-to-end ({figures.measured.file})"
    else:
        rows = [*pricing.counts(stage, cfg, n), pricing.FIXED_ROW]
        seconds, missing = {}, dict.fromkeys(rows, f"no end-to-end figures of {figures.device}")
    out.seconds.update(seconds)
    out.sources.update(dict.fromkeys(seconds, source if seconds else ""))
    component = _component(stage, cfg, figures, store) if set(missing) - {pricing.FIXED_ROW} else {}
    for row, reason in missing.items():
        if row in component:
            bound = ", the forward alone: a lower bound" if stage == "transfer" else ""
            out.seconds[row], out.sources[row] = component[row], f"component model ({reason}{bound})"
        elif row == pricing.FIXED_ROW and figures.host is not None:
            host, _ = pricing.price(stage, cfg, n, figures.host, {**record, "device": figures.host.device}, restarts)
            if pricing.FIXED_ROW in host:
                out.seconds[row] = host[row]
                out.sources[row] = f"{figures.host.device}'s ({figures.host.file}) at ratio 1: host-side costs"
                continue
            out.unpriced[row] = reason
        elif row != "k-means" or pricing.counts(stage, cfg, n)[row][0]:
            out.unpriced[row] = reason
    return out


def grid_cells(grid, data_root: str = "data"):
    """(block, stage, config, share) of every cell of every block of the grid; ``share``: the part of its epochs a
    cell trains (a study cell continuing another's snapshot at epoch e trains epochs - e of them)."""
    for dataset, method, seed in grid.cells():
        yield "pretrain", "pretrain", grid.pretrain_config(dataset, method, seed, data_root), 1.0
        yield "lincls", "lincls", grid.lincls_config(dataset, method, seed, data_root), 1.0
    for dataset, method, seed in grid.transfer_cells():
        yield "transfer", "transfer", grid.transfer_config(dataset, method, seed, data_root), 1.0
    for name, study in grid.studies.items():
        for method, variant, seed in study.cells():
            cfg = grid.study_config(name, method, variant, seed, data_root)
            start = (study.init_source(variant) or {}).get("epoch", 0)
            yield f"study {name}", "study", cfg, max(cfg.epochs - start, 0) / cfg.epochs
    for _source, method, task, seed in grid.detection_cells():
        yield "detection", "detection", grid.detection_config(method, task, seed, data_root), 1.0


def price_grid(grid, figures: Figures, store: str | None = None) -> dict[str, dict]:
    """Per block: {"cells", "seconds", "sources": {row: {source: cells}}, "unpriced": {row: {reason: cells}}}."""
    blocks: dict[str, dict] = {}
    for block, stage, cfg, share in grid_cells(grid):
        entry = blocks.setdefault(block, {"cells": 0, "seconds": 0.0, "sources": {}, "unpriced": {}})
        entry["cells"] += 1
        threads = grid.resources.get("pretrain" if stage == "study" else stage, {}).get("threads", 1)
        price = price_cell(stage, cfg, figures, store, threads)
        for row, seconds in price.seconds.items():
            entry["seconds"] += seconds * (share if row in ("pretraining", "kNN monitor", "k-means") else 1.0)
            sources = entry["sources"].setdefault(row, {})
            sources[price.sources[row]] = sources.get(price.sources[row], 0) + 1
        for row, reason in price.unpriced.items():
            reasons = entry["unpriced"].setdefault(row, {})
            reasons[reason] = reasons.get(reason, 0) + 1
    return blocks


def lines(grid, figures: Figures, store: str | None = None) -> list[str]:
    """The whole grid's total, block by block, with the figures each block was read from and their age."""
    blocks = price_grid(grid, figures, store)
    unit = "GPU-hours" if figures.gpu else "CPU-hours"
    total = sum(b["seconds"] for b in blocks.values()) / 3600.0
    out = [f"every block of grid {grid.name}, fixed costs per job included ({unit}):"]
    for block, entry in blocks.items():
        out.append(f"{block:18} {entry['cells']:6d} cells {entry['seconds'] / 3600.0:12.4g}")
        for row, sources in sorted(entry["sources"].items()):
            for source, cells in sorted(sources.items()):
                out.append(f"  {row}: {cells} cells from {source}")
        for row, reasons in sorted(entry["unpriced"].items()):
            for reason, cells in sorted(reasons.items()):
                out.append(f"  {row}: NOT PRICED in {cells} cells: {reason}")
    unpriced = sum(n for b in blocks.values() for r in b["unpriced"].values() for n in r.values())
    left = f"; {unpriced} cell passes not priced (named above), not in it" if unpriced else ""
    out.append(f"{'grid total':18} {sum(b['cells'] for b in blocks.values()):6d} cells {total:12.4g}{left}")
    ages = [figures.describe()]
    for measured in {id(m): m for m in (figures.measured, figures.host) if m is not None}.values():
        ages.append(f"{measured.describe()}, {_age_days(measured.date):.0f} days old")
    out += [f"  figures: {age}" for age in ages]
    return out


def _age_days(date: str) -> float:
    measured = datetime.fromisoformat(date.replace("Z", "+00:00"))
    return (datetime.now(timezone.utc) - measured).total_seconds() / 86400.0
