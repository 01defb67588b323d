"""The appendix's toy table (ring.reports.tables.toy)."""

import json
import math

import pandas as pd

from ring.core import gaussian
from ring.reports import tables
from ring.reports.tables import toy


def test_toy_cnce_table_means_stds_paper_and_true_mi(tmp_path):
    files = []
    for seed, (nce, cnce50) in enumerate([(0.010, -0.10), (0.014, -0.14)]):
        metrics = {"seed": seed, "true_mi": 0.0204110, "nce_critic": {"NCE": nce, "CNCE50": cnce50}}
        if seed == 0:
            metrics["own_critics"] = {"NCE": nce, "CNCE50": 3e-5}
            metrics["own_critics_train"] = {"NCE": 0.013, "CNCE50": 7e-5}
        files.append(tmp_path / f"toy{seed}.json")
        files[-1].write_text(json.dumps(metrics))
    wide = tables.toy_cnce(files, tmp_path / "t" / "table_toy_cnce")
    assert list(wide.columns) == ["True", "NCE", "CNCE w_l=50"]
    assert wide.loc["ours, NCE's critic: mean (2 seeds)"].tolist() == ["0.02041", "0.012", "-0.12"]
    assert wide.loc["ours, NCE's critic: std"].tolist() == ["—", "0.002828", "0.02828"]
    assert wide.loc["ours, own critics: mean (1 seed)"].tolist() == ["0.02041", "0.01", "3e-05"]
    # Standard errors 0.002828 / sqrt 2 = 0.002 and 0.02, above the paper's stdevs (0.001, 9e-6): a distance in those
    # units would measure two seeds' noise (-1.4 and -1.3e4), not a deviation.
    assert wide.loc["ours, NCE's critic: standard error"].tolist() == ["—", "0.002", "0.02"]
    assert wide.loc["ours, NCE's critic: (mean - paper) / paper stdev"].tolist() == ["—", "unresolved", "unresolved"]
    assert wide.loc["training data, own critics: mean (1 seed)"].tolist() == ["0.02041", "0.013", "7e-05"]
    # The published w_l = 50 mean lies below its ceiling (no mark); NCE's k -> inf ceiling is the true MI.
    assert wide.loc["paper: mean († above the ceiling)"].tolist() == ["0.02041", "0.01345", "7.29e-05"]
    assert wide.loc["paper: stdev"].tolist() == ["—", "0.001", "9e-06"]
    assert wide.loc["ceiling, k → ∞ (any critic)"].tolist() == [
        "—",
        "0.02041",
        f"{gaussian.cnce_ceiling(0.2, 50.0):.4g}",
    ]
    assert wide.loc["ceiling, k = 101 (any critic)"].tolist() == [
        "—",
        "—",
        f"{gaussian.cnce_ceiling(0.2, 50.0, 101):.4g}",
    ]
    summary = pd.read_csv(tmp_path / "t" / "table_toy_cnce.csv")
    row = summary[(summary.protocol == "nce_critic") & (summary.estimator == "CNCE50")].iloc[0]
    assert (row.n, row.percentile, row.paper_mean) == (2, 50.0, 7.29e-05)
    assert row.paper_mean < row.ceiling_k < row.ceiling_inf and not row.paper_above_ceiling


def test_toy_table_marks_a_published_mean_above_the_ceiling(tmp_path, monkeypatch):
    # The ceiling itself is tested in tests/core/test_gaussian.py; here only the marking: a ceiling placed
    # between the paper's w_l = 10 and w_l = 25 means marks the first and not the second.
    monkeypatch.setattr(toy, "toy_ceiling", lambda e: (math.nan, 0.005) if e != "NCE" else (math.nan, 0.02041))
    path = tmp_path / "toy0.json"
    path.write_text(
        json.dumps({"seed": 0, "true_mi": 0.0204110, "nce_critic": {"NCE": 0.01, "CNCE10": 0.0, "CNCE25": 0.0}})
    )
    wide = tables.toy_cnce([path], tmp_path / "t" / "table_toy_cnce")
    assert wide.loc["paper: mean († above the ceiling)"].tolist() == ["0.02041", "0.01345", "0.01241 †", "0.0022"]
    assert "† a published mean above" in (tmp_path / "t" / "table_toy_cnce.md").read_text()
    assert "Looseness of CNCE" in (tmp_path / "t" / "table_toy_cnce.md").read_text()
    assert "tab:toy_cnce" in (tmp_path / "t" / "table_toy_cnce.tex").read_text()


def test_toy_table_says_where_its_size_cannot_resolve_a_sign_or_a_distance_to_the_paper(tmp_path):
    """Issue 51: a one-seed smoke cell read -1.2e5 paper stdevs, with nothing saying its size made the row
    meaningless.  One seed: the standard error is the held-out points' (ring.toy_cnce's *_sem)."""
    path = tmp_path / "toy0.json"
    estimates = {"NCE": 0.0125, "CNCE10": -0.001, "CNCE95": -0.125}
    sems = {"NCE": 0.0005, "CNCE10": 0.002, "CNCE95": 0.004}
    path.write_text(json.dumps({"seed": 0, "true_mi": 0.0204110, "nce_critic": estimates, "nce_critic_sem": sems}))
    wide = tables.toy_cnce([path], tmp_path / "t" / "table_toy_cnce")
    # CNCE10 lies within 2 SE of zero (0.001 < 0.004): its sign is not resolved; the others' are.
    assert wide.loc["ours, NCE's critic: mean (1 seed)"].tolist() == ["0.02041", "0.0125", "-0.001 ‡", "-0.125"]
    assert wide.loc["ours, NCE's critic: standard error"].tolist() == ["—", "0.0005", "0.002", "0.004"]
    # NCE: SE 0.0005 <= the paper's 0.001, (0.0125 - 0.01345) / 0.001 = -0.95 -> -0.9 (half to even); the CNCEs'
    # SEs exceed the paper's 3e-4 and 4e-6: unresolved, not -44 and -3.1e4.
    assert wide.loc["ours, NCE's critic: (mean - paper) / paper stdev"].tolist() == [
        "—",
        "-0.9",
        "unresolved",
        "unresolved",
    ]
    md = (tmp_path / "t" / "table_toy_cnce.md").read_text()
    assert "‡ a mean within 2 standard errors of zero" in md and "'unresolved' where our standard error exceeds" in md
    csv = pd.read_csv(tmp_path / "t" / "table_toy_cnce.csv").set_index("estimator")
    assert csv.loc["CNCE95", "se"] == 0.004 and not csv.loc["CNCE95", "deviation_resolved"]
    assert csv.loc["NCE", "deviation_resolved"] and not csv.loc["CNCE10", "sign_resolved"]
