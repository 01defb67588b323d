"""ring-bench on a real SLURM cluster (.ci/slurm/start.sh): submission, job arrays, resources and
the controller, and the jobs a killed client left running, collected by the next client.

These tests never skip: a machine without the cluster fails them, as CI must.  What the SLURM files share is in
tests/workflow/slurm.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ring.cluster.admission import preflight, sbatch_test_args
from ring.cluster.slurm import Resources, job_states, pending_reason
from ring.core.config import PretrainConfig
from tests import ROOT
from tests.helpers import TINY_PRETRAIN
from tests.workflow.runs import TINY, job_counts, snakemake, write_grid
from tests.workflow.slurm import (
    CLUSTER,
    SITE,
    SLURM,
    SLURM_TESTS,
    SMALL_SEED0,
    all_completed,
    batch,
    client_within_readme,
    kill_and_rerun_until_reattached,
    launch_cell,
    live_state,
    now,
    recorded_id,
    sacct_jobs,
    start_client,
    wait_for,
    workdir,  # noqa: F401  (the fixture)
)

pytestmark = SLURM_TESTS


def test_client_stays_light():
    """Issue 34 item 7: README's figure is the client's measured size (it said 27 MB while the client held 45.6)."""
    # VmHWM, not ru_maxrss: the latter can report the forking parent's size (pytest holds torch).
    code = (
        "import sys, ring.cluster.launch, ring.cluster.batch; print('torch' in sys.modules, "
        "next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')))"
    )
    imported, rss_kb = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert imported == "False"
    assert client_within_readme(int(rss_kb)), f"the client holds {int(rss_kb) / 1024:.1f} MB; update README.md's figure"


def test_job_array_is_one_sbatch_and_all_tables_reuses_it(workdir):
    write_grid(workdir, "tiny", SMALL_SEED0)
    start = now()
    out = batch(workdir, "submit", "--stage", "pretrain")
    array_id = out.split("job array ")[1].split()[0]
    wait_for(lambda: sacct_jobs("ring-pretrain-tiny", start, workdir), 60, "the array in accounting")
    jobs = sacct_jobs("ring-pretrain-tiny", start, workdir)
    assert {jid.split("_")[0] for jid, _, _ in jobs} == {array_id}  # one sbatch, one array
    status = batch(workdir, "status")
    # Two pretraining rows (the outlook's "pretrain:" line is not a cell); lincls cells not submitted yet.
    assert sum(line.startswith("pretrain ") for line in status.splitlines()) == 2 and "missing" in status
    result = snakemake(workdir, "all_tables", *SLURM)
    assert not [j for j in sacct_jobs("ring-pretrain-", start, workdir) if not j[0].startswith(array_id)]
    counts = job_counts(result.stdout + result.stderr)
    assert counts.get("lincls") == 2
    assert (workdir / "results/tiny/tables/table1.md").exists()


def test_a_finished_job_array_is_collected_by_all_tables(workdir):
    """Issue #11, item 2 (second repro): every array task finished before all_tables runs."""
    write_grid(workdir, "tiny", SMALL_SEED0)
    start = now()
    out = batch(workdir, "submit", "--stage", "pretrain")
    array_id = out.split("job array ")[1].split()[0]
    ids = [f"{array_id}_{i}" for i in range(int(out.split("submitted ")[1].split()[0]))]
    wait_for(lambda: all_completed(ids), 900, "every array task to complete")
    result = snakemake(workdir, "all_tables", *SLURM)
    output = result.stdout + result.stderr
    assert (workdir / "results/tiny/tables/table1.md").exists()
    assert "MissingOutputException" not in output
    resubmitted = [j for j in sacct_jobs("ring-pretrain-", start, workdir) if not j[0].startswith(array_id)]
    print(output[-4000:])
    assert not resubmitted, output[-3000:]


