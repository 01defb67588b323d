"""ring-bench on a real SLURM cluster: one node, and a second one for a cell across nodes (started by
.ci/slurm/start.sh, stopped at the end).

These tests never skip: a machine without the cluster fails them, as CI must.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import torch
import yaml

from ring.cluster.admission import preflight
from ring.cluster.batch import load_config, merge
from ring.cluster.jobs import IGNORED_STOP
from ring.cluster.slurm import Resources, stage_resources
from ring.core import config as C
from ring.engine.checkpoint import safe_load
from tests import ROOT
from tests.documented import current_test, section, shell_commands
from tests.helpers import TINY_PRETRAIN, copy_workflow, launch_command
from tests.workflow.runs import TINY, entry, job_counts, snakemake, write_grid

pytestmark = (
    pytest.mark.slow
)  # a real SLURM cluster, minutes of jobs: outside the developer loop (pytest -m 'not slow')


# The test cluster's site values, written to profiles/slurm/site.yaml as a user would (layered over
# the SHIPPED cluster.yaml): partition gpu, account ring, and node sizes it can hold (2 CPUs, ~20 GB,
# 2 fake GPUs); poll_s 1 keeps the tests short.
SITE = {
    "slurm": {
        "defaults": {"partition": "gpu", "account": "ring", "cpus_per_task": 1, "mem_gb": 2, "poll_s": 1},
        "lincls": {"mem_gb": 2},
        "transfer": {"mem_gb": 2},
    }
}
TINY_SEED0 = {**TINY, "seeds": [0]}  # the SLURM tests' grid: 2 pretraining and 2 linear-evaluation cells
SHIPPED = [ROOT / "ring" / "resources" / "config.yaml", ROOT / "ring" / "resources" / "cluster.yaml"]


def shipped_resources(stage: str) -> dict:
    """A stage's resources as the profile resolves them: shipped cluster.yaml, then the site file."""
    return stage_resources(merge(load_config(SHIPPED), SITE)["slurm"], stage)


CLUSTER = shipped_resources("pretrain")
# The profile with the test grid (after the target: --config takes every argument after it);
# cluster values come from the copy's site.yaml.
SLURM = ("--profile", "profiles/slurm", "--config", "grid=tiny")
BATCH_CONFIGS = [
    "--configfile",
    "ring/resources/config.yaml",
    "ring/resources/cluster.yaml",
    "profiles/slurm/site.yaml",
]


def start_client(workdir: Path, *targets: str, log: Path | None = None) -> subprocess.Popen:
    """A Snakemake client of the SLURM profile in the background (``targets``, all_tables by default), in a session of
    its own so that ``os.killpg`` kills it with its waiting launchers and not the test; its output goes to ``log``,
    else nowhere."""
    cmd = [sys.executable, "-m", "snakemake", *(targets or ("all_tables",)), *SLURM]
    if log is None:
        return subprocess.Popen(
            cmd, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
    with open(log, "w") as sink:  # the client holds its own copy of the file: ours can close
        return subprocess.Popen(cmd, cwd=workdir, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)


@pytest.fixture(scope="module", autouse=True)
def cluster():
    subprocess.run(["bash", str(ROOT / ".ci" / "slurm" / "start.sh")], check=True, timeout=900)
    yield
    subprocess.run(["bash", str(ROOT / ".ci" / "slurm" / "stop.sh")], check=True, timeout=300)


@pytest.fixture
def workdir(tmp_path) -> Path:
    copy_workflow(tmp_path)
    (tmp_path / "profiles" / "slurm" / "site.yaml").write_text(yaml.safe_dump(SITE))
    write_grid(tmp_path, "tiny", TINY_SEED0)
    return tmp_path


def sacct_jobs(name_prefix: str, since: str, workdir: Path | None = None) -> list[tuple[str, str, str]]:
    """(JobID, JobName, State) of allocations submitted since ``since`` whose name starts with the prefix, and that
    were submitted from ``workdir`` when given (sacct -S also lists jobs submitted earlier that still ran then, and
    a cluster shared by several test runs has their jobs of the same names)."""
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-S", since, "-o", "JobID,JobName,State,Submit,WorkDir"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    rows = [line.split("|", 4) for line in out.splitlines()]
    return [
        tuple(row[:3])
        for row in rows
        if row[1].startswith(name_prefix) and row[3] >= since and (workdir is None or row[4] == str(workdir))
    ]


def batch(workdir: Path, *command: str) -> str:
    """``ring.cluster.batch COMMAND`` on the workdir's tiny grid with the SLURM profile's configs: its output."""
    where = ["--grid", "tiny", *BATCH_CONFIGS, "--grids-dir", "ring/resources/grids"]
    cmd = [sys.executable, "-m", "ring.cluster.batch", *command, *where]
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, check=True, timeout=120).stdout


def now() -> str:
    return datetime.now().strftime("%Y-%m-%dT%H:%M:%S")


