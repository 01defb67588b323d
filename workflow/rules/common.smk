# Shared by several stages: config and grid validation, wildcard constraints, cell paths, the stages' registry of
# their cells' config and hash rules, the launch parts of the stage rules, the run's handlers.  A stage's own paths
# live in its rule file; every other function the rules call is in functions.smk (tests/workflow/test_conventions.py
# keeps them there).
# Only torch-free parts of ring are imported here, so planning a DAG stays fast and light.

import dataclasses
import os
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.settings.types import DeploymentMethod
from snakemake.utils import validate

# A checkout's ring/ beside the Snakefile; the copy a wheel ships (ring/resources/workflow/, `ring run`): installed.
if Path(workflow.basedir, "ring").is_dir():
    sys.path.insert(0, str(Path(workflow.basedir)))

import ring.core.failures
import ring.plan.checks
import ring.plan.gate
import ring.plan.grid
import ring.plan.lineage
import ring.plan.ownership
import ring.plan.targets
import ring.resources
from ring.core.catalog import DATASETS, TRANSFER
from ring.core.cell_paths import BACKBONE, cell_file
from ring.core.config import config_hash, dump as config_text
from ring.core.yaml_reading import read_yaml
from ring.core.methods import METHODS
from ring.plan.rules import TABLE_EXTS, CellConfig, Planned, logged, one_of, stale_input
from ring.reports.captions import cell_axes, cell_config, cell_metrics, feature_maps, shown_table

# ring.resources: the one copy of the grids, schemas and default config (a wheel's `ring` reads it too).
RESOURCES = Path(ring.resources.__file__).parent
GRID_DIR, SCHEMAS = RESOURCES / "grids", RESOURCES / "schemas"
# Every rule's conda environment (relative to the rule files), for `--sdm conda` only; Detectron2 is not in it.
RING_ENV = "../envs/ring.yaml"
# The Python of every job, a rule's params.python: the activated RING_ENV's under `--sdm conda`, else the interpreter
# running Snakemake, so jobs see the same environment.  A Path, which Snakemake leaves out of the params it records
# for its rerun trigger: moving or recreating the environment reruns nothing.  Snakemake's documented Snakefile
# interface says nothing of the deployment method; its settings object (the API's DeploymentSettings) is the one
# place that does, and `--sdm conda` may come from a profile or the command line alike, which `ring run` cannot see.
PYTHON = (
    Path("python") if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method else Path(sys.executable)
)


def _fail_plan(message: str):
    # One sentence on stderr and a non-zero exit, instead of Snakemake's traceback dump.
    print(f"ring: {message}", file=sys.stderr)
    raise SystemExit(1)


def _validated(values, schema: str, what: str):
    """values checked against a schema (Snakemake fills in its defaults); a failure names ``what`` and the key path."""
    try:
        validate(values, schema)
    except WorkflowError as err:
        if not hasattr(err.__context__, "absolute_path"):  # not the jsonschema ValidationError validate() wraps
            raise
        _fail_plan(ring.plan.gate.schema_refusal(err.__context__, what, schema))


# Snakemake reads the config files itself (the default, a profile's cluster.yaml and site.yaml, --configfile),
# keeping the last of a repeated key; each is read again here, so that a repeated key is refused.  Only the merged
# `config` is documented; the files' list (a profile's included) is the workflow object's, there being no other.
for config_file in workflow.configfiles:
    try:
        read_yaml(config_file, "Config file")
    except ValueError as err:
        _fail_plan(str(err))
_validated(config, str(SCHEMAS / "config.schema.yaml"), "Workflow config (ring/resources/config.yaml and --config)")
try:  # only the selected grid is read, validated and checked, before any job exists
    GRID = ring.plan.gate.select(
        config["grid"],
        GRID_DIR,
        lambda values, what: _validated(values, str(SCHEMAS / "grid.schema.yaml"), what),
        skip_checksums=bool(config.get("skip_checksums")),
        # Off for --lint alone: it needs neither Detectron2 nor results/.  No documented name says a lint is running;
        # the workflow object's flag is the one Snakemake itself turns off for it.
        environment=workflow.check_envvars,
    )
