"""Planning cost of the workflow: `snakemake -n all_tables` on the paper grid (target <= 5 s).

python benchmarks/orchestration.py [--tiny]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, write  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def plan(grid: str) -> tuple[float, int]:
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "all_tables", "--config", f"grid={grid}", "data_root=/nonexistent"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    elapsed = time.perf_counter() - start
    total = int(re.search(r"^total\s+(\d+)", out.stdout + out.stderr, re.M).group(1))
    return elapsed, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args()
    repeats = 1 if args.tiny else 5
    runs = [plan("paper") for _ in range(repeats)]
    write(
        "orchestration",
        {
            "machine": machine(),
            "command": "snakemake -n all_tables --config grid=paper",
            "jobs_planned": runs[0][1],
            "median_s": statistics.median(r[0] for r in runs),
            "runs_s": [r[0] for r in runs],
        },
        tiny=args.tiny,
    )


if __name__ == "__main__":
    main()
