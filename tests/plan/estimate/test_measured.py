"""ring.plan.estimate.measured: a pass timed past its warm-up and its loader's prefetch, and the figures' records."""

import math

import pytest

from ring.plan.estimate.measured import check_written, mismatch, pass_figure

RECORD = {
    "device": "cpu",
    "workers": 2,
    "prefetch_factor": 2,
    "compile": False,
    "store": "none",
    "threads": 1,
    "batch": 10,
    "bank": 256,
    "crop": 16,
    "dataset": "digits",
}


def _segment(first_gaps: list[float], steady: float, batches: int, calls: int = 2) -> dict:
    """A traced segment: per call, the first batches arrive after ``first_gaps`` (the prefetched ones at once), the
    rest every ``steady`` seconds; 10 images a batch."""
    stamps, t, spent = [], 100.0, 0.0
    for call in range(1, calls + 1):
        start = t
        for i in range(batches):
            t += first_gaps[i] if i < len(first_gaps) else steady
            stamps.append(["pretraining", call, t, 10])
        spent += t - start
    return {
        "pass_stamps": stamps,
        "passes_s": {"pretraining": spent},
        "pass_images": {"pretraining": 10 * batches * calls},
        "pass_calls": {"pretraining": calls},
    }


def test_the_rate_is_timed_past_the_prefetched_batches_and_the_warm_up():
    # 2 workers x prefetch 2 = 4 batches decoded before the clock could see them (each handed over in 0.01 s), then a
    # 3-second compile on the first step: timed from the first of them, the rate would be far too fast.
    segment = _segment([3.0, 0.01, 0.01, 0.01, 0.01], steady=0.5, batches=30)
    fig = pass_figure("pretraining", segment, RECORD, warmup=1)
    assert fig["excluded_batches"] == 5
    assert math.isclose(fig["seconds_per_image"], 0.05)  # 0.5 s per 10-image batch, exactly the steady rate
    assert fig["timed_batches"] == 2 * 25
    # The rest is per call: the compile and the prefetched batches less their images at the steady rate.
    assert math.isclose(fig["seconds_per_call"], 3.04 - 5 * 0.5, rel_tol=1e-9)


def test_a_figure_timed_inside_the_prefetch_is_refused_where_written_and_where_read():
    fig = pass_figure("pretraining", _segment([0.01] * 4, 0.5, 30), RECORD, warmup=1)
    check_written(fig)
    with pytest.raises(ValueError, match="timed inside the prefetch"):
        check_written({**fig, "excluded_batches": 2})  # 2 < 2 workers x prefetch 2 + 1
    with pytest.raises(ValueError, match="needs 8"):
        pass_figure("pretraining", _segment([0.01] * 4, 0.5, 8, calls=1), RECORD, warmup=1)
    with pytest.raises(ValueError, match="at least one batch"):
        pass_figure("pretraining", _segment([], 0.5, 30), RECORD, warmup=0)


def test_a_gap_of_other_work_between_batches_is_the_calls_not_the_images():
    # 20 batches, then 30 s of something else (a classifier's epochs on cached features), then 20 more.
    segment = _segment([0.5] * 20 + [30.0], steady=0.5, batches=41, calls=1)
    fig = pass_figure("pretraining", segment, {**RECORD, "workers": 0}, warmup=1)
    assert math.isclose(fig["seconds_per_image"], 0.05)
    assert fig["seconds_per_call"] > 29


def test_a_cell_that_runs_otherwise_than_the_figure_is_not_priced_from_it():
    assert mismatch(RECORD, dict(RECORD)) == ""
    assert mismatch(RECORD, {**RECORD, "crop": 224}).startswith("measured at crop 16")
    why = mismatch(RECORD, {**RECORD, "workers": 8, "store": "jpeg95"})
    assert "workers 2 (the cell's 8)" in why and "store 'none' (the cell's 'jpeg95')" in why
    assert mismatch(RECORD, {**RECORD, "dataset": "cifar10"}) == ""  # priced per image of the cell's own dataset
    # The bank is pretraining's: the kNN monitor's forward reads none.
    assert mismatch(RECORD, {**RECORD, "bank": 1024}) and not mismatch(RECORD, {**RECORD, "bank": 1024}, "kNN monitor")
