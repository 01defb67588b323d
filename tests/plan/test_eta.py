"""When will a grid end (ring.plan.eta): the arithmetic on a grid with finished, running and pending cells."""

import json

import pytest

from ring.cluster import progress
from ring.plan import eta


def _cell(stage, dataset, chain, state, spent=0.0, price=None, wall_left_h=None):
    return eta.Cell(stage, dataset, chain, state, spent, price, 2 if stage == "pretrain" else 1, wall_left_h)


CELLS = [
    _cell("pretrain", "cifar10", "c1", "done", spent=10.0, price=5.0),  # spent twice its price
    _cell("pretrain", "cifar10", "c2", "done", spent=12.0, price=4.0),  # three times
    _cell("pretrain", "cifar10", "c3", "running", spent=1.0, price=6.0, wall_left_h=1.5),  # measured: 3 GPU-h left
    _cell("pretrain", "cifar10", "c4", "pending", price=5.0),  # 10-15 GPU-h (calibrated on cifar10's 2x-3x)
    _cell("pretrain", "stl10", "s1", "failed", spent=7.0, price=8.0),  # reruns: 16-24 (no stl10 run: the stage's)
    _cell("lincls", "cifar10", "c1", "done", spent=1.0, price=2.0),  # half its price
    _cell("lincls", "cifar10", "c2", "pending", price=2.0),  # 1 each
    _cell("lincls", "cifar10", "c3", "pending", price=2.0),
    _cell("lincls", "cifar10", "c4", "missing", price=2.0),
    _cell("lincls", "stl10", "s1", "pending", price=1.0),  # 0.5
]


def test_the_outlook_of_a_grid_with_finished_running_and_pending_cells():
    out = eta.outlook(CELLS)
    pre, lin = out.stages["pretrain"], out.stages["lincls"]
    assert (pre.done, pre.running, pre.pending, pre.unpriced) == (2, 1, 2, 0)
    assert pre.spent == pytest.approx(30.0) and pre.left == pytest.approx((3 + 10 + 16, 3 + 15 + 24))
    assert (lin.done, lin.running, lin.pending, lin.unpriced) == (1, 0, 4, 0)
    assert lin.spent == pytest.approx(1.0) and lin.left == pytest.approx((3.5, 3.5))
    assert out.grid.left == pytest.approx((32.5, 45.5)) and out.grid.spent == pytest.approx(31.0)
    # Chains (wall hours, each stage on its own GPUs): c3 3/2 + 1, c4 10/2 + 1, s1 16/2 + 0.5: s1's 8.5 is a floor;
    # the other, 32.5 GPU-h over the 10 GPUs of the cells left (3 x 2 + 4 x 1), is 3.25 h.
    assert out.chain_h == pytest.approx(8.5) and out.gpus_all == 10
    # The ceiling, one cell at a time on its own GPUs: c3 1.5 h, c4 15/2, s1 24/2, the evaluations 1 + 1 + 1 + 0.5.
    assert out.hours == pytest.approx((8.5, 1.5 + 7.5 + 12 + 3.5))
    assert out.calibrated_on == 3
    lines = out.lines("smoke")
    assert lines[0] == "pretrain: 2 done, 1 running, 2 pending; 30 GPU-h spent, 29-42 GPU-h left"
    assert lines[1] == "lincls: 1 done, 0 running, 4 pending; 1 GPU-h spent, 3.5 GPU-h left"
    assert lines[2] == (
        "grid smoke: 3 done, 1 running, 6 pending; 31 GPU-h spent, 32.5-45.5 GPU-h left; 8.5-24.5 h left (at least "
        "the longest pretrain->lincls chain, 8.5 h, and the work over the 10 GPUs its cells left hold at once, "
        "3.25 h; at most one cell at a time on its own GPUs); prices calibrated on the grid's 3 finished cells"
    )


