"""ring.core.accounting: a job's runs from sacct, the segments its killed runs never wrote, and their sums."""

import json

import pytest

from ring.core import accounting


def test_runs_killed_before_writing_a_segment_come_from_accounting(monkeypatch):
    runs = [
        {"state": "REQUEUED", "started": "t0", "ended": "t1", "wall_s": 9.0, "node": "n"},
        {"state": "REQUEUED", "started": "t2", "ended": "t3", "wall_s": 11.0, "node": "n"},
        {"state": "RUNNING", "started": "t4", "ended": "Unknown", "wall_s": 1.0, "node": "n"},
    ]
    monkeypatch.setattr(accounting, "accounted_runs", lambda job_id: runs)
    written = [{"job_id": "7", "restart_count": 0, "wall_s": 9.0}]  # the first run was USR2-preempted
    current = {"job_id": "7", "restart_count": 2, "gpus": 1, "gpu_model": None}
    (added,) = accounting.missing_runs(written, current)  # only the hard-killed second run
    assert (added["restart_count"], added["wall_s"], added["outcome"]) == (1, 11.0, "killed (REQUEUED)")
    assert accounting.missing_runs(written, {**current, "restart_count": 0}) == []


# sacct -D of job 41: a first run hard-killed by an external requeue, a second run killed for good
# (scancel --signal=KILL), and a third record that never started; job 42 is another job's line.
SACCT_41 = """41|REQUEUED|2026-01-01T10:00:00|2026-01-01T10:00:09|9|n1|billing=1,cpu=1,gres/gpu=2,mem=2G,node=1
41|PENDING|Unknown|Unknown|0||billing=1,cpu=1,gres/gpu=2,mem=2G,node=1
41|FAILED|2026-01-01T10:01:00|2026-01-01T10:01:21|21|n2|billing=1,cpu=1,gres/gpu:a100=2,mem=2G,node=1
42|COMPLETED|2026-01-01T09:00:00|2026-01-01T09:10:00|600|n1|billing=1,gres/gpu=1
"""


def test_accounting_orders_a_jobs_runs_as_its_restarts():
    runs = accounting.parse_runs(SACCT_41, "41")
    assert [(r["state"], r["wall_s"], r["node"]) for r in runs] == [
        ("REQUEUED", 9.0, "n1"),
        ("FAILED", 21.0, "n2"),
        ("PENDING", 0.0, ""),
    ]
    assert [r["gpus"] for r in runs] == [2, 2, 2]
    assert accounting.allocated_gpus("cpu=1,gres/gpu=4,gres/gpu:a100=4,node=1") == 4
    assert accounting.allocated_gpus("cpu=1") == 0


def test_a_job_killed_for_good_is_added_to_the_cells_provenance_once(tmp_path, monkeypatch):
    """Issue #11, item 6: the launcher adds an ended job's unrecorded runs before it resubmits the cell;
    the next job's segment keeps them, and a second call adds nothing."""
    monkeypatch.setattr(accounting, "accounted_runs", lambda job_id: accounting.parse_runs(SACCT_41, job_id))
    earlier = {"job_id": "40", "restart_count": 0, "wall_s": 30.0, "gpus": 1, "outcome": "completed"}
    (tmp_path / "provenance.json").write_text(json.dumps({"seed": 3, "segments": [earlier]}))
    assert accounting.add_ended_job(tmp_path, "41") == 2  # both runs that started; none wrote a segment
    doc = json.loads((tmp_path / "provenance.json").read_text())
    assert doc["seed"] == 3 and [s.get("source") for s in doc["segments"]] == [None, "sacct", "sacct"]
    assert [(s["restart_count"], s["outcome"], s["gpus"]) for s in doc["segments"][1:]] == [
        (0, "killed (REQUEUED)", 2),
        (1, "killed (FAILED)", 2),
    ]
    assert (doc["wall_s"], doc["requeues"]) == (60.0, 1)
    assert doc["gpu_hours"] == round((30.0 * 1 + 9.0 * 2 + 21.0 * 2) / 3600, 6)
    assert accounting.add_ended_job(tmp_path, "41") == 0
    # No provenance yet (the job was killed before its first segment): the file is started with them.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert accounting.add_ended_job(fresh, "41") == 2
    assert json.loads((fresh / "provenance.json").read_text())["wall_s"] == 30.0


def test_a_run_that_never_got_a_node_never_ran():
    """sacct can give a pending job cancelled while accounting lags its cancel time as Start; without a
    node it never ran, and no GPU time is added for it."""
    line = "9_1|CANCELLED by 0|2026-11-26T17:52:10|2026-11-26T17:52:10|0|None assigned|\n"
    (run,) = accounting.parse_runs(line, "9_1")
    assert not accounting.started(run)
    assert accounting.unrecorded([], "9_1", [run]) == []


