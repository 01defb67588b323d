"""Running the Snakemake workflow in a scratch copy (``workdir``, tests/conftest.py), shared by the workflow tests and
the tests that plan or run a grid elsewhere (docs, checks, the plug-in guide)."""

import json
import re
import subprocess
import sys
from html import unescape
from pathlib import Path

import yaml


def snakemake(workdir: Path, *args, check: bool = True, timeout: int = 1500) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=workdir, capture_output=True, text=True, timeout=timeout
    )
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


def entry(metrics: dict) -> str:
    """How a table starts a linear-evaluation cell's entry: its top-1, or the verdict of a diverged evaluation
    (the test grids' one-epoch encoders may give one: ring.engine.health.divergence)."""
    return f"{metrics['top1']:.1f}" if "top1" in metrics else "diverged"


def report_captions(html: str) -> dict[str, str]:
    """The rendered caption (HTML) of each file a `snakemake --report` HTML shows, by file name."""
    results = json.loads(re.search(r"var results = (\{.*?\});\n", html, re.S).group(1))
    return {Path(path).name: result["caption"] for path, result in results.items()}


def caption_text(caption_html: str) -> str:
    """A caption's words, its tags left out, one space between them."""
    return " ".join(unescape(re.sub(r"<[^>]+>", "", caption_html)).split())


def write_grid(workdir: Path, name: str, values: dict) -> None:
    (workdir / "ring" / "resources" / "grids" / f"{name}.yaml").write_text(yaml.safe_dump(values))


TINY = {
    "datasets": ["digits"],
    "methods": ["IR", "MoCoRing"],
    "seeds": [0, 1],
    "pretrain": {
        "all": {
            "epochs": 1,
            "batch_size": 64,
            "lr_milestones": [],
            "resize": 32,
            "crop": 32,
            "bank_negatives": 256,
            "queue_size": 256,
            "bn_groups": 2,
            "ring_anneal_epochs": 1,
            "knn_every": 0,
            "num_workers": 0,
        }
    },
    "lincls": {
        "all": {"epochs": 2, "batch_size": 64, "resize": 32, "crop": 32, "augmentation": "none", "num_workers": 0}
    },
    "resources": {"pretrain": {"threads": 1}, "lincls": {"threads": 1}},
}

# The workflow tests' grid: TINY at 16 pixels.  They test what the workflow decides (what reruns, what is kept, what
# the tables show), not accuracy; 16-pixel views make each pretraining and evaluation job's compute about 4x smaller
# (ResNet-18's maps stay 1 x 1 at layer4).  TINY itself stays at 32 pixels, as tests/workflow/test_slurm_*.py (which
# imports it) was written and measured with.
SMALL = {
    **TINY,
    "pretrain": {"all": {**TINY["pretrain"]["all"], "resize": 16, "crop": 16}},
    "lincls": {"all": {**TINY["lincls"]["all"], "resize": 16, "crop": 16}},
}


# One Table 4 cell on SMALL's IR encoder (the generated datasets, a few CPU iterations), for the tests that lay its
# cells out finished without training (tests/helpers.py's finished_detection).
DETECTION = {
    **SMALL,
    "methods": ["IR"],
    "seeds": [0],
    "detection": {
        "source": "digits",
        "methods": ["IR"],
        "tasks": ["voc_det"],
        "datasets": "embedded",
        "all": {"num_gpus": 0, "num_workers": 0, "overrides": {"SOLVER.MAX_ITER": 30}},
    },
    "resources": {**SMALL["resources"], "detection": {"threads": 1}},
}


# The jobs that one retrained pretraining cell brings: itself, its linear evaluation and the tables that read it.
ONE_CELL_RETRAINED = {
    "all_tables": 1,
    "lincls": 1,
    "make_gpu_hours": 1,
    "make_table1": 1,
    "pretrain": 1,
    "pretrain_config": 1,
    "pretrain_hash": 1,
    "total": 7,
}


# README command (1), `all_tables` on the smoke grid, in two halves that pytest-xdist runs side by side, each a file of
# its own (--dist loadfile): Tables 1-3 with GPU-hours (tests/workflow/test_quick_start.py), and what reads only a few
# of their encoders or none, Table 4, the toy and the studies (tests/workflow/test_quick_start_appendix.py).  As one
# test it was the suite's critical path (775 s under two workers, 397 s alone; the fresh-clone CI of f88f2be).
# test_quick_start_appendix.py::test_the_halves_plan_exactly_all_tables keeps their union all_tables.
QUICK_START_HALVES = {
    "tables": ("table1", "table2", "table_la_variants", "table3", "gpu_hours"),
    "appendix": ("table4", "table_toy_cnce", "fig_hard_negatives", "fig_anneal_policies", "fig_negatives_k"),
}


# Each half's Snakemake run may take this long, and its test 300 s more (pytest-timeout's mark on each; the suite's
# 1,800 s elsewhere).  README command (1) is the suite's largest piece of work and its time follows the host: 517 s in
# the CI of edaca0b; on an AVX2-only host (2026-12-02) 1,340 s of the first half beside test_pretrain.py in a full
# `pytest -n 2` run, about 2,100 s in a fresh-clone CI, and the appendix half 1,628 s beside that CI; the former
# limits (1,700 and 1,500 s) would have stopped both.  A hang detector about 1.5 times the longest of those, not a speed
# limit: README (1)'s time on a quiet machine is benchmarks/quickstart.sh's figure.
QUICK_START_TIMEOUT_S = 3300


def ring_status(workdir: Path, *args) -> str:
    """What `ring status` (ring.cluster.batch's status) prints in ``workdir`` with ``args``."""
    result = subprocess.run(
        [sys.executable, "-m", "ring.cluster.batch", "status", *map(str, args)],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def status_rows(workdir: Path, grid: str) -> list[tuple[str, str]]:
    """(stage, state) of each cell's row that `ring status --grid grid` prints in ``workdir``."""
    rows = [line.split() for line in ring_status(workdir, "--grid", grid).splitlines()]
    return [(row[0], row[4]) for row in rows if len(row) > 4 and row[3].startswith("seed")]