def launch_cell(cell: Path, cfg: C.PretrainConfig, resources: dict) -> subprocess.Popen:
    cell.mkdir(parents=True, exist_ok=True)
    C.save(cfg, cell / "config.yaml")
    cmd = launch_command(cell, "--launcher", "slurm", "--resources", json.dumps(resources))
    return subprocess.Popen(
        cmd,
        cwd=cell.parents[5],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def wait_for(predicate, timeout: float, what: str, poll_s: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(poll_s)


def log_lines(cell: Path) -> int:
    path = cell / "log.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def same_weights(a: Path, b: Path) -> bool:
    sa, sb = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.fixture(scope="module")
def reference(module_tmp) -> Path:
    """An uninterrupted SLURM run of the interruption tests' cell."""
    cell = module_tmp("ref") / "results" / "t" / "pretrain" / "digits" / "IRing" / "seed0"
    proc = launch_cell(cell, C.PretrainConfig(method="IRing", **{**TINY_PRETRAIN, "epochs": 3}), CLUSTER)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    return cell / "encoder.pt"


def readme_client_mb() -> float:
    """The waiting client's resident memory as README.md states it."""
    match = re.search(r"`ring.cluster.launch` process holds about (\d+) MB resident", (ROOT / "README.md").read_text())
    assert match, "README.md no longer states the waiting client's memory (the sentence this test checks)"
    return float(match.group(1))


def client_within_readme(rss_kb: int) -> bool:
    """README's figure is a measurement: within 15% of what is measured (imports and allocator vary that little)."""
    return abs(rss_kb / 1024 - readme_client_mb()) <= 0.15 * readme_client_mb()


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


def test_usr2_checkpoints_at_a_step_boundary_requeues_and_resumes(tmp_path, reference):
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "IRing" / "seed0"
    proc = launch_cell(cell, C.PretrainConfig(method="IRing", **{**TINY_PRETRAIN, "epochs": 3}), CLUSTER)
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
    assert same_weights(reference, cell / "encoder.pt")
    assert client_within_readme(rss_kb), f"the waiting client holds {rss_kb / 1024:.1f} MB; update README.md's figure"


def test_usr2_after_the_export_ends_the_job_completed(tmp_path, reference):
    """Issue 34 item 3: SLURM's USR2 from the moment export.json exists until the job ends (sent every 50 ms, so
    some land in the interpreter's shutdown, where Python had put back the default action: the task died of
    the signal and the job FAILED)."""
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "IRing" / "seed0"
    proc = launch_cell(cell, C.PretrainConfig(method="IRing", **{**TINY_PRETRAIN, "epochs": 3}), CLUSTER)
    wait_for((cell / "export.json").exists, 600, "the export")
    job_id = json.loads((cell / "slurm" / "job.json").read_text())["job_id"]
    sent, deadline = 0, time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        sent += subprocess.run(["scancel", "--signal=USR2", job_id], capture_output=True, timeout=30).returncode == 0
        time.sleep(0.05)
    out, _ = proc.communicate(timeout=600)
    assert sent >= 1 and proc.returncode == 0, out
    assert sacct_states([job_id]) == ["COMPLETED"], out
    assert accounted_runs_of(job_id) == 1  # never requeued
    segments = json.loads((cell / "provenance.json").read_text())["segments"]
    assert [s["outcome"] for s in segments] == ["completed"]
    # Provenance tells what happened: the signals the job noted, ignored, are counted in its segment.  (Those that
    # land in the interpreter's shutdown are ignored unnoted: no Python code runs there; on the local SLURM every
    # one did, scancel taking longer than the job's last steps.)
    noted = (cell / "slurm" / f"{job_id}_0_log.err").read_text().count(IGNORED_STOP)
    assert segments[0].get("stop_signals_after_outputs", 0) == noted
    assert same_weights(reference, cell / "encoder.pt")


def test_external_requeue_resumes_from_the_periodic_checkpoint(tmp_path, reference):
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "IRing" / "seed0"
    cfg = C.PretrainConfig(method="IRing", **{**TINY_PRETRAIN, "epochs": 3, "checkpoint_interval_min": 0.0})
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
    assert same_weights(reference, cell / "encoder.pt")


@pytest.fixture(scope="module")
def local_run(module_tmp) -> Path:
    """The workdir's grid (tiny, seed 0) run through the local profile, once for the module: the
    reference of the SLURM runs' tables and encoders."""
    local = module_tmp("local")
    copy_workflow(local)
    write_grid(local, "tiny", TINY_SEED0)
    snakemake(local, "--profile", "profiles/local", "all_tables", "--config", "grid=tiny")
    return local


def test_slurm_tables_equal_local_tables(workdir, local_run):
    start = now()
    result = snakemake(workdir, "all_tables", *SLURM)
    assert "submitted SLURM job" in result.stdout + result.stderr
    assert len(sacct_jobs("ring-", start)) == 4  # 2 pretraining + 2 linear-evaluation cells
    for table in ("table1.csv", "table1.md"):
        assert (workdir / "results/tiny/tables" / table).read_text() == (
            local_run / "results/tiny/tables" / table
        ).read_text()
    stages = [
        line.split(",")[0] for line in (workdir / "results/tiny/tables/gpu_hours.csv").read_text().splitlines()[1:]
    ]
    assert sorted(stages) == ["lincls", "lincls", "pretrain", "pretrain"]


def test_killed_client_reattaches_without_a_second_submission(workdir):
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


def test_job_array_is_one_sbatch_and_all_tables_reuses_it(workdir):
    start = now()
    out = batch(workdir, "submit", "--stage", "pretrain")
    array_id = out.split("job array ")[1].split()[0]
    wait_for(lambda: sacct_jobs("ring-pretrain-tiny", start), 60, "the array in accounting")
    jobs = sacct_jobs("ring-pretrain-tiny", start)
    assert {jid.split("_")[0] for jid, _, _ in jobs} == {array_id}  # one sbatch, one array
    status = batch(workdir, "status")
    # Two pretraining rows (the outlook's "pretrain:" line is not a cell); lincls cells not submitted yet.
    assert sum(line.startswith("pretrain ") for line in status.splitlines()) == 2 and "missing" in status
    result = snakemake(workdir, "all_tables", *SLURM)
    assert not [j for j in sacct_jobs("ring-pretrain-", start) if not j[0].startswith(array_id)]
    counts = job_counts(result.stdout + result.stderr)
    assert counts.get("lincls") == 2
    assert (workdir / "results/tiny/tables/table1.md").exists()


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


def test_a_drained_partition_is_told_apart_from_resources_slurm_refuses(capsys):
    """Issue 40 item 6: with the only node drained, `sbatch --test-only` refuses what a plain sbatch queues; the
    check said "SLURM refuses these resources ... fix them in profiles/slurm/site.yaml"."""
    node = subprocess.run(["sinfo", "-h", "-o", "%N"], capture_output=True, text=True, timeout=30).stdout.split()[0]
    subprocess.run(
        ["scontrol", "update", f"nodename={node}", "state=drain", "reason=ring-test"], check=True, timeout=30
    )
    try:
        preflight(Resources.from_dict(CLUSTER), checkpoint_interval_min=5.0)  # not refused
        err = capsys.readouterr().err
        assert "has no node that takes a job now" in err and "the jobs are submitted and wait PENDING" in err, err
        with pytest.raises(ValueError, match="Requested node configuration is not available"):
            preflight(Resources.from_dict({**CLUSTER, "gpus_per_node": 8}), checkpoint_interval_min=5.0)
    finally:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], check=True, timeout=30)


