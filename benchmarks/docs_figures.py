"""Figures the documentation quotes from the code, generated: the paper grid's price (docs/cluster.md) and the screen
`ring status` shows before the paper grid's first cell (README).  Each lies between a page's ``<!-- NAME:begin ... -->``
and ``<!-- NAME:end -->`` comments; ``python -m benchmarks.docs_figures --write`` writes them there after a change
to the figures, the grids or the estimate, and tests/project/test_doc_claims.py fails while a page holds other
text.  Torch-free: it prices and plans, it trains nothing.

The smaller figures the pages quote inline (a store's size, a probe's checkpoint, a preemption's delay) are functions
below that ring/resources/figures/doc-figures.json's ``computed`` entries name; tests/project/test_docs.py compares
them with the text.  The one that reads ``FLAGS_EVERY`` imports torch when called.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from ring import resources
from ring.plan import grid
from ring.plan.estimate import load_figures
from ring.plan.estimate.report import estimate

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "python -m benchmarks.docs_figures --write"
# The lines of `ring status` that say when a grid ends (ring.cluster.outlook) and what its store needs; the cell rows
# and the totals line above them are the grid's table, not the screen README shows.
SCREEN_LINE = re.compile(r"(pretrain|lincls|grid paper): |store ")


def paper_price() -> str:
    """The sentence of docs/cluster.md: the paper grid's GPU-hours from the committed figures, as `ring estimate
    --grid paper` totals them with each cell's store, with `--store none`, and from the older H100 figures."""
    paper = grid.load(resources.GRIDS / "paper.yaml")

    def hours(device: str | None, store: str | None) -> str:
        return f"{sum(row[3] for row in estimate(paper, load_figures(device), store)):,.0f}"

    return (
        f"From the committed H200 figures the paper grid's pretraining and linear evaluation cost about "
        f"{hours(None, None)} GPU-hours with each cell's own store ({hours(None, 'none')} with `--store none`, "
        f"ImageNet read from its JPEG files; {hours('H100', None)} H100-hours, older figures)"
    )


def paper_screen() -> str:
    """README's screen: `ring status --grid paper` in an empty folder, before the first cell, as a text block."""
    with tempfile.TemporaryDirectory() as empty:
        printed = subprocess.run(
            [sys.executable, "-m", "ring.cli", "status", "--grid", "paper"],
            cwd=empty,
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        ).stdout
    lines = [line for line in printed.splitlines() if SCREEN_LINE.match(line)]
    return "\n".join(["   ```text", *(f"   {line}" for line in lines), "   ```"])


# Figures the pages quote inline, computed from the code and its constants: ring/resources/figures/doc-figures.json's
# `computed` entries name one of these with its arguments, and tests/project/test_docs.py compares its numbers, rounded
# as the text rounds them, with the quote's.


def imagenet_store_gb(fmt: str) -> float:
    """ImageNet's prepared store (both splits, at the catalog's store size) in GB, as the prepare stage sizes it."""
    from ring.core import catalog
    from ring.data.store_layout import needed_bytes

    imagenet = catalog.spec("imagenet")
    return needed_bytes(sum(imagenet.publisher_counts), fmt, imagenet.store_size) / 1e9


def gathered_keys(batch: int, px: int, gbps: float) -> list[float]:
    """MoCo's shuffled key views all-gathered to every rank per step: MB of fp32 images, ms at ``gbps`` Gb/s, gbps."""
    megabytes = batch * 3 * px * px * 4 / 1e6
    return [megabytes, megabytes * 8 / gbps, gbps]


def flag_delay() -> list[float]:
    """How late a preemption is acted on at most: FLAGS_EVERY steps at the slowest step (s) of the figures `ring
    estimate` prices from, and that step (ms)."""
    from ring.engine.distributed import FLAGS_EVERY

    figures = load_figures()
    step_s = max(figures.batch[m] / rate for m, rate in figures.step_images_per_s.items())
    return [FLAGS_EVERY * step_s, step_s * 1000]


# ResNet-18's last feature map at 224 px, 512 x 7 x 7, which the linear probe reads (ring.lincls).
PROBE_FEATURES = 512 * 7 * 7


def probe_checkpoint_mb(dataset: str) -> float:
    """The final probe's checkpoint on ``dataset``: its classifier's float32 weights and biases, and their momentum."""
    from ring.core import catalog

    classes = catalog.spec(dataset).num_classes
    return 2 * (PROBE_FEATURES * classes + classes) * 4 / 1e6


def suite_budget() -> list[float]:
    """benchmarks/gpu_suite.sh's default RING_SUITE_BUDGET_S, full and quick, each in minutes and seconds."""
    script = (ROOT / "benchmarks" / "gpu_suite.sh").read_text()
    quick, full = (int(s) for s in re.findall(r"budget=\$\{RING_SUITE_BUDGET_S:-(\d+)\}", script))
    return [full / 60, full, quick / 60, quick]


def footprint_bound_gb() -> float:
    """tests/conftest.py's FOOTPRINT_BOUND_BYTES in GB: the most the suite's temporary folder may hold as it runs."""
    conftest = (ROOT / "tests" / "conftest.py").read_text()
    return float(re.search(r"^FOOTPRINT_BOUND_BYTES = int\(([\d.]+) \* 1000\*\*3\)", conftest, re.M)[1])


# name -> (page, generator); the page holds the generated text between the name's two comments.
BLOCKS: dict[str, tuple[str, Callable[[], str]]] = {
    "paper-price": ("docs/cluster.md", paper_price),
    "paper-screen": ("README.md", paper_screen),
}


def span(text: str, name: str) -> re.Match:
    """Where ``name``'s generated text lies in a page: between its begin comment and its end comment."""
    found = re.search(
        rf"(<!-- {name}:begin \({re.escape(COMMAND)}\) -->\n?)(.*?)(\n? *<!-- {name}:end -->)", text, re.S
    )
    if not found:
        raise SystemExit(f"docs_figures: the page of {name} has no <!-- {name}:begin ({COMMAND}) --> ... end comments")
    return found


def stale() -> dict[str, tuple[str, str]]:
    """``{name: (what the page says, what the code says)}`` of every block that differs."""
    differs = {}
    for name, (page, make) in BLOCKS.items():
        shown, made = span((ROOT / page).read_text(), name).group(2), make()
        if shown != made:
            differs[name] = (shown, made)
    return differs


def write() -> list[str]:
    """Each page's blocks replaced by what the code says now; the names of those that changed."""
    changed = []
    for name, (page, make) in BLOCKS.items():
        text = (ROOT / page).read_text()
        found, made = span(text, name), make()
        if found.group(2) != made:
            (ROOT / page).write_text(text[: found.start(2)] + made + text[found.end(2) :])
            changed.append(name)
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write the blocks into their pages")
    args = parser.parse_args(argv)
    if args.write:
        print("\n".join(f"docs_figures: wrote {name}" for name in write()) or "docs_figures: every block current")
        return 0
    for name, (shown, made) in stale().items():
        print(f"{name}: the page says\n{shown}\nthe code says\n{made}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
