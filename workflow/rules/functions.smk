# Every function the rules call, in one place: the stages' input functions (and the helpers they share with nothing
# else), then the run handlers' checks.  Only functions: `snakemake --lint` wants them apart from the rules.  The
# Snakefile includes this file right after common.smk, so a rule file may call any of them while it is read; a
# function may read any rule file's paths (one namespace, looked up when it is called).
# tests/workflow/test_conventions.py keeps every function here used by a rule, and none defined twice.

import shlex
import subprocess
import tempfile
from types import SimpleNamespace

from snakemake.utils import format as format_shell

from ring.plan.rules import TableRule, stale_table, with_kept_runs
from ring.reports.captions import outlook as table_outlook  # what the gpu_hours table says of its grid's end

# --- The data check -----------------------------------------------------------------------------------------


def generated_data(wildcards) -> list:
    """The generation marker of an embedded generated dataset, which its data check waits for."""
    return [GENERATED_DATA.format(dataset=wildcards.dataset)] if wildcards.dataset in GENERATORS else []


# --- Prepared stores ----------------------------------------------------------------------------------------


def store_shards(wildcards) -> list:
    """Every shard record of a store: the catalog's image counts make the shards, so the plan needs no listing."""
    counts = dict(zip(STORE_SPLITS, DATASETS[wildcards.dataset].publisher_counts))
    return [
        STORE_SHARD.format(**dict(wildcards.items()), split=split, shard=f"{shard:05d}")
        for split, images in counts.items()
        for shard in range(n_shards(images))
    ]


def cell_store_ok(config_of):
    """A stage rule's ``store`` input: the check stamp of the prepared store its cell reads (ring.data.store_layout.cell_store:
    an image folder at the catalog's store size, store not none), else nothing.  ``config_of``: the cell's config from
    the rule's wildcards."""

    def store_ok(wildcards) -> list:
        cfg = config_of(wildcards)
        spec = DATASETS.get(cfg.dataset)
        if cell_store(".", spec.store_size if spec else 0, cfg.store, cfg.resize) is None:
            return []
        return [STORE_OK.format(grid=wildcards.grid, dataset=cfg.dataset, format=cfg.store, size=cfg.resize)]

    return store_ok


def grid_store_oks(grid: str) -> list:
    """The check stamps of every store the grid's pretraining and linear-evaluation cells read."""
    return sorted(
        {
            ok
            for dataset, method, seed in GRIDS[grid].cells()
            for stage in ("pretrain", "lincls")
            for ok in cell_store_ok(lambda wc, stage=stage: stage_config(stage, wc))(
                SimpleNamespace(grid=grid, dataset=dataset, method=method, seed=str(seed))
            )
        }
    )


def store_changed(wildcards) -> list:
    """store_check's ``changed`` input: the check's stale mark (STALE in common.smk) when the store's manifest
    and shards are no longer what the check's stamp records (a few stats, ring.data.store_layout.fingerprint): a store
    deleted is then built again and checked, a damaged one stops the run, where the stamp alone said "Nothing to be
    done".  A params trigger cannot: its value is taken as the run is planned, before the store is built again."""
    ok = STORE_OK.format(**dict(wildcards.items()))
    stamp = read_record(ok)
    where = STORE.format(dataset=wildcards.dataset, format=wildcards.format, size=wildcards.size)
    here = store_fingerprint(Path(where))
    return stale_input(ok if stamp and stamp.get("fingerprint") != here else None, [ok])


# --- Pretraining --------------------------------------------------------------------------------------------


def two_encoder_methods() -> list:
    """Methods whose pretraining cells export an L and an ab trunk (CMC and its variants)."""
    return [name for name, m in METHODS.items() if len(m.encoder_files) > 1]


def stale_encoder(wildcards) -> list:
    """A pretraining rule's ``stale`` input: marks the cell's encoder (STALE in common.smk) when another config than the
    grid's made it, or when its files differ from their checksum record (damaged after the cell finished)."""
    encoder = Path(PRETRAIN_ENCODER.format(**dict(wildcards.items())))
    if not encoder.is_file():  # nothing to be stale (and no config to build: plans stay fast)
        return stale_input(None, [str(encoder)])
    found = ring.plan.lineage.superseded(
        encoder.parent, config_hash(stage_config("pretrain", wildcards))
    ) or ring.plan.lineage.damaged(encoder.parent, METHODS[wildcards.method].encoder_files, encoder)
    return stale_input(found.target if found else None, [str(encoder)])


