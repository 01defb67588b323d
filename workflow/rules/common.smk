# Helpers shared by every rule: config and grid validation, wildcard constraints, cell paths.
# Only torch-free parts of ring are imported here, so planning a DAG stays fast and light.

import json
import os
import re
import shlex
import sys
from pathlib import Path, PurePosixPath

import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir)))

import ring.core.files
import ring.plan.checks
import ring.plan.grid
import ring.plan.lineage
import ring.plan.ownership
from ring.plan.catalog import DATASETS, TRANSFER, loader_verifies, skip_refusal
from ring.plan.catalog import fingerprint as dataset_fingerprint
from ring.data.fetch import grid_targets
from ring.data.metadataset import GENERATED, GENERATORS
from ring.core.config import SNAPSHOT_FILE, config_hash
from ring.core.config import dump as config_text
from ring.plan.rerun import RUN_RECORD
from ring.core.methods import METHODS

GRID_DIR = Path(workflow.basedir, "workflow", "grids")
# The conda environment of every rule (relative to the rule files), used only with `--sdm conda`;
# otherwise every job runs in the environment running Snakemake.  Detectron2 (Table 4) is not in it.
RING_ENV = "../envs/ring.yaml"


def _interpreter():
    """The Python of every job, a rule's ``params.python``.  A Path, which Snakemake leaves out of
    the params it records for its rerun trigger: moving or recreating the environment reruns nothing."""
    from snakemake.settings.types import DeploymentMethod

    if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
        return Path("python")  # the activated RING_ENV's
    return Path(sys.executable)  # the interpreter running Snakemake, so jobs see the same environment


PYTHON = _interpreter()


def _fail_plan(message: str):
    # One sentence on stderr and a non-zero exit, instead of Snakemake's traceback dump.
    print(f"ring: {message}", file=sys.stderr)
    raise SystemExit(1)


def _validated(values, schema: str, what: str):
    """values checked against a schema; a failure names ``what`` (the file) and the key path."""
    from snakemake.exceptions import WorkflowError

    try:
        validate(values, schema)
    except WorkflowError as err:
        cause = err.__context__  # the jsonschema ValidationError validate() wraps
        if not hasattr(cause, "absolute_path"):
            raise
        key = PurePosixPath(*map(str, cause.absolute_path)).as_posix() if cause.absolute_path else "(top level)"
        _fail_plan(f"{what}: key {key}: {cause.message}; fix it (the schema is workflow/schemas/{Path(schema).name}).")


def _read_grid(path: Path) -> dict:
    # YAML 1.2 floats (3e-2); a syntax error, a repeated key, an empty file or a list: one sentence each.
    try:
        return ring.plan.grid.read(path)
    except ValueError as err:
        _fail_plan(str(err))


def _check_configfiles():
    """Snakemake reads the workflow config files itself (workflow/config.yaml, a profile's cluster.yaml and site.yaml,
    --configfile), keeping the last of a repeated key; each is read again here, so that a repeated key is refused."""
    from ring.core.config import read_yaml

    for path in workflow.configfiles:
        try:
            read_yaml(path, "Config file")
        except ValueError as err:
            _fail_plan(str(err))


def grid_path(value: str) -> Path:
    """``grid=NAME`` is workflow/grids/NAME.yaml; ``grid=PATH.yaml`` is that file, anywhere."""
    try:
        return ring.plan.grid.resolve(value, GRID_DIR)
    except ValueError as err:
        _fail_plan(f"config {err}")