def test_the_bounds_hold_when_stages_take_different_gpu_counts():
    """Issue 50 item 5: on a 2 x 4 site (pretraining on 8 GPUs, evaluation on 1) the ceiling spread every GPU-hour
    over the widest cell's 8 GPUs, 6.05 days where one cell at a time is 14.3."""
    cells = [
        eta.Cell("pretrain", "imagenet", (m,), "pending", 0.0, 80.0, 8)  # 10 h each on its 8 GPUs
        for m in ("IR", "MoCo")
    ] + [eta.Cell("lincls", "imagenet", (m,), "pending", 0.0, 5.0, 1) for m in ("IR", "MoCo")]  # 5 h each on 1
    out = eta.outlook(cells)
    # At most 10 + 10 + 5 + 5 h (was 170 GPU-h / 8 = 21.25 h, below what the grid can take); at least a chain's
    # 10 + 5 h, above the 170 GPU-h over all 18 GPUs (9.4 h).
    assert out.hours == pytest.approx((15.0, 30.0)) and out.gpus_all == 18
    assert "15-30 h left" in out.lines("g")[-1]


def test_a_cell_left_unpriced_makes_the_time_left_unknown():
    """Issue 50 item 5: a plug-in grid whose cells ring.plan.estimate cannot price printed "0.00127 s left"."""
    out = eta.outlook([*CELLS, _cell("lincls", "stl10", "s2", "pending")])
    assert out.hours is None and out.grid.unpriced == 1
    assert out.lines("g")[-1] == (
        "grid g: 3 done, 1 running, 7 pending; 31 GPU-h spent, 32.5-45.5 GPU-h left (+1 cells not priced); "
        "time left unknown (1 cells left are not priced); prices calibrated on the grid's 3 finished cells"
    )
    unpriced = eta.outlook([_cell("pretrain", "plugin", "p1", "pending"), _cell("lincls", "plugin", "p1", "pending")])
    assert unpriced.hours is None and "time left unknown (2 cells left are not priced)" in unpriced.lines("g")[-1]


def test_nothing_finished_is_the_model_uncalibrated_and_nothing_running_is_one_cells_width():
    out = eta.outlook(
        [
            _cell("pretrain", "cifar10", "c1", "pending", price=4.0),
            _cell("lincls", "cifar10", "c1", "pending", price=1.0),
        ]
    )
    assert out.grid.left == (5.0, 5.0) and out.chain_h == pytest.approx(4.0 / 2 + 1.0)
    assert out.hours == pytest.approx((3.0, 3.0))  # one chain: its stages one after the other, both bounds
    assert "prices uncalibrated" in out.lines("g")[-1]


def test_a_running_segment_s_rate_comes_from_its_progress_file(tmp_path):
    assert progress.running_segment(tmp_path) == (0.0, None)  # before its first epoch ends
    record = {"epoch": 3, "epochs": 10, "segment_epochs": 1.5, "segment_wall_s": 1800.0, "gpus": 4, "updated": "x"}
    (tmp_path / progress.PROGRESS).write_text(json.dumps(record))
    spent, wall_left = progress.running_segment(tmp_path)
    # 1.5 epochs in half an hour on 4 GPUs: 2 GPU-h spent; 7 epochs left at 3 epochs an hour.
    assert spent == pytest.approx(2.0) and wall_left == pytest.approx(7 / 3)


def test_cells_finished_on_a_cpu_calibrate_nothing_and_it_says_so():
    """A cell run on a CPU spends 0 GPU-hours (provenance counts GPUs): no ratio to calibrate on, and the line says
    why, not that nothing has finished."""
    out = eta.outlook(
        [
            _cell("pretrain", "digits", "c1", "done", spent=0.0, price=4.0),
            _cell("lincls", "digits", "c1", "pending", price=1.0),
        ]
    )
    assert out.calibrated_on == 0 and out.grid.left == (1.0, 1.0)
    assert out.lines("g")[-1].endswith(
        "prices uncalibrated (no finished cell has spent GPU-hours yet: ring.plan.estimate's model as it is)"
    )
