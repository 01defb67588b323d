"""ring-bench on a real SLURM cluster (.ci/slurm/start.sh): the tiny grid through the shipped profile
equals the local run; edits and reruns of its cells, and the chaos run.

These tests never skip: a machine without the cluster fails them, as CI must.  What the SLURM files share is in
tests/workflow/slurm.py.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ring.core import config
from tests import ROOT
from tests.documented import current_test, section, shell_commands
from tests.helpers import copy_workflow
from tests.workflow.runs import entry, snakemake, write_grid
from tests.workflow.slurm import (
    BATCH_CONFIGS,
    SITE,
    SLURM,
    SLURM_TESTS,
    SMALL_SEED0,
    TINY_SEED0,
    accounted_runs_of,
    batch,
    live_state,
    now,
    recorded_id,
    sacct_jobs,
    sacct_states,
    same_weights,
    start_client,
    submitted,
    training_started,
    wait_for,
    workdir,  # noqa: F401  (the fixture)
)

pytestmark = SLURM_TESTS


@pytest.fixture(scope="module")
def local_run(module_tmp) -> Path:
    """The workdir's grid (tiny, seed 0) run through the local profile, once for the module: the
    reference of the SLURM runs' tables and encoders."""
    local = module_tmp("local")
    copy_workflow(local)
    write_grid(local, "tiny", TINY_SEED0)
    snakemake(local, "--profile", "profiles/local", "all_tables", "--config", "grid=tiny")
    return local


def the_grid_equals_the_local_run(workdir: Path, local_run: Path) -> None:
    """The tiny grid through the SLURM profile: four jobs, Table 1 byte-equal to the local run's, and each job's
    stage in gpu_hours.csv (the start of the tests that go on from the finished grid)."""
    start = now()
    result = snakemake(workdir, "all_tables", *SLURM)
    assert "submitted SLURM job" in result.stdout + result.stderr
    assert len(sacct_jobs("ring-", start, workdir)) == 4  # 2 pretraining + 2 linear-evaluation cells
    for table in ("table1.csv", "table1.md"):
        assert (workdir / "results/tiny/tables" / table).read_text() == (
            local_run / "results/tiny/tables" / table
        ).read_text()
    stages = [
        line.split(",")[0] for line in (workdir / "results/tiny/tables/gpu_hours.csv").read_text().splitlines()[1:]
    ]
    assert sorted(stages) == ["lincls", "lincls", "pretrain", "pretrain"]


def test_an_edited_cell_is_decided_on_the_login_node_and_table1_shows_the_new_number(workdir, local_run):
    """Issue #22, items 1, 8 and 9: the same edit as locally, with the shipped profile on the cluster."""
    first = now()
    the_grid_equals_the_local_run(workdir, local_run)
    folder = workdir / "results/tiny/pretrain/digits/IR/seed0"
    old_job = recorded_id(folder)
    values = {**TINY_SEED0, "pretrain": {**TINY_SEED0["pretrain"], "by_method": {"IR": {"lr": 0.01}}}}
    write_grid(workdir, "tiny", values)
    # Issue 40 item 6: before the run rewrites any config, status and submit agree with the plan (both IR cells
    # rerun): the evaluation of the stale encoder is stale too, not done, and submit leaves it to its pretraining.
    rows = {tuple(line.split()[:3]): line.split()[4] for line in batch(workdir, "status").splitlines()[:-1]}
    assert rows[("pretrain", "digits", "IR")] == rows[("lincls", "digits", "IR")] == "stale", rows
    # Finished, not stale: "diverged" where the tiny encoder's probe sat at chance (status says so since issue 51).
    assert rows[("lincls", "digits", "MoCoRing")] in ("done", "diverged"), rows
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
    # Issue 50 item 3: so with the IR evaluation, whose run of the old encoder was set aside with its job: that job is
    # not copied into the new evaluation's provenance, nor called "COMPLETED but metrics.json is missing".
    held = segments_by_job(workdir / "results" / "tiny")
    assert sorted(held) == sorted(jid for jid, _, _ in sacct_jobs("ring-", first, workdir)), held
    assert all(len(files) == 1 for files in held.values()) and "metrics.json is missing" not in output, held

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
        pretrain = {"all": {**SMALL_SEED0["pretrain"]["all"], "epochs": epochs}}
        write_grid(workdir, "tiny", {**SMALL_SEED0, "methods": ["IR"], "pretrain": pretrain})
        start = now()
        result = snakemake(workdir, "all_tables", *SLURM)
        return result.stdout + result.stderr, [name for _, name, _ in sacct_jobs("ring-", start, workdir)]

    first = now()
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
        # Issue 50 item 3: gpu_hours adds every provenance.json, live and kept: each job sacct lists is in one of
        # them, once.  The retrained encoder's evaluation set the first one's run aside, and its job was copied from
        # sacct into the live cell's provenance as "killed (COMPLETED)" too.
        held = segments_by_job(workdir / "results" / "tiny")
        assert sorted(held) == sorted(jid for jid, _, _ in sacct_jobs("ring-", first, workdir)), held
        assert all(len(files) == 1 for files in held.values()), held