def _load_grid(value: str) -> dict:
    """Only the selected grid is read and validated: a broken neighbour never blocks a run."""
    path = grid_path(value)
    values = _read_grid(path)
    _validated(values, "../schemas/grid.schema.yaml", f"Grid file {path}")
    try:
        # Every cell's full config of every stage is checked here (ring.plan.checks), before any job exists.
        grid = ring.plan.grid.from_dict(path.stem, values, source=str(path))
    except ValueError as err:
        _fail_plan(str(err))
    config["grid"] = grid.name  # targets and results/ use the name (the file's stem)
    # No Detectron2 for Table 4, an unwritable results folder, or one another grid file of this name made.
    if problem := ring.plan.checks.environment(grid):
        _fail_plan(problem)
    for broken in METHODS.broken.values():  # this grid names none of its methods: a line, not a refusal
        print(
            f"ring: warning: {broken}; its methods are unavailable until that package is fixed or uninstalled.",
            file=sys.stderr,
        )
    if config.get("skip_checksums"):  # refused here, not after the data check passed and the job failed
        refused = [d for d in dict.fromkeys(grid_targets(grid)) if d in DATASETS and loader_verifies(d)]
        if refused:
            _fail_plan(skip_refusal(refused[0]))
    # Every job records this grid file and the workflow config in provenance.json (ring.engine.provenance).
    # Set here for the jobs, never read from the user's environment: no `envvars:` to assert.
    os.environ.update(
        RING_GRID_FILE=str(path.resolve()),
        RING_WORKFLOW_CONFIG=str(Path(workflow.basedir, "workflow", "config.yaml")),
    )
    return {grid.name: grid}, path.resolve()


_check_configfiles()
_validated(config, "../schemas/config.schema.yaml", "Workflow config (workflow/config.yaml and --config)")
# GRID_FILE: the grid's file, whether it was given by name or by path.
GRIDS, GRID_FILE = _load_grid(config["grid"])


def _one_of(names) -> str:
    return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))


wildcard_constraints:
    grid=_one_of(GRIDS),
    dataset=_one_of({**DATASETS, **TRANSFER}),
    method=_one_of(METHODS),
    seed=r"\d+",


# CONFIG_HASH: a stage's cell has two light rules. <stage>_hash writes config.hash, the hash of the values that
# change results (ring.core.config.config_hash), and reruns only when it changes; <stage>_config, after it, writes
# config.yaml, every value the job reads (runtime knobs such as threads, compile and num_workers included), and
# reruns on any edit.  The stage rule takes config.hash as a plain input and config.yaml as ancient(), so a
# runtime-only edit rewrites config.yaml and submits nothing, while any other edit reruns exactly the cells it
# changes.  A rule that reads an encoder takes its pretraining cell's config.hash too, as an edited pretraining config
# whose job failed removed the encoder, a missing intermediate that alone would not rerun the evaluation (the next
# run would report "Nothing to be done").  In this order, not the other: Snakemake never looks at the params of a
# job that follows one it reruns, so a hash rule after config.yaml's would miss every edit.


def results_key(build):
    """A hash rule's params entry: the config hash of the cell config ``build(wildcards)``."""
    return lambda wc: config_hash(build(wc))


# STALE: an output that the tables would show as stale (ring.plan.lineage: an encoder another config made, a
# number made from another encoder or config) is forced, as the table footnote's `-R <file>` would: all_tables reruns
# it and a dry run plans it, instead of "Nothing to be done" beside a stale table (issue 34, item 2).  Mtimes and
# params cannot say it (an encoder a job of the previous config wrote after the edit is newer than the new
# config.hash), and a flag in params would rerun the cell again on the next run, once it holds.  The stage rules'
# `stale` inputs are these functions: no file, only the mark, added where Snakemake adds its incomplete outputs
# (the DAG's forced files, read when it decides what runs, after every job's inputs are known).


def _force(paths) -> None:
    dag = getattr(workflow, "_dag", None)
    if dag is not None and paths:
        dag.forcefiles.update(map(str, paths))


def stale_encoder(wildcards) -> list:
    """A pretraining rule's ``stale`` input: forces the cell's encoder when another config than the grid's made it."""
    encoder = Path(PRETRAIN_ENCODER.format(**dict(wildcards.items())))
    if not encoder.is_file():  # nothing to be stale (and no config to build: plans stay fast)
        return []
    found = ring.plan.lineage.superseded(encoder.parent, config_hash(stage_config("pretrain", wildcards)))
    _force([found.target] if found else [])
    return []