# --- Linear evaluation --------------------------------------------------------------------------------------


def encoder_companions(wildcards) -> list:
    """Encoder files of a pretraining cell besides encoder.pt (CMC's encoder_ab.pt)."""
    return expand(PRETRAIN_FILE, name=METHODS[wildcards.method].encoder_files[1:], **wildcards)


# --- The tables (and which tables and figures a grid builds: all_tables) ------------------------------------


def cell_wildcards(grid: str) -> dict:
    """Parallel lists of dataset, method and seed over the cells of ``grid``, for expand(zip)."""
    cells = GRIDS[grid].cells()
    return {"dataset": [c[0] for c in cells], "method": [c[1] for c in cells], "seed": [c[2] for c in cells]}


def transfer_metrics(grid: str) -> list:
    cells = GRIDS[grid].transfer_cells()
    return [TRANSFER_METRICS.format(grid=grid, dataset=d, method=m, seed=s) for d, m, s in cells]


def detection_metrics(grid: str) -> list:
    cells = GRIDS[grid].detection_cells()
    return [DETECTION_METRICS.format(grid=grid, dataset=d, method=m, task=t, seed=s) for d, m, t, s in cells]


def toy_cnce_metrics(grid: str) -> list:
    return expand(TOY_CNCE_METRICS, grid=grid, seed=GRIDS[grid].toy_cnce_seeds())


def lincls_metrics(grid: str) -> list:
    return expand(LINCLS_METRICS, zip, grid=[grid] * len(GRIDS[grid].cells()), **cell_wildcards(grid))


def provenance_files(grid: str) -> list:
    """Provenance of every finished cell of ``grid`` and of every run an edit set aside in it, read after the cells,
    never an input."""
    n = len(GRIDS[grid].cells())
    return with_kept_runs(
        [
            *expand(PRETRAIN_PROVENANCE, zip, grid=[grid] * n, **cell_wildcards(grid)),
            *expand(LINCLS_PROVENANCE, zip, grid=[grid] * n, **cell_wildcards(grid)),
            *[str(Path(p).with_name("provenance.json")) for p in transfer_metrics(grid)],
        ]
    )


def table_metrics(grid: str, table: str) -> list:
    """metrics.json of the cells of one table of ``grid`` (Table 1: the top-level datasets x methods)."""
    cells = GRIDS[grid].table_cells(table)
    return [LINCLS_METRICS.format(grid=grid, dataset=d, method=m, seed=s) for d, m, s in cells]


def lincls_table(table: str, **params) -> TableRule:
    """A table of linear-evaluation cells (Table 1, a `tables:` entry): rows its methods, columns its datasets."""
    return TableRule(
        lambda grid: table_metrics(grid, table),
        AXES_OPTIONS,
        {
            "methods": lambda wc: GRIDS[wc.grid].table_axes(table)[0],
            "datasets": lambda wc: GRIDS[wc.grid].table_axes(table)[1],
            **params,
        },
    )


def table_files(grid: str, table: str) -> list:
    return expand(TABLE, grid=grid, table=table, ext=TABLE_EXTS)


def toy_cnce_tables(grid: str) -> list:
    """The appendix's toy table where the grid has a toy_cnce block."""
    return table_files(grid, "table_toy_cnce") if GRIDS[grid].toy_cnce_seeds() else []


def study_files(grid: str) -> list:
    """Figures (and tables) of every study the grid plans (their rules: studies.smk)."""
    files = []
    for study in GRIDS[grid].studies:
        files += expand(FIGURE, grid=grid, study=study, ext=FIGURE_EXTS)
        if study in STUDY_TABLES:
            files += expand(TABLE, grid=grid, table=STUDY_TABLES[study], ext=["csv", "md"])
    return files


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