def test_two_gpu_cell_runs_ddp_from_submitits_environment(tmp_path):
    """gpus_per_node=2: two tasks, one per (fake) GPU, ranks from submitit; gloo on this CPU machine."""
    # Two steps, from the same start (the epoch-0 snapshot): as in tests/engine/test_distributed.py, the updates are
    # compared.
    cfg = C.PretrainConfig(
        method="MoCoRing",
        **{
            **TINY_PRETRAIN,
            "epochs": 1,
            "knn_every": 0,
            "bn_groups": 2,
            "batch_size": 640,
            "queue_size": 1280,
            "snapshot_epochs": [0],
        },
    )
    single = tmp_path / "results" / "t" / "pretrain" / "digits" / "MoCoRing" / "seed0"
    proc = launch_cell(single, cfg, CLUSTER)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    double = tmp_path / "results" / "t" / "pretrain" / "digits" / "MoCoRing" / "seed1"
    proc = launch_cell(double, cfg, {**CLUSTER, "gpus_per_node": 2})
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    a, b = (torch.load(c / "encoder.pt", weights_only=True) for c in (single, double))
    start = {k.removeprefix("trunk."): v for k, v in safe_load(single / "snapshot_epoch0.pt")["encoder"].items()}
    keys = [k for k in a if "running_" not in k and "num_batches_tracked" not in k]
    step = [torch.cat([(state[k] - start[k]).flatten() for k in keys]) for state in (a, b)]
    # One process sums each BatchNorm group's statistics in one call, each rank its own group: rounding, which
    # digits' flat backgrounds amplify to about 0.5% of two steps' update (tests/engine/test_distributed.py
    # measures it).
    assert (step[0] - step[1]).norm() <= 0.03 * step[0].norm()
    assert json.loads((double / "provenance.json").read_text())["segments"][0]["outcome"] == "completed"


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


def sacct_states(job_ids: list[str]) -> list[str]:
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", ",".join(job_ids), "-o", "JobID,State"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    return [line.split("|")[1].split()[0] for line in out.splitlines() if line.split("|")[0] in job_ids]


def all_completed(job_ids: list[str]) -> bool:
    states = sacct_states(job_ids)
    return len(states) == len(job_ids) and set(states) == {"COMPLETED"}


def test_jobs_that_finish_while_no_client_watches_are_collected(workdir):
    """Issue #11, item 2 (first repro): kill the client, let the jobs complete, unlock, rerun."""
    start = now()
    proc = start_client(workdir)
    records = [workdir / f"results/tiny/pretrain/digits/{m}/seed0/slurm/job.json" for m in ("IR", "MoCoRing")]
    wait_for(lambda: all(r.exists() for r in records), 300, "both submissions")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    ids = [json.loads(r.read_text())["job_id"] for r in records]
    wait_for(lambda: all_completed(ids), 600, "the orphaned jobs to complete")
    snakemake(workdir, "--unlock")
    result = snakemake(workdir, "all_tables", *SLURM)
    output = result.stdout + result.stderr
    assert (workdir / "results/tiny/tables/table1.md").exists()
    for cell in ("IR", "MoCoRing"):
        assert (workdir / f"results/tiny/pretrain/digits/{cell}/seed0/encoder.pt").exists()
    # Snakemake deleted the incomplete outputs: each cell's encoder is restored from the copy its job kept
    # (checksum verified, torch-free), and no pretraining job is submitted again (issue #22, item 8).
    assert "MissingOutputException" not in output
    assert output.count("COMPLETED meanwhile; restored") == 2, output[-3000:]
    assert len(sacct_jobs("ring-pretrain-", start)) == 2
    # A second rerun has nothing to do (the cells are complete now).
    assert "Nothing to be done" in (lambda r: r.stdout + r.stderr)(snakemake(workdir, "all_tables", *SLURM))


def test_a_rerun_in_a_jobs_last_seconds_collects_its_output_without_a_new_job(workdir):
    """Issue 34 item 1: the client is killed after the job wrote encoder.pt, while the job still runs; `--unlock` and a
    rerun then delete that encoder as incomplete, and the launcher re-attaches to the running job.  When it COMPLETES,
    the launcher puts the encoder back from the copy the job kept (it used to fail: "COMPLETED without writing")."""
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


def test_linear_evaluations_that_finish_while_no_client_watches_are_collected(workdir):
    """Issue 34, "Why" item 4: the client is killed while the linear evaluations run (their cells' run.json, written
    when the stage starts, is watched), the jobs COMPLETE, the rerun collects them: rc 0, no lincls job submitted
    again, each metrics.json the bytes its job wrote (put back from the copy it kept, checksum verified)."""
    start = now()
    proc = start_client(workdir)
    cells = [workdir / f"results/tiny/lincls/digits/{m}/seed0" for m in ("IR", "MoCoRing")]
    wait_for(
        lambda: all((c / "slurm" / "job.json").exists() and (c / "run.json").exists() for c in cells),
        600,
        "both linear evaluations to start",
    )
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    ids = [json.loads((c / "slurm" / "job.json").read_text())["job_id"] for c in cells]
    wait_for(lambda: all_completed(ids), 600, "the orphaned linear evaluations to complete")
    written = {c: (c / "metrics.json").read_bytes() for c in cells}
    snakemake(workdir, "--unlock")
    result = snakemake(workdir, "all_tables", *SLURM)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and (workdir / "results/tiny/tables/table1.md").exists()
    # Each evaluation Snakemake reran as incomplete (at least one: the client died while both ran) is collected.
    rerun_jobs = job_counts(output).get("lincls", 0)
    assert rerun_jobs >= 1 and "MissingOutputException" not in output, output[-3000:]
    assert output.count("the evaluation of this encoder with this config is complete") == rerun_jobs, output[-3000:]
    assert {c: (c / "metrics.json").read_bytes() for c in cells} == written
    assert len(sacct_jobs("ring-lincls-", start)) == 2 and len(sacct_jobs("ring-pretrain-", start)) == 2


def test_a_finished_job_array_is_collected_by_all_tables(workdir):
    """Issue #11, item 2 (second repro): every array task finished before all_tables runs."""
    start = now()
    out = batch(workdir, "submit", "--stage", "pretrain")
    array_id = out.split("job array ")[1].split()[0]
    ids = [f"{array_id}_{i}" for i in range(int(out.split("submitted ")[1].split()[0]))]
    wait_for(lambda: all_completed(ids), 900, "every array task to complete")
    result = snakemake(workdir, "all_tables", *SLURM)
    output = result.stdout + result.stderr
    assert (workdir / "results/tiny/tables/table1.md").exists()
    assert "MissingOutputException" not in output
    resubmitted = [j for j in sacct_jobs("ring-pretrain-", start) if not j[0].startswith(array_id)]
    print(output[-4000:])
    assert not resubmitted, output[-3000:]


