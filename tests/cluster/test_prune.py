"""Issue 40 item 2: `ring prune` deletes only what it proves unwanted: a grid through the gate that owns the folder,
nothing while a run holds it (Snakemake's lock, a live launcher, a submitted job), exactly what --dry-run listed, and
only with --yes or a y at a terminal.  Each refusal is one sentence and leaves every byte in place."""

import io
import json
import os
import socket
import sys
from pathlib import Path

import pytest

from ring.cluster import batch, progress, slurm
from ring.plan import ownership
from tests.cluster.test_batch import _fake_slurm
from tests.plan.test_gate import GOOD, grid_dir, results_folder, snapshot


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """results/tiny owned by grids/tiny.yaml: a named cell with a superseded run, and a cell the grid no longer
    names; SLURM's commands are not on PATH (a test that wants them puts fakes there)."""
    grids = grid_dir(tmp_path, GOOD)
    base = results_folder(tmp_path)
    run = base / "pretrain" / "digits" / "IR" / "seed0" / "runs" / "0123abcd"
    run.mkdir(parents=True)
    (run / "encoder.pt").write_bytes(os.urandom(3000))
    ownership.claim(grids / "tiny.yaml", base)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.chdir(tmp_path)  # where Snakemake runs: results/ and .snakemake/ side by side
    return base


UNWANTED = ("pretrain/digits/IR/seed0/runs/0123abcd", "lincls/digits/IR/seed7")


def prune(capsys, *args) -> tuple[int, list[str], str]:
    code = batch.main(["prune", "--grid", "tiny", "--grids-dir", "grids", "--results", "results", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.strip()


def refused(capsys, folder, sentence: str, *args) -> None:
    before = snapshot(folder)
    code, _, err = prune(capsys, *args)
    assert code == 1 and err.count("\n") == 0 and err.startswith("ring: ") and sentence in err, err
    assert snapshot(folder) == before


def test_prune_removes_with_yes_exactly_what_the_dry_run_listed(folder, capsys):
    code, dry, _ = prune(capsys, "--dry-run")
    assert code == 0 and dry[-1].endswith("(--dry-run: nothing removed)")
    listed = {Path(line.split()[-1]) for line in dry[:-1]}
    assert listed == {Path("results/tiny", p) for p in UNWANTED}
    kept = {p: data for p, data in snapshot(folder).items() if not any(str(u) in str(p) for u in UNWANTED)}
    code, out, err = prune(capsys, "--yes")
    assert code == 0, err
    assert out[:-1] == [
        line.replace("would free", "frees").replace(" (--dry-run: nothing removed)", "") for line in dry
    ]
    assert out[-1].startswith("ring: removed 1 superseded run (0.0 MB) and 1 cell folder the grid no longer names")
    assert not any(p.exists() for p in listed) and snapshot(folder) == kept


def test_without_yes_and_without_a_terminal_prune_lists_and_removes_nothing(folder, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))  # not a terminal: its y is no answer
    refused(
        capsys, folder, "Nothing removed: prune removes the 2 folders above only with --yes (or a y at a terminal)."
    )


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("answer", ["y", "n", ""])
def test_at_a_terminal_only_a_y_removes(folder, capsys, monkeypatch, answer):
    monkeypatch.setattr(sys, "stdin", Terminal(answer + "\n"))
    before = snapshot(folder)
    code, out, err = prune(capsys)
    assert "ring: remove these 2 folders (0.0 MB)? [y/N] " in out[-1]
    if answer == "y":
        assert code == 0 and not any((folder / p).exists() for p in UNWANTED)
    else:
        assert code == 1 and "Nothing removed" in err and snapshot(folder) == before


def test_what_changed_while_the_user_answered_is_not_removed(folder, capsys, monkeypatch):
    def answer(prompt):
        (folder / "lincls" / "digits" / "IR" / "seed8").mkdir()  # a cell appears meanwhile
        return "y"

    monkeypatch.setattr(sys, "stdin", Terminal())
    monkeypatch.setattr("builtins.input", answer)
    before = {p for p in snapshot(folder)}
    code, _, err = prune(capsys)
    assert code == 1 and "changed while you answered; nothing removed" in err
    assert set(snapshot(folder)) == before


def test_a_snakemake_run_holding_the_folder_stops_prune(folder, capsys, tmp_path):
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("results/other/tables/table1.csv\n")  # another grid's run: no matter
    assert prune(capsys, "--dry-run")[0] == 0
    (locks / "1.input.lock").write_text("results/tiny/pretrain/digits/IRingNoAnneal/seed0/config.yaml\n")
    refused(
        capsys, folder, f"A Snakemake run holds results/tiny (its lock {locks.resolve() / '1.input.lock'})", "--yes"
    )
    code, out, _ = prune(capsys, "--dry-run")  # a dry run still lists, and says what holds the folder
    assert code == 0 and out[-1].startswith("(prune would remove nothing now: A Snakemake run holds results/tiny")


def test_a_live_local_launcher_stops_prune(folder, capsys):
    cell = folder / "pretrain" / "digits" / "IRingNoAnneal" / "seed0"
    marker = {"state": "running", "pid": os.getpid(), "host": socket.gethostname(), "started": "2026-01-01T00:00:00"}
    (cell / progress.MARKER).write_text(json.dumps(marker))
    refused(
        capsys,
        folder,
        f"A local launcher runs results/tiny/pretrain/digits/IRingNoAnneal/seed0 (pid {os.getpid()}",
        "--yes",
    )


@pytest.mark.parametrize(
    "sacct, sentence",
    [
        (["77|RUNNING"], "SLURM job 77 of grid tiny is running in results/tiny/lincls/digits/IR/seed7; prune once it"),
        (["77|PENDING"], "SLURM job 77 of grid tiny is pending in"),
        ([], "SLURM job 77 of grid tiny is just submitted in"),  # accounting does not know it yet
        (None, "SLURM cannot say whether the jobs recorded in results/tiny still run"),
    ],
)
def test_a_submitted_job_of_the_grid_stops_prune(folder, capsys, tmp_path, sacct, sentence):
    slurm.write_record(folder / "lincls" / "digits" / "IR" / "seed7", "77", tmp_path / "logs", "lincls")
    _fake_slurm(tmp_path / "bin", tmp_path / "calls", sacct or [], [])
    if sacct is None:  # SLURM unreachable: no proof the job ended
        (tmp_path / "bin" / "sacct").write_text("#!/bin/sh\necho 'Connection refused' >&2\nexit 1\n")
    refused(capsys, folder, sentence, "--yes")


def test_a_job_that_ended_long_ago_holds_nothing(folder, capsys, tmp_path):
    cell = folder / "lincls" / "digits" / "IR" / "seed7"
    slurm.write_record(cell, "77", tmp_path / "logs", "lincls")
    record = cell / "slurm" / "job.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "submitted": "2020-01-01T00:00:00+00:00"}))
    _fake_slurm(tmp_path / "bin", tmp_path / "calls", ["77|COMPLETED"], [])
    code, _, err = prune(capsys, "--yes")
    assert code == 0 and not cell.exists(), err


def test_a_folder_no_grid_file_is_recorded_for_is_not_pruned(folder, capsys):
    (folder / ownership.MARKER).unlink()
    refused(capsys, folder, "No grid file is recorded as the maker of results/tiny", "--yes")