except ValueError as err:
    _fail_plan(str(err))
config["grid"] = GRID.name  # targets and results/ use the name (the file's stem)
GRIDS = {GRID.name: GRID}
GRID_FILE = Path(GRID.source).resolve()  # the grid's file, whether it was given by name or by path
# Every job records this grid file and the workflow config in provenance.json (ring.engine.provenance); set here
# for the jobs, never read from the user's environment: no `envvars:` to assert.
os.environ.update(RING_GRID_FILE=str(GRID_FILE), RING_WORKFLOW_CONFIG=str(RESOURCES / "config.yaml"))


wildcard_constraints:
    grid=one_of(GRIDS),
    dataset=one_of({**DATASETS, **TRANSFER}),
    method=one_of(METHODS),
    seed=r"\d+",


# A cell's folder names its grid, stage, and its stage's wildcards (ring.core.cell_paths, the one spelling of the
# layout: every rule file builds its cell patterns with cell_file); the patterns of more than one rule file are here.
PRETRAIN_CONFIG = cell_file("pretrain", "config.yaml")
PRETRAIN_HASH = cell_file("pretrain", "config.hash")
PRETRAIN_ENCODER = cell_file("pretrain", "encoder.pt")
PRETRAIN_FILE = cell_file("pretrain", "{name}")  # METHODS[m].encoder_files
LINCLS_METRICS = cell_file("lincls", "metrics.json")
TRANSFER_METRICS = cell_file("transfer", "metrics.json")
DATA_OK = "results/{grid}/data/{dataset}.ok"
TABLE = "results/{grid}/tables/{table}.{ext}"
TABLE_LOG = "results/{grid}/tables/{table}.log"
DETECTION_EMBEDDED = "results/{grid}/detection/datasets"  # the generated COCO/VOC-format default


def cell_dir(path) -> str:
    return str(Path(path).parent)


def stage_config(stage: str, wildcards):
    grid = GRIDS[wildcards.grid]
    cell = (wildcards.dataset, wildcards.method, int(wildcards.seed), config["data_root"])
    if stage == "lincls":
        return grid.lincls_config(*cell)
    # The decoder a cell recorded when first planned stays its decoder (ring.plan.grid.recorded_decoder).
    path = PRETRAIN_CONFIG.format(grid=wildcards.grid, dataset=cell[0], method=cell[1], seed=cell[2])
    recorded = ring.plan.grid.recorded_decoder(path)
    return grid.pretrain_config(*cell, recorded=recorded)


def detection_datasets_root(grid: str) -> str:
    """Where a grid's detection datasets are: the generated ones, or $DETECTRON2_DATASETS (else data_root/detectron2)."""
    if GRIDS[grid].detection.get("datasets") == "embedded":
        return DETECTION_EMBEDDED.format(grid=grid)
    return os.environ.get("DETECTRON2_DATASETS") or str(Path(config["data_root"]) / "detectron2")


# Each stage's cells' config.yaml and config.hash (ring.plan.rules.CellConfig), by stage: each rule file registers its
# stage, workflow/rules/cells.smk makes the rules (CONFIG_HASH there says why two).
CELL_CONFIGS = {}


# The shell command of each rule a loop makes, by rule name (own_shell).
LOOP_COMMANDS = {}


def own_shell(scope: dict, name: str, command: str) -> str:
    """The shell command of the rule ``name`` that a loop makes (``command`` where the loop defines it), and in a job
    the command its rule was defined with.  Snakemake evaluates a rule's shell expression twice, when it defines the
    rule (the text it shows and compares for its code rerun trigger) and again in each job's rule function, where the
    loop's variables hold their last entry; ``scope``, that function's locals(), names the job's rule there
    (``rule``, the name a shell command reads as ``{rule}``)."""
    if "rule" in scope:
        return LOOP_COMMANDS[scope["rule"]]
    LOOP_COMMANDS[name] = command
    return command


# The jobs this run is to start, recorded by the rules' ``planned`` inputs (ring.plan.rules.Planned); the run's
# handlers (run.smk) check them before the first job.
PLANNED = Planned()


