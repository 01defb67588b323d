"""The paper's layout of a table and its files (ring.reports.tables.layout): what each cell says, the footnotes, and
that no non-finite number reaches a table."""

import math

import pandas as pd
import pytest

from ring.reports.tables import layout

NAN, INF = math.nan, math.inf


def _row(**values) -> pd.Series:
    """One (method, dataset) row of a table's summary (ring.reports.tables.summary.summarize)."""
    row = {
        "method": "IR",
        "dataset": "cifar10",
        "n": 1,
        "mean": 80.0,
        "std": NAN,
        "delta_to_base": NAN,
        "delta_significant": False,
        "paper": 81.2,
        "diff_to_paper": -1.2,
        "differs": "",
        "stale": "",
        "diverged": "",
        "loss_note": "",
    }
    return pd.Series({**row, **values})


@pytest.mark.parametrize(
    "values, text",
    [
        ({}, "80.0"),
        ({"n": 3, "mean": 81.04, "std": 1.26}, "81.0 ± 1.3"),  # one decimal, as the paper prints
        ({"n": 0, "mean": NAN}, "—"),  # no cell finished: shown, never dropped
        ({"delta_to_base": 3.5}, "80.0 (+3.5)"),
        ({"delta_to_base": -0.25, "delta_significant": True}, "80.0 (-0.2*)"),
        ({"delta_to_base": 3.5, "delta_tested": False}, "80.0 (+3.5 untested)"),  # one seed a side: not "(+3.5)"
        ({"loss_note": "loss 1.5e+06"}, "80.0 [h1]"),
        ({"stale": "cells/IR/seed0 is older than its encoder"}, "stale [s1]"),
        ({"diverged": "cells/IR/seed0 diverged", "mean": NAN}, "diverged [d1]"),
        # Non-finite numbers never reach the table: no difference shown rather than "inf".
        ({"delta_to_base": INF}, "80.0"),
        ({"delta_to_base": -INF, "delta_significant": True}, "80.0"),
        ({"mean": INF}, "—"),
    ],
)
def test_cell_text(values, text):
    assert layout.cell_text(_row(**values), {}, {}, {}) == text


def test_a_stale_or_diverged_reason_keeps_its_mark_and_a_new_one_gets_the_next():
    stale, diverged = {}, {}
    assert layout.cell_text(_row(stale="a"), stale, diverged) == "stale [s1]"
    assert layout.cell_text(_row(stale="b"), stale, diverged) == "stale [s2]"
    assert layout.cell_text(_row(stale="a"), stale, diverged) == "stale [s1]"
    assert layout.cell_text(_row(diverged="x"), stale, diverged) == "diverged [d1]"
    assert stale == {"a": "[s1]", "b": "[s2]"} and diverged == {"x": "[d1]"}


@pytest.mark.parametrize(
    "values, text",
    [
        ({}, "81.2 (-1.2)"),
        ({"n": 0, "mean": NAN, "diff_to_paper": NAN}, "81.2"),  # the paper's number, nothing to compare
        ({"paper": NAN, "diff_to_paper": NAN}, "—"),  # the paper has none
        ({"differs": "lr, epochs"}, "81.2 [1]"),  # another protocol: a footnote, no difference
        ({"paper": INF, "diff_to_paper": -INF}, "—"),
        ({"diff_to_paper": NAN}, "81.2 (—)"),
    ],
)
def test_paper_text(values, text):
    assert layout.paper_text(_row(**values), {}) == text


def _summary():
    return pd.DataFrame(
        [
            _row(method="IR", dataset="cifar10"),
            _row(method="IRing", dataset="cifar10", mean=84.0, delta_to_base=4.0, differs="lr", paper=83.9),
            _row(method="IR", dataset="digits", paper=NAN, diff_to_paper=NAN, stale="gone"),
            _row(method="IRing", dataset="digits", n=0, mean=NAN, paper=NAN, diff_to_paper=NAN),
        ]
    )


def test_layout_is_the_papers_rows_and_column_pairs_with_footnotes_in_order():
    wide = layout.layout(_summary(), ["IR", "IRing"], ["cifar10", "digits"])
    assert list(wide.index) == ["IR", "IRing"] and wide.index.name == "Method"
    assert list(wide.columns) == [
        "CIFAR10",
        "CIFAR10 paper (ours − paper)",
        "Digits",
        "Digits paper (ours − paper)",
    ]
    assert wide.loc["IRing"].tolist() == ["84.0 (+4.0)", "83.9 [1]", "—", "—"]
    assert wide.loc["IR"].tolist() == ["80.0", "81.2 (-1.2)", "stale [s1]", "—"]
    assert wide.attrs["footnotes"] == [
        "[1] protocol differs from the paper's in lr: no difference to the paper shown.",
        "[s1] stale: gone",
    ]


def test_the_files_say_each_cell_as_laid_out_and_never_a_non_finite_number(tmp_path):
    summary = _summary()
    summary.loc[1, "delta_to_base"] = INF  # what no upstream check should let through: still no "inf" shown
    summary.loc[3, "paper"] = -INF
    wide = layout.layout(summary, ["IR", "IRing"], ["cifar10", "digits"])
    paths = layout.write("table1", "A caption", summary.replace([INF, -INF], NAN), wide, tmp_path / "t")
    assert [p.name for p in paths] == ["t.csv", "t.md", "t.tex"]
    md = (tmp_path / "t.md").read_text()
    assert md.startswith("**table1**: A caption\n\n| Method")
    assert "| 80.0 " in md and "| 84.0 " in md  # as laid out: not reparsed into 80
    assert "[1] protocol differs from the paper's in lr" in md and "[s1] stale: gone" in md
    assert "Welch's two-sided t-test" in md
    tex = (tmp_path / "t.tex").read_text()
    assert "\\caption{A caption." in tex and "\\label{tab:table1}" in tex
    for path in paths:
        text = path.read_text().lower()
        assert "nan" not in text and "inf" not in text, path.name
    assert pd.read_csv(paths[0]).shape == (4, summary.shape[1])


def test_markdown_keeps_each_cells_text():
    wide = pd.DataFrame({"CIFAR10": ["80.0", "1e3"]}, index=pd.Index(["IR", "IRing"], name="Method"))
    assert layout.markdown(wide).splitlines()[2:] == ["| IR       | 80.0      |", "| IRing    | 1e3       |"]


def test_a_failed_rendering_leaves_every_old_file(tmp_path, monkeypatch):
    summary = _summary()
    wide = layout.layout(summary, ["IR", "IRing"], ["cifar10", "digits"])
    for ext in ("csv", "md", "tex"):
        (tmp_path / f"t.{ext}").write_text("old")

    def fails(*args, **kwargs):
        raise RuntimeError("LaTeX rendering failed")

    monkeypatch.setattr(pd.DataFrame, "to_latex", fails)
    with pytest.raises(RuntimeError):
        layout.write("table1", "A caption", summary, wide, tmp_path / "t")
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {"t.csv": "old", "t.md": "old", "t.tex": "old"}
