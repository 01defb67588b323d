"""What the report's captions say (workflow/report/*.rst), read from the cells a table or figure read.

The table rules pass these as params that take ``input``: Snakemake does not record such params for its rerun
trigger and evaluates them again for ``snakemake --report`` once the cells exist; before then they describe
what is there.  Torch-free and pandas-free: the workflow calls them while it plans.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable
from pathlib import Path

from ring.core.yaml_reading import read_yaml


def cell_metrics(metrics_files: Iterable) -> list[dict]:
    """The cells' metrics.json that are there and readable (a corrupt one: ring.reports.tables says so in one
    sentence when it builds the table)."""
    found = []
    for path in map(Path, metrics_files):
        try:
            metrics = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(metrics, dict):
            found.append(metrics)
    return found


def feature_maps(metrics_files: Iterable) -> list[dict]:
    """The frozen features the linear evaluations used, from their metrics.json protocol stamps
    (ring.lincls): one entry per feature layer and shape, with the methods that used it."""
    maps = {}
    for metrics in cell_metrics(metrics_files):
        protocol = metrics.get("protocol") if isinstance(metrics.get("protocol"), dict) else {}
        shape = " x ".join(map(str, protocol.get("feature_shape", []))) or "unrecorded"
        methods = maps.setdefault((protocol.get("feature_layer", "unrecorded"), shape), [])
        if metrics.get("method") not in methods:
            methods.append(metrics.get("method"))
    return [{"layer": layer, "shape": shape, "methods": methods} for (layer, shape), methods in maps.items()]


def cell_axes(files: Iterable, names: tuple[str, ...]) -> dict:
    """The values each folder level of ``files`` takes, in order of appearance, named from the last
    folder up (a seed folder seed<s> as <s>): cell_axes(encoders, ("seed", "variant", "method")) of
    .../<method>/<variant>/seed<s>/encoder.pt."""
    axes = {name: [] for name in names}
    for path in map(Path, files):
        # Not strict: the folders above the named levels (results/<grid>/...) are no axes.
        for name, part in zip(names, reversed(path.parent.parts), strict=False):
            value = part.removeprefix("seed") if name == "seed" else part
            if value not in axes[name]:
                axes[name].append(value)
    return axes


def cell_config(files: Iterable) -> dict:
    """The config.yaml beside the first of ``files`` that has one (the cells of a table share a
    protocol), as a dict; {} before any cell ran."""
    for path in map(Path, files):
        try:
            values = read_yaml(path.with_name("config.yaml"), "Cell config")  # YAML 1.2 floats, as the stages read
        except (OSError, ValueError):  # not written yet, or broken: its stage says so
            continue
        if isinstance(values, dict):
            return values
    return {}


# The gpu_hours table opens with when its grid will end, as `ring status` says it (ring.reports.tables.cost writes
# the block, the report's caption reads it back from the table): a heading line, then the lines in a text block.
OUTLOOK_HEADING = "When the grid will end"


def outlook_block(lines: list[str], when: str) -> str:
    """The Markdown block of ``ring status``'s outlook ``lines``, computed at ``when``."""
    body = "\n".join(lines)
    return f"{OUTLOOK_HEADING} (`ring status`, ring.plan.eta), at {when}:\n\n```text\n{body}\n```\n"


def outlook(table: str | Path) -> dict:
    """The outlook of a gpu_hours table (:func:`outlook_block`): ``{"when": ..., "lines": [...]}``, {} where it has
    none or is not there yet."""
    try:
        text = Path(table).read_text()
    except OSError:
        return {}
    _, found, rest = text.partition(f"{OUTLOOK_HEADING} (")
    if not found or "```text\n" not in rest:
        return {}
    when = rest.split("\n", 1)[0].rsplit(", at ", 1)[-1].removesuffix(":")
    return {"when": when, "lines": rest.split("```text\n", 1)[1].split("\n```", 1)[0].splitlines()}


def shown_table(table: str | Path, width: int = 80) -> str:
    """A table's ``.md`` below its caption line: its rows with every mark beside its number (``diverged [d1]``,
    ``[h1]``, ``*``, ``untested``) and the notes that explain them, wrapped to ``width`` columns; "" where it is
    not there yet.  The report's captions show it as a literal block: the CSV the report carries holds the numbers
    alone, and the marks are what a reader must see beside them."""
    try:
        text = Path(table).read_text()
    except OSError:
        return ""
    body = text.split("\n\n", 1)[1] if text.startswith("**") and "\n\n" in text else text
    lines = []
    for line in body.strip("\n").splitlines():
        lines.extend([line] if line.startswith("|") or not line else textwrap.wrap(line, width) or [""])
    return "\n".join(lines)
