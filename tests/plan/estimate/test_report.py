"""ring.plan.estimate.report: the table by pass and the command that prints it."""

import math

from ring.cluster import batch
from ring.plan import estimate
from ring.plan import grid as grid_plan
from tests.plan.estimate.test_passes import PAPER, _jpeg, _store, figures  # noqa: F401  (the fixture)


def test_the_table_by_pass_and_the_command(figures, capsys):
    _store(figures)
    grid = grid_plan.load(PAPER)
    f = estimate.load_figures(results=figures)
    rows = estimate.estimate_passes(grid, f, "none")
    assert {r[0] for r in rows} == {"pretraining", "kNN monitor", "k-means", "linear evaluation"}
    # Every cell's passes add up to its stage's price, with the store as without it.
    for store in ("none", "raw"):
        by_stage = sum(h for *_, h in estimate.estimate(grid, f, store))
        assert math.isclose(sum(h for *_, h in estimate.estimate_passes(grid, f, store)), by_stage)
    assert estimate.estimate(grid, f, "raw") != estimate.estimate(grid, f, "none")
    text = estimate.report(grid, f, by="pass", store="none")
    assert "transfer           not priced" in text and "detection          not priced" in text
    assert "CMC's 128" in text  # how a batch-128 cell is priced from batch-256 figures, said
    assert "jpeg_decode-GPU_X.json" in text and "store_loader-GPU_X.json" in text
    args = ["estimate", "--grid", "paper", "--device", "GPU X", "--figures", str(figures), "--by", "pass"]
    assert batch.main([*args, "--store", "raw"]) == 0
    out = capsys.readouterr().out
    assert "every image-folder cell priced reading store: raw" in out.splitlines()[0]
    assert f"{'linear evaluation':18} {'imagenet':10} {27:6d}" in out