def stale_evaluation(pattern: str):
    """An evaluation rule's ``stale`` input: forces what its finished metrics.json needs rerun (itself, or the
    encoder it evaluated) when the tables would show it stale."""

    def mark(wildcards) -> list:
        path = Path(pattern.format(**dict(wildcards.items())))
        metrics = ring.core.files.read_record(path) if path.is_file() else {}
        found = ring.plan.lineage.stale(path, metrics) if metrics else None
        _force([found.target] if found else [])
        return []

    return mark


def write_hash() -> str:
    """The shell command of a hash rule (params results)."""
    return logged("printf '%s\\n' {params.results:q} > {output:q}")


# Every cell's folder names its grid, stage, dataset, method and seed; each file a rule reads or
# writes is spelled out as one pattern, and a rule's logs lie beside its outputs.
PRETRAIN_CONFIG = "results/{grid}/pretrain/{dataset}/{method}/seed{seed}/config.yaml"
PRETRAIN_CONFIG_LOG = "results/{grid}/pretrain/{dataset}/{method}/seed{seed}/config.log"
PRETRAIN_HASH = "results/{grid}/pretrain/{dataset}/{method}/seed{seed}/config.hash"
PRETRAIN_HASH_LOG = "results/{grid}/pretrain/{dataset}/{method}/seed{seed}/config.hash.log"
PRETRAIN_ENCODER = "results/{grid}/pretrain/{dataset}/{method}/seed{seed}/encoder.pt"
PRETRAIN_LOG = "results/{grid}/pretrain/{dataset}/{method}/seed{seed}/pretrain.log"
PRETRAIN_PROVENANCE = "results/{grid}/pretrain/{dataset}/{method}/seed{seed}/provenance.json"
# A pretraining cell's encoder files by name (METHODS[m].encoder_files: CMC's encoder_ab.pt too).
PRETRAIN_FILE = "results/{grid}/pretrain/{dataset}/{method}/seed{seed}/{name}"
LINCLS_CONFIG = "results/{grid}/lincls/{dataset}/{method}/seed{seed}/config.yaml"
LINCLS_CONFIG_LOG = "results/{grid}/lincls/{dataset}/{method}/seed{seed}/config.log"
LINCLS_HASH = "results/{grid}/lincls/{dataset}/{method}/seed{seed}/config.hash"
LINCLS_HASH_LOG = "results/{grid}/lincls/{dataset}/{method}/seed{seed}/config.hash.log"
LINCLS_METRICS = "results/{grid}/lincls/{dataset}/{method}/seed{seed}/metrics.json"
LINCLS_LOG = "results/{grid}/lincls/{dataset}/{method}/seed{seed}/lincls.log"
LINCLS_PROVENANCE = "results/{grid}/lincls/{dataset}/{method}/seed{seed}/provenance.json"
DATA_OK = "results/{grid}/data/{dataset}.ok"
DATA_LOG = "results/{grid}/data/{dataset}.log"  # its one sentence, for the failed-run summary and ring.cluster.batch
FETCH_LOG = "results/{grid}/data/fetch.log"
TABLE = "results/{grid}/tables/{table}.{ext}"
TABLE_LOG = "results/{grid}/tables/{table}.log"
TABLE_EXTS = ["csv", "md", "tex"]
TOY_CNCE_CONFIG = "results/{grid}/toy_cnce/seed{seed}/config.yaml"
TOY_CNCE_CONFIG_LOG = "results/{grid}/toy_cnce/seed{seed}/config.log"
TOY_CNCE_METRICS = "results/{grid}/toy_cnce/seed{seed}/metrics.json"
TOY_CNCE_LOG = "results/{grid}/toy_cnce/seed{seed}/toy_cnce.log"
# Transfer (Table 3): {dataset} is the transfer dataset; the encoder is the grid's source column's.
TRANSFER_CONFIG = "results/{grid}/transfer/{dataset}/{method}/seed{seed}/config.yaml"
TRANSFER_CONFIG_LOG = "results/{grid}/transfer/{dataset}/{method}/seed{seed}/config.log"
TRANSFER_HASH = "results/{grid}/transfer/{dataset}/{method}/seed{seed}/config.hash"
TRANSFER_HASH_LOG = "results/{grid}/transfer/{dataset}/{method}/seed{seed}/config.hash.log"
TRANSFER_METRICS = "results/{grid}/transfer/{dataset}/{method}/seed{seed}/metrics.json"
TRANSFER_MANIFEST = "results/{grid}/transfer/{dataset}/{method}/seed{seed}/split-manifest.json"
TRANSFER_LOG = "results/{grid}/transfer/{dataset}/{method}/seed{seed}/transfer.log"
TRANSFER_STATS = "results/{grid}/transfer/{dataset}"  # normalisation cache shared by the dataset's cells
# An embedded dataset generated by ring.data.metadataset (the smoke grid's transfer column) under the data root.
GENERATED_DATA = str(Path(config["data_root"], "{dataset}", GENERATED))
GENERATED_LOG = str(Path(config["data_root"], "{dataset}", "generate.log"))


