"""What stops a grid's jobs on this machine (ring.plan.checks.environment): Detectron2 missing, a results or cell
folder this user cannot write, at plan time and before any job."""

import subprocess

import pytest

from ring.plan import checks
from tests.plan.checks import BASE, plan, refusals


def test_a_results_folder_that_cannot_be_written_stops_theplan(workdir):
    (workdir / "results").mkdir()
    (workdir / "results" / "mygrid").write_text("not a folder")
    grid, result = plan(workdir, BASE)
    assert result.returncode != 0
    assert [line for line in result.stderr.splitlines() if line.startswith("ring: ")] == [
        "ring: The results folder results/mygrid is a file, not a folder; move it away or choose another grid name."
    ]


def test_detectron2_is_asked_for_only_by_the_jobs_that_import_it_on_this_machine(tmp_path, monkeypatch):
    """Issue 51 item 3: a grid with Table 4 could not be planned (nor its table1 run) without Detectron2."""
    import importlib.util

    from ring.plan import grid as grid_plan

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "detectron2" else real(name, *a))
    grid = grid_plan.from_dict("mygrid", BASE)
    assert grid.detection and checks.environment(grid, tmp_path / "results") is None  # the plan: none needed
    rules = ["pretrain", "lincls", "detection"]
    assert checks.detection_environment(rules, "slurm") is None  # the cluster's job checks its own environment
    for needs, launcher in ((rules, "local"), (["detection_convert"], "slurm"), (["detection_embedded"], "slurm")):
        sentence = checks.detection_environment(needs, launcher)
        assert sentence.startswith("Detectron2 is not installed in this Python environment"), (needs, launcher)
    assert checks.detection_environment(["pretrain", "table1"], "local") is None
    monkeypatch.undo()
    assert checks.detection_environment(rules, "local") is None  # installed here


def test_environment_names_an_unwritable_folder(tmp_path, monkeypatch):
    import os

    from ring.plan import grid as grid_plan

    grid = grid_plan.from_dict("mygrid", BASE)
    monkeypatch.setattr(os, "access", lambda path, mode: str(path) != str(tmp_path))  # what a non-root user meets
    assert checks.environment(grid, tmp_path / "results") == (
        f"The results folder {tmp_path / 'results' / 'mygrid'} cannot be created: {tmp_path} is not writable by this "
        f"user; "
        "fix its permissions or run from a folder you can write."
    )


def _unwritable(folder):
    """Make ``folder`` unwritable for this user: chmod, and for root (whom permissions do not stop) the immutable flag;
    whether it worked, as the check sees it."""
    import os

    folder.chmod(0o555)
    if os.access(folder, os.W_OK) and subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode:
        return False
    return not os.access(folder, os.W_OK)


def test_an_unwritable_cell_folder_stops_the_plan_before_any_job(workdir):
    """Not results/<grid> itself: a cell folder below it, which the cell's job would meet with a PermissionError."""
    cell = workdir / "results" / "mygrid" / "pretrain" / "digits" / "IRing" / "seed0"
    cell.mkdir(parents=True)
    try:
        if not _unwritable(cell):
            pytest.skip("this user can write any folder and the file system has no immutable flag")
        grid, result = plan(workdir, BASE)
    finally:
        subprocess.run(["chattr", "-i", str(cell)], capture_output=True)
        cell.chmod(0o755)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    folder = "results/mygrid/pretrain/digits/IRing/seed0"
    assert refusals(result) == [
        f"ring: The cell folder {folder} is not writable by this user; fix its permissions "
        f"(chmod -R u+w {folder}) or move it away, and rerun."
    ]
    assert "Job stats" not in result.stdout + result.stderr


def test_environment_finds_an_unwritable_cell_folder_at_any_depth(tmp_path, monkeypatch):
    import os

    from ring.plan import grid as grid_plan

    grid = grid_plan.from_dict("mygrid", {k: v for k, v in BASE.items() if k != "detection"})
    results = tmp_path / "results"
    study = results / "mygrid" / "studies" / "hard_negatives" / "digits" / "IR" / "source" / "seed0"
    study.mkdir(parents=True)
    assert checks.environment(grid, results) is None
    monkeypatch.setattr(os, "access", lambda path, mode: str(path) != str(study))
    assert checks.environment(grid, results) == (
        f"The cell folder {study} is not writable by this user; fix its permissions (chmod -R u+w {study}) or move it "
        "away, and rerun."
    )