def test_every_stages_resources_are_checked_once_before_the_first_submission(workdir):
    """Issue #11, item 5: a bad lincls partition is found before pretraining is submitted, and a
    signal_delay_s that is not shorter than time_min too; each problem is printed once."""
    site = {
        "slurm": {
            **SITE["slurm"],
            "lincls": {**SITE["slurm"]["lincls"], "partition": "nosuch"},
            "pretrain": {"time_min": 2, "signal_delay_s": 120},
        }
    }
    (workdir / "profiles" / "slurm" / "site.yaml").write_text(yaml.safe_dump(site))
    start = now()
    result = snakemake(workdir, "all_tables", *SLURM, check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert output.count("invalid partition specified: nosuch") == 1, output[-3000:]
    assert output.count("signal_delay_s=120 is not shorter than time_min=2 min") == 1, output[-3000:]
    assert "nothing was submitted" in output and not sacct_jobs("ring-", start)


def test_a_cancelled_pending_array_task_is_resubmitted_not_waited_on_forever(workdir):
    """Issue #11, item 3: a record sacct and squeue no longer know is gone after unknown_grace_s."""
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
    assert "pending" not in cancelled and ("gone" in cancelled or "failed" in cancelled), status
    result = snakemake(workdir, "all_tables", *SLURM, timeout=600)
    assert (workdir / "results/tiny/tables/table1.md").exists(), result.stderr[-3000:]


def test_an_unreachable_controller_is_retried_not_reported_as_bad_resources(tmp_path):
    """Issue #11, item 4: slurmctld down when a cell is launched, back some seconds later."""
    ctld = ["bash", str(ROOT / ".ci" / "slurm" / "ctld.sh")]
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "IR" / "seed0"
    subprocess.run([*ctld, "stop"], check=True, timeout=60)
    try:
        proc = launch_cell(cell, C.PretrainConfig(method="IR", **{**TINY_PRETRAIN, "epochs": 1}), CLUSTER)
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


def test_a_job_killed_for_good_is_in_the_provenance_of_the_cells_next_job(tmp_path, reference):
    """Issue #11, item 6: `scancel --signal=KILL` ends the job without a requeue and without its segment;
    the cell's next job resumes, and provenance has the killed run from sacct beside the new one."""
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "IRing" / "seed0"
    cfg = C.PretrainConfig(method="IRing", **{**TINY_PRETRAIN, "epochs": 3, "checkpoint_interval_min": 0.0})
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
    assert same_weights(reference, cell / "encoder.pt")


# -- chaos: every disruption of issue #11 in one run of the tiny grid through the shipped profile ----------
CHAOS_SEED = int(os.environ.get("RING_CHAOS_SEED", "11"))  # another seed: other moments, same assertions
# What a launcher prints when it submits a cell again for a reason the issue allows: its output was
# deleted by Snakemake's rerun of an incomplete rule, or its job is gone (the cancelled pending task).
JUSTIFIED = ("COMPLETED but", "treating it as gone", "ended CANCELLED", "cancelled before it ran")


class Chaos:
    """The seeded disruptions' clock and log: every event with its second since the start."""

    def __init__(self, seed: int, path: Path):
        self.rng, self.path, self.t0 = random.Random(seed), path, time.monotonic()
        self.say(f"seed {seed} (RING_CHAOS_SEED)")

    def say(self, line: str) -> None:
        line = f"chaos {time.monotonic() - self.t0:6.1f} s: {line}"
        print(line, flush=True)
        with open(self.path, "a") as fh:
            fh.write(line + "\n")


def kill_and_rerun_until_reattached(workdir: Path, client, cell: Path, job_id: str, target: str) -> subprocess.Popen:
    """The client killed with its waiting launchers (the jobs live on), the workdir unlocked and ``target`` rerun:
    the rerun, once its launcher for ``cell`` says it re-attached to ``job_id`` (its output on a pipe)."""
    os.killpg(client.pid, signal.SIGKILL)
    client.wait()
    snakemake(workdir, "--unlock")
    rerun = subprocess.Popen(
        [sys.executable, "-m", "snakemake", target, *SLURM],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    log = cell / "pretrain.log"
    wait_for(lambda: log.exists() and f"re-attached to SLURM job {job_id}" in log.read_text(), 300, "the re-attach")
    return rerun


def recorded_id(cell: Path) -> str | None:
    path = cell / "slurm" / "job.json"
    return json.loads(path.read_text())["job_id"] if path.exists() else None


def live_state(job_id: str | None) -> str | None:
    """squeue's state of a live job (None when it is not queued or running; needs the controller)."""
    if job_id is None:
        return None
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=30)
    return out.stdout.split()[0] if out.returncode == 0 and out.stdout.split() else None


def accounted_runs_of(job_id: str) -> int:
    out = subprocess.run(
        ["sacct", "-n", "-X", "-D", "-P", "-j", job_id, "-o", "JobID"], capture_output=True, text=True, timeout=30
    ).stdout
    return sum(line == job_id for line in out.splitlines())


def training_started(cell: Path) -> bool:
    """The stage's per-step TensorBoard run exists: ring.cluster.jobs has replaced submitit's USR2 handler, so
    USR2 now stops at a step boundary (before that, python's default would kill the step)."""
    return any((cell / "steps").glob("events.out.tfevents.*"))


def submissions_per_cell(since: str, array_tasks: dict[str, str]) -> dict[str, int]:
    """sbatch submissions per cell (``stage/method``) from sacct: single jobs by name, array tasks by the
    cells their records named right after submission; a requeue keeps its job id and is not counted."""
    counts: dict[str, int] = {}
    for job_id, name, _ in sacct_jobs("ring-", since):
        if job_id in array_tasks:
            cell = array_tasks[job_id]
        else:
            stage, _, method, _ = name.removeprefix("ring-").split("-")
            cell = f"{stage}/{method}"
        counts[cell] = counts.get(cell, 0) + 1
    return counts


def test_chaos_on_the_cluster_loses_nothing_and_submits_nothing_twice(workdir, local_run, tmp_path):
    """Issue #11, item 8: a cancelled pending array task, USR2 and an external requeue at seeded random
    moments, slurmctld stopped and restarted, the client killed mid-run and rerun after its jobs
    finished; then the tables are byte-equal to the local run's and the encoders equal its encoders."""
    chaos = Chaos(CHAOS_SEED, tmp_path / "chaos.log")
    site = {
        "slurm": {
            **SITE["slurm"],
            "defaults": {**SITE["slurm"]["defaults"], "array_parallelism": 1, "unknown_grace_s": 5},
        }
    }
    (workdir / "profiles" / "slurm" / "site.yaml").write_text(yaml.safe_dump(site))
    methods = ("IR", "MoCoRing")
    pretrain = {m: workdir / f"results/tiny/pretrain/digits/{m}/seed0" for m in methods}
    lincls = {m: workdir / f"results/tiny/lincls/digits/{m}/seed0" for m in methods}
    ctld = ["bash", str(ROOT / ".ci" / "slurm" / "ctld.sh")]
    start = now()

    # 1. The pretraining cells as one array, one task at a time; the second, still pending, is cancelled.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "ring.cluster.batch",
            "submit",
            "--stage",
            "pretrain",
            "--grid",
            "tiny",
            *BATCH_CONFIGS,
            "--grids-dir",
            "ring/resources/grids",
        ],
        cwd=workdir,
        check=True,
        timeout=120,
        capture_output=True,
    )
    array_tasks = {recorded_id(pretrain[m]): f"pretrain/{m}" for m in methods}
    cancelled = recorded_id(pretrain["MoCoRing"])
    assert live_state(cancelled) == "PENDING"
    subprocess.run(["scancel", cancelled], check=True, timeout=30)
    chaos.say(f"array {sorted(array_tasks)}: cancelled the pending task {cancelled}")

    # 2. The client; USR2 to one pretraining job and an external requeue of the other, each at a random
    # moment of its training (USR2) or of its run (requeue).
    client_log = tmp_path / "client1.log"
    client = start_client(workdir, log=client_log)
    usr2_cell, requeue_cell = chaos.rng.sample(methods, 2)
    delays = {usr2_cell: chaos.rng.uniform(0, 3), requeue_cell: chaos.rng.uniform(1, 8)}
    chaos.say(
        f"USR2 to {usr2_cell} {delays[usr2_cell]:.1f} s into its training; "
        f"requeue of {requeue_cell} {delays[requeue_cell]:.1f} s after it starts running"
    )
    due: dict[str, float] = {}
    hit: dict[str, str] = {}
    deadline = time.monotonic() + 300
    while len(hit) < 2:
        assert time.monotonic() < deadline and client.poll() is None, client_log.read_text()[-3000:]
        for method in methods:
            job_id = recorded_id(pretrain[method])
            if method in hit or job_id == cancelled:
                continue
            started = training_started(pretrain[method]) if method == usr2_cell else live_state(job_id) == "RUNNING"
            if method not in due and started:
                due[method] = time.monotonic() + delays[method]
            if method in due and time.monotonic() >= due[method]:
                cmd = ["scancel", "--signal=USR2", job_id] if method == usr2_cell else ["scontrol", "requeue", job_id]
                result = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
                chaos.say(
                    f"{' '.join(cmd)} (state {live_state(job_id)}): rc {result.returncode} {result.stderr.strip()}"
                )
                assert result.returncode == 0, result.stderr
                hit[method] = job_id
        time.sleep(0.2)
    # Both jobs requeue (USR2: submitit asks the controller, so that must be done before it goes away).
    wait_for(lambda: all(accounted_runs_of(job_id) >= 2 for job_id in hit.values()), 120, "both requeues")

    # 3. The controller goes away for a while during the run (the client retries; jobs keep running).
    time.sleep(chaos.rng.uniform(0, 4))
    outage = chaos.rng.uniform(5, 12)
    chaos.say(f"slurmctld stopped for {outage:.1f} s")
    subprocess.run([*ctld, "stop"], check=True, timeout=60)
    try:
        time.sleep(outage)
    finally:
        subprocess.run([*ctld, "start"], check=True, timeout=120)
    chaos.say("slurmctld back")

    # 4. The client is killed while a linear evaluation runs; its jobs finish without it.
    wait_for(
        lambda: any(live_state(recorded_id(lincls[m])) == "RUNNING" for m in methods) or client.poll() is not None,
        300,
        "a linear-evaluation job to run",
    )
    time.sleep(chaos.rng.uniform(0, 4))
    assert client.poll() is None, "the client finished before it could be killed:\n" + client_log.read_text()[-3000:]
    os.killpg(client.pid, signal.SIGKILL)
    client.wait()
    chaos.say(
        f"client killed; jobs alive: "
        f"{[m for m in methods for c in (pretrain, lincls) if live_state(recorded_id(c[m]))]}"
    )
    wait_for(
        lambda: not subprocess.run(["squeue", "-h"], capture_output=True, text=True, timeout=30).stdout.strip(),
        300,
        "the orphaned jobs to finish",
    )
    chaos.say("every job ended; unlock and rerun")
    snakemake(workdir, "--unlock")
    rerun = snakemake(workdir, "all_tables", *SLURM)
    chaos.say("rerun done")

    output = client_log.read_text() + rerun.stdout + rerun.stderr
    # No lost outputs, and the tables are the local run's, byte for byte.
    for cell in (*pretrain.values(), *lincls.values()):
        assert (cell / ("encoder.pt" if "pretrain" in cell.parts else "metrics.json")).exists(), cell
    for table in ("table1.csv", "table1.md"):
        assert (workdir / "results/tiny/tables" / table).read_bytes() == (
            local_run / "results/tiny/tables" / table
        ).read_bytes(), table
    # The final encoders are the undisturbed (local) run's.
    for method in methods:
        assert same_weights(
            local_run / f"results/tiny/pretrain/digits/{method}/seed0/encoder.pt", pretrain[method] / "encoder.pt"
        ), method
    # One submission per cell, plus one for each resubmission the issue allows (an output deleted by the
    # rerun of an incomplete rule, the gone array task), each announced by its launcher.
    counts = submissions_per_cell(start, array_tasks)
    chaos.say(f"sbatch submissions per cell (sacct): {counts}")
    for method in methods:
        for stage in ("pretrain", "lincls"):
            # The launchers name their cell as the rules pass it, relative to the workdir.
            lines = [line for line in output.splitlines() if f"results/tiny/{stage}/digits/{method}/seed0:" in line]
            allowed = sum(any(reason in line for reason in JUSTIFIED) for line in lines)
            assert 1 <= counts.get(f"{stage}/{method}", 0) <= 1 + allowed, (stage, method, counts, lines)
    # The disruptions happened: both jobs ran again after their requeue.
    assert all(accounted_runs_of(job_id) >= 2 for job_id in hit.values())


