# Helpers shared by every rule: config and grid validation, wildcard constraints, cell paths.
# Only torch-free parts of ring are imported here, so planning a DAG stays fast and light.

import json
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
            *[f for t in GRIDS[grid].tables for f in table_files(grid, t)]]


# Tables with their own cells (the grid's `tables:` block), built by rule make_grid_table.
GRID_TABLES = ["table2", "table_la_variants"]


def table_metrics(grid: str, table: str) -> list:
    """metrics.json of the cells of one table of ``grid`` (Table 1: the top-level datasets x methods)."""
    cells = GRIDS[grid].table_cells(table)
    return expand(LINCLS_CELL + "/metrics.json", zip, grid=[grid] * len(cells),
                  dataset=[c[0] for c in cells], method=[c[1] for c in cells], seed=[c[2] for c in cells])


def two_encoder_methods() -> list:
    """Methods whose pretraining cells export an L and an ab trunk (CMC and its variants)."""
    return [name for name, m in METHODS.items() if len(m.encoder_files) > 1]


def encoder_companions(wildcards) -> list:
    """Encoder files of a pretraining cell besides encoder.pt (CMC's encoder_ab.pt)."""
    names = METHODS[wildcards.method].encoder_files[1:]
    return [expand(PRETRAIN_CELL + "/" + n, **wildcards)[0] for n in names]


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


def cell_dir(path) -> str:
    return str(Path(path).parent)


onsuccess:
    # Print the tables this run was asked for, so `all_tables` ends with them on screen.
    for target in (Path(f) for f in all_tables(config["grid"]) if f.endswith(".md")):
        if target.exists():
            print(f"\n{target}\n\n{target.read_text()}", file=sys.stderr)
