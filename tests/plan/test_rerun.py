"""ring.plan.rerun: ``ring rerun`` on one cell folder, by hand, after the gate (ring.core.cell_runs decides)."""

from ring.core import cell_runs
from ring.core.config import config_hash, save
from ring.plan import ownership
from tests.helpers import pretrain_config, run_module
from tests.plan.test_gate import BAD, GOOD, grid_dir, results_folder, snapshot


def test_the_cli_reads_the_cells_config_yaml(tmp_path):
    cfg = pretrain_config("IR", epochs=1)
    cell_runs.write_record(tmp_path, cfg)
    for name in ("checkpoint.pt", "encoder.pt", "log.jsonl"):
        (tmp_path / name).write_text(config_hash(cfg))
    save(pretrain_config("IR", epochs=1, lr=0.1), tmp_path / "config.yaml")
    result = run_module("ring.plan.rerun", tmp_path, "--stage", "pretrain")
    assert "this cell starts over" in result.stderr and (tmp_path / "runs").is_dir()


def test_rerun_by_hand_opens_the_grid_that_owns_the_cells_folder_through_the_gate(tmp_path, capsys, monkeypatch):
    from ring.plan import rerun

    monkeypatch.delenv("RING_GRID_FILE", raising=False)
    grids = grid_dir(tmp_path, GOOD)
    base = results_folder(tmp_path)
    ownership.claim(grids / "tiny.yaml", base)
    cell = base / "pretrain" / "digits" / "IR" / "seed0"
    (grids / "tiny.yaml").write_text(BAD["misspelt key"][0])  # edited since, with a typo the workflow refuses
    before = snapshot(base)
    assert rerun.main([str(cell), "--stage", "pretrain"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "key (top level): Additional properties are not allowed" in err, err
    assert snapshot(base) == before
    monkeypatch.setenv("RING_GRID_FILE", str(grids / "tiny.yaml"))  # the workflow's jobs: it opened the grid already
    assert rerun.grid_problem(cell) is None
