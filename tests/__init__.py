"""The test suite.  Its folders mirror the package (tests/core for ring/core, ...); tests/workflow and tests/project
check the Snakemake workflow and the repository as a whole.  ROOT is the checkout every test reads."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
