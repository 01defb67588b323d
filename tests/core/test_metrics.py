"""ring.core.metrics: a metrics document holds finite numbers only, or one sentence names its file."""

import math

import pytest

from ring.core.metrics import NonFinite, check_metrics, non_finite_values


def test_non_finite_values_names_each_bad_float_by_its_dotted_path():
    doc = {
        "top1": 51.2,
        "loss": math.nan,
        "curve": [1.0, math.inf, {"knn": -math.inf}],
        "epochs": 100,  # ints, strings and None are never non-finite
        "method": "IR",
        "note": None,
        "nested": {"ok": (0.5, 2)},
    }
    assert non_finite_values(doc) == ["loss", "curve.1", "curve.2.knn"]
    assert non_finite_values(math.nan) == [""] and non_finite_values([]) == []


def test_check_metrics_refuses_a_non_finite_value_in_one_sentence():
    doc = {"a": math.nan, "b": math.inf, "c": [math.nan, math.nan], "d": 1.0}
    with pytest.raises(NonFinite) as err:
        check_metrics(doc, "results/g/lincls/x/metrics.json")
    assert str(err.value) == (
        "results/g/lincls/x/metrics.json holds a non-finite metric (a, b, c.0); the cell that wrote it diverged: "
        "rerun it with a lower lr."
    )  # the first three named
    assert isinstance(err.value, ValueError)  # callers that catch ValueError catch it too


def test_check_metrics_looks_only_at_the_keys_it_is_given():
    doc = {"top1": 50.0, "per_epoch_loss": [math.nan]}
    check_metrics(doc, "m.json", keys=["top1", "absent"])  # an unlisted non-finite value and a missing key pass
    check_metrics({"top1": 1.0}, "m.json")
    with pytest.raises(NonFinite, match=r"^m\.json holds a non-finite metric \(per_epoch_loss\.0\)"):
        check_metrics(doc, "m.json", keys=["per_epoch_loss"])
