"""The statistics of a table (ring.reports.tables.summary): Welch's test of a Ring method against its base."""

import pandas as pd
import pytest

from ring.reports import tables
from ring.reports.tables import summary
from tests.reports.tables.fixtures import _metrics


def test_ring_base_differences_beyond_the_seed_noise_are_marked_by_welchs_test(tmp_path):
    files = _metrics(
        tmp_path,
        [
            # CIFAR10: IRing 5 points above IR, seed spread 1 on both sides: t = 6.1 at 4 degrees of freedom, p = 0.004.
            *(("cifar10", "IR", s, v) for s, v in enumerate((80.0, 81.0, 82.0))),
            *(("cifar10", "IRing", s, v) for s, v in enumerate((85.0, 86.0, 87.0))),
            # CIFAR100: 1 point above with a spread of 2 a side: t = 0.6, p = 0.57, within the noise.
            *(("cifar100", "IR", s, v) for s, v in enumerate((50.0, 52.0, 54.0))),
            *(("cifar100", "IRing", s, v) for s, v in enumerate((51.0, 53.0, 55.0))),
            # STL10: one seed a side, 10 points apart: no spread to test against, said so (it read like CIFAR100).
            ("stl10", "IR", 0, 70.0),
            ("stl10", "IRing", 0, 80.0),
        ],
    )
    wide = tables.build("table1", files, ["IR", "IRing"], ["cifar10", "cifar100", "stl10"], tmp_path / "t1")
    assert wide.loc["IR", "CIFAR10"] == "81.0 ± 1.0"
    assert wide.loc["IRing", "CIFAR10"] == "86.0 ± 1.0 (+5.0*)"
    assert wide.loc["IRing", "CIFAR100"] == "53.0 ± 2.0 (+1.0)"
    assert wide.loc["IRing", "STL10"] == "80.0 (+10.0 untested)"
    csv = pd.read_csv(tmp_path / "t1.csv").set_index(["method", "dataset"])
    assert csv.loc[("IRing", "cifar10"), "delta_p"] == pytest.approx(0.00367, abs=1e-4)
    assert csv.loc[("IRing", "cifar100"), "delta_p"] == pytest.approx(0.5734, abs=1e-3)
    assert pd.isna(csv.loc[("IRing", "stl10"), "delta_p"]) and not csv.loc[("IRing", "stl10"), "delta_significant"]
    assert csv.loc[("IRing", "cifar100"), "delta_tested"] and not csv.loc[("IRing", "stl10"), "delta_tested"]
    md = (tmp_path / "t1.md").read_text()
    assert "Welch's two-sided t-test" in md and "p < 0.05" in md and "one seed, which has no spread" in md
    assert "no mark: tested, within the noise; 'untested' after a difference: not tested" in md
    assert "Welch's two-sided t-test" in (tmp_path / "t1.tex").read_text()  # the LaTeX caption states it too


def test_welch_p_agrees_with_the_formula_and_needs_two_seeds_a_side():
    import math

    # Welch: t = 3 / sqrt(1/3 + 4/3) = 2.32, df = (5/3)^2 / ((1/3)^2/2 + (4/3)^2/2) = 2.94; t(2.94) two-sided p = 0.105.
    assert summary.welch_p(13.0, 2.0, 3, 10.0, 1.0, 3) == pytest.approx(0.105, abs=2e-3)
    assert math.isnan(summary.welch_p(13.0, math.nan, 1, 10.0, 1.0, 3))
    assert summary.welch_p(13.0, 0.0, 2, 10.0, 0.0, 2) == 0.0 and summary.welch_p(10.0, 0.0, 2, 10.0, 0.0, 2) == 1.0
