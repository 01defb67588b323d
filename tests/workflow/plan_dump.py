"""Every job a grid's dry run plans, as sorted text: its rule, wildcards, files and shell command.

    python tests/workflow/plan_dump.py ROOT GRID > plan.txt     # ROOT: a checkout (or `git archive` of one)

Two checkouts whose dumps are equal plan the same jobs: used to show that a change of the workflow's code left every
job's rule, files and shell as they were.  The workflow is copied into a scratch folder (results/ empty), every
target of the grid is asked for, and what differs between two runs of the same plan (job ids, reasons, the scratch
folder's path) is left out.  ``tiny`` is the workflow tests' grid (tests/workflow/runs.py), written into the copy.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

# Lines of a job's block that name no property of the job: its number in this plan, why it runs (always "missing
# output files" in an empty results/), the scratch folder Snakemake picks as tmpdir, and the time it was planned.
VOLATILE = re.compile(r"^\s*(jobid|reason|resources):|^\[\w{3} \w{3} .*\d{4}\]$")
JOB_START = re.compile(r"^(local)?(rule|checkpoint) \S+:$")


# Every job of a grid: its tables and figures (all_tables covers each block the grid plans; a figure rule of a study
# the grid lacks is refused), and the data rules no table needs.
TARGETS = ("all_tables", "fetch_data", "prepare_stores")


def copy_checkout(root: Path, dest: Path) -> None:
    for name in ("Snakefile", "workflow", "profiles", "ring"):
        src = root / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, dest / name)


def tiny_grid(root: Path) -> dict:
    sys.path.insert(0, str(root))
    from tests.workflow.runs import TINY

    return TINY


def jobs(output: str) -> list[str]:
    """Each job's block of a dry run's output, its volatile lines left out."""
    blocks, block = [], None
    for line in output.splitlines():
        if JOB_START.match(line):
            block = [line]
            blocks.append(block)
        elif line.startswith("Job stats:") or line.startswith("This was a dry-run"):
            block = None
        elif block is not None and line.strip() and not VOLATILE.match(line):
            block.append(line.rstrip())
    return sorted("\n".join(b) for b in blocks)


def plan(root: Path, grid: str) -> str:
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        copy_checkout(root, work)
        if grid == "tiny":
            (work / "ring" / "resources" / "grids" / "tiny.yaml").write_text(yaml.safe_dump(tiny_grid(root)))
        env = {**os.environ, "PYTHONPATH": str(work)}
        run = subprocess.run(
            [sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "1", *TARGETS, "--config", f"grid={grid}"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        )
        if run.returncode:
            raise SystemExit(f"dry run of {grid} in {root} failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
        return "\n\n".join(jobs(run.stdout.replace(scratch, "<work>"))) + "\n"


if __name__ == "__main__":
    sys.stdout.write(plan(Path(sys.argv[1]).resolve(), sys.argv[2]))
