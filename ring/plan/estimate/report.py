"""A grid's price as a table: by stage and dataset (the default) or by pass, with the header naming every file."""

from __future__ import annotations

from ring.plan.estimate import blocks, inputs
from ring.plan.estimate.figures import Figures
from ring.plan.estimate.passes import PASSES, lincls_passes, measured_kmeans, pretrain_passes, stated_flops

# The passes this table does not price, and why (each its own row of ``--by pass``): every block's price, below it
# (ring.plan.estimate.blocks), prices them.
NOT_PRICED = {
    "transfer": "not priced in this table (the component model has no figure for its datasets' input): see every "
    "block's price below",
    "detection": "not priced in this table (the component model has no Detectron2 figure): see every block's price "
    "below, from the end-to-end detection figures",
}


def cell_passes(stage: str, cfg, figures: Figures, store: str | None = None) -> dict[str, float] | None:
    """Predicted GPU-hours of each pass of one cell from its config, or None for a stage this model does not price.
    ``store``: price every image-folder cell as reading this store ("none": today's code), else its own key."""
    if stage == "pretrain":
        return pretrain_passes(cfg, figures, store)
    if stage == "lincls":
        return lincls_passes(cfg, figures, store)
    return None


def predict_cell(stage: str, cfg, figures: Figures, store: str | None = None) -> float | None:
    """Predicted GPU-hours of one cell from its config, or None for a stage this model does not price."""
    passes = cell_passes(stage, cfg, figures, store)
    return None if passes is None else sum(passes.values())


def _cells(grid):
    for dataset, name, seed in grid.cells():
        for stage, build in (("pretrain", grid.pretrain_config), ("lincls", grid.lincls_config)):
            yield stage, dataset, build(dataset, name, seed, "data")


def estimate(grid, figures: Figures, store: str | None = None) -> list[tuple[str, str, int, float]]:
    """(stage, dataset, cells, predicted GPU-hours) of every dataset of the grid's pretrain and lincls stages."""
    rows: dict[tuple[str, str], list] = {}
    for stage, dataset, cfg in _cells(grid):
        row = rows.setdefault((stage, dataset), [0, 0.0])
        row[0] += 1
        row[1] += predict_cell(stage, cfg, figures, store)
    return [(stage, dataset, cells, hours) for (stage, dataset), (cells, hours) in rows.items()]


def estimate_passes(grid, figures: Figures, store: str | None = None) -> list[tuple[str, str, int, float]]:
    """(pass, dataset, cells, predicted GPU-hours) of every pass the grid's pretrain and lincls cells make."""
    rows: dict[tuple[str, str], list] = {}
    for stage, dataset, cfg in _cells(grid):
        for name, hours in cell_passes(stage, cfg, figures, store).items():
            if hours > 0:
                row = rows.setdefault((name, dataset), [0, 0.0])
                row[0] += 1
                row[1] += hours
    order = {name: i for i, name in enumerate(PASSES)}
    return sorted(
        ((name, dataset, cells, hours) for (name, dataset), (cells, hours) in rows.items()),
        key=lambda r: (order[r[0]], r[1]),
    )


def sources(figures: Figures) -> list[str]:
    """One line per figure the price reads, naming its file: what `estimate`'s header shows."""
    lines = []
    for fam in sorted(figures.images_per_s):
        lines.append(_family_line(figures, fam))
    if figures.batch:
        lines.append(
            "a cell at another batch than its family's figures (CMC's 128) is priced at their seconds per image: "
            "an image's forward and backward work does not depend on the batch; a smaller batch's lower occupancy is "
            "not measured"
        )
    lines += inputs.sources(figures)
    for kind, rows in sorted(figures.ring_ratios.items()):
        lines.append(
            f"{kind}: step-time ratio {', '.join(f'{r:.3g} at {n:,}' for n, r in sorted(rows))}, of the step only "
            f"({figures.ring_files[kind]})"
        )
    lines.append(_kmeans_line(figures))
    return lines


