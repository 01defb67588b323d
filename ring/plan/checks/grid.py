"""A grid's checks, before anything runs: its names (datasets, methods, tables, stages, studies), its blocks' keys,
and every cell's full config through the plan-time checks (ring.plan.checks).  :func:`ring.plan.grid.from_dict`
runs them on every grid it builds (a :class:`ring.plan.grid.Grid`, the ``grid`` each function here takes)."""

from __future__ import annotations

from ring import resources
from ring.core import catalog
from ring.core.config import SNAPSHOT_FILE, PretrainConfig, check_key
from ring.core.method_keys import GROUP_OF, RING
from ring.core.methods import METHODS, missing
from ring.core.stages import stages_with
from ring.core.yaml_reading import read_yaml
from ring.plan import checks
from ring.plan.detection_tasks import TASKS

# Keys that name a cell (its folder) or where its data is: the grid sets them from the cell and the
# workflow config, so a stage block that sets one would train a cell other than the one its folder
# and its table row name.  Each maps to where it belongs.
IDENTITY_KEYS = {
    "method": "the grid's top-level methods: list",
    "dataset": "the grid's top-level datasets: list (transfer datasets under transfer: datasets:)",
    "seed": "the grid's top-level seeds: list",
    "data_root": "the workflow config (--config data_root=PATH)",
    "source": "transfer: source: (or detection: source:)",
    "stats_cache": "nowhere: the workflow sets it for each transfer dataset",
    "init_from": "a study variant's init_from: {method, variant, epoch}",
    "task": "detection: tasks:",
    "datasets_root": "the DETECTRON2_DATASETS environment variable (or detection: datasets: embedded)",
}
# The appendix's studies, each with its figure builder in ring.reports.figures (the study's name is its figure's).
STUDIES = ("hard_negatives", "anneal_policies", "negatives_k", "ring_window")
INIT_KEYS = ("method", "variant", "epoch")
# What a grid's resources: block sets: a local job's CPU threads, which the workflow's rules read.  A SLURM job's
# resources are the site's (its slurm: block), which every launch and ring submit read: the same key in a grid would be
# ignored, so it is refused with where it belongs.
GRID_RESOURCES = ("threads",)


def check_no_identity_keys(values: dict, where: str) -> None:
    """A block of stage overrides sets no key that names the cell (see IDENTITY_KEYS); one sentence otherwise."""
    for key in values:
        if key in IDENTITY_KEYS:
            raise checks.ConfigError(
                f"{where}: {key!r} names the cell, so it cannot be set in a stage block (every "
                f"cell would train the same {key} under its own name); set it in "
                f"{IDENTITY_KEYS[key]} and remove it here."
            )


def check_read(method: str, values: dict, where: str) -> None:
    """Keys set for ``method`` alone (``by_method``) must be keys it reads: one it never reads changes nothing it
    trains (its hash takes the key at its default), so setting it there is a mistake to be told of, not ignored."""
    unread = [k for k in values if method in METHODS and not METHODS[method].reads(k)]
    if not unread:
        return
    key = unread[0]
    if GROUP_OF[key] is RING:  # the window's settings: name the methods that have one
        what = (
            f"is a Ring setting but {method} has no Ring window, so it would be ignored; remove it or use "
            f"{method}Ring-style methods ({', '.join(n for n, m in METHODS.items() if m.ring)})"
        )
    else:
        readers = [n for n, m in METHODS.items() if m.reads(key)]
        what = (
            f"is a setting {method} never reads (only {', '.join(readers)} do), so it would change nothing it "
            "trains; remove it here (under all: or by_dataset it applies only to the methods that read it)"
        )
    raise checks.ConfigError(f"{where}: {key}={values[key]!r} {what}.")


def check_source(grid, stage: str, source: str) -> None:
    """A block evaluating encoders (detection, transfer) reuses the grid's pretraining cells of its source."""
    if source not in grid.datasets:
        raise ValueError(
            f"Grid {grid.name}: {stage} source {source!r} is not one of the grid's datasets "
            f"({', '.join(grid.datasets)}), so no encoder is pretrained on it; add it to the datasets or change the "
            "source."
        )


def validate_detection(grid) -> None:

    block = grid.detection
    for part, values in [
        ("all", block.get("all", {})),
        *((f"by_task {k}", v) for k, v in block.get("by_task", {}).items()),
        *((f"by_method {k}", v) for k, v in block.get("by_method", {}).items()),
    ]:
        check_no_identity_keys(values, f"Grid {grid.file}, block detection {part}")
    check_source(grid, "detection", block["source"])
    for name in [*block["methods"], *block.get("by_method", {})]:
        if name not in grid.methods:
            raise ValueError(
                f"Grid {grid.name}: detection method {name!r} is not one of the grid's methods "
                f"({', '.join(grid.methods)}), so no encoder is pretrained with it."
            )
    for name in [*block["tasks"], *block.get("by_task", {})]:
        if name not in TASKS:
            raise ValueError(f"Grid {grid.name}: unknown detection task {name!r}; choose from {', '.join(TASKS)}.")
    for _, method, task, seed in grid.detection_cells():
        try:
            cfg = grid.detection_config(method, task, seed, "datasets")
        except ValueError as err:
            raise ValueError(f"Grid {grid.name}, detection cell {method}/{task}/seed{seed}: {err}") from None
        checks.check(cfg, f"Grid {grid.file}, stage detection, cell {block['source']}/{method}/{task}/seed{seed}")