def test_a_cancelled_pending_array_task_is_resubmitted_not_waited_on_forever(workdir):
    """Issue #11, item 3: a record sacct and squeue no longer know is gone after unknown_grace_s."""
    write_grid(workdir, "tiny", SMALL_SEED0)
    site = {
        "slurm": {
            **SITE["slurm"],
            "defaults": {**SITE["slurm"]["defaults"], "array_parallelism": 1, "unknown_grace_s": 5},
        }
    }
    (workdir / "profiles" / "slurm" / "site.yaml").write_text(yaml.safe_dump(site))
    out = batch(workdir, "submit", "--stage", "pretrain")
    array_id = out.split("job array ")[1].split()[0]
    subprocess.run(["scancel", f"{array_id}_1"], check=True, timeout=30)  # pending: parallelism 1
    time.sleep(6)  # past unknown_grace_s, so status may call it gone
    status = batch(workdir, "status")
    cancelled = next(line for line in status.splitlines() if line.startswith("pretrain") and "MoCoRing" in line)
    # The state column, not the line: the log path it names holds the test's own name, "..._pending_array0".
    assert cancelled.split()[4] in ("gone", "failed"), status
    result = snakemake(workdir, "all_tables", *SLURM, timeout=600)
    assert (workdir / "results/tiny/tables/table1.md").exists(), result.stderr[-3000:]


def test_cancel_stops_the_grids_jobs_and_status_reports_them(workdir):
    write_grid(workdir, "tiny", {**TINY, "pretrain": {"all": {**TINY["pretrain"]["all"], "epochs": 50}}})
    batch(workdir, "submit", "--stage", "pretrain")
    status = batch(workdir, "status")
    assert any(state in status for state in ("pending", "running"))
    out = batch(workdir, "cancel")
    assert "cancelled 4 jobs" in out  # 2 methods x 2 seeds
    array_id = json.loads((workdir / "results/tiny/pretrain/digits/IR/seed0/slurm/job.json").read_text())[
        "job_id"
    ].split("_")[0]

    def nothing_left() -> bool:
        # Asked of squeue, not sacct: a task cancelled while still pending may never get an accounting
        # record of its own (issue 11, item 2), so waiting for its CANCELLED state could wait forever.
        out = subprocess.run(
            ["squeue", "-h", "-r", "-o", "%i", "-j", array_id], capture_output=True, text=True, timeout=30
        )
        return not out.stdout.strip() and (out.returncode == 0 or "Invalid job id" in out.stderr)

    wait_for(nothing_left, 60, "the cancellation")


