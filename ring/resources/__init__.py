"""The package's data, the one copy of each file: a checkout's workflow and benchmark scripts read them here, and an
installed wheel carries them (pyproject.toml's package-data), so ``ring`` never reads a file of the checkout.

* ``grids/NAME.yaml``: the named grids (``grid=NAME``, ``ring estimate --grid NAME``);
* ``schemas/``: the grid file's and the workflow config's JSON schemas;
* ``config.yaml``: the workflow's default config (the Snakefile's configfile);
* ``cluster.yaml``: the slurm profile's per-stage resources, under the site's ``profiles/slurm/site.yaml``;
* ``figures/``: the committed benchmark results (``benchmarks/*.py`` write them here); the wheel carries the ones
  ``ring estimate`` prices from (throughput, Ring's selection ratios, the JPEG path);
* ``requirements-detection.txt``: Detectron2's runtime requirements (the installers install them; the plan names
  them when one is missing);
* ``install/``: Detectron2's installers, CPU and cluster (``ring install-detection [--cluster]``).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def path(*parts: str) -> Path:
    """A file or folder of the package's data, as a path: the workflow, glob and jsonschema want real files."""
    root = files(__name__)
    if not isinstance(root, Path):  # a zipped import (zipimport, a .pyz): no file system path to hand out
        raise RuntimeError(
            f"ring-bench's data lies inside an archive ({root}); install the package as files (pip install)."
        )
    return root.joinpath(*parts)


GRIDS = path("grids")
SCHEMAS = path("schemas")
CONFIG = path("config.yaml")
CLUSTER = path("cluster.yaml")
FIGURES = path("figures")
DETECTION_REQUIREMENTS = path("requirements-detection.txt")
INSTALLERS = path("install")