def unknown_method(name: str) -> str:
    """The end of the sentence for a method name the registry lacks: a broken plug-in's failure when there is one."""
    return missing(name) or f"unknown method {name!r}; choose from {', '.join(METHODS)}."


def validate(grid) -> None:
    """Names and config keys; one sentence per problem, raised before anything runs."""
    _tables(grid)
    _stage_blocks(grid)
    _resources(grid)
    for seed in (grid.toy_cnce_seeds() or [0]) if grid.toy_cnce is not None else []:
        try:
            cfg = grid.toy_cnce_config(seed)
        except ValueError as err:
            raise ValueError(f"Grid {grid.name}, toy_cnce: {err}") from None
        checks.check(cfg, f"Grid {grid.file}, block toy_cnce, seed {seed}")
    if grid.transfer:
        validate_transfer(grid)
    _cells(grid)
    if grid.detection:
        validate_detection(grid)


def _tables(grid) -> None:
    """Table 1's and every other table's datasets (pretraining ones of the catalog) and methods (registered)."""
    if "table1" in grid.tables:
        raise ValueError(
            f"Grid {grid.name}: table1's cells are the top-level datasets x methods; remove it from tables."
        )
    for table, axes in [("", {"methods": grid.methods, "datasets": grid.datasets}), *grid.tables.items()]:
        where = f"table {table}: " if table else ""
        for name in axes["datasets"]:
            catalog.spec(name)
            if name in catalog.TRANSFER:
                raise ValueError(
                    f"Grid {grid.name}: {where}{name!r} is a transfer dataset, not a pretraining one; "
                    "list it under transfer: datasets."
                )
        for name in axes["methods"]:
            if name not in METHODS:
                raise ValueError(f"Grid {grid.name}: {where}{unknown_method(name)}")


def _stage_blocks(grid) -> None:
    """Each stage block's names and keys: a known stage, catalog datasets, registered methods, and keys that are its
    config's fields and name no cell."""
    blocks = stages_with("grid_block")  # the stages a grid has a block of, by the config class its keys are fields of
    for stage, block in grid.stages.items():
        if stage not in blocks:
            raise ValueError(f"Grid {grid.name}: unknown stage {stage!r}; stages are {', '.join(blocks)}.")
        for name in block.get("by_dataset", {}):
            catalog.spec(name)
        for name in block.get("by_method", {}):
            if name not in METHODS:
                raise ValueError(f"Grid {grid.name}: by_method names {unknown_method(name)}")
        overrides = [
            ("all", block.get("all", {})),
            *((f"by_dataset {k}", v) for k, v in block.get("by_dataset", {}).items()),
            *((f"by_method {k}", v) for k, v in block.get("by_method", {}).items()),
        ]
        for where, values in overrides:
            check_no_identity_keys(values, f"Grid {grid.file}, stage {stage}, block {where}")
            for key in values:
                check_key(blocks[stage].config, key, context=f"Grid {grid.name}, stage {stage}: ")


def _resources(grid) -> None:
    """Each key of the grid's ``resources:`` block is one a grid sets (:data:`GRID_RESOURCES`); a SLURM resource there
    is named with the site file's block that sets it, anything else with what the block holds."""
    schema = read_yaml(resources.SCHEMAS / "config.schema.yaml", "Schema")
    slurm_keys = schema["$defs"]["resources"]["properties"]
    for stage, block in grid.resources.items():
        for key in (k for k in block or {} if k not in GRID_RESOURCES):
            where = f"Grid {grid.file}: resources: {stage}: {key}"
            if key in slurm_keys:
                raise ValueError(
                    f"{where} is a SLURM resource, which every launch reads from the site file, never from a grid, so "
                    f"it would be ignored; set it under slurm: in your site file (profiles/slurm/site.yaml, or ring "
                    "run --site; its keys are ring/resources/cluster.yaml's) and remove it here."
                )
            raise ValueError(
                f"{where} is no resource a grid sets (a grid's resources: holds threads, a local job's CPU threads); "
                "remove it (SLURM resources go under slurm: in your site file, keys as in ring/resources/cluster.yaml)."
            )


