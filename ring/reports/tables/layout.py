"""The paper's layout of a table (methods as rows; per column our cell, then the paper's number and our difference
to it), its footnotes, and its files: CSV (long format, one row per method x column), Markdown and LaTeX."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ring.core.files import atomic_write
from ring.core.methods import display_name
from ring.reports.tables.published import dataset_display
from ring.reports.tables.summary import SIGNIFICANCE_NOTE, UNTESTED


def _finite(x) -> bool:
    return x is not None and math.isfinite(x)


def _fmt(x: float, signed: bool = False) -> str:
    if not _finite(x):  # no number (NaN), or one that must never reach a table (inf)
        return "—"
    return f"{x:+.1f}" if signed else f"{x:.1f}"


def cell_text(
    row,
    stale_notes: dict | None = None,
    diverged_notes: dict | None = None,
    loss_notes: dict | None = None,
    unresolved_notes: dict | None = None,
) -> str:
    if row.stale:  # one stale seed makes the whole entry stale: a mean over the rest would be another number
        mark = (stale_notes if stale_notes is not None else {}).setdefault(
            row.stale, f"[s{len(stale_notes or {}) + 1}]"
        )
        return f"stale {mark}"
    if getattr(row, "diverged", ""):  # likewise one diverged seed: its evaluation has no accuracy to average
        notes = diverged_notes if diverged_notes is not None else {}
        return f"diverged {notes.setdefault(row.diverged, f'[d{len(notes) + 1}]')}"
    if row.n == 0:
        return "—"
    text = _fmt(row["mean"]) + (f" ± {row['std']:.1f}" if row.n > 1 else "")
    if getattr(row, "loss_note", ""):  # a measured number, marked: its probe's training loss stayed high
        notes = loss_notes if loss_notes is not None else {}
        text += f" {notes.setdefault(row.loss_note, f'[h{len(notes) + 1}]')}"
    if getattr(row, "unresolved", ""):  # a number the run is too small to tell from zero: the table says so
        notes = unresolved_notes if unresolved_notes is not None else {}
        text += f" {notes.setdefault(row.unresolved, f'[u{len(notes) + 1}]')}"
    if _finite(row.delta_to_base):
        text += f" ({_fmt(row.delta_to_base, signed=True)}{significance_mark(row)})"
    return text


def significance_mark(row) -> str:
    """ "*" for a difference Welch's test finds beyond the seed noise, "" for one it finds within, and " untested"
    for one it could not test (a side with one seed): the last two must not read alike."""
    if not row.get("delta_tested", True):
        return f" {UNTESTED}"
    return "*" if row.get("delta_significant", False) else ""


def paper_text(row, footnotes: dict | None = None) -> str:
    if not _finite(row.paper):
        return "—"
    if row.n and row.differs and footnotes is not None:
        # Another protocol: no difference to the paper, a footnote naming the keys instead.
        mark = footnotes.setdefault(row.differs, f"[{len(footnotes) + 1}]")
        return f"{row.paper:.1f} {mark}"
    return f"{row.paper:.1f} ({_fmt(row.diff_to_paper, signed=True)})" if row.n else f"{row.paper:.1f}"


def layout(summary: pd.DataFrame, methods: list[str], datasets: list[str], display=dataset_display) -> pd.DataFrame:
    """The paper's layout: methods as rows; per dataset our cell, then the paper's number and our difference."""
    wide = pd.DataFrame(index=pd.Index([display_name(m) for m in methods], name="Method"))
    footnotes: dict[str, str] = {}  # differing keys -> their mark, in order of appearance
    stale_notes: dict[str, str] = {}  # why a cell is stale -> its mark
    diverged_notes: dict[str, str] = {}  # a diverged evaluation's sentence -> its mark
    loss_notes: dict[str, str] = {}  # a high-loss probe's note -> its mark
    unresolved_notes: dict[str, str] = {}  # why a run cannot resolve a number -> its mark
    for d in datasets:
        col = display(d)
        part = summary[summary.dataset == d].set_index("method")
        notes = (stale_notes, diverged_notes, loss_notes, unresolved_notes)
        wide[col] = [cell_text(part.loc[m], *notes) for m in methods]
        wide[f"{col} paper (ours − paper)"] = [paper_text(part.loc[m], footnotes) for m in methods]
    wide.attrs["footnotes"] = [
        *(
            f"{mark} protocol differs from the paper's in {keys}: no difference to the paper shown."
            for keys, mark in footnotes.items()
        ),
        *(f"{mark} stale: {reason}" for reason, mark in stale_notes.items()),
        *(f"{mark} diverged, no accuracy: {reason}" for reason, mark in diverged_notes.items()),
        *(f"{mark} accuracy measured, training loss high: {note}" for note, mark in loss_notes.items()),
        *(f"{mark} unresolved: {why}" for why, mark in unresolved_notes.items()),
    ]
    return wide


def markdown(wide: pd.DataFrame) -> str:
    """``wide`` as a Markdown table, each cell's text as written: tabulate would otherwise print "80.0" as 80."""
    return wide.to_markdown(disable_numparse=True)


def write(name: str, caption: str, summary: pd.DataFrame, wide: pd.DataFrame, prefix: str | Path) -> list[Path]:
    """<prefix>.csv (``summary``), .md and .tex (``wide``, captioned, with the notes and its footnotes)."""
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    paths = [prefix.with_suffix(".csv"), prefix.with_suffix(".md"), prefix.with_suffix(".tex")]
    note = (
        "mean ± std over seeds; (±x) after a Ring method: difference to its base method; "
        f"{SIGNIFICANCE_NOTE} paper: the published number, in brackets ours minus the paper's."
    )
    note = " ".join([note, *wide.attrs.get("footnotes", [])])
    write_texts(
        {
            paths[0]: summary.to_csv(index=False, float_format="%.4f"),
            paths[1]: f"**{name}**: {caption}\n\n{markdown(wide)}\n\n{note}\n",
            paths[2]: wide.to_latex(caption=f"{caption}. {note}", label=f"tab:{name}", escape=True),
        }
    )
    return paths


def write_texts(texts: dict[Path, str]) -> None:
    """Every table file rendered first, then each replaced atomically: a failure leaves the old tables in place."""
    for path, text in texts.items():
        atomic_write(path, lambda fh, text=text: fh.write(text.encode()))