def segments_by_job(results: Path) -> dict[str, list[Path]]:
    """Job id -> the provenance.json holding each of its segments, over every cell and every run kept under runs/."""
    held: dict[str, list[Path]] = {}
    for path in sorted(results.rglob("provenance.json")):
        for segment in json.loads(path.read_text()).get("segments", []):
            held.setdefault(segment["job_id"], []).append(path)
    return held


def readme_cluster_rerun() -> list[str]:
    """The commands of README's "Running on a cluster", item 5 ("Rerun one cell"), as written."""
    item = section("README.md", "Running on a cluster").split("\n5. **Rerun one cell**")[1].split("\n6. **")[0]
    assert current_test() in item, "README's cluster item 5 must name the test that runs its commands"
    return shell_commands(item)


def test_readmes_cluster_rerun_of_one_cell_runs_as_written(workdir, local_run):
    """Issue #22: README's cluster recipe, its placeholders naming this grid's cell, run literally, on the grid run
    through the SLURM profile (whose tables are first found equal to the local run's)."""
    the_grid_equals_the_local_run(workdir, local_run)
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
    wanted = config.config_hash(config.load(config.PretrainConfig, cell / "config.yaml"))
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


# -- chaos: every disruption of issue #11 in one run of the tiny grid through the shipped profile ----------
CHAOS_SEED = int(os.environ.get("RING_CHAOS_SEED", "11"))  # another seed: other moments, same assertions


# What a launcher prints when it submits a cell again for a reason the issue allows: its output was
# deleted by Snakemake's rerun of an incomplete rule, its job is gone (the cancelled pending task), or its
# requeued job started while the controller was stopped and srun could not start its step.
JUSTIFIED = (
    "COMPLETED but",
    "treating it as gone",
    "ended CANCELLED",
    "cancelled before it ran",
    "before its stage started",
)


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


def squeue_workdirs() -> list[str]:
    """The working folders of the jobs queued or running (squeue's %Z): this test's own, and any other's."""
    return subprocess.run(["squeue", "-h", "-o", "%Z"], capture_output=True, text=True, timeout=30).stdout.split()


def submissions_per_cell(since: str, array_tasks: dict[str, str], workdir: Path) -> dict[str, int]:
    """sbatch submissions per cell (``stage/method``) from sacct: single jobs by name, array tasks by the
    cells their records named right after submission; a requeue keeps its job id and is not counted."""
    counts: dict[str, int] = {}
    for job_id, name, _ in sacct_jobs("ring-", since, workdir):
        if job_id in array_tasks:
            cell = array_tasks[job_id]
        else:
            stage, _, method, _ = name.removeprefix("ring-").split("-")
            cell = f"{stage}/{method}"
        counts[cell] = counts.get(cell, 0) + 1
    return counts


def test_chaos_on_the_cluster_loses_nothing_and_submits_nothing_twice(workdir, local_run, tmp_path, cluster_alone):
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
        lambda: str(workdir) not in squeue_workdirs(),
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
    counts = submissions_per_cell(start, array_tasks, workdir)
    chaos.say(f"sbatch submissions per cell (sacct): {counts}")
    for method in methods:
        for stage in ("pretrain", "lincls"):
            # The launchers name their cell as the rules pass it, relative to the workdir.
            lines = [line for line in output.splitlines() if f"results/tiny/{stage}/digits/{method}/seed0:" in line]
            allowed = sum(any(reason in line for reason in JUSTIFIED) for line in lines)
            assert 1 <= counts.get(f"{stage}/{method}", 0) <= 1 + allowed, (stage, method, counts, lines)
    # The disruptions happened: both jobs ran again after their requeue.
    assert all(accounted_runs_of(job_id) >= 2 for job_id in hit.values())