def cell_wildcards(grid: str) -> dict:
    """Parallel lists of dataset, method and seed over the cells of ``grid``, for expand(zip)."""
    cells = GRIDS[grid].cells()
    return {"dataset": [c[0] for c in cells], "method": [c[1] for c in cells], "seed": [c[2] for c in cells]}


def lincls_metrics(grid: str) -> list:
    return expand(LINCLS_METRICS, zip, grid=[grid] * len(GRIDS[grid].cells()), **cell_wildcards(grid))


def provenance_files(grid: str) -> list:
    """Provenance of every finished cell of ``grid`` (read after the cells, never an input)."""
    n = len(GRIDS[grid].cells())
    paths = [
        *expand(PRETRAIN_PROVENANCE, zip, grid=[grid] * n, **cell_wildcards(grid)),
        *expand(LINCLS_PROVENANCE, zip, grid=[grid] * n, **cell_wildcards(grid)),
        *[str(Path(p).with_name("provenance.json")) for p in transfer_metrics(grid)],
    ]
    return [p for p in paths if Path(p).exists()]


def table_files(grid: str, table: str) -> list:
    return expand(TABLE, grid=grid, table=table, ext=TABLE_EXTS)


def toy_cnce_metrics(grid: str) -> list:
    return expand(TOY_CNCE_METRICS, grid=grid, seed=GRIDS[grid].toy_cnce_seeds())


def toy_cnce_tables(grid: str) -> list:
    """The appendix's toy table where the grid has a toy_cnce block."""
    return table_files(grid, "table_toy_cnce") if GRIDS[grid].toy_cnce_seeds() else []


def for_report(paths: list, caption: str, category: str) -> list:
    """``paths`` with the first PNG or CSV among them shown by ``snakemake --report``, captioned by
    workflow/report/<caption>.rst (a Jinja template that lists the cells the rule read)."""
    shown = next(p for p in paths if p.endswith((".png", ".csv")))
    return [report(p, caption=f"../report/{caption}.rst", category=category) if p == shown else p for p in paths]


def table_outputs(table: str, exts=TABLE_EXTS) -> list:
    # update(): Snakemake keeps the old table files while the rule runs and restores them if it fails
    # (a bad metrics.json is refused by ring.reports.tables), instead of deleting them first.
    return update(for_report(expand(TABLE, table=table, ext=exts, allow_missing=True), table, "Tables"))


def all_tables(grid: str) -> list:
    """Every table and figure the grid covers: Table 1, then each optional block's, then GPU-hours."""
    g = GRIDS[grid]
    return [
        *table_files(grid, "table1"),
        *[f for table in g.tables for f in table_files(grid, table)],  # Table 2, the LA variants
        *(table_files(grid, "table3") if g.transfer else []),
        *(table_files(grid, "table4") if g.detection else []),
        *toy_cnce_tables(grid),
        *study_files(grid),
        *expand(TABLE, grid=grid, table="gpu_hours", ext=["csv", "md"]),
    ]


