"""ring.cluster.cells: a grid's cells as SLURM and the workflow see them (their state, their most specific failure)."""

from ring.cluster import cells
from ring.cluster.slurm import Resources, write_record


def test_a_failed_slurm_cell_shows_the_launchers_sentence_not_sruns(tmp_path):
    """Issue 50 item 3: `ring status` showed "srun: error: vm: task 0: Exited with exit code 1" for a job out of
    memory, where the launcher had said which mem_gb to raise."""
    cell, folder = tmp_path / "cell", tmp_path / "cell" / "slurm"
    write_record(cell, "7", folder, "pretrain", tasks=1)
    (folder / "7_0_log.err").write_text(
        "slurmstepd: error: Detected 1 oom_kill event in StepId=7.0\nsrun: error: vm: task 0: Exited with exit code 1\n"
    )
    state, detail = cells.cell_status(cell, "pretrain", Resources(mem_gb=4), {"7": "OUT_OF_MEMORY"})
    assert state == "failed" and detail.startswith("7 OUT_OF_MEMORY: SLURM job 7 ran out of host memory at mem_gb=4 GB")
    (folder / "7_0_log.err").write_text("ValueError: bad shard\nsrun: error: vm: task 0: Exited with exit code 1\n")
    assert cells.cell_status(cell, "pretrain", Resources(), {"7": "FAILED"}) == (
        "failed",
        "7 FAILED: ValueError: bad shard",
    )


def test_a_finished_cell_is_done_and_a_missing_one_with_no_record_is_missing(tmp_path):
    cell = tmp_path / "cell"
    cell.mkdir()
    assert cells.cell_status(cell, "pretrain", Resources(), {}) == ("missing", "")
    (cell / cells.OUTPUT["pretrain"]).write_bytes(b"weights")
    assert cells.cell_status(cell, "pretrain", Resources(), {}) == ("done", "")


def test_status_lists_every_detection_cell_and_names_what_is_damaged_or_stale(tmp_path, capsys):
    """Issue 52 item 5: `ring status` listed no Table 4 cell, so a damaged backbone.pkl was never reported."""
    import json

    import yaml

    from ring.cluster import batch
    from ring.plan import grid
    from tests.helpers import finished_detection
    from tests.workflow.runs import DETECTION as GRID

    detection = {**GRID["detection"], "methods": ["IR", "MoCo"], "tasks": ["voc_det", "coco_kp"]}
    values = {**GRID, "methods": ["IR", "MoCo"], "detection": detection}
    grids = tmp_path / "grids"
    grids.mkdir()
    (grids / "tiny.yaml").write_text(yaml.safe_dump(values))
    results = tmp_path / "results"
    ir = finished_detection(results, grid.from_dict("tiny", values), "IR", "voc_det")
    moco = finished_detection(results, grid.from_dict("tiny", values), "MoCo", "voc_det")

    def rows() -> dict[tuple[str, str], list[str]]:
        assert batch.main(["status", "--grid", "tiny", "--grids-dir", str(grids), "--results", str(results)]) == 0
        lines = capsys.readouterr().out.splitlines()
        found = {tuple(line.split()[2:4]): line.split(maxsplit=5)[4:] for line in lines if line.startswith("detection")}
        return found | {("total", ""): [line for line in lines if line.startswith("total ")]}

    seen = rows()
    assert {key: value[0] for key, value in seen.items() if key[0] != "total"} == {
        ("IR/voc_det", "seed0"): "done",
        ("IR/coco_kp", "seed0"): "missing",
        ("MoCo/voc_det", "seed0"): "done",
        ("MoCo/coco_kp", "seed0"): "missing",
    }
    # Counted with the pretraining (both done) and linear evaluation cells (both missing).
    assert seen[("total", "")] == ["total 8 stage runs: 4 done, 0 stale, 0 running, 0 pending, 0 failed, 4 missing"]
    backbone = ir.parents[1] / "seed0" / "backbone.pkl"
    backbone.write_bytes(b"backbonE")  # one flipped byte: every IR cell, finished or not, names it
    metrics = json.loads((moco / "metrics.json").read_text())
    (moco / "metrics.json").write_text(json.dumps({**metrics, "columns": {"voc_det_AP": 60.0}}))  # edited in place
    seen = rows()
    damaged = f"{backbone} differs from the SHA-256 its checksum record"
    assert seen[("IR/voc_det", "seed0")][0] == "damaged" and damaged in seen[("IR/voc_det", "seed0")][1]
    assert seen[("IR/coco_kp", "seed0")][0] == "missing" and damaged in seen[("IR/coco_kp", "seed0")][1]
    assert (
        seen[("MoCo/voc_det", "seed0")][0] == "damaged"
        and f"{moco / 'metrics.json'} differs" in (seen[("MoCo/voc_det", "seed0")][1])
    )
    # The grid edited since the cell finished: made with another config than the grid's.
    (moco / "metrics.json").write_text(json.dumps(metrics))
    edited = {
        **values,
        "detection": {**values["detection"], "all": {"num_gpus": 0, "overrides": {"SOLVER.MAX_ITER": 9}}},
    }
    (grids / "tiny.yaml").write_text(yaml.safe_dump(edited))
    stale = rows()[("MoCo/voc_det", "seed0")]
    assert stale[0] == "stale" and stale[1].startswith("made with another config than the grid's"), stale
