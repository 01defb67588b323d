# Helpers shared by every rule: config and grid validation, wildcard constraints, cell paths.
# Only torch-free parts of ring are imported here, so planning a DAG stays fast and light.

import json
import os
import re
import shlex
import sys
from pathlib import Path

import yaml
from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir)))

import ring.grid
from ring.catalog import DATASETS
from ring.config import save as save_config
from ring.methods import METHODS

validate(config, "../schemas/config.schema.yaml")

PYTHON = sys.executable  # the interpreter running Snakemake, so jobs see the same environment
GRID_DIR = Path(workflow.basedir) / "workflow" / "grids"


def _load_grids() -> dict:
    grids = {}
    for path in sorted(GRID_DIR.glob("*.yaml")):
        with open(path) as fh:
            values = yaml.safe_load(fh)
        validate(values, "../schemas/grid.schema.yaml")
        grids[path.stem] = ring.grid.from_dict(path.stem, values)
    return grids


GRIDS = _load_grids()
if config["grid"] not in GRIDS:
    raise ValueError(
        f"config grid={config['grid']!r} has no file {GRID_DIR}/{config['grid']}.yaml; "
        f"choose one of {', '.join(GRIDS)}."
    )


def _one_of(names) -> str:
    return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))


wildcard_constraints:
    grid=_one_of(GRIDS),
    dataset=_one_of(DATASETS),
    method=_one_of(METHODS),
    seed=r"\d+",


# Every cell's folder names its grid, stage, dataset, method and seed.
PRETRAIN_CELL = "results/{grid}/pretrain/{dataset}/{method}/seed{seed}"
LINCLS_CELL = "results/{grid}/lincls/{dataset}/{method}/seed{seed}"
DATA_OK = "results/{grid}/data/{dataset}.ok"
TABLE = "results/{grid}/tables/{table}.{ext}"
TABLE_EXTS = ["csv", "md", "tex"]


def cell_wildcards(grid: str) -> dict:
    """Parallel lists of dataset, method and seed over the cells of ``grid``, for expand(zip)."""
    cells = GRIDS[grid].cells()
    return {"dataset": [c[0] for c in cells], "method": [c[1] for c in cells], "seed": [c[2] for c in cells]}


def lincls_metrics(grid: str) -> list:
    return expand(LINCLS_CELL + "/metrics.json", zip, grid=[grid] * len(GRIDS[grid].cells()), **cell_wildcards(grid))


def provenance_files(grid: str) -> list:
    """Provenance of every finished cell of ``grid`` (read after the cells, never an input)."""
    n = len(GRIDS[grid].cells())
    paths = [*expand(PRETRAIN_CELL + "/provenance.json", zip, grid=[grid] * n, **cell_wildcards(grid)),
             *expand(LINCLS_CELL + "/provenance.json", zip, grid=[grid] * n, **cell_wildcards(grid))]
    return [p for p in paths if Path(p).exists()]


def table_files(grid: str, table: str) -> list:
    return expand(TABLE, grid=grid, table=table, ext=TABLE_EXTS)


def all_tables(grid: str) -> list:
    return [*table_files(grid, "table1"), *expand(TABLE, grid=grid, table="gpu_hours", ext=["csv", "md"]),
            *(table_files(grid, "table4") if GRIDS[grid].detection else [])]


def stage_config(stage: str, wildcards):
    grid = GRIDS[wildcards.grid]
    build = {"pretrain": grid.pretrain_config, "lincls": grid.lincls_config}[stage]
    return build(wildcards.dataset, wildcards.method, int(wildcards.seed), config["data_root"])


def stage_threads(stage: str):
    """CPU threads of a local job; a SLURM client only waits, so it takes one."""
    def threads(wildcards):
        if config["launcher"] == "slurm":
            return 1
        return GRIDS[wildcards.grid].resources.get(stage, {}).get("threads", 1)
    return threads


def launch_options(stage: str) -> str:
    """ring.launch options of a stage: the launcher and, on SLURM, the stage's resources."""
    if config["launcher"] == "local":
        return "--launcher local"
    slurm = config.get("slurm", {})
    resources = {**slurm.get("defaults", {}), **slurm.get(stage, {})}
    return f"--launcher slurm --resources {shlex.quote(json.dumps(resources))}"


# -- Table 4 (detection) ----------------------------------------------------------------------
from ring.detection.tasks import TASKS as DETECTION_TASKS

wildcard_constraints:
    task=_one_of(DETECTION_TASKS),


# Converted backbone of one pretrained encoder, and one Detectron2 cell per (method, task, seed).
DETECTION_WEIGHTS = "results/{grid}/detection/{dataset}/{method}/seed{seed}/backbone.pkl"
DETECTION_CELL = "results/{grid}/detection/{dataset}/{method}/{task}/seed{seed}"
DETECTION_EMBEDDED = "results/{grid}/detection/datasets"  # the generated COCO/VOC-format default


def detection_metrics(grid: str) -> list:
    cells = GRIDS[grid].detection_cells()
    return [DETECTION_CELL.format(grid=grid, dataset=d, method=m, task=t, seed=s) + "/metrics.json" for d, m, t, s in cells]


def detection_datasets_root(grid: str) -> str:
    """Where a grid's detection datasets are: the generated ones, or $DETECTRON2_DATASETS (else data_root/detectron2)."""
    if GRIDS[grid].detection.get("datasets") == "embedded":
        return DETECTION_EMBEDDED.format(grid=grid)
    return os.environ.get("DETECTRON2_DATASETS") or str(Path(config["data_root"]) / "detectron2")


def detection_config(wildcards):
    grid = GRIDS[wildcards.grid]
    return grid.detection_config(wildcards.method, wildcards.task, int(wildcards.seed), detection_datasets_root(wildcards.grid))


def detection_data(wildcards) -> list:
    """The generated dataset when the grid uses it; real datasets are checked by the stage itself."""
    if GRIDS[wildcards.grid].detection.get("datasets") == "embedded":
        return [DETECTION_EMBEDDED.format(grid=wildcards.grid)]
    return []


def cell_dir(path) -> str:
    return str(Path(path).parent)


onsuccess:
    # Print the tables this run was asked for, so `all_tables` ends with them on screen.
    for target in (Path(f) for f in all_tables(config["grid"]) if f.endswith(".md")):
        if target.exists():
            print(f"\n{target}\n\n{target.read_text()}", file=sys.stderr)