def _cells(grid) -> None:
    """Every pretraining and linear-evaluation cell's full config, built (every override key against the dataclasses)
    and checked; first the keys set for one method, which must be keys it reads."""
    for method, values in grid.stages.get("pretrain", {}).get("by_method", {}).items():
        check_read(method, values, f"Grid {grid.file}, stage pretrain, block by_method {method}")
    for dataset, method, seed in grid.cells():
        for stage, build in (("pretrain", grid.pretrain_config), ("lincls", grid.lincls_config)):
            try:
                cfg = build(dataset, method, seed, "data")
            except ValueError as err:
                raise ValueError(f"Grid {grid.name}, cell {dataset}/{method}/seed{seed}: {err}") from None
            checks.check(cfg, f"Grid {grid.file}, stage {stage}, cell {dataset}/{method}/seed{seed}")


def validate_transfer(grid) -> None:
    block = grid.transfer
    for key in ("source", "datasets"):
        if key not in block:
            raise ValueError(f"Grid {grid.name}: the transfer block needs {key!r}.")
    check_source(grid, "transfer", block["source"])
    for name in [*block["datasets"], *block.get("by_dataset", {})]:
        if name not in catalog.TRANSFER:
            raise ValueError(
                f"Grid {grid.name}: {name!r} is not a transfer dataset; choose from {', '.join(catalog.TRANSFER)}."
            )
    for name in grid.transfer_methods():
        if name not in grid.methods:
            raise ValueError(
                f"Grid {grid.name}: transfer method {name!r} is not one of the grid's methods, "
                "whose pretraining cells it reuses."
            )
    for dataset, method, seed in grid.transfer_cells():
        try:
            cfg = grid.transfer_config(dataset, method, seed, "data")
        except ValueError as err:
            raise ValueError(f"Grid {grid.name}, transfer cell {dataset}/{method}/seed{seed}: {err}") from None
        checks.check(cfg, f"Grid {grid.file}, stage transfer, cell {dataset}/{method}/seed{seed}")


def validate_study(grid, study) -> None:
    where = f"Grid {grid.name}, study {study.name}"
    _study_names(grid, study, where)
    cells = study.cells()
    for method, variant, seed in cells:
        cfg = _study_cell(grid, study, (method, variant, seed), cells, where)
        checks.check(
            cfg, f"Grid {grid.file}, stage studies ({study.name}), cell {study.dataset}/{method}/{variant}/seed{seed}"
        )


def _study_names(grid, study, where: str) -> None:
    """A known study on a catalog dataset with registered methods, blocks that name no cell, and variant_methods
    that name its variants and methods."""
    if study.name not in STUDIES:
        raise ValueError(f"{where}: unknown study; studies are {', '.join(STUDIES)}.")
    check_no_identity_keys(study.pretrain, f"Grid {grid.file}, study {study.name}, block pretrain")
    for variant, values in study.variants.items():
        check_no_identity_keys(
            {k: v for k, v in values.items() if k != "init_from"},
            f"Grid {grid.file}, study {study.name}, variant {variant}",
        )
    catalog.spec(study.dataset)
    for name in study.methods:
        if name not in METHODS:
            raise ValueError(f"{where}: {unknown_method(name)}")
    for variant, methods in study.variant_methods.items():
        if variant not in study.variants or not set(methods) <= set(study.methods):
            raise ValueError(
                f"{where}: variant_methods {variant}: {methods} must name a variant and methods of the study."
            )


def _study_cell(grid, study, cell: tuple[str, str, int], cells: list, where: str) -> PretrainConfig:
    """A study cell's config, starting from the snapshot its variant's init_from names (a cell of the same study
    that saves that epoch, before this cell's last)."""
    method, variant, seed = cell
    ref = study.init_source(variant)
    try:
        cfg = grid.study_config(study.name, method, variant, seed, "data")
    except ValueError as err:
        raise ValueError(f"{where}, cell {method}/{variant}/seed{seed}: {err}") from None
    if ref is None:
        return cfg
    if sorted(ref) != sorted(INIT_KEYS) or (ref["method"], ref["variant"], seed) not in cells:
        raise ValueError(
            f"{where}, variant {variant}: init_from {ref} must be {{method, variant, epoch}} "
            "naming a cell of the same study."
        )
    source = grid.study_config(study.name, ref["method"], ref["variant"], seed, "data")
    if ref["epoch"] not in source.snapshot_epochs or not ref["epoch"] < cfg.epochs:
        raise ValueError(
            f"{where}, variant {variant}: init_from epoch {ref['epoch']} must be in the snapshot_epochs "
            f"{source.snapshot_epochs} of {ref['method']}/{ref['variant']} and below epochs={cfg.epochs}."
        )
    cfg.init_from = SNAPSHOT_FILE.format(epoch=ref["epoch"])  # the workflow's path (its folder is no check's)
    return cfg