# STALE: an output that the tables would show as stale (ring.plan.lineage: an encoder another config made, a
# number made from another encoder or config) is rerun, as the table footnote's `-R <file>` would: all_tables reruns
# it and a dry run plans it, instead of "Nothing to be done" beside a stale table.  Mtimes and params cannot say it
# (an encoder a job of the previous config wrote after the edit is newer than the new config.hash), and a flag in
# params would rerun the cell again on the next run, once it holds.  The plan marks the file instead, and the rule
# that makes it takes the mark as its `stale` input (ring.plan.rules.stale_input: no file of the cell's).


def stale_evaluation(pattern: str):
    """An evaluation rule's ``stale`` input: marks what its finished metrics.json needs rerun (itself, or the
    backbone it trained on) when the tables would show it stale."""

    def marks(wc) -> list:
        metrics = pattern.format(**dict(wc.items()))
        return stale_input(ring.plan.lineage.stale_target(metrics), [metrics])

    return marks


def stage_threads(stage: str):
    """CPU threads of a local job; a SLURM client only waits, so it takes one."""
    return lambda wc: 1 if config["launcher"] == "slurm" else GRIDS[wc.grid].resources.get(stage, {}).get("threads", 1)


def launch_options(stage: str) -> str:
    """ring.cluster.launch options of a stage: the launcher and, on SLURM, the stage's resources."""
    if config["launcher"] == "local":
        return "--launcher local"
    from ring.cluster.slurm import slurm_options  # not at the top: it imports submitit, which local plans never need

    # --verbose from the command line or a profile: Snakemake's output settings alone hold it (none documented).
    return slurm_options(config.get("slurm", {}), stage, getattr(workflow.output_settings, "verbose", False))


def admitted(stage: str, build=None, output: str | None = None):
    """A SLURM stage rule's ``admitted`` input: no file, but every node and resource rule its job breaks that needs no
    running cluster (ring.cluster.admission.plan_problems: the batch over the ranks, one-task stages, the site's
    largest node, memory per task), checked while Snakemake plans, so a dry run (``-n``) refuses what a run would:
    one sentence each, nothing submitted or written.  ``build(wildcards)`` is the cell's config; a cell whose
    ``output`` is there is not checked (its job does not run)."""

    def check(wildcards) -> list:
        if config["launcher"] != "slurm" or (output and Path(output.format(**dict(wildcards.items()))).exists()):
            return []
        from ring.cluster.admission import plan_problems  # submitit: only SLURM plans import it

        cell = None if build is None else dataclasses.asdict(build(wildcards))
        if problems := plan_problems(stage, config.get("slurm", {}), cell):
            where = f"{stage} {'/'.join(str(v) for v in wildcards)}"
            print("\n".join(f"ring: {where}: {problem}" for problem in problems), file=sys.stderr)
            raise SystemExit(1)
        return []

    return check


# Rules that launch a stage, and the checkpoint interval of their cell (time_min must exceed it).
LAUNCHED_CHECKPOINT_INTERVAL = {
    "pretrain": lambda wc: stage_config("pretrain", wc).checkpoint_interval_min,
    "pretrain_two_encoders": lambda wc: stage_config("pretrain", wc).checkpoint_interval_min,
    "study_pretrain": lambda wc: study_cell_config(wc).checkpoint_interval_min,
}


def for_report(paths: list, caption: str, category: str) -> list:
    """``paths`` with the first PNG or CSV among them shown by ``snakemake --report``, captioned by
    workflow/report/<caption>.rst (a Jinja template that lists the cells the rule read)."""
    shown = next(p for p in paths if p.endswith((".png", ".csv")))
    return [report(p, caption=f"../report/{caption}.rst", category=category) if p == shown else p for p in paths]


def table_outputs(table: str, exts=TABLE_EXTS) -> list:
    # update(): Snakemake keeps the old table files while the rule runs and restores them if it fails
    # (a bad metrics.json is refused by ring.reports.tables), instead of deleting them first.
    return update(for_report(expand(TABLE, table=table, ext=exts, allow_missing=True), table, "Tables"))