def test_an_edited_cell_is_decided_on_the_login_node_and_table1_shows_the_new_number(workdir):
    """Issue #22, items 1, 8 and 9: the same edit as locally, with the shipped profile on the cluster."""
    snakemake(workdir, "all_tables", *SLURM)
    folder = workdir / "results/tiny/pretrain/digits/IR/seed0"
    old_job = recorded_id(folder)
    values = {**TINY_SEED0, "pretrain": {**TINY_SEED0["pretrain"], "by_method": {"IR": {"lr": 0.01}}}}
    write_grid(workdir, "tiny", values)
    # Issue 40 item 6: before the run rewrites any config, status and submit agree with the plan (both IR cells
    # rerun): the evaluation of the stale encoder is stale too, not done, and submit leaves it to its pretraining.
    rows = {tuple(line.split()[:3]): line.split()[4] for line in batch(workdir, "status").splitlines()[:-1]}
    assert rows[("pretrain", "digits", "IR")] == rows[("lincls", "digits", "IR")] == "stale", rows
    assert rows[("lincls", "digits", "MoCoRing")] == "done", rows
    start = now()
    result = snakemake(workdir, "all_tables", *SLURM)
    output = result.stdout + result.stderr
    cell = "results/tiny/pretrain/digits/IR/seed0"
    assert f"ring: {cell}: its config changed (lr): the previous run is kept in {cell}/runs/" in output
    # Decided on the login node by the config rule: the submitted job found a cell with nothing to decide.
    record = json.loads((workdir / cell / "slurm" / "job.json").read_text())
    job_log = (workdir / record["folder"] / f"{record['job_id']}_0_log.err").read_text()  # folder: relative to the run
    assert "its config changed" not in job_log and "resuming" not in job_log and "epoch=0" in job_log
    assert "ran an earlier config of this cell (it was edited since); submitting the edited cell" in output
    assert f"ring: {cell}: SLURM job" in output and f"{cell}/encoder.pt is missing" not in output
    assert "different config" not in output
    assert [name for _, name, _ in sacct_jobs("ring-", start, workdir)] == [
        "ring-pretrain-digits-IR-seed0",
        "ring-lincls-digits-IR-seed0",
    ]
    metrics = json.loads((workdir / "results/tiny/lincls/digits/IR/seed0/metrics.json").read_text())
    assert re.search(rf"\| IR +\| +{entry(metrics)} ", (workdir / "results/tiny/tables/table1.md").read_text())
    # Issue 34 item 6: the edited cell's provenance holds its own config's job only; the earlier config's job stays
    # in the run kept under runs/ (it used to be added to the new provenance too, as "killed (COMPLETED)"): no
    # job's hours are counted twice.
    (kept,) = folder.glob("runs/*/provenance.json")
    jobs = {
        path: {s["job_id"] for s in json.loads(path.read_text())["segments"]}
        for path in (folder / "provenance.json", kept)
    }
    assert jobs == {folder / "provenance.json": {recorded_id(folder)}, kept: {old_job}}, jobs
    # Issue 40 item 6: gpu_hours counts both, each once (it read only the live cells' provenance.json).
    runs = [line.split(",")[2] for line in (workdir / "results/tiny/tables/gpu_hours.csv").read_text().splitlines()[1:]]
    assert sorted(r for r in runs if r.startswith(cell)) == [cell, str(kept.parent.relative_to(workdir))], runs

    # Runtime knobs are not edits (issue 32 item 7, issue 34 item 5): the configs take them, nothing is submitted.
    values["pretrain"] = {**values["pretrain"], "all": {**values["pretrain"]["all"], "loss_read_every": 10}}
    values["lincls"] = {**values["lincls"], "all": {**values["lincls"]["all"], "num_workers": 1}}
    write_grid(workdir, "tiny", values)
    start = now()
    result = snakemake(workdir, "all_tables", *SLURM)
    assert not sacct_jobs("ring-", start, workdir), result.stdout + result.stderr
    assert yaml.safe_load((workdir / cell / "config.yaml").read_text())["loss_read_every"] == 10


