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
from ring.config import SNAPSHOT_FILE
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
            *study_files(grid)]


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


# --- Studies of the appendix (ring.grid.Study): hard negatives, annealing policies, negatives k ----

# Every study and variant name over all grids ("none" keeps a constraint valid without studies).
STUDY_NAMES = {name for g in GRIDS.values() for name in g.studies} or {"none"}
VARIANT_NAMES = {v for g in GRIDS.values() for s in g.studies.values() for v in s.variants} or {"none"}


wildcard_constraints:
    study=_one_of(STUDY_NAMES),
    variant=_one_of(VARIANT_NAMES),


STUDY_CELL = "results/{grid}/study/{study}/{dataset}/{method}/{variant}/seed{seed}"
FIGURE = "results/{grid}/tables/fig_{study}.{ext}"
FIGURE_EXTS = ["png", "pdf", "csv"]
# Studies that also write a summary table (name -> table): the k sweep's mean +- std over seeds.
STUDY_TABLES = {"negatives_k": "table_negatives_k"}


def study_encoders(grid: str, study: str) -> list:
    """encoder.pt of every cell of a study (the figure reads log.jsonl and config.yaml beside each)."""
    if study not in GRIDS[grid].studies:
        raise ValueError(f"Grid {grid} plans no study {study!r}; add it under studies: in {GRID_DIR}/{grid}.yaml.")
    s = GRIDS[grid].studies[study]
    return [STUDY_CELL.format(grid=grid, study=study, dataset=s.dataset, method=m, variant=v, seed=seed) + "/encoder.pt"
            for m, v, seed in s.cells()]


def study_source(wildcards) -> list:
    """The cell a study cell starts from (its snapshot is read after the source finishes), or nothing."""
    ref = GRIDS[wildcards.grid].studies[wildcards.study].init_source(wildcards.variant)
    if ref is None:
        return []
    cell = STUDY_CELL.format(grid=wildcards.grid, study=wildcards.study, dataset=wildcards.dataset,
                             method=ref["method"], variant=ref["variant"], seed=wildcards.seed)
    return [cell + "/encoder.pt"]


def study_config(wildcards):
    grid, study = GRIDS[wildcards.grid], wildcards.study
    ref = grid.studies[study].init_source(wildcards.variant)
    init = "" if ref is None else str(Path(study_source(wildcards)[0]).parent / SNAPSHOT_FILE.format(epoch=ref["epoch"]))
    return grid.study_config(study, wildcards.method, wildcards.variant, int(wildcards.seed), config["data_root"], init)


def study_files(grid: str) -> list:
    """Figures (and tables) of every study the grid plans."""
    files = []
    for study in GRIDS[grid].studies:
        files += expand(FIGURE, grid=grid, study=study, ext=FIGURE_EXTS)
        if study in STUDY_TABLES:
            files += expand(TABLE, grid=grid, table=STUDY_TABLES[study], ext=["csv", "md"])
    return files
