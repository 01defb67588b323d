"""README's "Rerunning one cell", its three commands run as written on the smoke grid's IRing cell: the smoke grid,
in a copy of the workflow, cut to that one cell (Table 1 of IRing), so that recomputing it and `all_tables` after it
costs one cell, not the whole quick start (tests/workflow/test_quick_start.py builds the rest)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.documented import documented_commands
from tests.workflow.runs import entry, job_counts, snakemake

pytestmark = pytest.mark.slow  # trains a cell twice through Snakemake


def test_readmes_rerun_of_one_cell_runs_as_written(workdir):
    smoke = workdir / "ring" / "resources" / "grids" / "smoke.yaml"
    values = yaml.safe_load(smoke.read_text())
    kept = {"description", "datasets", "seeds", "lincls", "resources"}
    pretrain = {"all": values["pretrain"]["all"]}  # by_method names methods this cut grid lacks
    smoke.write_text(yaml.safe_dump({**{k: values[k] for k in kept}, "methods": ["IRing"], "pretrain": pretrain}))
    snakemake(workdir, "--profile", "profiles/local", "all_tables", timeout=900)
    tables = workdir / "results" / "smoke" / "tables"
    (workdir / ".venv").symlink_to(Path(sys.executable).parents[1])  # README's .venv is this interpreter's
    table1 = tables / "table1.md"
    before = table1.stat().st_mtime_ns
    build_one, remove, recompute = documented_commands("README.md", "Rerunning one cell")
    result = subprocess.run(build_one, shell=True, cwd=workdir, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and "Nothing to be done" in result.stdout + result.stderr  # it is built already
    subprocess.run(remove, shell=True, cwd=workdir, check=True)
    result = subprocess.run(recompute, shell=True, cwd=workdir, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    counts = job_counts(result.stdout + result.stderr)
    assert counts["pretrain"] == 1 and counts["lincls"] == 1 and counts["make_table1"] == 1  # the cell, then downstream
    assert table1.stat().st_mtime_ns > before
    iring = json.loads((workdir / "results/smoke/lincls/digits_colour/IRing/seed0/metrics.json").read_text())
    (row,) = [line for line in table1.read_text().splitlines() if line.startswith("| IRing ")]
    assert re.match(rf"\| IRing +\| +{entry(iring)} ", row), table1.read_text()  # the retrained cell's number
