"""ring.cluster.detach, the config rule's first step: an edited cell lets go of its previous config's SLURM job.

Driven through its command (``main``) against SLURM clients faked on PATH, so the tests hold wherever the cancel and
wait logic lives (ring.cluster.launch today)."""

import json
import os
from pathlib import Path

import pytest

from ring.cluster import detach
from ring.cluster.slurm import write_record
from ring.core import cell_runs
from ring.core.config import PretrainConfig, config_hash, save
from tests.helpers import TINY_PRETRAIN

# sacct's answers about job 7: its state (JobID,State), and its one run (the -D query of ring.core.accounting).
SACCT = """#!/bin/sh
echo "sacct $*" >> {calls}
case "$*" in
  *ElapsedRaw*) echo "7|$(cat {state})|2026-01-01T10:00:00|2026-01-01T10:00:12|12|n1|cpu=1,gres/gpu=1,node=1" ;;
  *) echo "7|$(cat {state})" ;;
esac
"""
# squeue lists the job while it runs; scancel ends it (or is refused, as for another user's job).
SQUEUE = """#!/bin/sh
echo "squeue $*" >> {calls}
[ "$(cat {state})" = RUNNING ] && echo RUNNING
exit 0
"""
SCANCEL = """#!/bin/sh
echo "scancel $*" >> {calls}
[ -e {refuse} ] && {{ echo "scancel: error: Kill job error on job id $1: Access/permission denied" >&2; exit 1; }}
echo CANCELLED > {state}
"""


@pytest.fixture
def slurm(tmp_path, monkeypatch):
    """sacct, squeue and scancel on PATH, job 7 RUNNING; returns (state file, calls file, refuse file)."""
    bin_dir, state, calls, refuse = (tmp_path / n for n in ("bin", "state", "calls.txt", "refuse"))
    bin_dir.mkdir()
    state.write_text("RUNNING\n")
    for name, text in (("sacct", SACCT), ("squeue", SQUEUE), ("scancel", SCANCEL)):
        (bin_dir / name).write_text(text.format(calls=calls, state=state, refuse=refuse))
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return state, calls, refuse


def _cell(tmp_path, record_of="old") -> tuple[Path, str]:
    """A pretraining cell edited from lr 0.03 to 0.01: run.json and the files of the lr 0.03 run, and a launcher record
    of job 7 running the ``record_of`` config ("old" or "new"); returns the cell and the old config's hash."""
    cell = tmp_path / "results" / "g" / "pretrain" / "digits" / "IR" / "seed0"
    cell.mkdir(parents=True)
    old, new = (PretrainConfig(method="IR", **{**TINY_PRETRAIN, "lr": lr}) for lr in (0.03, 0.01))
    cell_runs.write_record(cell, old)
    (cell / "encoder.pt").write_bytes(b"lr 0.03")
    (cell / "log.jsonl").write_text('{"epoch": 0}\n')
    save(new, cell / "config.yaml")
    write_record(cell, "7", cell / "slurm", "pretrain", config_hash=config_hash(old if record_of == "old" else new))
    return cell, config_hash(old)


def _said(capsys) -> list[str]:
    return capsys.readouterr().err.splitlines()


def test_a_running_job_of_the_previous_config_is_cancelled_accounted_and_its_run_kept_aside(tmp_path, slurm, capsys):
    _, calls, _ = slurm
    cell, old = _cell(tmp_path)
    assert detach.main([str(cell), "--stage", "pretrain"]) == 0
    assert "scancel 7" in calls.read_text().splitlines()
    said = _said(capsys)
    assert said[0] == (
        f"ring: {cell}: its config changed while SLURM job 7 of the previous config was RUNNING; cancelling it "
        "first, so that nothing of it writes into the edited cell"
    )
    # Retired: no client re-attaches to it; the record stays beside, not in, the kept run.
    assert not (cell / "slurm" / "job.json").exists() and (cell / "slurm" / "job-7.json").is_file()
    kept = cell / "runs" / old
    assert (kept / "encoder.pt").read_bytes() == b"lr 0.03" and not (cell / "encoder.pt").exists()
    # Its run that wrote no segment (cancelled) is in the previous run's provenance, which moved with it.
    (segment,) = json.loads((kept / "provenance.json").read_text())["segments"]
    assert (segment["job_id"], segment["wall_s"], segment["gpus"], segment["source"]) == ("7", 12.0, 1, "sacct")
    assert not (cell / "provenance.json").exists()


