"""ring.plan.estimate.check: the finished cells' price beside the seconds their provenance recorded, per pass."""

import json
import math

import yaml

from ring.cluster import batch
from ring.core.config import save
from ring.plan import estimate
from ring.plan import grid as grid_plan
from tests.plan.estimate.test_figures import _write_figures
from tests.plan.estimate.test_pricing import _pretrain, write_price

GRID = {
    "datasets": ["digits"],
    "methods": ["IR"],
    "seeds": [0],
    "pretrain": {
        "all": {
            "epochs": 3,
            "batch_size": 64,
            "resize": 16,
            "crop": 16,
            "knn_every": 2,
            "num_workers": 0,
            "bank_negatives": 256,
        }
    },
    "resources": {"pretrain": {"threads": 1}},
}


def _segment(outcome: str, passes_s: dict) -> dict:
    return {"outcome": outcome, "wall_s": sum(passes_s.values()), "gpu_model": None, "passes_s": passes_s}


def _finished_cell(results, segments, output="encoder.pt"):
    cell = results / "check" / "pretrain" / "digits" / "IR" / "seed0"
    cell.mkdir(parents=True)
    save(_pretrain(), cell / "config.yaml")
    (cell / output).write_bytes(b"")
    (cell / "provenance.json").write_text(json.dumps({"segments": segments}))
    return cell


def test_the_finished_cells_price_is_set_beside_what_each_pass_spent(tmp_path, capsys):
    figures_dir, results = tmp_path / "figures", tmp_path / "results"
    figures_dir.mkdir()
    _write_figures(figures_dir, "cpu", "2026-11-26T10:00:00Z", 10.0, image_size=16)
    write_price(figures_dir)
    # Preempted once, then completed: its passes' seconds add up over both processes, and so do its fixed costs.
    first = _segment("preempted", {"start and imports": 12.0, "setup": 3.0, "pretraining": 20.0})
    second = _segment("completed", {"start and imports": 12.0, "pretraining": 25.0, "kNN monitor": 7.0})
    second["passes_s"]["checkpoint writes"] = 1.5
    _finished_cell(results, [first, second])
    grid = grid_plan.from_dict("check", GRID)
    figures = estimate.load_figures("cpu", results=figures_dir)
    result = estimate.check.check(grid, results, figures)
    assert result.cells == 1
    cells, predicted, spent = result.rows["pretraining"]
    assert (cells, spent) == (1, 45.0) and math.isclose(predicted, 3 * 1.0 + 3 * 21 * 64 * 0.010)
    assert result.rows["kNN monitor"][2] == 7.0
    assert math.isclose(result.rows["fixed costs"][1], 2 * 15.0 + 3 * 0.5)  # two processes' fixed costs
    assert result.rows["fixed costs"][2] == 12.0 + 3.0 + 12.0 + 1.5
    grid_file = tmp_path / "check.yaml"
    grid_file.write_text(yaml.safe_dump(GRID))
    argv = ["estimate", "--grid", str(grid_file), "--results", str(results), "--check", "--figures", str(figures_dir)]
    assert batch.main(argv) == 0
    out = capsys.readouterr().out
    assert "predicted against spent of the 1 finished cells of grid check, cpu" in out
    assert f"pretraining: priced from end-to-end ({figures_dir / 'price-cpu.json'})" in out  # --figures': by path


def test_a_cell_still_running_or_recorded_before_the_clock_is_not_checked(tmp_path):
    results = tmp_path / "results"
    _finished_cell(results, [_segment("preempted", {"pretraining": 5.0})])
    assert estimate.check.check(grid_plan.from_dict("check", GRID), results, None).cells == 0
    old = {"outcome": "completed", "wall_s": 10.0}  # before ring.engine.clock: no passes_s
    (results / "check" / "pretrain" / "digits" / "IR" / "seed0" / "provenance.json").write_text(
        json.dumps({"segments": [old]})
    )
    result = estimate.check.check(grid_plan.from_dict("check", GRID), results, None)
    assert result.cells == 0 and result.unrecorded == 1


def test_the_spent_seconds_are_read_on_the_clock_the_figures_were_measured_on(tmp_path):
    """The CPU's figures are its jobs' CPU seconds (ring.engine.clock): a cell run on a busy host, whose wall seconds
    doubled while its CPU seconds did not, is checked on the latter; a file mixing the two clocks is refused."""
    figures_dir, results = tmp_path / "figures", tmp_path / "results"
    figures_dir.mkdir()
    _write_figures(figures_dir, "cpu", "2026-11-26T10:00:00Z", 10.0, image_size=16)
    write_price(figures_dir)
    path = figures_dir / "price-cpu.json"
    price = json.loads(path.read_text())
    for fig in [*price["passes"], *price["fixed"].values()]:
        fig["clock"] = "cpu"
    path.write_text(json.dumps({**price, "clock": "cpu"}))
    busy = {**_segment("completed", {"pretraining": 80.0}), "passes_cpu_s": {"pretraining": 40.0}}
    _finished_cell(results, [busy])
    result = estimate.check.check(
        grid_plan.from_dict("check", GRID), results, estimate.load_figures("cpu", results=figures_dir)
    )
    assert result.clock == "cpu" and result.rows["pretraining"][2] == 40.0
    price["passes"][0]["clock"] = "wall"
    path.write_text(json.dumps({**price, "clock": "cpu"}))
    try:
        estimate.load_figures("cpu", results=figures_dir)
    except ValueError as err:
        assert "mixes clocks" in str(err)
    else:
        raise AssertionError("a file mixing the wall and the CPU clocks was read")