def test_failing_job_fails_its_rule_with_the_log_tail(workdir):
    # A config the plan accepts but the job refuses once it trains: lr near float32's maximum makes the
    # loss non-finite at the second step, whatever the data (ring.engine.health's sentence, exit 1).
    pretrain = {"all": {**TINY["pretrain"]["all"], "lr": 1e38}}
    write_grid(workdir, "tiny", {**TINY, "methods": ["IR"], "seeds": [0], "pretrain": pretrain})
    result = snakemake(workdir, "results/tiny/pretrain/digits/IR/seed0/encoder.pt", *SLURM, check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "failed (" in output and "last lines of" in output
    assert "the training loss became" in output and "the learning rate (lr=1e+38) is likely too high" in output


@pytest.mark.parametrize(
    "override, message",
    [
        ({"partition": "nosuch"}, "invalid partition specified: nosuch"),
        ({"account": "nosuch"}, "Invalid account"),
        ({"gpus_per_node": 8}, "Requested node configuration is not available"),
        ({"time_min": 1}, "time_min=1 is shorter than one checkpoint interval"),
    ],
)
def test_bad_resources_fail_before_submission(override, message):
    with pytest.raises(ValueError, match=message):
        preflight(Resources.from_dict({**CLUSTER, **override}), checkpoint_interval_min=5.0)


def test_every_stages_resources_are_checked_once_before_the_first_submission(workdir):
    """Issue #11, item 5: a bad lincls partition is found before pretraining is submitted, and a
    signal_delay_s that is not shorter than time_min too; each problem is printed once.  The second needs no cluster,
    so the plan refuses it first (issue 50 item 4); the partition is SLURM's word, asked once the plan holds."""
    start = now()
    for stage, values, problem in [
        (
            "pretrain",
            {"time_min": 20, "signal_delay_s": 1500},
            "signal_delay_s=1500 is not shorter than time_min=20 min",
        ),
        ("lincls", {**SITE["slurm"]["lincls"], "partition": "nosuch"}, "invalid partition specified: nosuch"),
    ]:
        site = {"slurm": {**SITE["slurm"], stage: values}}
        (workdir / "profiles" / "slurm" / "site.yaml").write_text(yaml.safe_dump(site))
        result = snakemake(workdir, "all_tables", *SLURM, check=False)
        output = result.stdout + result.stderr
        assert result.returncode != 0
        assert output.count(problem) == 1, output[-3000:]
        assert "nothing was submitted" in output or "Traceback" not in output, output[-3000:]
    assert not sacct_jobs("ring-", start, workdir)


def test_a_drained_partition_is_told_apart_from_resources_slurm_refuses(capsys, cluster_alone):
    """Issue 40 item 6: with the only node drained, `sbatch --test-only` refuses what a plain sbatch queues; the
    check said "SLURM refuses these resources ... fix them in profiles/slurm/site.yaml"."""
    node = subprocess.run(["sinfo", "-h", "-o", "%N"], capture_output=True, text=True, timeout=30).stdout.split()[0]
    subprocess.run(
        ["scontrol", "update", f"nodename={node}", "state=drain", "reason=ring-test"], check=True, timeout=30
    )
    names = []
    try:
        preflight(Resources.from_dict(CLUSTER), checkpoint_interval_min=5.0)  # not refused
        err = capsys.readouterr().err
        assert "has no node that takes a job now" in err and "the jobs are submitted and wait PENDING" in err, err
        with pytest.raises(ValueError, match="Requested node configuration is not available"):
            preflight(Resources.from_dict({**CLUSTER, "gpus_per_node": 8}), checkpoint_interval_min=5.0)
        # Issue 50 item 2: one of partition multi's two nodes drained, the other up; a 2-node job was refused,
        # though a plain sbatch queues it.
        names = sorted(
            set(subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True).stdout.split())
        )
        subprocess.run(["scontrol", "update", f"nodename={names[0]}", "state=drain", "reason=ring-test"], check=True)
        subprocess.run(["scontrol", "update", f"nodename={','.join(names[1:])}", "state=resume"], check=True)
        two = Resources.from_dict({**CLUSTER, "partition": "multi", "nodes": 2})
        preflight(two, checkpoint_interval_min=5.0)
        err = capsys.readouterr().err
        assert f"has 1 node(s) that take a job now where the job needs 2 ({names[0]}: drain)" in err, err
        queued = subprocess.run(
            ["sbatch", "--parsable", *sbatch_test_args(two)[2:]], capture_output=True, text=True, timeout=60
        )
        assert queued.returncode == 0, queued.stderr
        job_id = queued.stdout.strip().split(";")[0]
        try:  # it pends, with squeue's reason once the scheduler has looked at it ("None" before: not shown)
            deadline, reason = time.monotonic() + 60, ""
            while not reason and time.monotonic() < deadline:
                time.sleep(1)
                reason = pending_reason(job_id)
            assert reason and job_states([job_id])[job_id] == "PENDING", reason
        finally:
            subprocess.run(["scancel", job_id], timeout=30)
        with pytest.raises(ValueError, match="SLURM refuses this stage's resources"):  # no 3 nodes to wait for
            preflight(Resources.from_dict({**CLUSTER, "partition": "multi", "nodes": 3}), checkpoint_interval_min=5.0)
    finally:
        # Every node this test drained (the first sinfo line's, multi's first) that is still drained.
        drained = subprocess.run(["sinfo", "-h", "-t", "drain", "-N", "-o", "%N"], capture_output=True, text=True)
        for name in sorted({*node.split(","), *names[:1]} & set(drained.stdout.split())):
            subprocess.run(["scontrol", "update", f"nodename={name}", "state=resume"], check=True, timeout=30)


def test_an_unreachable_controller_is_retried_not_reported_as_bad_resources(tmp_path, cluster_alone):
    """Issue #11, item 4: slurmctld down when a cell is launched, back some seconds later."""
    ctld = ["bash", str(ROOT / ".ci" / "slurm" / "ctld.sh")]
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "IR" / "seed0"
    subprocess.run([*ctld, "stop"], check=True, timeout=60)
    try:
        proc = launch_cell(
            cell, PretrainConfig(method="IR", **{**TINY_PRETRAIN, "epochs": 1, "resize": 16, "crop": 16}), CLUSTER
        )
        time.sleep(15)  # the client meets the dead controller and retries
    finally:
        subprocess.run([*ctld, "start"], check=True, timeout=120)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    # sbatch itself waits up to 60 s for a controller, so whether the client prints its own retry
    # line depends on timing; what must hold is that the outage is never reported as bad resources.
    assert "refuses" not in out, out
    # Issue 34 item 7: a retry line says which cell waits; SLURM's own error lines only under --verbose.
    retries = [line for line in out.splitlines() if "unreachable while" in line]
    assert all(line.startswith(f"ring: {cell}: ") and "sbatch: error" not in line for line in retries), out
    assert (cell / "encoder.pt").exists()