def test_a_job_of_the_cells_own_config_is_left_alone(tmp_path, slurm, capsys):
    _, calls, _ = slurm
    cell, _ = _cell(tmp_path, record_of="new")
    assert detach.main([str(cell), "--stage", "pretrain"]) == 0
    assert not calls.exists() or "scancel" not in calls.read_text()  # SLURM is not even asked to cancel
    assert (cell / "slurm" / "job.json").is_file()
    assert not (cell / "slurm" / "job-7.json").exists()


def test_a_job_of_the_previous_config_that_ended_is_not_cancelled_but_its_run_moves_aside(tmp_path, slurm, capsys):
    state, calls, _ = slurm
    state.write_text("COMPLETED\n")
    cell, old = _cell(tmp_path)
    assert detach.main([str(cell), "--stage", "pretrain"]) == 0
    assert "scancel" not in calls.read_text()
    assert (cell / "slurm" / "job.json").is_file()  # the launcher tells the earlier config's output from it
    assert (cell / "runs" / old / "encoder.pt").is_file()
    assert not any("cancelling" in line for line in _said(capsys))


def test_a_refused_cancel_is_one_sentence_and_nothing_moves(tmp_path, slurm, capsys):
    _, _, refuse = slurm
    refuse.touch()
    cell, _ = _cell(tmp_path)
    assert detach.main([str(cell), "--stage", "pretrain"]) == 1
    last = _said(capsys)[-1]
    assert last.startswith(f"ring: {cell}: ") and "scancel 7 failed (scancel: error: Kill job error" in last
    assert (cell / "encoder.pt").exists() and not (cell / "runs").exists()  # the job may still write: nothing moved
    assert (cell / "slurm" / "job.json").is_file()


def test_without_slurm_a_record_of_another_config_is_one_sentence(tmp_path, monkeypatch, capsys):
    cell, _ = _cell(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm"))
    assert detach.main([str(cell), "--stage", "pretrain"]) == 1
    (line,) = _said(capsys)
    assert line.startswith(f"ring: {cell}: sacct is not on PATH; ")
    assert (cell / "encoder.pt").exists() and not (cell / "runs").exists()


def test_a_cell_without_a_config_is_one_sentence(tmp_path, capsys):
    cell = tmp_path / "cell"
    cell.mkdir()
    assert detach.main([str(cell), "--stage", "lincls"]) == 1
    (line,) = _said(capsys)
    assert line == (
        f"ring: {cell}: Config file {cell / 'config.yaml'} does not exist; the workflow writes it, or pass an "
        "existing file."
    )


def test_a_cell_without_a_record_is_only_brought_in_line_with_its_config(tmp_path, monkeypatch, capsys):
    """No launcher record (a local run): SLURM is never asked, the previous run moves aside as the rule's next step."""
    cell, old = _cell(tmp_path)
    (cell / "slurm" / "job.json").unlink()
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm"))  # asking SLURM would fail
    assert detach.main([str(cell), "--stage", "pretrain"]) == 0
    assert (cell / "runs" / old / "encoder.pt").is_file()


def test_the_stage_must_be_one_the_rerun_knows(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        detach.main([str(tmp_path), "--stage", "pretrian"])
    assert exit_.value.code == 2 and "invalid choice: 'pretrian'" in capsys.readouterr().err
