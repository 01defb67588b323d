"""ring-bench on a real SLURM cluster (.ci/slurm/start.sh): one cell preempted (USR2), requeued or
killed, and resumed to the uninterrupted run's weights.

These tests never skip: a machine without the cluster fails them, as CI must.  What the SLURM files share is in
tests/workflow/slurm.py.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import time
from pathlib import Path

import pytest

from ring.cluster.jobs import IGNORED_STOP
from ring.core.config import PretrainConfig
from tests.helpers import TINY_PRETRAIN
from tests.workflow.slurm import (
    CLUSTER,
    SLURM_TESTS,
    accounted_runs_of,
    client_within_readme,
    cluster_turn,
    launch_cell,
    log_lines,
    sacct_states,
    same_weights,
    wait_for,
)

pytestmark = SLURM_TESTS


# The interruption tests' cell.  Two epochs: each interruption comes once the first has ended (its log line), and the
# second runs on after it.
IRING = PretrainConfig(method="IRing", **{**TINY_PRETRAIN, "epochs": 2})


@pytest.fixture(scope="module")
def reference(module_tmp) -> dict:
    """The interruption tests' cell run once on SLURM, its job sent USR2 every 50 ms from the moment its export.json
    exists until it ends: its training is never interrupted, so its encoder is the uninterrupted run's, which the
    other tests' resumed runs must equal.  Whether the late signals did no harm is asserted by
    test_usr2_after_the_export_ends_the_job_completed (one run for both: the module's reference run is this one)."""
    cell = module_tmp("ref") / "results" / "t" / "pretrain" / "digits" / "IRing" / "seed0"
    with cluster_turn():
        proc = launch_cell(cell, IRING, CLUSTER)
        wait_for((cell / "export.json").exists, 600, "the export")
        job_id = json.loads((cell / "slurm" / "job.json").read_text())["job_id"]
        sent, deadline = 0, time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            sent += (
                subprocess.run(["scancel", "--signal=USR2", job_id], capture_output=True, timeout=30).returncode == 0
            )
            time.sleep(0.05)
        out, _ = proc.communicate(timeout=600)
    return {
        "cell": cell,
        "encoder": cell / "encoder.pt",
        "job_id": job_id,
        "sent": sent,
        "rc": proc.returncode,
        "out": out,
    }


def test_usr2_after_the_export_ends_the_job_completed(reference):
    """Issue 34 item 3: SLURM's USR2 from the moment export.json exists until the job ends (sent every 50 ms, so
    some land in the interpreter's shutdown, where Python had put back the default action: the task died of
    the signal and the job FAILED)."""
    cell, job_id, out = reference["cell"], reference["job_id"], reference["out"]
    assert reference["sent"] >= 1 and reference["rc"] == 0, out
    assert sacct_states([job_id]) == ["COMPLETED"], out
    assert accounted_runs_of(job_id) == 1  # never requeued
    segments = json.loads((cell / "provenance.json").read_text())["segments"]
    assert [s["outcome"] for s in segments] == ["completed"]
    # Provenance tells what happened: the signals the job noted, ignored, are counted in its segment.  (Those that
    # land in the interpreter's shutdown are ignored unnoted: no Python code runs there; on the local SLURM every
    # one did, scancel taking longer than the job's last steps.)
    noted = (cell / "slurm" / f"{job_id}_0_log.err").read_text().count(IGNORED_STOP)
    assert segments[0].get("stop_signals_after_outputs", 0) == noted


def test_usr2_checkpoints_at_a_step_boundary_requeues_and_resumes(tmp_path, reference):
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "IRing" / "seed0"
    proc = launch_cell(cell, IRING, CLUSTER)
    wait_for(lambda: log_lines(cell) >= 1, 300, "the first epoch")
    job_id = json.loads((cell / "slurm" / "job.json").read_text())["job_id"]
    rss_kb = int(
        next(
            line.split()[1]
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
            if line.startswith("VmRSS")
        )
    )
    subprocess.run(["scancel", "--signal=USR2", job_id], check=True, timeout=30)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    segments = json.loads((cell / "provenance.json").read_text())["segments"]
    assert [s["outcome"] for s in segments] == ["preempted", "completed"]
    assert segments[1]["restart_count"] >= 1 and segments[0]["job_id"] == job_id
    assert same_weights(reference["encoder"], cell / "encoder.pt")
    assert client_within_readme(rss_kb), f"the waiting client holds {rss_kb / 1024:.1f} MB; update README.md's figure"


def test_external_requeue_resumes_from_the_periodic_checkpoint(tmp_path, reference):
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "IRing" / "seed0"
    cfg = dataclasses.replace(IRING, checkpoint_interval_min=0.0)
    proc = launch_cell(cell, cfg, CLUSTER)
    wait_for(lambda: log_lines(cell) >= 1, 300, "the first epoch")
    time.sleep(2)
    job_id = json.loads((cell / "slurm" / "job.json").read_text())["job_id"]
    subprocess.run(["scontrol", "requeue", job_id], check=True, timeout=30)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    assert (
        "resuming"
        in (Path(json.loads((cell / "slurm" / "job.json").read_text())["folder"]) / f"{job_id}_0_log.err").read_text()
    )
    provenance = json.loads((cell / "provenance.json").read_text())
    assert provenance["requeues"] >= 1
    # The hard-killed first run wrote no segment: accounting's record of it is added (issue #11, item 6).
    killed = [s for s in provenance["segments"] if s.get("source") == "sacct"]
    assert [s["restart_count"] for s in killed] == [0] and killed[0]["wall_s"] > 0
    assert provenance["wall_s"] == round(sum(s["wall_s"] for s in provenance["segments"]), 3)
    # One line per state change, and the final state is shown (the old client stopped at REQUEUED).
    states = [line.split()[5] for line in out.splitlines() if f"SLURM job {job_id} " in line and "min)" in line]
    assert states[-1] == "COMPLETED" and all(a != b for a, b in itertools.pairwise(states)), states
    assert same_weights(reference["encoder"], cell / "encoder.pt")


def test_a_job_killed_for_good_is_in_the_provenance_of_the_cells_next_job(tmp_path, reference):
    """Issue #11, item 6: `scancel --signal=KILL` ends the job without a requeue and without its segment;
    the cell's next job resumes, and provenance has the killed run from sacct beside the new one."""
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "IRing" / "seed0"
    cfg = dataclasses.replace(IRING, checkpoint_interval_min=0.0)
    proc = launch_cell(cell, cfg, CLUSTER)
    wait_for(lambda: log_lines(cell) >= 1, 300, "the first epoch")
    killed = json.loads((cell / "slurm" / "job.json").read_text())["job_id"]
    subprocess.run(["scancel", "--signal=KILL", killed], check=True, timeout=30)
    first, _ = proc.communicate(timeout=600)
    assert proc.returncode == 1 and f"SLURM job {killed} failed (" in first, first
    proc = launch_cell(cell, cfg, CLUSTER)
    second, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0 and "submitted SLURM job" in second, second
    provenance = json.loads((cell / "provenance.json").read_text())
    segments = provenance["segments"]
    (gone,) = [s for s in segments if s["job_id"] == killed]
    assert gone["source"] == "sacct" and gone["outcome"].startswith("killed (") and gone["wall_s"] > 0, gone
    assert gone["gpus"] == 1  # the allocation's GPU (AllocTRES), though this CPU machine's job saw none
    assert segments[-1]["outcome"] == "completed" and segments[-1]["job_id"] != killed
    assert provenance["wall_s"] == round(sum(s["wall_s"] for s in segments), 3)
    assert f"added 1 run(s) of SLURM job {killed}" in first + second
    assert same_weights(reference["encoder"], cell / "encoder.pt")