def test_a_job_whose_step_srun_could_not_start_is_submitted_again_and_finishes(tmp_path, cluster_alone):
    """srun asks slurmctld for the job's step: away longer than srun waits (about 10 s), the batch script ends FAILED
    before the stage ran (the chaos test met this once, a requeued job starting during the controller's restart).
    That is the cluster's doing: the client says so, submits the cell once more, and the cell finishes."""
    ctld = ["bash", str(ROOT / ".ci" / "slurm" / "ctld.sh")]
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "IR" / "seed0"
    cfg = PretrainConfig(method="IR", **{**TINY_PRETRAIN, "epochs": 1, "resize": 16, "crop": 16})
    start = now()
    # The job's setup holds srun back 8 s, so that the controller is already away when srun asks it for the step.
    proc = launch_cell(cell, cfg, {**CLUSTER, "setup": [*CLUSTER.get("setup", []), "sleep 8"]})
    wait_for(
        lambda: (cell / "slurm" / "job.json").exists() and live_state(recorded_id(cell)) == "RUNNING",
        300,
        "the job to start",
    )
    subprocess.run([*ctld, "stop"], check=True, timeout=60)
    try:
        time.sleep(25)  # past the setup's 8 s and srun's 10 s of retries
    finally:
        subprocess.run([*ctld, "start"], check=True, timeout=120)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    assert "ended FAILED before its stage started: srun could not reach SLURM's controller" in out, out
    assert (cell / "encoder.pt").exists()
    assert len(sacct_jobs("ring-pretrain-digits-IR-seed0", start, tmp_path)) == 2