def transfer_metrics(grid: str) -> list:
    cells = GRIDS[grid].transfer_cells()
    return expand(
        TRANSFER_METRICS,
        zip,
        grid=[grid] * len(cells),
        dataset=[c[0] for c in cells],
        method=[c[1] for c in cells],
        seed=[c[2] for c in cells],
    )


def transfer_encoders(wildcards) -> list:
    """The encoder files a transfer cell evaluates: the same method and seed pretrained on the grid's
    source (encoder.pt first; CMC's encoder_ab.pt is found beside it)."""
    source = GRIDS[wildcards.grid].transfer["source"]
    return expand(
        PRETRAIN_FILE,
        grid=wildcards.grid,
        dataset=source,
        method=wildcards.method,
        seed=wildcards.seed,
        name=METHODS[wildcards.method].encoder_files,
    )


def transfer_stage_config(wildcards):
    return GRIDS[wildcards.grid].transfer_config(
        wildcards.dataset,
        wildcards.method,
        int(wildcards.seed),
        config["data_root"],
        TRANSFER_STATS.format(**wildcards),
    )


def generated_data(wildcards) -> list:
    """The generation marker of an embedded generated dataset, which its data check waits for."""
    return [GENERATED_DATA.format(dataset=wildcards.dataset)] if wildcards.dataset in GENERATORS else []


# Tables with their own cells (the grid's `tables:` block), built by rules make_<table>.
GRID_TABLES = ["table2", "table_la_variants"]


def table_metrics(grid: str, table: str) -> list:
    """metrics.json of the cells of one table of ``grid`` (Table 1: the top-level datasets x methods)."""
    cells = GRIDS[grid].table_cells(table)
    return expand(
        LINCLS_METRICS,
        zip,
        grid=[grid] * len(cells),
        dataset=[c[0] for c in cells],
        method=[c[1] for c in cells],
        seed=[c[2] for c in cells],
    )


def two_encoder_methods() -> list:
    """Methods whose pretraining cells export an L and an ab trunk (CMC and its variants)."""
    return [name for name, m in METHODS.items() if len(m.encoder_files) > 1]


def encoder_companions(wildcards) -> list:
    """Encoder files of a pretraining cell besides encoder.pt (CMC's encoder_ab.pt)."""
    return expand(PRETRAIN_FILE, name=METHODS[wildcards.method].encoder_files[1:], **wildcards)


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
    """ring.cluster.launch options of a stage: the launcher and, on SLURM, the stage's resources."""
    if config["launcher"] == "local":
        return "--launcher local"
    from ring.cluster.slurm import stage_resources  # the same merge as ring.cluster.batch's

    resources = stage_resources(config.get("slurm", {}), stage)
    # `snakemake --verbose` also shows SLURM's own error lines beside the launcher's retry lines.
    verbose = " --verbose" if getattr(workflow.output_settings, "verbose", False) else ""
    return f"--launcher slurm --resources {shlex.quote(json.dumps(resources))}{verbose}"


# Rules that launch a stage, and the checkpoint interval of their cell (time_min must exceed it).
LAUNCHED_CHECKPOINT_INTERVAL = {
    "pretrain": lambda wc: stage_config("pretrain", wc).checkpoint_interval_min,
    "pretrain_two_encoders": lambda wc: stage_config("pretrain", wc).checkpoint_interval_min,
    "study_pretrain": lambda wc: study_cell_config(wc).checkpoint_interval_min,
}


def slurm_preflight() -> None:
    """Before the first submission: the resources of every stage this run will submit, one
    `sbatch --test-only` per distinct set, every problem printed once; none is submitted if any fails."""
    from ring.cluster.slurm import CHECKED_ENV, check_resource_sets

    sets = {}  # rule -> (resources, the largest checkpoint interval of its cells)
    for job in workflow.dag.needrun_jobs():
        launch = getattr(job.params, "launch", None)
        if not launch or "--resources" not in launch:
            continue
        words = shlex.split(launch)
        values = json.loads(words[words.index("--resources") + 1])
        interval = LAUNCHED_CHECKPOINT_INTERVAL.get(job.rule.name, lambda wc: None)(job.wildcards)
        known = sets.get(job.rule.name, (values, None))[1]
        sets[job.rule.name] = (values, interval if known is None else max(known, interval or known))
    problems, digests = check_resource_sets(sets)
    if problems:
        print("\n".join(f"ring: {p}" for p in problems), file=sys.stderr)
        raise WorkflowError("SLURM refused resources before any submission (above); nothing was submitted.")
    os.environ[CHECKED_ENV] = ",".join(digests)  # the rules' launchers skip their own sbatch --test-only


