"""The Snakemake DAG, run for real in a copy of the workflow (results never touch the checkout)."""

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests import ROOT
from tests.workflow.runs import ONE_CELL_RETRAINED, SMALL, job_counts, ring_status, snakemake, write_grid

pytestmark = pytest.mark.slow  # whole Snakemake runs: outside the developer loop (pytest -m 'not slow')


def test_paper_grid_plans_every_table1_cell_without_any_dataset(workdir):
    start = time.monotonic()
    result = snakemake(workdir, "-n", "all_tables", "--config", "grid=paper", "data_root=/nonexistent")
    elapsed = time.monotonic() - start
    counts = job_counts(result.stdout + result.stderr)
    # Table 1's 7 x 4, Table 2's two lesions on CIFAR10 and ImageNet, 4 new LA variants on CIFAR10;
    # CMC, CMCRing, CMCCave and CMCRing+C_i cells export two encoders.
    assert counts["pretrain"] + counts["pretrain_two_encoders"] == counts["lincls"] == (28 + 4 + 4) * 3
    assert counts["pretrain_two_encoders"] == (2 * 4 + 2) * 3
    # Table 1's four datasets and Table 3's nine transfer datasets each get one data check.
    assert (
        counts["data_check"] == 4 + 9
        and counts["make_table1"] == 1
        and counts["make_table2"] == counts["make_table_la_variants"] == 1
    )
    assert elapsed < 60, f"planning took {elapsed:.1f}s"  # ~2 s here; the benchmark tracks the real figure
    # The job count README and docs/performance.md quote comes from the committed benchmark, which must be current.
    recorded = json.loads((ROOT / "ring" / "resources" / "figures" / "orchestration-cpu.json").read_text())[
        "jobs_planned"
    ]
    assert counts["total"] == recorded, "rerun python benchmarks/orchestration.py and commit its result"
    for doc in ("README.md", "docs/performance.md"):
        quoted = re.findall(r"grid=paper`?[^\n]*?(\d[\d,]*) jobs", (ROOT / doc).read_text())
        assert quoted and {int(q.replace(",", "")) for q in quoted} == {recorded}, (doc, quoted)