def _kmeans_line(figures: Figures) -> str:
    measured, stated = measured_kmeans(figures), stated_flops(figures)
    ran = (
        f"up to its measured run's {measured[0] / 1e12:.3g} TFLOP in {measured[1]:.3g} s ({figures.eager_files['LA']})"
        if measured
        else "no measured run"
    )
    beyond = (
        f"beyond it the {stated[1]}'s stated FP32 rate, {stated[0] / 1e12:g} TFLOP/s (ring.plan.estimate.FP32_FLOPS; "
        "its argmin passes over the n x k distances not counted: a lower bound)"
        if stated
        else "no stated GEMM rate for this device: the measured run's rate throughout"
    )
    return f"k-means: its distance GEMMs' work, {ran}; {beyond}"


def _family_line(figures: Figures, fam: str) -> str:
    eager = (
        f"eager '{figures.feed}' pipeline {figures.images_per_s[fam]:,.0f} images/s"
        f"{' (' + figures.eager_files[fam] + ')' if fam in figures.eager_files else ''}"
    )
    at = f"; batch {figures.batch[fam]}" if fam in figures.batch else ""
    c = figures.compiled.get(fam)
    if not figures.gpu:
        return f"{fam}: {eager} (compile: auto is off on a CPU){at}"
    if c:
        return (
            f"{fam}: compiled {c['pipeline']:,.0f} images/s with the views ({c['source']}); "
            f"compile: off cells {eager}{at}"
        )
    return f"{fam}: {eager} (no throughput_{fam}_compile file for this device: compile: auto cells priced eager){at}"


def _unit(figures: Figures) -> str:
    if figures.gpu:
        return "GPU-hours"
    if figures.gpu_devices:
        return f"CPU-hours (GPU figures are committed too, for {', '.join(figures.gpu_devices)}: pass --device)"
    return "CPU-hours (no GPU figures committed)"


def report(grid, figures: Figures, by: str = "stage", store: str | None = None) -> str:
    """The price's text: header (figures and their files), then a table by stage and dataset or by pass."""
    reads = f"; every image-folder cell priced reading store: {store}" if store else ""
    lines = [
        f"ring: predicted {_unit(figures)} of grid {grid.name} from {figures.describe()}{reads}",
        *(f"  {line}" for line in sources(figures)),
    ]
    if by == "pass":
        lines += _table("pass", estimate_passes(grid, figures, store), PASSES, 18)
        lines += [f"{name:18} {why}" for name, why in NOT_PRICED.items()]
    elif by == "stage":
        rows = sorted(estimate(grid, figures, store), key=lambda r: (r[0] != "pretrain", r[1]))
        lines += _table("stage", rows, ("pretrain", "lincls"), 10)
        lines.append("(transfer, detection and study cells: in every block's price below)")
    else:
        raise ValueError(f"Unknown --by {by!r}; choose stage or pass.")
    return "\n".join([*lines, *blocks.lines(grid, figures, store)])


def _table(key: str, rows: list, groups, width: int) -> list[str]:
    lines = [f"{key:{width}} {'dataset':10} {'cells':>6} {'hours':>12}"]
    lines += [f"{name:{width}} {dataset:10} {cells:6d} {hours:12.4g}" for name, dataset, cells, hours in rows]
    for group in groups:
        sel = [r for r in rows if r[0] == group]
        if sel:
            lines.append(f"{group:{width}} {'all':10} {sum(r[2] for r in sel):6d} {sum(r[3] for r in sel):12.4g}")
    # A cell makes several passes: the passes' total counts no cells.
    cells = f"{sum(r[2] for r in rows):6d}" if key == "stage" else f"{'':6}"
    lines.append(f"{'total':{width}} {'':10} {cells} {sum(r[3] for r in rows):12.4g}")
    return lines