onstart:
    # The first run that writes results/<grid> records its grid file there (a dry run, which has no onstart, writes
    # nothing): a later plan from another file of the same name is refused (ring.plan.ownership).
    ring.plan.ownership.claim(GRID_FILE, Path("results", config["grid"]))
    if config["launcher"] == "slurm":
        slurm_preflight()


# -- Table 4 (detection) ----------------------------------------------------------------------
from ring.plan.detection_tasks import TASKS as DETECTION_TASKS


wildcard_constraints:
    task=_one_of(DETECTION_TASKS),


# Converted backbone of one pretrained encoder, and one Detectron2 cell per (method, task, seed).
DETECTION_WEIGHTS = "results/{grid}/detection/{dataset}/{method}/seed{seed}/backbone.pkl"
DETECTION_WEIGHTS_LOG = "results/{grid}/detection/{dataset}/{method}/seed{seed}/backbone.pkl.log"
DETECTION_CONFIG = "results/{grid}/detection/{dataset}/{method}/{task}/seed{seed}/config.yaml"
DETECTION_CONFIG_LOG = "results/{grid}/detection/{dataset}/{method}/{task}/seed{seed}/config.log"
DETECTION_HASH = "results/{grid}/detection/{dataset}/{method}/{task}/seed{seed}/config.hash"
DETECTION_HASH_LOG = "results/{grid}/detection/{dataset}/{method}/{task}/seed{seed}/config.hash.log"
DETECTION_METRICS = "results/{grid}/detection/{dataset}/{method}/{task}/seed{seed}/metrics.json"
DETECTION_LOG = "results/{grid}/detection/{dataset}/{method}/{task}/seed{seed}/detection.log"
DETECTION_EMBEDDED = "results/{grid}/detection/datasets"  # the generated COCO/VOC-format default
DETECTION_EMBEDDED_LOG = "results/{grid}/detection/datasets.log"


def detection_metrics(grid: str) -> list:
    cells = GRIDS[grid].detection_cells()
    return [DETECTION_METRICS.format(grid=grid, dataset=d, method=m, task=t, seed=s) for d, m, t, s in cells]


def detection_datasets_root(grid: str) -> str:
    """Where a grid's detection datasets are: the generated ones, or $DETECTRON2_DATASETS (else data_root/detectron2)."""
    if GRIDS[grid].detection.get("datasets") == "embedded":
        return DETECTION_EMBEDDED.format(grid=grid)
    return os.environ.get("DETECTRON2_DATASETS") or str(Path(config["data_root"]) / "detectron2")


def detection_cell_config(wildcards):
    grid = GRIDS[wildcards.grid]
    return grid.detection_config(
        wildcards.method, wildcards.task, int(wildcards.seed), detection_datasets_root(wildcards.grid)
    )


def detection_data(wildcards) -> list:
    """The generated dataset when the grid uses it; real datasets are checked by the stage itself."""
    if GRIDS[wildcards.grid].detection.get("datasets") == "embedded":
        return [DETECTION_EMBEDDED.format(grid=wildcards.grid)]
    return []


def cell_dir(path) -> str:
    return str(Path(path).parent)


# ring.cluster.slurm.RECORD, the SLURM launcher's record in a cell's slurm/ folder (not imported: that module
# brings submitit into every plan, local ones included).
SLURM_RECORD = "job.json"


