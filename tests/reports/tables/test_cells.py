"""Cells a table reads (ring.reports.tables.cells): a high-loss probe, a diverged one, at chance."""

import json
import math

import pandas as pd
import pytest

from ring.reports import tables
from ring.reports.tables import cells
from tests.reports.tables.fixtures import PROTOCOL, _metrics, _probe


def test_a_high_loss_probe_above_chance_shows_its_accuracy_marked_with_the_loss_and_protocol(tmp_path):
    # README command (1)'s CMC probe: 26.9% top-1 (chance 10%) at a last-epoch loss of 1.5e6 (6500 ln 10).
    files = [
        _probe(tmp_path, "CMC", 26.9, 1.5e6),
        _probe(tmp_path, "CMCRing", 30.0, 2.2e6),
        _probe(tmp_path, "IR", 90.0, 0.2),
    ]
    wide = tables.build("table1", files, ["IR", "CMC", "CMCRing"], ["digits"], tmp_path / "t")
    assert wide.loc["CMC", "Digits"] == "26.9 [h1]"
    assert wide.loc["CMCRing", "Digits"] == "30.0 [h2] (+3.1 untested)"  # a measured number: its delta to CMC too
    assert wide.loc["IR", "Digits"] == "90.0"  # a healthy probe is unmarked
    md = (tmp_path / "t.md").read_text()
    note = md[md.index("[h1] accuracy measured, training loss high: ") :]
    assert "loss 1.5e+06" in note and "ln(10) = 230" in note and PROTOCOL in note.split("[h2]")[0]
    assert "test top-1 26.9% against chance 10.0% + 3 binomial standard errors over 450 test images = 14.2%" in note
    assert "diverged" not in md
    assert cells.collect(files, "top1").set_index("method").loc["CMC", "value"] == 26.9  # the CSV's number too


@pytest.mark.parametrize("top1, loss", [(10.2, 0.3), (10.2, 1.5e6), (14.2, 2.0), (5.0, 2.0)])
def test_a_probe_at_chance_shows_diverged_whatever_its_loss(tmp_path, top1, loss):
    """At chance: top-1 within 3 binomial standard errors of 1/K, 10% + 3 x sqrt(0.1 x 0.9 / 450) = 14.24% on digits."""
    wide = tables.build("table1", [_probe(tmp_path, "CMC", top1, loss)], ["CMC"], ["digits"], tmp_path / "t")
    assert wide.loc["CMC", "Digits"] == "diverged [d1]"
    md = (tmp_path / "t.md").read_text()
    assert f"test top-1 {top1:.1f}% against chance 10.0%" in md and "is at chance" in md
    assert f"{top1:.1f} [" not in md.split("diverged [d1]")[0].split("|")[-1]  # no number in the cell


def test_a_probe_just_above_the_chance_bar_shows_its_number(tmp_path):
    # The bar on digits is 14.24% (ring.engine.health.chance_bar, tests/engine/test_health.py); just above it a number
    # (a learning-nothing probe passes it with probability 0.13%).
    wide = tables.build("table1", [_probe(tmp_path, "IR", 14.3, 0.3)], ["IR"], ["digits"], tmp_path / "t")
    assert wide.loc["IR", "Digits"] == "14.3"


@pytest.mark.parametrize("loss", [math.inf, math.nan])
def test_a_non_finite_loss_shows_diverged_even_with_an_accuracy_above_chance(tmp_path, loss):
    wide = tables.build("table1", [_probe(tmp_path, "IR", 80.0, loss)], ["IR"], ["digits"], tmp_path / "t")
    assert wide.loc["IR", "Digits"] == "diverged [d1]"
    assert "is not finite" in (tmp_path / "t.md").read_text()


def test_a_diverged_evaluation_shows_its_sentence_and_no_non_finite_value_reaches_a_table(tmp_path):
    files = _metrics(
        tmp_path, [("digits", "IR", 0, 90.0), ("digits", "IRing", 0, 91.0), ("digits", "CMCRing", 0, 80.0)]
    )
    sentence = "cells/CMC: the linear evaluation diverged: its last epoch's mean training loss 1.2e+06 exceeds 230."
    diverged = tmp_path / "diverged.json"
    diverged.write_text(json.dumps({"dataset": "digits", "method": "CMC", "seed": 0, "diverged": sentence}))
    methods = ["IR", "IRing", "CMC", "CMCRing", "MoCo"]
    wide = tables.build("table1", [*files, diverged], methods, ["digits"], tmp_path / "t")
    assert wide.loc["CMC", "Digits"] == "diverged [d1]"
    assert wide.loc["CMCRing", "Digits"] == "80.0"  # its base diverged: no difference to it
    assert wide.loc["MoCo", "Digits"] == "—"
    md = (tmp_path / "t.md").read_text()
    assert f"[d1] diverged, no accuracy: {sentence}" in md
    for suffix in (".md", ".tex"):
        text = (tmp_path / "t").with_suffix(suffix).read_text().lower()
        assert "nan" not in text and "inf" not in text.replace("infer", ""), suffix
    csv = pd.read_csv(tmp_path / "t.csv")
    assert csv[csv.method == "CMC"].iloc[0].n == 0 and pd.isna(csv[csv.method == "CMC"].iloc[0]["mean"])
    # A metrics file that is neither an accuracy nor a diverged verdict is still refused.
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"dataset": "digits", "method": "CMC", "seed": 0, "diverged": ""}))
    with pytest.raises(tables.MetricsError, match="lacks top1"):
        tables.build("table1", [bad], methods, ["digits"], tmp_path / "t")
