"""A cell's metrics as a table reads them: checked, and kept out of the table (with their sentence) when stale or
diverged.  A cell's ``metrics.json`` is JSON, never unpickled; a file a table cannot use is refused in one sentence
(:class:`MetricsError`) before any table file is replaced.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd

from ring.core.cell_paths import cell_values
from ring.core.metrics import check_metrics
from ring.plan import lineage
from ring.reports.tables.protocol import protocol_differences


class MetricsError(ValueError):
    """A cell's metrics.json that a table cannot use."""


# The keys that name an evaluation cell; a diverged cell's metrics.json holds them and no accuracy.
IDENTITY_KEYS = ("dataset", "method", "seed")


def diverged_reason(m: dict) -> str:
    """The sentence of a linear evaluation that diverged (ring.lincls writes it instead of an accuracy), or ''."""
    reason = m.get("diverged") if isinstance(m, dict) else None
    return reason if isinstance(reason, str) and reason else ""


def loss_note(m: dict) -> str:
    """The note of a linear probe whose accuracy is reported although its training loss stayed high, or ''."""
    note = m.get("loss_note") if isinstance(m, dict) else None
    return note if isinstance(note, str) and note else ""


def read_metrics(path: str | Path, keys: tuple[str, ...], diverged_ok: bool = False) -> dict:
    """A cell's metrics as JSON (never unpickled), holding ``keys`` with finite values; one sentence naming the file.
    With ``diverged_ok``, a diverged cell's file (:func:`diverged_reason`) needs only the keys that name the cell."""
    path = Path(path)
    try:
        m = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise MetricsError(
            f"The metrics file {path} is unreadable or corrupt ({reason}); rerun the cell that writes it "
            "(delete the file first)."
        ) from None
    if diverged_ok and diverged_reason(m):
        keys = tuple(k for k in keys if k in IDENTITY_KEYS)
    missing = [k for k in keys if not isinstance(m, dict) or k not in m]
    if missing:
        raise MetricsError(f"The metrics file {path} lacks {', '.join(missing)}; rerun the cell that writes it.")
    check_metrics(m, path, keys)
    check_contents(m, path)
    return m


# Metrics that are percentages of test images: a value outside [0, 100] was not computed by a stage.
PERCENT_KEYS = ("top1", "top5")


def check_contents(m: dict, path: Path) -> None:
    """Numbers in range, and the keys that name the cell equal to the folder it lies in
    (.../<dataset>/<method>/seed<k>/metrics.json): a mislabelled file never fills another row."""
    for key in PERCENT_KEYS:
        if key in m and not (isinstance(m[key], (int, float)) and not isinstance(m[key], bool) and 0 <= m[key] <= 100):
            raise MetricsError(
                f"The metrics file {path} holds {key}={m[key]!r}, not a percentage in [0, 100]; "
                "rerun the cell that writes it."
            )
    found = cell_values(path)
    if found is not None and found.file and "task" not in m:
        folder = {k: v for k, v in found.values if k in IDENTITY_KEYS}
        wrong = [f"{k}={m[k]!r} (its folder says {v!r})" for k, v in folder.items() if k in m and m[k] != v]
        if wrong:
            raise MetricsError(
                f"The metrics file {path} is labelled {', '.join(wrong)}; it belongs to another cell: "
                "rerun the cell that writes it."
            )


def stale_reason(path: str | Path, m: dict) -> str:
    """Why a cell's chain (metrics <- encoder <- config, ring.plan.lineage) no longer holds, said on stderr too; ''
    when it holds.  A stale cell is kept in the table with that sentence, never as a number."""
    stale = lineage.stale_reason(path, m) or ""
    if stale:
        print(f"ring: stale: {stale}", file=sys.stderr)
    return stale


def collect(metric_files: list[str | Path], metric: str) -> pd.DataFrame:
    """One row per cell, a stale one (:func:`stale_reason`) or a diverged one (:func:`diverged_reason`) without a value,
    one whose probe's loss stayed high with its value and its :func:`loss_note`."""
    rows = []
    for path in metric_files:
        m = read_metrics(path, (*IDENTITY_KEYS, metric), diverged_ok=True)
        stale = stale_reason(path, m)
        diverged = "" if stale else diverged_reason(m)
        rows.append(
            {
                "dataset": m["dataset"],
                "method": m["method"],
                "seed": int(m["seed"]),
                "value": math.nan if stale or diverged else float(m[metric]),
                "differs": ", ".join(protocol_differences(path)),
                "stale": stale,
                "diverged": diverged,
                "loss_note": "" if stale or diverged else loss_note(m),
            }
        )
    return pd.DataFrame(
        rows, columns=["dataset", "method", "seed", "value", "differs", "stale", "diverged", "loss_note"]
    )