def write_cell_config(stage: str) -> str:
    """The shell command of a cell's config rule (params python, text and cell).  It writes config.yaml;
    a cell that already ran (it has a run.json) is then brought in line by ring.plan.rerun, here, before any
    job is submitted: a longer schedule continues, any other edit keeps the previous run under
    runs/<hash>/ and starts over.  A cell that a SLURM launcher recorded a job for goes through
    ring.cluster.detach instead, which first cancels that job when it still runs the previous config (and
    waits until it has ended), so that nothing of it writes into the cell once its files moved.  A cell that
    never ran costs no interpreter.  A shell job, not `run:`: Snakemake runs `run:` jobs in a fresh
    interpreter (~1.5 s each)."""
    return logged(
        "printf '%s' {params.text:q} > {output:q}"
        f" && if [ -e {{params.cell:q}}/slurm/{SLURM_RECORD} ]; then {{params.python:q}} -m ring.cluster.detach"
        f" {{params.cell:q}} --stage {stage}; elif [ -e {{params.cell:q}}/{RUN_RECORD} ]; then"
        f" {{params.python:q}} -m ring.plan.rerun {{params.cell:q}} --stage {stage}; fi"
    )


def logged(command: str) -> str:
    """``command`` with its stderr (every ``ring:`` sentence) also written to the rule's log, for the
    failed-run summary; its stdout, its stderr on the terminal and its exit status (pipefail) are
    unchanged.  fd 3 carries stdout past the pipe into tee, which must end before the job does."""
    return "{{ {{ COMMAND; }} 2>&1 1>&3 3>&- | tee {log:q} >&2 3>&-; }} 3>&1".replace("COMMAND", command)


# -- what the report's captions say (workflow/report/*.rst), read from the cells a table read ------
# Params that take `input` are not recorded by Snakemake for its rerun trigger and are evaluated
# again by `snakemake --report` once the cells exist; before then they describe what is there.


def cell_metrics(metrics_files) -> list[dict]:
    """The cells' metrics.json that are there and readable (a corrupt one: ring.reports.tables says so in one sentence)."""
    found = []
    for path in map(Path, metrics_files):
        try:
            metrics = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(metrics, dict):
            found.append(metrics)
    return found


def feature_maps(metrics_files) -> list[dict]:
    """The frozen features the linear evaluations used, from their metrics.json protocol stamps
    (ring.lincls): one entry per feature layer and shape, with the methods that used it."""
    maps = {}
    for metrics in cell_metrics(metrics_files):
        protocol = metrics.get("protocol") if isinstance(metrics.get("protocol"), dict) else {}
        shape = " x ".join(map(str, protocol.get("feature_shape", []))) or "unrecorded"
        methods = maps.setdefault((protocol.get("feature_layer", "unrecorded"), shape), [])
        if metrics.get("method") not in methods:
            methods.append(metrics.get("method"))
    return [{"layer": layer, "shape": shape, "methods": methods} for (layer, shape), methods in maps.items()]


def cell_axes(files, names: tuple[str, ...]) -> dict:
    """The values each folder level of ``files`` takes, in order of appearance, named from the last
    folder up (a seed folder seed<s> as <s>): cell_axes(encoders, ("seed", "variant", "method")) of
    .../<method>/<variant>/seed<s>/encoder.pt."""
    axes = {name: [] for name in names}
    for path in map(Path, files):
        for name, part in zip(names, reversed(path.parent.parts)):
            value = part.removeprefix("seed") if name == "seed" else part
            if value not in axes[name]:
                axes[name].append(value)
    return axes


def cell_config(files) -> dict:
    """The config.yaml beside the first of ``files`` that has one (the cells of a table share a
    protocol), as a dict; {} before any cell ran."""
    from ring.core.config import read_yaml  # YAML 1.2 floats, as the stages read their configs

    for path in map(Path, files):
        try:
            values = read_yaml(path.with_name("config.yaml"), "Cell config")
        except (OSError, ValueError):  # not written yet, or broken: its stage says so
            continue
        if isinstance(values, dict):
            return values
    return {}