def test_two_clients_of_one_cell_submit_one_job(tmp_path):
    cell = tmp_path / "results" / "g" / "pretrain" / "digits" / "IRing" / "seed0"
    cfg = PretrainConfig(method="IRing", **{**TINY_PRETRAIN, "epochs": 1, "resize": 16, "crop": 16})
    start = now()
    first = launch_cell(cell, cfg, CLUSTER)
    second = launch_cell(cell, cfg, CLUSTER)
    outputs = [p.communicate(timeout=600)[0] for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outputs
    assert sum(o.count("submitted SLURM job") for o in outputs) == 1
    assert any("another client is attached to this cell; waiting for it" in o for o in outputs)
    assert len(sacct_jobs("ring-pretrain-digits-IRing-seed0", start, tmp_path)) == 1


def test_killed_client_reattaches_without_a_second_submission(workdir):
    write_grid(workdir, "tiny", SMALL_SEED0)
    start, cell = now(), workdir / "results/tiny/pretrain/digits/IR/seed0"
    proc = start_client(workdir)
    wait_for((cell / "slurm" / "job.json").exists, 300, "the first submission")
    job_id = recorded_id(cell)
    # Held (SIGSTOP) while the client is killed and the rerun starts: this tiny job can end sooner than Snakemake
    # starts again on a loaded machine (seen under two pytest-xdist workers), and a job that ended is collected, not
    # re-attached to (test_jobs_that_finish_while_no_client_watches_are_collected).
    wait_for(lambda: live_state(job_id) == "RUNNING", 300, "the job to start")
    subprocess.run(["scontrol", "suspend", job_id], check=True, timeout=30)
    assert live_state(job_id) == "SUSPENDED"
    rerun = kill_and_rerun_until_reattached(workdir, proc, cell, job_id, "all_tables")
    subprocess.run(["scontrol", "resume", job_id], check=True, timeout=30)
    out, _ = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, out[-3000:]
    names = [name for _, name, _ in sacct_jobs("ring-pretrain-", start, workdir)]
    assert sorted(names) == ["ring-pretrain-digits-IR-seed0", "ring-pretrain-digits-MoCoRing-seed0"]


def test_a_rerun_in_a_jobs_last_seconds_collects_its_output_without_a_new_job(workdir):
    """Issue 34 item 1: the client is killed after the job wrote encoder.pt, while the job still runs; `--unlock` and a
    rerun then delete that encoder as incomplete, and the launcher re-attaches to the running job.  When it COMPLETES,
    the launcher puts the encoder back from the copy the job kept (it used to fail: "COMPLETED without writing")."""
    write_grid(workdir, "tiny", SMALL_SEED0)
    start, cell = now(), workdir / "results/tiny/pretrain/digits/IR/seed0"
    target = "results/tiny/pretrain/digits/IR/seed0/encoder.pt"
    proc = start_client(workdir, target)
    wait_for((cell / "encoder.pt").exists, 600, "the encoder", poll_s=0.02)
    job_id = recorded_id(cell)
    # The job ends about a second after its encoder appears, sooner than Snakemake starts again: it is held in
    # those last seconds (SIGSTOP) while the client is killed and the rerun re-attaches, then let go.
    subprocess.run(["scontrol", "suspend", job_id], check=True, timeout=30)
    written = (cell / "encoder.pt").read_bytes()
    rerun = kill_and_rerun_until_reattached(workdir, proc, cell, job_id, target)
    assert not (cell / "encoder.pt").exists()  # Snakemake's rerun deleted the running job's output
    subprocess.run(["scontrol", "resume", job_id], check=True, timeout=30)
    out, _ = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, out[-3000:]
    assert f"SLURM job {job_id} COMPLETED; restored" in out, out[-3000:]
    assert [job[0] for job in sacct_jobs("ring-pretrain-", start, workdir)] == [job_id]  # no new job
    assert (cell / "encoder.pt").read_bytes() == written


def kill_the_client_once(workdir: Path, cells: list[Path], started, what: str, log: Path) -> None:
    """A client of all_tables (its output to ``log``) killed with its waiting launchers once ``started(cell)`` holds for
    every cell, the jobs recorded in those cells left to complete unwatched, then the workdir unlocked."""
    client = start_client(workdir, log=log)
    wait_for(lambda: all(started(cell) for cell in cells), 600, what)
    os.killpg(client.pid, signal.SIGKILL)
    client.wait()
    ids = [recorded_id(cell) for cell in cells]
    wait_for(lambda: all_completed(ids), 600, f"the orphaned jobs ({what}) to complete")
    snakemake(workdir, "--unlock")


def test_jobs_that_finish_while_no_client_watches_are_collected(workdir, tmp_path):
    """Issue #11, item 2 (first repro): the client is killed once both pretraining jobs are submitted, the jobs
    complete, the next client collects them.  Issue 34, "Why" item 4: that client is killed in turn while the linear
    evaluations run (their cells' run.json, written when the stage starts, is watched), the jobs complete, the third
    collects them: rc 0, no job submitted again, each metrics.json the bytes its job wrote (put back from the copy it
    kept, checksum verified)."""
    start, methods = now(), ("IR", "MoCoRing")
    pretrain = [workdir / f"results/tiny/pretrain/digits/{m}/seed0" for m in methods]
    lincls = [workdir / f"results/tiny/lincls/digits/{m}/seed0" for m in methods]

    def submitted_job(cell: Path) -> bool:
        return (cell / "slurm" / "job.json").exists()

    kill_the_client_once(workdir, pretrain, submitted_job, "both submissions", tmp_path / "first.log")
    second = tmp_path / "second.log"
    running = "both linear evaluations to start"
    kill_the_client_once(workdir, lincls, lambda c: submitted_job(c) and (c / "run.json").exists(), running, second)
    # Snakemake deleted the incomplete outputs: each cell's encoder is restored from the copy its job kept (checksum
    # verified, torch-free), and no pretraining job is submitted again (issue #22, item 8).
    output = second.read_text()
    assert "MissingOutputException" not in output
    assert output.count("COMPLETED meanwhile; restored") == 2, output[-3000:]
    assert all((cell / "encoder.pt").exists() for cell in pretrain)
    written = {c: (c / "metrics.json").read_bytes() for c in lincls}
    result = snakemake(workdir, "all_tables", *SLURM)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and (workdir / "results/tiny/tables/table1.md").exists()
    # Each evaluation Snakemake reran as incomplete (at least one: the client died while both ran) is collected.
    rerun_jobs = job_counts(output).get("lincls", 0)
    assert rerun_jobs >= 1 and "MissingOutputException" not in output, output[-3000:]
    assert output.count("the evaluation of this encoder with this config is complete") == rerun_jobs, output[-3000:]
    assert {c: (c / "metrics.json").read_bytes() for c in lincls} == written
    assert (
        len(sacct_jobs("ring-lincls-", start, workdir)) == 2 and len(sacct_jobs("ring-pretrain-", start, workdir)) == 2
    )
    # A second rerun has nothing to do (the cells are complete now).
    assert "Nothing to be done" in (lambda r: r.stdout + r.stderr)(snakemake(workdir, "all_tables", *SLURM))