def test_an_undone_and_a_redone_epochs_edit_submit_nothing(workdir):
    """Issue 40 item 6, README's edit table on the cluster: a longer epochs continues the cell (one pretraining job);
    undoing the edit brings the shorter finished run back, redoing it the longer one: no job is submitted."""
    cell = workdir / "results/tiny/pretrain/digits/IR/seed0"

    def run(epochs: int) -> tuple[str, list]:
        pretrain = {"all": {**TINY["pretrain"]["all"], "epochs": epochs}}
        write_grid(workdir, "tiny", {**TINY_SEED0, "methods": ["IR"], "pretrain": pretrain})
        start = now()
        result = snakemake(workdir, "all_tables", *SLURM)
        return result.stdout + result.stderr, [name for _, name, _ in sacct_jobs("ring-", start, workdir)]

    run(1)
    short = (cell / "encoder.pt").read_bytes()
    output, jobs = run(2)
    assert "continuing from its checkpoint to epochs=2" in output and jobs == [
        "ring-pretrain-digits-IR-seed0",
        "ring-lincls-digits-IR-seed0",
    ], jobs
    long = (cell / "encoder.pt").read_bytes()
    for epochs, encoder in ((1, short), (2, long)):
        output, jobs = run(epochs)
        assert jobs == [] and "is back in place" in output, output[-3000:]
        assert (cell / "encoder.pt").read_bytes() == encoder


