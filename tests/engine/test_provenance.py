"""provenance.json says whether the grid file and workflow config were tracked and unmodified."""

import json
import subprocess

import pytest

import ring
from ring.engine import provenance


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_an_untracked_or_modified_grid_file_makes_the_cell_dirty(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    grid, cfg = repo / "mine.yaml", repo / "config.yaml"
    grid.write_text("seeds: [0]\n")
    cfg.write_text("grid: mine\n")
    _git(repo, "add", "config.yaml")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "config")
    monkeypatch.setenv(provenance.GRID_ENV, str(grid))
    monkeypatch.setenv(provenance.WORKFLOW_CONFIG_ENV, str(cfg))

    state = provenance.run_files_state()
    assert state["grid_file"]["tracked"] is False and state["files_dirty"]
    assert state["workflow_config"] == {
        "path": str(cfg.resolve()),
        "sha256": state["workflow_config"]["sha256"],
        "tracked": True,
        "modified": False,
    }
    (tmp_path / "cell0").mkdir()
    with provenance.Segment(tmp_path / "cell0", "hash", 0):
        pass  # one completed segment: the record is written on exit
    doc = json.loads((tmp_path / "cell0" / provenance.FILE).read_text())
    assert doc["dirty"] is True and doc["grid_file"]["sha256"] == provenance.file_state(grid)["sha256"]

    _git(repo, "add", "mine.yaml")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "grid")
    assert not provenance.run_files_state()["files_dirty"]
    grid.write_text("seeds: [1]\n")
    state = provenance.run_files_state()
    assert state["grid_file"]["modified"] is True and state["files_dirty"]
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text("x: 1\n")
    assert provenance.file_state(outside)["tracked"] is False


def test_the_code_is_the_checkouts_commit_or_the_installed_version_said_so(tmp_path):
    here = provenance.git_state()  # the tests run from a checkout
    assert len(here["commit"]) == 40 and here["code"] == "git checkout" and here["version"] == ring.__version__
    # A wheel installed into a venv that lies inside some other repository: that repository's commit is not ours.
    other = tmp_path / "project"
    site = other / ".venv" / "lib" / "site-packages"
    (site / "ring").mkdir(parents=True)
    _git(other, "init", "-q")
    _git(other, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "theirs")
    for repo in (site, tmp_path / "nowhere"):  # inside another repository, and outside any
        assert provenance.git_state(repo) == {
            "commit": None,
            "dirty": None,
            "version": ring.__version__,
            "code": f"installed package ring-bench {ring.__version__}, not a git checkout: no commit recorded",
        }


def test_a_segment_records_its_nodes_and_counts_the_gpus_of_all_of_them(tmp_path, monkeypatch):
    """A 2-node x 4-GPU job: rank 0 writes one segment for all 8 processes; GPU-hours are wall x 8."""
    monkeypatch.setenv("SLURM_JOB_ID", "3001")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "2")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setattr(provenance, "gpus_in_use", lambda: (8, "NVIDIA H200"))  # as on the GPU nodes
    with provenance.Segment(tmp_path, "hash", 0):
        pass
    doc = json.loads((tmp_path / provenance.FILE).read_text())
    segment = doc["segments"][0]
    assert (segment["nodes"], segment["gpus"], segment["job_id"]) == (2, 8, "3001")
    assert doc["gpu_hours"] == round(segment["wall_s"] * 8 / 3600, 6)
    monkeypatch.delenv("SLURM_JOB_NUM_NODES")
    assert provenance.nodes_in_use() == 1


def test_rank_0_writes_the_running_segments_rate_each_epoch(tmp_path, monkeypatch):
    """progress.json: what `ring status` extrapolates a running cell from (ring.cluster.progress.running_segment)."""
    from ring.cluster import progress

    monkeypatch.setattr(provenance, "gpus_in_use", lambda: (4, "NVIDIA H200"))
    with provenance.Segment(tmp_path, "hash", 0) as segment:
        segment.t0 -= 1800.0  # resumed half an hour ago at epoch 2.5 of 10; epoch 4 just ended
        segment.progress(2.5, 4, 10)
        record = json.loads((tmp_path / provenance.PROGRESS).read_text())
        assert {k: record[k] for k in ("epoch", "epochs", "segment_epochs", "gpus")} == {
            "epoch": 4,
            "epochs": 10,
            "segment_epochs": 1.5,
            "gpus": 4,
        }
        spent, wall_left = progress.running_segment(tmp_path)
        assert spent == pytest.approx(2.0, rel=1e-3) and wall_left == pytest.approx(2.0, rel=1e-3)
    assert provenance.PROGRESS == progress.PROGRESS