onerror:
    # A short summary last: one line per failed job with its cell and its one-sentence reason.
    import ring.core.failures

    logs = [log] if isinstance(log, str) else list(log)  # Snakemake 9 passes a list of log files
    text = "\n".join(Path(p).read_text(errors="replace") for p in logs if Path(p).is_file())
    print(f"\n{ring.core.failures.summary(text)}", file=sys.stderr)


onsuccess:
    # Print the tables this run was asked for, so `all_tables` ends with them on screen.
    for target in (Path(f) for f in all_tables(config["grid"]) if f.endswith(".md")):
        if target.exists():
            print(f"\n{target}\n\n{target.read_text()}", file=sys.stderr)


# --- Studies of the appendix (ring.plan.grid.Study): hard negatives, annealing policies, negatives k ----

# Every study and variant name over all grids ("none" keeps a constraint valid without studies).
STUDY_NAMES = {name for g in GRIDS.values() for name in g.studies} or {"none"}
VARIANT_NAMES = {v for g in GRIDS.values() for s in g.studies.values() for v in s.variants} or {"none"}


wildcard_constraints:
    study=_one_of(STUDY_NAMES),
    variant=_one_of(VARIANT_NAMES),


STUDY_CONFIG = "results/{grid}/study/{study}/{dataset}/{method}/{variant}/seed{seed}/config.yaml"
STUDY_CONFIG_LOG = "results/{grid}/study/{study}/{dataset}/{method}/{variant}/seed{seed}/config.log"
STUDY_ENCODER = "results/{grid}/study/{study}/{dataset}/{method}/{variant}/seed{seed}/encoder.pt"
STUDY_LOG = "results/{grid}/study/{study}/{dataset}/{method}/{variant}/seed{seed}/pretrain.log"
# The folder levels of STUDY_ENCODER from the last up, for cell_axes (the report captions).
STUDY_AXES = ("seed", "variant", "method", "dataset")
FIGURE = "results/{grid}/tables/fig_{study}.{ext}"
FIGURE_LOG = "results/{grid}/tables/fig_{study}.log"
FIGURE_EXTS = ["png", "pdf", "csv"]
# Studies that also write a summary table (name -> table): the k sweep's mean +- std over seeds.
STUDY_TABLES = {"negatives_k": "table_negatives_k", "ring_window": "table_ring_window"}


def study_encoders(grid: str, study: str) -> list:
    """encoder.pt of every cell of a study (the figure reads log.jsonl and config.yaml beside each)."""
    if study not in GRIDS[grid].studies:
        raise ValueError(f"Grid {grid} plans no study {study!r}; add it under studies: in {GRIDS[grid].file}.")
    s = GRIDS[grid].studies[study]
    return [
        STUDY_ENCODER.format(grid=grid, study=study, dataset=s.dataset, method=m, variant=v, seed=seed)
        for m, v, seed in s.cells()
    ]


def study_source(wildcards) -> list:
    """The cell a study cell starts from (its snapshot is read after the source finishes), or nothing."""
    ref = GRIDS[wildcards.grid].studies[wildcards.study].init_source(wildcards.variant)
    if ref is None:
        return []
    return [
        STUDY_ENCODER.format(
            grid=wildcards.grid,
            study=wildcards.study,
            dataset=wildcards.dataset,
            method=ref["method"],
            variant=ref["variant"],
            seed=wildcards.seed,
        )
    ]


def study_cell_config(wildcards):
    grid, study = GRIDS[wildcards.grid], wildcards.study
    ref = grid.studies[study].init_source(wildcards.variant)
    init = (
        "" if ref is None else str(Path(study_source(wildcards)[0]).parent / SNAPSHOT_FILE.format(epoch=ref["epoch"]))
    )
    return grid.study_config(study, wildcards.method, wildcards.variant, int(wildcards.seed), config["data_root"], init)


def study_files(grid: str) -> list:
    """Figures (and tables) of every study the grid plans."""
    files = []
    for study in GRIDS[grid].studies:
        files += expand(FIGURE, grid=grid, study=study, ext=FIGURE_EXTS)
        if study in STUDY_TABLES:
            files += expand(TABLE, grid=grid, table=STUDY_TABLES[study], ext=["csv", "md"])
    return files