@pytest.mark.parametrize(
    "tres, gpus",
    [
        ("cpu=1,gres/gpu=2,gres/gpu:a100=2,node=1", 2),  # both listed: the plain count, not their sum
        ("cpu=2,gres/gpu:a100=1,gres/gpu:v100=2,node=1", 3),  # typed only: summed
        ("billing=4,cpu=4,mem=8G,node=1", 0),
        ("", 0),
        ("gres/gpu=", 0),  # a value sacct left empty is no count
    ],
)
def test_allocated_gpus_reads_sacct_alloctres(tres, gpus):
    assert accounting.allocated_gpus(tres) == gpus


def test_parse_runs_keeps_only_the_jobs_own_lines_with_an_elapsed_time():
    output = "\n".join(
        [
            "41|COMPLETED|2026-01-01T10:00:00|2026-01-01T10:00:05|5|n1|gres/gpu=1",
            "41.batch|COMPLETED|2026-01-01T10:00:00|2026-01-01T10:00:05|5|n1|",  # a step, not the job
            "41|RUNNING|2026-01-01T11:00:00|Unknown||n1|gres/gpu=1",  # no ElapsedRaw: not a run yet
            "garbage",
        ]
    )
    (run,) = accounting.parse_runs(output, "41")
    assert run == {
        "state": "COMPLETED",
        "started": "2026-01-01T10:00:00",
        "ended": "2026-01-01T10:00:05",
        "wall_s": 5.0,
        "node": "n1",
        "gpus": 1,
    }
    assert accounting.parse_runs(output, "4") == [] and accounting.parse_runs("", "41") == []


@pytest.mark.parametrize(
    "started, node, ran",
    [("2026-01-01T10:00:00", "n1", True), ("Unknown", "n1", False), ("None", "n1", False), ("2026", "", False)],
)
def test_a_run_started_only_with_a_start_time_and_a_node(started, node, ran):
    assert accounting.started({"started": started, "node": node}) is ran


def test_accounted_runs_asks_sacct_for_every_run_and_is_empty_without_it(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.txt"
    sacct = bin_dir / "sacct"
    sacct.write_text(f'#!/bin/sh\necho "$*" > {calls}\nprintf "%s" "{SACCT_41}"\n')
    sacct.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert [r["wall_s"] for r in accounting.accounted_runs("41")] == [9.0, 21.0, 0.0]
    asked = calls.read_text().split()
    assert asked[:2] == ["-j", "41"] and {"-D", "-X", "-P"} <= set(asked)  # requeued runs, one line each
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no SLURM here: provenance lacks them, nothing fails
    assert accounting.accounted_runs("41") == []


def test_missing_runs_needs_a_job_that_restarted():
    record = {"job_id": None, "restart_count": 3, "gpus": 1, "gpu_model": None}
    assert accounting.missing_runs([], record) == []  # not a SLURM job: never asks sacct


def test_a_killed_segment_says_where_it_came_from():
    (run,) = accounting.parse_runs(SACCT_41.splitlines()[0], "41")
    segment = accounting.killed_segment(run, "41", 0, 4, "A100")
    assert segment == {
        **run,
        "outcome": "killed (REQUEUED)",
        "gpus": 4,  # the caller's count wins over the allocation's
        "gpu_model": "A100",
        "job_id": "41",
        "restart_count": 0,
        "source": "sacct",
    }


def test_totals_sum_wall_time_and_gpu_hours_and_count_requeues():
    segments = [
        {"wall_s": 1800.0, "gpus": 2, "restart_count": 0},
        {"wall_s": 900.0, "gpus": 4},  # a segment without restart_count is the first run
        {"wall_s": 0.5, "gpus": 1, "restart_count": 2},
    ]
    assert accounting.totals(segments) == {
        "wall_s": 2700.5,
        "gpu_hours": round((1800 * 2 + 900 * 4 + 0.5) / 3600, 6),
        "requeues": 2,
    }
    assert accounting.totals([]) == {"wall_s": 0, "gpu_hours": 0.0, "requeues": 0}


def test_ignored_stops_are_noted_on_the_jobs_completed_segment_only(tmp_path):
    path = tmp_path / accounting.FILE
    assert accounting.note_ignored_stops(tmp_path, "7", 2) is False and not path.exists()  # no provenance yet
    segments = [
        {"job_id": "7", "outcome": "killed (REQUEUED)"},
        {"job_id": "8", "outcome": "completed"},
        {"job_id": "7", "outcome": "completed"},
    ]
    path.write_text(json.dumps({"seed": 1, "segments": segments}))
    assert accounting.note_ignored_stops(tmp_path, "7", 0) is False  # nothing to note
    assert accounting.note_ignored_stops(tmp_path, "9", 1) is False  # no segment of that job
    assert accounting.note_ignored_stops(tmp_path, "7", 3) is True
    doc = json.loads(path.read_text())
    assert doc["seed"] == 1 and [s.get("stop_signals_after_outputs") for s in doc["segments"]] == [None, None, 3]
