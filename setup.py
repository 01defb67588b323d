"""The workflow as package data: a wheel carries the Snakefile, workflow/ and profiles/ under ring/resources/workflow/,
laid out as in a checkout, so that an installed ``ring run`` runs the workflow from any folder
(ring/cluster/workflow.py).
Copied when the package is built, not kept twice in the repository: a checkout's ``snakemake`` reads the files where
they are.  Everything else is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).parent
# What the shipped workflow is, relative to the repository's root (MANIFEST.in puts the same into an sdist).
WORKFLOW = ("Snakefile", "workflow", "profiles")


class BuildWithWorkflow(build_py):
    def run(self):
        super().run()
        shipped = Path(self.build_lib, "ring", "resources", "workflow")
        for name in WORKFLOW:
            source = ROOT / name
            if source.is_dir():
                ignore = shutil.ignore_patterns("__pycache__", ".snakemake")
                shutil.copytree(source, shipped / name, ignore=ignore, dirs_exist_ok=True)
            else:
                shipped.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, shipped / name)


setup(cmdclass={"build_py": BuildWithWorkflow})
