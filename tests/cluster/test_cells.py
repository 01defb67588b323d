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
