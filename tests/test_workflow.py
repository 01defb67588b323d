"""The Snakemake DAG, run for real in a copy of the workflow (results never touch the checkout)."""

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def workdir(tmp_path) -> Path:
    for name in ("Snakefile", "workflow", "profiles"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    return tmp_path


def snakemake(workdir: Path, *args, check: bool = True, timeout: int = 900) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=workdir, capture_output=True, text=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table Snakemake prints before running (or for a dry run)."""
    block = output.split("Job stats:")[1]
    counts = {}
    for line in block.splitlines()[3:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts


def write_grid(workdir: Path, name: str, values: dict) -> None:
    (workdir / "workflow" / "grids" / f"{name}.yaml").write_text(yaml.safe_dump(values))


TINY = {
    "datasets": ["digits"], "methods": ["IR", "MoCoRing"], "seeds": [0, 1],
    "pretrain": {"all": {"epochs": 1, "batch_size": 64, "lr_milestones": [], "resize": 32, "crop": 32,
                         "bank_negatives": 256, "queue_size": 256, "bn_groups": 2, "ring_anneal_epochs": 1,
                         "knn_every": 0, "num_workers": 0}},
    "lincls": {"all": {"epochs": 2, "batch_size": 64, "resize": 32, "crop": 32, "augmentation": "none", "num_workers": 0}},
    "resources": {"pretrain": {"threads": 1}, "lincls": {"threads": 1}},
}


def test_paper_grid_plans_every_table1_cell_without_any_dataset(workdir):
    start = time.monotonic()
    result = snakemake(workdir, "-n", "all_tables", "--config", "grid=paper", "data_root=/nonexistent")
    elapsed = time.monotonic() - start
    counts = job_counts(result.stdout + result.stderr)
    assert counts["pretrain"] == counts["lincls"] == 7 * 4 * 3
    assert counts["data_check"] == 4 and counts["make_table1"] == 1
    assert elapsed < 60, f"planning took {elapsed:.1f}s"  # ~2 s here; the benchmark tracks the real figure


def test_bad_config_fails_on_load_with_one_sentence(workdir):
    result = snakemake(workdir, "-n", "all_tables", "--config", "grid=papr", check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "config grid='papr' has no file" in output and "choose one of paper, smoke" in output
    result = snakemake(workdir, "-n", "all_tables", "--config", "data_dir=x", check=False)
    assert result.returncode != 0
    assert "Additional properties are not allowed ('data_dir' was unexpected)" in result.stdout + result.stderr


def test_missing_dataset_fails_the_dag_before_any_training_job(workdir, tmp_path):
    result = snakemake(workdir, "--cores", "1", "results/paper/lincls/cifar10/IR/seed0/metrics.json",
                       "--config", "grid=paper", f"data_root={tmp_path / 'data'}", check=False, timeout=120)
    assert result.returncode != 0
    assert f"ring: Data root {tmp_path / 'data'} does not exist" in result.stderr
    assert not (workdir / "results" / "paper" / "pretrain" / "cifar10" / "IR" / "seed0" / "pretrain.log").exists()


def test_not_implemented_method_fails_its_cell_with_a_clear_sentence(workdir):
    write_grid(workdir, "tiny", {**TINY, "methods": ["CMC"], "seeds": [0]})
    result = snakemake(workdir, "--cores", "1", "results/tiny/pretrain/digits/CMC/seed0/encoder.pt",
                       "--config", "grid=tiny", check=False, timeout=300)
    assert result.returncode != 0
    assert "ring: Method CMC is not implemented yet (CMC's two L/ab encoders are issue #4)" in result.stdout + result.stderr


def test_tiny_grid_end_to_end_then_rerun_exactly_one_cell(workdir):
    write_grid(workdir, "tiny", TINY)
    snakemake(workdir, "--profile", "profiles/local", "all_tables", "--config", "grid=tiny")
    table = (workdir / "results" / "tiny" / "tables" / "table1.md").read_text()
    assert re.search(r"\| IR +\| \d+\.\d ± \d+\.\d ", table)
    assert re.search(r"\| MoCoRing +\| \d+\.\d ± \d+\.\d ", table)

    # Nothing left to do.
    again = snakemake(workdir, "--profile", "profiles/local", "all_tables", "--config", "grid=tiny")
    assert "Nothing to be done" in again.stdout + again.stderr

    # Rerun one cell: remove its folder (every stage resumes, so a kept checkpoint would be reused)
    # and force its output; only its jobs run, then the table they feed.
    cell = "results/tiny/lincls/digits/MoCoRing/seed1"
    shutil.rmtree(workdir / cell)
    result = snakemake(workdir, "--profile", "profiles/local", "all_tables", "-R", f"{cell}/metrics.json", "--config", "grid=tiny")
    assert job_counts(result.stdout + result.stderr) == {
        "all_tables": 1, "lincls": 1, "lincls_config": 1, "make_gpu_hours": 1, "make_table1": 1, "total": 5}

    # Retrain one pretraining cell: it, its linear evaluation and the table.
    cell = "results/tiny/pretrain/digits/IR/seed0"
    shutil.rmtree(workdir / cell)
    result = snakemake(workdir, "--profile", "profiles/local", "all_tables", "-R", f"{cell}/encoder.pt", "--config", "grid=tiny")
    assert job_counts(result.stdout + result.stderr) == {
        "all_tables": 1, "lincls": 1, "make_gpu_hours": 1, "make_table1": 1, "pretrain": 1, "pretrain_config": 1,
        "total": 6}
    # Training is deterministic on the CPU: the retrained cell reproduces its metrics exactly.
    assert "Nothing to be done" in snakemake(workdir, "-n", "all_tables", "--config", "grid=tiny").stdout


def test_readme_quick_start_builds_table1_on_the_embedded_default(workdir):
    """README command (1), minus the install: the smoke grid's all_tables prints Table 1."""
    result = snakemake(workdir, "--profile", "profiles/local", "all_tables", timeout=1200)
    printed = result.stdout + result.stderr
    for method in ("IR", "IRing", "MoCo", "MoCoRing"):
        assert re.search(rf"\| {method} +\| \d+\.\d", printed), method
    csv = (workdir / "results" / "smoke" / "tables" / "table1.csv").read_text()
    assert csv.count("digits") == 4
    # The appendix's studies at smoke size: three figures and the k table, every method at both k.
    tables = workdir / "results" / "smoke" / "tables"
    for study in ("hard_negatives", "anneal_policies", "negatives_k"):
        assert all((tables / f"fig_{study}.{ext}").stat().st_size > 0 for ext in ("png", "pdf", "csv")), study
    k_table = (tables / "table_negatives_k.md").read_text()
    for method in ("IR", "IRing", "MoCo", "MoCoRing"):
        assert re.search(rf"\| {method} +\| \d+\.\d +\| \d+\.\d", k_table), method


def test_paper_grid_plans_the_appendix_studies(workdir):
    result = snakemake(workdir, "-n", "fig_hard_negatives", "fig_anneal_policies", "fig_negatives_k",
                       "--config", "grid=paper", "data_root=/nonexistent")
    counts = job_counts(result.stdout + result.stderr)
    # hard negatives 1 + 12, policies 5, k sweep (8 + 8 + 4 + 4) x 3 seeds; all on CIFAR10.
    assert counts["study_pretrain"] == counts["study_config"] == 13 + 5 + 72
    assert counts["make_study_figure"] == 3 and counts["make_table_negatives_k"] == 1 and counts["data_check"] == 1
    # A branch of the hard-negatives study needs its IR source cell (whose snapshot it starts from).
    branch = "results/paper/study/hard_negatives/cifar10/IRing/t25_e100/seed0/encoder.pt"
    result = snakemake(workdir, "-n", branch, "--config", "grid=paper", "data_root=/nonexistent")
    assert job_counts(result.stdout + result.stderr)["study_pretrain"] == 2
    assert "results/paper/study/hard_negatives/cifar10/IR/source/seed0/encoder.pt" in result.stdout