def test_two_clients_of_one_cell_submit_one_job(tmp_path):
    cell = tmp_path / "results" / "g" / "pretrain" / "digits" / "IRing" / "seed0"
    cfg = C.PretrainConfig(method="IRing", **{**TINY_PRETRAIN, "epochs": 1})
    start = now()
    first = launch_cell(cell, cfg, CLUSTER)
    second = launch_cell(cell, cfg, CLUSTER)
    outputs = [p.communicate(timeout=600)[0] for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outputs
    assert sum(o.count("submitted SLURM job") for o in outputs) == 1
    assert any("another client is attached to this cell; waiting for it" in o for o in outputs)
    assert len(sacct_jobs("ring-pretrain-digits-IRing-seed0", start)) == 1


def readme_cluster_rerun() -> list[str]:
    """The commands of README's "Running on a cluster", item 5 ("Rerun one cell"), as written."""
    item = section("README.md", "Running on a cluster").split("\n5. **Rerun one cell**")[1].split("\n6. **")[0]
    assert current_test() in item, "README's cluster item 5 must name the test that runs its commands"
    return shell_commands(item)


def test_readmes_cluster_rerun_of_one_cell_runs_as_written(workdir):
    """Issue #22: README's cluster recipe, its placeholders naming this grid's cell, run literally."""
    snakemake(workdir, "all_tables", *SLURM)
    (workdir / ".venv").symlink_to(Path(sys.executable).parents[1])  # README's .venv is this interpreter's
    cell = {"GRID": "tiny", "DATASET": "digits", "METHOD": "IR", "seedN": "seed0"}
    table1 = workdir / "results/tiny/tables/table1.md"
    before = table1.stat().st_mtime_ns
    start = now()
    for command in readme_cluster_rerun():
        for placeholder, value in cell.items():
            command = command.replace(placeholder, value)
        result = subprocess.run(command, shell=True, cwd=workdir, capture_output=True, text=True, timeout=1200)
        assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    # The cell submitted once, the other cells untouched.  Its linear evaluation belongs to config and encoder: the
    # retrained encoder is bit-identical to the deleted one (seeded training), so the evaluation of that very encoder
    # is collected without a job (issue 32 item 3); another encoder would have been evaluated by one job.
    names = [name for _, name, _ in sacct_jobs("ring-", start, workdir)]
    lincls_log = (workdir / "results/tiny/lincls/digits/IR/seed0/lincls.log").read_text()
    collected = "the evaluation of this encoder with this config is complete" in lincls_log
    assert names == ["ring-pretrain-digits-IR-seed0"] + ([] if collected else ["ring-lincls-digits-IR-seed0"]), names
    assert table1.stat().st_mtime_ns > before
    metrics = json.loads((workdir / "results/tiny/lincls/digits/IR/seed0/metrics.json").read_text())
    assert re.search(rf"\| IR +\| +{entry(metrics)} ", table1.read_text())


def test_an_edit_while_the_job_runs_cancels_it_before_its_files_move(workdir):
    """Issue 34, item 2: the client killed while the IR job trains, lr edited, unlock, rerun.  The config rule cancels
    the previous config's job and waits for its end before that run moves to runs/<old hash>/; the edited cell's
    encoder comes from one new job of its own config, and a second all_tables submits nothing."""
    cell = workdir / "results/tiny/pretrain/digits/IR/seed0"
    # Three epochs for IR: its job must still run when the rerun's config rule reaches it (one epoch ended first).
    values = {**TINY_SEED0, "pretrain": {**TINY_SEED0["pretrain"], "by_method": {"IR": {"epochs": 3}}}}
    write_grid(workdir, "tiny", values)
    client = start_client(workdir)
    wait_for(lambda: training_started(cell) or client.poll() is not None, 300, "the IR job's training")
    old = recorded_id(cell)
    assert live_state(old) == "RUNNING", "the IR job ended before the client could be killed"
    os.killpg(client.pid, signal.SIGKILL)  # the client and its waiting launchers die; the job trains on
    client.wait()
    old_hash = json.loads((cell / "run.json").read_text())["config_hash"]
    values["pretrain"]["by_method"]["IR"]["lr"] = 0.01
    write_grid(workdir, "tiny", values)
    snakemake(workdir, "--unlock")
    result = snakemake(workdir, "all_tables", *SLURM)
    output = result.stdout + result.stderr
    assert f"SLURM job {old} of the previous config was RUNNING; cancelling it first" in output, output[-3000:]
    assert sacct_states([old]) == ["CANCELLED"]
    assert f"re-attached to SLURM job {old}" not in output
    # Submissions counted in the cell's own slurm/ folder: the shared test cluster runs other cells of this name.
    assert submitted(cell) == {old, recorded_id(cell)} and recorded_id(cell) != old
    wanted = C.config_hash(C.load(C.PretrainConfig, cell / "config.yaml"))
    assert wanted != old_hash and json.loads((cell / "export.json").read_text())["config_hash"] == wanted
    assert json.loads((cell / "run.json").read_text())["config_hash"] == wanted
    # The cancelled run is kept whole under its own hash, its job's record retired beside the new one.
    assert json.loads((cell / "runs" / old_hash / "run.json").read_text())["config_hash"] == old_hash
    assert (cell / "slurm" / f"job-{old}.json").is_file()
    metrics = json.loads((workdir / "results/tiny/lincls/digits/IR/seed0/metrics.json").read_text())
    table = (workdir / "results/tiny/tables/table1.md").read_text()
    assert "stale" not in table and re.search(rf"\| IR +\| +{entry(metrics)} ", table), table
    before = submitted(workdir / "results")
    snakemake(workdir, "all_tables", *SLURM)
    assert submitted(workdir / "results") == before


def submitted(folder: Path) -> set[str]:
    """The SLURM jobs submitit submitted from the cells under ``folder`` (their submission scripts)."""
    return {path.name.split("_")[0] for path in folder.rglob("slurm/*_submission.sh")}


# -- One cell across two nodes: partition "multi" holds the default node and a second slurmd on this machine
# (.ci/slurm/start.sh; MULTIPLE_SLURMD).  In this module, so that the cluster keeps one owner under xdist.

TWO_NODES = {**CLUSTER, "partition": "multi", "nodes": 2, "gpus_per_node": 2}  # 4 tasks, 2 per node
SECOND = "-b"  # start.sh names the second node after the machine: <hostname -s>-b


def job_of(cell: Path) -> str:
    return json.loads((cell / "slurm" / "job.json").read_text())["job_id"]


def task_nodes(cell: Path, job_id: str) -> dict[int, int]:
    """Each task's global rank -> its node index, from submitit's first line in every task's output log."""
    nodes = {}
    for log in (cell / "slurm").glob(f"{job_id}_*_log.out"):
        found = re.search(r"JobEnvironment\(.*node=(\d+).*global_rank=(\d+)", log.read_text())
        if found:
            nodes[int(found.group(2))] = int(found.group(1))
    return nodes


def test_a_two_node_cell_computes_what_one_process_computes(tmp_path):
    """2 nodes x 2 tasks, one BatchNorm group per node (MoCoRing, bn_groups 2: a group spans a node's 2 ranks and
    MoCo's shuffled keys cross the nodes), one step: the update is the single process's (as tests/engine/
    test_distributed.py measures it: 0.45%, the fp32 gradient's own accuracy on digits)."""
    values = {
        **TINY_PRETRAIN,
        "epochs": 1,
        "knn_every": 0,
        "bn_groups": 2,
        "batch_size": 1280,
        "queue_size": 1280,
        "snapshot_epochs": [0],
    }
    cfg = C.PretrainConfig(method="MoCoRing", **values)
    single = tmp_path / "single"
    single.mkdir()
    C.save(cfg, single / "config.yaml")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(
        [sys.executable, "-m", "ring.pretrain", "--config", str(single / "config.yaml"), "--out", str(single)],
        check=True,
        capture_output=True,
        timeout=600,
        env=env,
    )
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "MoCoRing" / "seed0"
    proc = launch_cell(cell, cfg, TWO_NODES)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out
    job_id = job_of(cell)
    alloc = subprocess.run(
        ["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "NNodes,AllocTRES,NodeList"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split("\n")[0]
    nnodes, tres, nodelist = alloc.split("|")
    assert nnodes == "2" and "gres/gpu=4" in tres, alloc
    assert task_nodes(cell, job_id) == {0: 0, 1: 0, 2: 1, 3: 1}, nodelist  # consecutive ranks share a node
    a, b = (torch.load(c / "encoder.pt", weights_only=True) for c in (single, cell))
    start = {k.removeprefix("trunk."): v for k, v in safe_load(single / "snapshot_epoch0.pt")["encoder"].items()}
    keys = [k for k in a if "running_" not in k and "num_batches_tracked" not in k]
    step = [torch.cat([(state[k] - start[k]).flatten() for k in keys]) for state in (a, b)]
    assert (step[0] - step[1]).norm() <= 0.03 * step[0].norm()
    segment = json.loads((cell / "provenance.json").read_text())["segments"][0]
    assert (segment["outcome"], segment["nodes"]) == ("completed", 2)


IRING_3_EPOCHS = C.PretrainConfig(method="IRing", **{**TINY_PRETRAIN, "epochs": 3})


def equal_across_processes(a: Path, b: Path) -> bool:
    """Two 4-process runs' encoders, equal up to the order in which gloo sums the 4 ranks' gradients: DDP rebuilds
    its buckets after a restart and the all-reduce then adds the same values in another grouping (measured 3.8e-6
    of the weights' norm after a USR2 requeue, two epochs on).  A resume from the wrong step, a lost update or
    another random stream moves them by percents."""
    sa, sb = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
    keys = [k for k in sa if sa[k].is_floating_point()]
    gap = sum((sa[k].double() - sb[k].double()).norm() ** 2 for k in keys) ** 0.5
    return sa.keys() == sb.keys() and bool(gap <= 1e-4 * sum(sa[k].double().norm() ** 2 for k in keys) ** 0.5)


@pytest.fixture(scope="module")
def two_node_reference(module_tmp) -> Path:
    """An undisturbed two-node run of the interruption tests' cell (one BatchNorm group over the 4 ranks)."""
    cell = module_tmp("ref2") / "results" / "t" / "pretrain" / "digits" / "IRing" / "seed0"
    proc = launch_cell(cell, IRING_3_EPOCHS, TWO_NODES)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out
    return cell / "encoder.pt"


def test_usr2_on_a_two_node_job_checkpoints_requeues_once_and_finishes_equal(tmp_path, two_node_reference):
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "IRing" / "seed0"
    proc = launch_cell(cell, IRING_3_EPOCHS, TWO_NODES)
    wait_for(lambda: log_lines(cell) >= 1, 600, "the first epoch")
    job_id = job_of(cell)
    subprocess.run(["scancel", "--signal=USR2", job_id], check=True, timeout=30)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out
    segments = json.loads((cell / "provenance.json").read_text())["segments"]
    assert [s["outcome"] for s in segments] == ["preempted", "completed"], segments
    assert segments[1]["restart_count"] == 1 and {s["job_id"] for s in segments} == {job_id}
    assert equal_across_processes(two_node_reference, cell / "encoder.pt")


def test_a_lost_second_node_resubmits_and_the_cell_still_finishes_equal(tmp_path, two_node_reference):
    """The second node's slurmd and its job steps killed, the node marked down: the job ends NODE_FAIL, the launcher
    submits it again (slurm.LOST) and the stage resumes from its checkpoint once the node is back."""
    state = Path(os.environ.get("RING_SLURM_STATE", "/tmp/ring-slurm"))
    node = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip() + SECOND
    cell = tmp_path / "results" / "t" / "pretrain" / "digits" / "IRing" / "seed0"
    proc = launch_cell(cell, IRING_3_EPOCHS, TWO_NODES)
    wait_for(lambda: log_lines(cell) >= 1, 600, "the first epoch")
    job_id = job_of(cell)
    subprocess.run(["bash", str(ROOT / ".ci" / "slurm" / "node.sh"), "fail", node], check=True, timeout=120)
    subprocess.run(["bash", str(ROOT / ".ci" / "slurm" / "node.sh"), "start", node], check=True, timeout=120)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out
    # The job ends NODE_FAIL and the launcher submits it again (ring.cluster.slurm.LOST: measured here, job 71
    # NODE_FAIL, job 72 resumed and COMPLETED); a site that requeues such jobs itself runs the same job again.
    # Either way a run ended NODE_FAIL, and it is in the cell's provenance (from sacct).
    runs = subprocess.run(
        ["sacct", "-D", "-X", "-n", "-P", "-j", ",".join({job_id, job_of(cell)}), "-o", "JobID,State"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert "NODE_FAIL" in runs, runs
    segments = json.loads((cell / "provenance.json").read_text())["segments"]
    assert [s["outcome"] for s in segments][0] == "killed (NODE_FAIL)" and segments[-1]["outcome"] == "completed"
    assert equal_across_processes(two_node_reference, cell / "encoder.pt")
    assert (state / "run").is_dir()