def missing_cells(table: str, cells):
    """A table rule's ``stale`` input: marks the table (STALE in common.smk) when a file of a cell it averages
    (``cells(grid)``) is gone (a metrics.json deleted, a pruned seed named again).  Snakemake reruns nothing for a
    missing intermediate file while the table is there and newer (it said "Nothing to be done" beside a table that
    still averaged the gone cell); rerun, the table needs its inputs, and the cells that make them are planned
    (restored from their kept copies, or rerun).  The table's command and caption read its ``cells`` input alone."""

    def marks(wc) -> list:
        table_file = TABLE.format(grid=wc.grid, table=table, ext="csv")
        return stale_input(stale_table(table_file, cells(wc.grid)), [table_file])

    return marks


# --- Transfer (Table 3) -------------------------------------------------------------------------------------


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


# --- Detection (Table 4) ------------------------------------------------------------------------------------


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


def stale_backbone(wildcards) -> list:
    """The conversion rule's ``stale`` input: marks the converted backbone when its bytes are not those its
    checksum record holds (damaged after its conversion), or it has none; then the marks on it (this one, or one
    a detection cell's stale_evaluation set)."""
    weights = DETECTION_WEIGHTS.format(**dict(wildcards.items()))
    found = ring.plan.lineage.backbone_damage(Path(weights))
    return stale_input(found.target if found else None, [weights])


# --- The appendix studies -----------------------------------------------------------------------------------


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


# --- The run's handlers (run.smk): every dataset the run reads, checked before its first job ----------------


def check_data_first() -> None:
    """The data check of every dataset this run reads, run here, in onstart, before its first job.

    A stage's jobs wait only for their own dataset's check: without this, a transfer set or a study's dataset that is
    missing was found after the pretraining it follows had trained, and Table 4's Detectron2 datasets after the
    pretraining and the conversion.  Each data_check job the run needs is run here as its job would run it (a dataset
    this run generates is left to its job), and the Detectron2 datasets of each detection task by the stage's own
    check; a failure stops the run before any job, with the summary a failed run ends with.  The data_check jobs
    then run again at once: the check's stamp makes the second pass a few stats."""
    failed = []
    with tempfile.TemporaryDirectory() as scratch:
        for output, rule, log, command in data_first_commands(Path(scratch)):
            for path in [*output, *log]:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            run = subprocess.run(["bash", "-c", f"set -o pipefail; {command}"], capture_output=True)
            if run.returncode:
                sys.stderr.write(run.stderr.decode(errors="replace"))
                failed.append((output, rule, log))
    if failed:
        print(f"\n{ring.core.failures.report(failed)}", file=sys.stderr)
        raise WorkflowError("A data check failed before any job started (above); nothing was started.")


def data_first_commands(scratch: Path) -> list:
    """(outputs, rule, log files, shell command) of each check :func:`check_data_first` runs: the planned data_check
    jobs' (their command as the rule formats it), and one per detection task and Detectron2 folder (its log beside
    the data checks')."""
    commands, detection = [], {}
    for wildcards in PLANNED.of("data_check"):
        if all(Path(f).exists() for f in generated_data(wildcards)):
            values = dict(wildcards.items())
            output, log = [DATA_OK.format(**values)], [DATA_LOG.format(**values)]
            params = SimpleNamespace(**{name: value(wildcards, output) for name, value in DATA_CHECK_PARAMS.items()})
            command = format_shell(DATA_CHECK_SHELL, params=params, wildcards=wildcards, output=output, log=log)
            commands.append((output, "data_check", log, command))
    for wildcards in PLANNED.of("detection"):
        if GRIDS[wildcards.grid].detection.get("datasets") != "embedded":
            cfg = detection_cell_config(wildcards)
            detection.setdefault((wildcards.grid, cfg.task, cfg.datasets_root, repr(cfg.overrides)), cfg)
    for i, ((grid, task, _, _), cfg) in enumerate(detection.items()):
        config = scratch / f"{i}.yaml"
        config_save(cfg, config)
        log = f"results/{grid}/data/detectron2-{task}.log"
        python = (
            f"{shlex.quote(str(PYTHON))} -m ring.detection.runner --config {shlex.quote(str(config))} --datasets-only"
        )
        output = f"results/{grid}/data/detectron2-{task}"
        commands.append(([output], "detection", [log], f"{python} 2>&1 | tee {shlex.quote(log)} >&2"))
    return commands