def test_bad_config_fails_on_load_with_one_sentence(workdir):
    result = snakemake(workdir, "-n", "all_tables", "--config", "grid=papr", check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "config grid='papr' has no file" in output and "choose one of paper, ring_digits, smoke" in output
    result = snakemake(workdir, "-n", "all_tables", "--config", "data_dir=x", check=False)
    assert result.returncode != 0
    assert "Additional properties are not allowed ('data_dir' was unexpected)" in result.stdout + result.stderr


def test_missing_dataset_fails_the_dag_before_any_training_job(workdir, tmp_path):
    result = snakemake(
        workdir,
        "--cores",
        "1",
        "results/paper/lincls/cifar10/IR/seed0/metrics.json",
        "--config",
        "grid=paper",
        f"data_root={tmp_path / 'data'}",
        check=False,
        timeout=120,
    )
    assert result.returncode != 0
    assert f"ring: Data root {tmp_path / 'data'} does not exist" in result.stderr
    # The run ends with its summary: one line per failed job, its cell and its one sentence.
    assert (
        f"ring: 1 job failed:\n  data cifar10 (rule data_check): Data root {tmp_path / 'data'} does not exist"
        in result.stderr.split("Error in rule")[-1]
    )
    assert not (workdir / "results" / "paper" / "pretrain" / "cifar10" / "IR" / "seed0" / "pretrain.log").exists()


def test_every_dataset_the_targets_read_is_checked_before_any_job_starts(workdir, tmp_path):
    """Issue 52 item 6: a transfer set missing (cub, table3) was found after the digits pretraining it follows had
    trained for a minute (pretraining waited only for its own dataset's check), and Table 4's Detectron2 datasets
    after pretraining and conversion.  Every data check the run needs now runs before its first job: nothing starts,
    and the run ends with the failed-run summary naming each."""
    grid = {
        **SMALL,
        "methods": ["IR"],
        "seeds": [0],
        "transfer": {"source": "digits", "datasets": ["cub"], "all": SMALL["lincls"]["all"]},
        "detection": {
            "source": "digits",
            "methods": ["IR"],
            "tasks": ["voc_det"],
            "datasets": "detectron2",
            "all": {"num_gpus": 0, "num_workers": 0},
        },
        "resources": {**SMALL["resources"], "transfer": {"threads": 1}, "detection": {"threads": 1}},
    }
    write_grid(workdir, "xfer", grid)
    data = tmp_path / "data"
    data.mkdir()
    args = ("--profile", "profiles/local", "table3", "table4", "--config", "grid=xfer", f"data_root={data}")
    result = snakemake(workdir, *args, check=False, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    listing = data / "detectron2" / "VOC2007" / "ImageSets" / "Main" / "trainval.txt"
    assert f"ring: 2 jobs failed:\n  data cub (rule data_check): Dataset cub is missing {data}" in out, out[-3000:]
    voc = f"Dataset voc_2007_trainval is missing: {listing} does not exist; put the datasets"
    assert f"\n  data detectron2-voc_det (rule detection): {voc}" in out, out[-3000:]
    assert "A data check failed before any job started (above); nothing was started." in out
    assert not re.search(r"^(local)?rule \w+:$", out, re.MULTILINE), out  # no job started, not even digits' check
    assert not (workdir / "results" / "xfer" / "pretrain").exists()
    assert not (workdir / "results" / "xfer" / "data" / "cub.ok").exists()


# SMALL with one linear-evaluation (and transfer) epoch, not two: the end-to-end tests below check what runs, what
# reruns and what the tables show, which one epoch writes as two do (each evaluation job one epoch shorter).
ONE_EVAL_EPOCH = {**SMALL["lincls"]["all"], "epochs": 1}
SMALL_EVAL = {**SMALL, "lincls": {"all": ONE_EVAL_EPOCH}}


def rerun_one(workdir: Path, cell: str, output: str) -> dict[str, int]:
    """README's rerun of one cell on the tiny grid: its folder removed, its ``output`` forced; the jobs that ran."""
    shutil.rmtree(workdir / cell)
    result = snakemake(
        workdir, "--profile", "profiles/local", "all_tables", "-R", f"{cell}/{output}", "--config", "grid=tiny"
    )
    return job_counts(result.stdout + result.stderr)


def test_tiny_grid_end_to_end_then_rerun_exactly_one_cell(workdir):
    write_grid(workdir, "tiny", SMALL_EVAL)
    snakemake(workdir, "--profile", "profiles/local", "all_tables", "--config", "grid=tiny")
    table = (workdir / "results" / "tiny" / "tables" / "table1.md").read_text()
    # Two seeds: mean ± std, or the verdict of a diverged evaluation (this grid's one-epoch encoders may give one).
    assert re.search(r"\| IR +\| (\d+\.\d ± \d+\.\d|diverged \[d\d\]) ", table)
    assert re.search(r"\| MoCoRing +\| (\d+\.\d ± \d+\.\d|diverged \[d\d\]) ", table)

    # Nothing left to do.
    again = snakemake(workdir, "--profile", "profiles/local", "all_tables", "--config", "grid=tiny")
    assert "Nothing to be done" in again.stdout + again.stderr

    # Rerun one cell: remove its folder (every stage resumes, so a kept checkpoint would be reused)
    # and force its output; only its jobs run, then the table they feed.
    assert rerun_one(workdir, "results/tiny/lincls/digits/MoCoRing/seed1", "metrics.json") == {
        "all_tables": 1,
        "lincls": 1,
        "lincls_config": 1,
        "lincls_hash": 1,
        "make_gpu_hours": 1,
        "make_table1": 1,
        "total": 6,
    }

    # Retrain one pretraining cell: it, its linear evaluation and the table.
    assert rerun_one(workdir, "results/tiny/pretrain/digits/IR/seed0", "encoder.pt") == ONE_CELL_RETRAINED
    # Training is deterministic on the CPU: the retrained cell reproduces its metrics exactly.
    assert "Nothing to be done" in snakemake(workdir, "-n", "all_tables", "--config", "grid=tiny").stdout


def test_toy_cnce_target_plans_the_paper_seeds_and_builds_its_table(workdir):
    counts = job_counts(snakemake(workdir, "-n", "table_toy_cnce", "--config", "grid=paper").stdout)
    assert counts["toy_cnce"] == counts["toy_cnce_config"] == 5 and counts["make_table_toy_cnce"] == 1
    toy = {
        "seeds": [0, 1],
        "epochs": 1,
        "n_points": 256,
        "batch_size": 64,
        "negatives": 10,
        "eval_points": 200,
        "percentages": [50, 90],
    }
    write_grid(workdir, "tiny", {**SMALL, "toy_cnce": toy})
    planned = job_counts(snakemake(workdir, "-n", "all_tables", "--config", "grid=tiny").stdout)
    assert planned["toy_cnce"] == 2 and planned["make_table_toy_cnce"] == 1
    snakemake(workdir, "--profile", "profiles/local", "table_toy_cnce", "--config", "grid=tiny")
    table = (workdir / "results" / "tiny" / "tables" / "table_toy_cnce.md").read_text()
    assert "ours, NCE's critic: mean (2 seeds)" in table and "CNCE w_l=90" in table
    assert (workdir / "results" / "tiny" / "toy_cnce" / "seed1" / "metrics.json").is_file()


def test_paper_grid_plans_every_transfer_cell_on_the_cifar10_encoders(workdir):
    result = snakemake(workdir, "-n", "table3", "--config", "grid=paper", "data_root=/nonexistent")
    counts = job_counts(result.stdout + result.stderr)
    assert counts["transfer"] == counts["transfer_config"] == 7 * 9 * 3
    # Only the CIFAR10 column's encoders; CMC and CMCRing cells export two.
    assert counts["pretrain"] + counts["pretrain_two_encoders"] == 7 * 3 and counts["pretrain_two_encoders"] == 2 * 3
    assert counts["data_check"] == 1 + 9 and counts["make_table3"] == 1


def test_transfer_column_end_to_end_on_generated_shapes(workdir, tmp_path):
    """The smoke grid's transfer column, shrunk: shapes generated under the data root, table3 built."""
    tiny = {
        **SMALL_EVAL,
        "methods": ["IR"],
        "seeds": [0],
        "transfer": {"source": "digits", "datasets": ["shapes"], "all": ONE_EVAL_EPOCH},
        "resources": {**SMALL["resources"], "transfer": {"threads": 1}},
    }
    write_grid(workdir, "tiny", tiny)
    data = tmp_path / "data"
    snakemake(workdir, "--profile", "profiles/local", "table3", "--config", "grid=tiny", f"data_root={data}")
    assert (data / "shapes" / "generated.json").is_file()
    cell = workdir / "results" / "tiny" / "transfer" / "shapes" / "IR" / "seed0"
    manifest = json.loads((cell / "split-manifest.json").read_text())
    assert manifest["counts"] == {"train": 960, "test": 240}
    assert json.loads((cell / "metrics.json").read_text())["protocol"]["split_sha256"] == manifest["sha256"]
    assert (cell.parent.parent / "normalization-16x16.json").is_file()  # shared by the dataset's cells
    assert re.search(
        r"\| IR +\| +(\d+\.\d|diverged \[d\d\]) +\| —",
        (workdir / "results" / "tiny" / "tables" / "table3.md").read_text(),
    )
    again = snakemake(workdir, "-n", "table3", "--config", "grid=tiny", f"data_root={data}")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_paper_grid_plans_the_appendix_studies(workdir):
    result = snakemake(
        workdir,
        "-n",
        "fig_hard_negatives",
        "fig_anneal_policies",
        "fig_negatives_k",
        "--config",
        "grid=paper",
        "data_root=/nonexistent",
    )
    counts = job_counts(result.stdout + result.stderr)
    # hard negatives 1 + 12, policies 8 (the authors' 4, ours 4), k sweep (8 + 8 + 4 + 4) x 3 seeds; all on CIFAR10.
    assert counts["study_pretrain"] == counts["study_config"] == 13 + 8 + 72
    assert (
        counts["make_fig_hard_negatives"] == counts["make_fig_anneal_policies"] == counts["make_fig_negatives_k"] == 1
        and counts["make_table_negatives_k"] == 1
        and counts["data_check"] == 1
    )
    # A branch of the hard-negatives study needs its IR source cell (whose snapshot it starts from).
    branch = "results/paper/study/hard_negatives/cifar10/IRing/t25_e100/seed0/encoder.pt"
    result = snakemake(workdir, "-n", branch, "--config", "grid=paper", "data_root=/nonexistent")
    assert job_counts(result.stdout + result.stderr)["study_pretrain"] == 2
    assert "results/paper/study/hard_negatives/cifar10/IR/source/seed0/encoder.pt" in result.stdout


def test_data_check_reruns_when_the_dataset_changes_and_stops_a_corrupted_one(workdir, tmp_path):
    from tests.data.test_metadataset import write_dtd

    data = tmp_path / "data"
    write_dtd(data)  # a tiny copy, not the publisher's release: checked with skip_checksums
    target = "results/smoke/data/dtd.ok"
    config = ["--config", f"data_root={data}", "skip_checksums=True"]  # snakemake parses True, not true
    snakemake(workdir, "--cores", "1", target, *config, timeout=300)
    assert json.loads((workdir / target).read_text())["checksums"].startswith("skipped (skip_checksums)")
    assert (workdir / "results" / "smoke" / "data" / "dtd.verified.json").is_file()
    assert "Nothing to be done" in snakemake(workdir, "-n", target, *config, timeout=300).stdout
    # An image removed after the check: the check runs again and stops the DAG with one sentence.
    (data / "dtd" / "dtd" / "dtd" / "images" / "banded" / "banded_0003.jpg").unlink()
    result = snakemake(workdir, "--cores", "1", target, *config, check=False, timeout=300)
    assert result.returncode != 0
    assert "ring: Dataset dtd lists 3 test image files but 1 are missing (first: " in result.stderr


def test_the_shipped_slurm_profile_plans_the_paper_grid(workdir):
    """`snakemake --profile profiles/slurm -n all_tables` on a clean checkout: no cluster is needed
    to plan, and the shipped cluster.yaml (every stage block, detection's included) must validate."""
    result = snakemake(workdir, "--profile", "profiles/slurm", "-n", "all_tables", "--config", "grid=paper")
    counts = job_counts(result.stdout + result.stderr)
    assert counts["pretrain"] + counts["pretrain_two_encoders"] == 108 and counts["detection"] == 45
    assert "--launcher slurm" in result.stdout + result.stderr
    status = ring_status(workdir, "--grid", "paper", "--results", workdir / "results")
    # The cell rows: not the total, the stores, nor the outlook's per-stage and grid lines ("pretrain: ...").
    cells = [line for line in status.splitlines() if not line.startswith(("total", "store ", "grid "))]
    rows = [line.split() for line in cells if not line.split()[0].endswith(":")]
    # Every pretraining and linear-evaluation cell, then the appendix studies' 93 cells (13 + 8 + 72), then Table 4's
    # 45 runs.
    assert [row[0] for row in rows] == ["pretrain"] * 108 + ["lincls"] * 108 + ["study"] * 93 + ["detection"] * 45
    assert [row[4] for row in rows] == ["missing"] * (2 * 108 + 93 + 45)
    assert next(line for line in status.splitlines() if line.startswith("total")).endswith("0 failed, 354 missing")


# Issue 50 item 4: sites whose jobs break a node or resource rule that needs no cluster, each planned with rc 0 and no
# word before; the smoke grid's pretraining batch is 64, its detection cells ask the shipped 8 GPUs.
REFUSED_SITES = {
    "ranks": ({"pretrain": {"nodes": 2, "gpus_per_node": 3}}, "batch_size=64 does not split evenly over the 6"),
    "one_task": ({"lincls": {"nodes": 2}}, "lincls runs one task (one process on one GPU), but nodes=2"),
    "node_gpus": ({"largest_node": {"gpus": 4}}, "detection asks for 8 GPUs per node (gpus_per_node=8) but the site"),
    "rank_memory": (
        {"pretrain": {"gpus_per_node": 4, "mem_gb": 64}, "largest_node": {"mem_gb": 128}},
        "pretrain asks for 256 GB of memory per node (4 tasks x mem_gb=64, per task)",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED_SITES))
def test_the_slurm_dry_run_refuses_what_the_run_would_in_one_sentence(workdir, case):
    site, sentence = REFUSED_SITES[case]
    (workdir / "profiles" / "slurm" / "site.yaml").write_text(yaml.safe_dump({"slurm": site}))
    if case == "ranks":  # `ring run -n` from a run folder holding the site's file, as the README plans a grid
        (workdir / "run").mkdir()
        (workdir / "run" / "site.yaml").write_text(yaml.safe_dump({"slurm": site}))
        args = [sys.executable, "-m", "ring.cli", "run", "-n", "all_tables", "--profile", "slurm", "--grid", "smoke"]
        result = subprocess.run(args, cwd=workdir / "run", capture_output=True, text=True, timeout=300)
        written = workdir / "run" / "results"
    else:
        result = snakemake(
            workdir, "--profile", "profiles/slurm", "-n", "all_tables", "--config", "grid=smoke", check=False
        )
        written = workdir / "results"
    said = [line for line in result.stderr.splitlines() if line.startswith("ring: ")]
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert len(said) == 1 and sentence in said[0] and said[0].endswith("."), result.stderr[-2000:]
    assert not written.exists()  # nothing planned is written, nothing submitted


def test_a_misspelt_target_or_a_cell_the_grid_does_not_name_is_one_sentence(workdir):
    # Issue 52 item 3: before, MissingRuleException without the targets, and seed9's cell planned as a new one.
    result = snakemake(workdir, "-n", "tabel1", check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert re.search(
        r"^ring: 'tabel1' is no target of the workflow; choose one of \S+, \S+, all_tables, table1, ",
        result.stderr,
        re.M,
    ), result.stderr
    cell = "results/smoke/pretrain/digits_colour/IR/seed9/encoder.pt"
    result = snakemake(workdir, "-n", cell, check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"ring: {cell} lies in pretrain/digits_colour/IR/seed9, a cell grid smoke does not name;" in result.stderr
    assert "Nothing to be done" not in snakemake(workdir, "-n", cell.replace("seed9", "seed0")).stdout


def test_a_rerun_after_a_killed_snakemake_and_unlock_waits_for_the_orphaned_launcher(workdir):
    """Issue 52 item 4: Snakemake killed while a local launcher trains, `--unlock`, an immediate rerun: a second
    launcher trained the cell beside the orphaned first (overlapping segments, epoch 1 logged twice).  Now the
    second waits on the cell folder's lock and takes the encoder the first finishes: every epoch is logged once."""
    import contextlib
    import os
    import signal

    grid = {**SMALL, "methods": ["IR"], "seeds": [0], "pretrain": {"all": {**SMALL["pretrain"]["all"], "epochs": 8}}}
    write_grid(workdir, "orphan", grid)
    cell = workdir / "results" / "orphan" / "pretrain" / "digits" / "IR" / "seed0"
    run = ["--profile", "profiles/local", str(cell.relative_to(workdir) / "encoder.pt"), "--config", "grid=orphan"]
    with open(workdir / "first.log", "w") as log:
        first = subprocess.Popen(
            [sys.executable, "-m", "snakemake", *run], cwd=workdir, stdout=log, stderr=log, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 300
        while not (cell / "log.jsonl").exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)  # the launcher trains: its first epoch is logged
        assert first.poll() is None, (workdir / "first.log").read_text()[-3000:]
        os.kill(first.pid, signal.SIGKILL)  # Snakemake only: its launcher goes on, orphaned
        first.wait()
        assert json.loads((cell / "running.json").read_text())["state"] == "running"
        snakemake(workdir, "--unlock", *run)
        second = snakemake(workdir, *run)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(first.pid, signal.SIGKILL)  # whatever of the first run is left
    assert "another launcher runs this cell" in second.stdout + second.stderr
    assert "(finished by the launcher this one waited for); nothing to run" in second.stdout + second.stderr
    epochs = [json.loads(line)["epoch"] for line in (cell / "log.jsonl").read_text().splitlines() if line.strip()]
    assert epochs == sorted(set(epochs)) and epochs[-1] == 7, epochs


def test_a_run_whose_slurm_resources_are_refused_writes_nothing_under_results(workdir, tmp_path):
    """Issue 52 item 2: the slurm profile's check of the resources (onstart) refused the run after the grid's
    ownership record had been written into results/<grid>/.  A stand-in sbatch accepts everything; the refusal is
    the resources' own (a time limit shorter than the stop signal's delay)."""
    import os

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sbatch").write_text("#!/bin/sh\nexit 0\n")
    (fake / "sbatch").chmod(0o755)
    write_grid(workdir, "tiny", {**SMALL, "methods": ["IR"], "seeds": [0]})
    mine = workdir / "mine.yaml"
    mine.write_text(yaml.safe_dump({"grid": "tiny", "slurm": {"pretrain": {"time_min": 1}}}))
    files = ["ring/resources/config.yaml", "ring/resources/cluster.yaml", "profiles/slurm/site.yaml", str(mine)]
    target = "results/tiny/pretrain/digits/IR/seed0/encoder.pt"
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--profile", "profiles/slurm", target, "--configfile", *files],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"},
    )
    assert result.returncode == 1 and "signal_delay_s=120 is not shorter than time_min=1 min" in result.stderr
    assert not (workdir / "results").exists(), sorted((workdir / "results").rglob("*"))
