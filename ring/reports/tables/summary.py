"""A table's numbers: per (method, column) the mean +- std over seeds, a Ring method's difference to its base method
with Welch's test of it, and the paper's number beside ours."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from ring.core.methods import METHODS
from ring.reports.tables.published import dataset_display

# The sentences a cell can carry instead of (stale, diverged) or beside (loss_note) its number.
REASONS = ("stale", "diverged", "loss_note")

# A Ring - base difference is marked (*) where Welch's two-sided t-test over the two methods' seeds gives p below
# this: the difference exceeds what the seeds' spread explains.  Welch, not Student: the two methods' seed spreads
# differ (ring_digits: 1.6 vs 3.9 points).  With 3 seeds a side it needs the difference beyond roughly 2.8 to 4.3
# standard errors (the t quantile at Welch's 2 to 4 degrees of freedom), so a gain within the seed noise is unmarked.
SIGNIFICANCE = 0.05
# A difference with one seed on a side cannot be tested; it says so, so that no mark never means two things.
UNTESTED = "untested"
SIGNIFICANCE_NOTE = (
    f"* after a difference: it exceeds the seed noise, Welch's two-sided t-test over the seeds of the "
    f"Ring method and of its base at p < {SIGNIFICANCE:g}; no mark: tested, within the noise; "
    f"{UNTESTED!r} after a difference: not tested, a side with one seed, which has no spread to test against."
)


def summarize(
    cells: pd.DataFrame,
    paper: Callable[[str, str], float],
    methods: list[str],
    datasets: list[str],
    display=dataset_display,
) -> pd.DataFrame:
    """One row per (method, dataset): n, mean, std, delta to the base method, paper, diff to paper.

    ``paper(method, column)`` is the published number (NaN where none); ``display`` names a ``dataset`` value's
    column in the paper (Table 4's values are its columns).
    """
    out = on_axes(seed_stats(cells), methods, datasets)
    out = with_deltas(out)
    out["paper"] = [paper(m, display(d)) for m, d in zip(out.method, out.dataset, strict=True)]
    out["diff_to_paper"] = out["mean"] - out["paper"]
    out.insert(2, "column", [display(d) for d in out.dataset])
    return out


def seed_stats(cells: pd.DataFrame) -> pd.DataFrame:
    """n, mean and std over seeds per (method, dataset), with the cells' sentences and differing keys joined."""
    by = ["method", "dataset"]
    stats = cells.groupby(by)["value"].agg(n="count", mean="mean", std="std").reset_index()
    # Their sentences (a stale or diverged cell's value is NaN, so n counts only the others; a noted one counts).
    for why in REASONS:
        if why in cells:
            reasons = cells.groupby(by)[why].agg(lambda v: " ".join(t for t in v if t)).reset_index()
            stats = stats.merge(reasons, on=by, how="left")
    if "differs" in cells:  # paper-fixed keys in which any seed's cell differs from the paper's protocol
        keys = (
            cells.groupby(by)["differs"]
            .agg(lambda v: ", ".join(sorted({k for text in v for k in text.split(", ") if k})))
            .reset_index()
        )
        stats = stats.merge(keys, on=by, how="left")
    return stats


def on_axes(stats: pd.DataFrame, methods: list[str], datasets: list[str]) -> pd.DataFrame:
    """``stats`` on every (method, dataset) of the table, in its order; an entry without cells has n 0."""
    grid = pd.MultiIndex.from_product([methods, datasets], names=["method", "dataset"]).to_frame(index=False)
    out = grid.merge(stats, on=["method", "dataset"], how="left")
    for text in ("differs", *REASONS):
        out[text] = out[text].fillna("") if text in out else ""
    # No number from a partly stale or diverged entry, nor a delta to it.
    out.loc[(out.stale != "") | (out.diverged != ""), ["mean", "std"]] = math.nan
    out["n"] = out["n"].fillna(0).astype(int)
    return out


def with_deltas(out: pd.DataFrame) -> pd.DataFrame:
    """Each Ring row's difference to its base method on the same column, and Welch's p of it."""
    by_cell = out.set_index(["method", "dataset"])

    def base_row(row):
        spec = METHODS[row.method]
        return (
            by_cell.loc[(spec.base, row.dataset)] if spec.ring and (spec.base, row.dataset) in by_cell.index else None
        )

    out["delta_to_base"] = [
        row["mean"] - base["mean"] if (base := base_row(row)) is not None else math.nan for _, row in out.iterrows()
    ]
    # Welch's p of each Ring - base difference (NaN with fewer than 2 seeds on a side: no spread to test against).
    out["delta_p"] = [
        welch_p(row["mean"], row["std"], row.n, base["mean"], base["std"], base.n)
        if (base := base_row(row)) is not None
        else math.nan
        for _, row in out.iterrows()
    ]
    out["delta_significant"] = out["delta_p"] < SIGNIFICANCE
    out["delta_tested"] = out["delta_p"].notna()
    return out


def welch_p(mean_a: float, std_a: float, n_a: int, mean_b: float, std_b: float, n_b: int) -> float:
    """Two-sided p of Welch's t-test from two samples' mean, std (ddof 1) and size; NaN unless both have 2+ values.
    Two samples without spread: 0 where the means differ, 1 where they agree (no noise for a difference to exceed)."""
    values = (mean_a, std_a, mean_b, std_b)
    if n_a < 2 or n_b < 2 or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
        return math.nan
    if std_a == 0 and std_b == 0:
        return 0.0 if mean_a != mean_b else 1.0
    from scipy import stats  # scikit-learn's dependency; imported here to keep ring.reports.tables light

    return float(stats.ttest_ind_from_stats(mean_a, std_a, n_a, mean_b, std_b, n_b, equal_var=False).pvalue)
