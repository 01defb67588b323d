"""Grids of cells: which (dataset, method, seed) a study trains, and each cell's full config.

A grid file (``ring/resources/grids/<name>.yaml``, structure in ``ring/resources/schemas/grid.schema.yaml``)
lists datasets, methods and seeds and overrides the paper's defaults of
:class:`ring.core.config.PretrainConfig` / :class:`ring.core.config.LinclsConfig`.  Overrides apply in
this order, the later winning: the stage's ``all`` block, then ``by_dataset``, then ``by_method``.
A method's defining values (a lesion's ``ring_anneal: none``, see :mod:`ring.core.methods`) are applied
last, and an override contradicting them is an error.

An optional ``tables:`` block names further tables, each with its own datasets x methods (Table 2,
the LA-variants table); the grid's cells are the union of the top-level datasets x methods (Table
1) and every table's product, without duplicates, in that order.

An optional ``studies`` block plans the appendix's studies (:class:`Study`): each names a dataset,
methods, seeds and variants (sets of pretraining overrides applied over the grid's own, e.g.
``k16: {bank_negatives: 16}``); a variant may start from another cell's snapshot
(``init_from: {method: IR, variant: source, epoch: 50}``, same study, dataset and seed).
This module is torch-free: the workflow client imports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path

from ring.core import catalog
from ring.core import config as C
from ring.core.methods import METHODS, RING_KEYS, apply_fixed, missing, read_only, unread_keys
from ring.plan import checks
from ring.plan.detection_tasks import TASKS

STAGES = {"pretrain": C.PretrainConfig, "lincls": C.LinclsConfig, "transfer": C.TransferConfig}
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
# A grid file's stem names its results folder (results/<name>/): a plain name, nothing that is a path.
GRID_NAME = re.compile(r"[A-Za-z0-9_-]+")
# The appendix's studies, each with its figure builder in ring.reports.figures (the study's name is its figure's).
STUDIES = ("hard_negatives", "anneal_policies", "negatives_k", "ring_window")
INIT_KEYS = ("method", "variant", "epoch")


@dataclass
class Study:
    name: str
    dataset: str
    methods: list[str]
    seeds: list[int]
    variants: dict[str, dict]  # variant -> PretrainConfig overrides (``init_from`` a reference to a cell)
    variant_methods: dict[str, list[str]] = field(default_factory=dict)  # variant -> methods running it (all)
    pretrain: dict = field(default_factory=dict)  # overrides shared by the study's cells
    description: str = ""

    def cells(self) -> list[tuple[str, str, int]]:
        """(method, variant, seed) of every cell of the study."""
        return [
            (m, v, s)
            for m in self.methods
            for v in self.variants
            if m in self.variant_methods.get(v, self.methods)
            for s in self.seeds
        ]

    def init_source(self, variant: str) -> dict | None:
        """The cell a variant starts from, ``{method, variant, epoch}``, or None."""
        ref = self.variants[variant].get("init_from")
        if ref and not isinstance(ref, dict):
            raise ValueError(
                f"Study {self.name}, variant {variant}: init_from must be {{method, variant, epoch}} "
                f"naming a cell of the study, not {ref!r}."
            )
        return dict(ref) if ref else None


@dataclass
class Grid:
    name: str
    description: str
    datasets: list[str]
    methods: list[str]
    seeds: list[int]
    stages: dict[str, dict] = field(default_factory=dict)
    resources: dict[str, dict] = field(default_factory=dict)
    # The appendix's toy experiment: its seeds and ToyCNCEConfig overrides (None: not in this grid).
    toy_cnce: dict | None = None
    detection: dict = field(default_factory=dict)  # Table 4 block, see detection_config()
    tables: dict[str, dict] = field(default_factory=dict)  # table name -> {datasets, methods}

    def table_axes(self, table: str) -> tuple[list[str], list[str]]:
        """(methods, datasets) of a table: Table 1 is the top level, the others their ``tables:`` entry."""
        if table == "table1":
            return list(self.methods), list(self.datasets)
        if table not in self.tables:
            raise ValueError(
                f"Grid {self.name} has no table {table!r}; its tables are table1, {', '.join(self.tables)}."
            )
        return list(self.tables[table]["methods"]), list(self.tables[table]["datasets"])

    def table_cells(self, table: str) -> list[tuple[str, str, int]]:
        methods, datasets = self.table_axes(table)
        return list(product(datasets, methods, self.seeds))

    def table_names(self) -> list[str]:
        return ["table1", *self.tables]

    studies: dict[str, Study] = field(default_factory=dict)
    source: str = ""  # the grid file, named by every error (empty: a grid built in code, named by its name)

    @property
    def file(self) -> str:
        return self.source or self.name

    def cells(self) -> list[tuple[str, str, int]]:
        return list(dict.fromkeys(c for t in self.table_names() for c in self.table_cells(t)))

    def stage_values(self, stage: str, dataset: str, method: str) -> dict:
        block = self.stages.get(stage, {})
        values = dict(block.get("all", {}))
        values.update(block.get("by_dataset", {}).get(dataset, {}))
        values.update(block.get("by_method", {}).get(method, {}))
        return values

    # -- transfer (Table 3): the source column's encoders, evaluated on other datasets ------------
    @property
    def transfer(self) -> dict:
        return self.stages.get("transfer", {})

    def transfer_methods(self) -> list[str]:
        return list(self.transfer.get("methods", self.methods))

    def transfer_cells(self) -> list[tuple[str, str, int]]:
        """(transfer dataset, method, seed) of every transfer cell; none without a transfer block."""
        if not self.transfer:
            return []
        return list(product(self.transfer["datasets"], self.transfer_methods(), self.seeds))

    def transfer_config(
        self, dataset: str, method: str, seed: int, data_root: str, stats_cache: str = ""
    ) -> C.TransferConfig:
        values = self.stage_values("transfer", dataset, method)
        return C.from_dict(
            C.TransferConfig,
            {
                "method": method,
                "dataset": dataset,
                "seed": seed,
                "data_root": data_root,
                "source": self.transfer["source"],
                "stats_cache": stats_cache,
                **values,
            },
        )

    def pretrain_values(self, dataset: str, method: str) -> dict:
        """A pretraining cell's overrides.  ``all`` and ``by_dataset`` serve several methods, so a key there applies
        only to the methods that read it (ring.core.methods.unread_keys): the others keep its default, in config.yaml
        and hash.  ``by_method`` keys are its method's own (:func:`validate` refuses one it never reads)."""
        block = self.stages.get("pretrain", {})
        values = read_only(method, {**block.get("all", {}), **block.get("by_dataset", {}).get(dataset, {})})
        values.update(block.get("by_method", {}).get(method, {}))
        return values

    def pretrain_config(self, dataset: str, method: str, seed: int, data_root: str) -> C.PretrainConfig:
        values = apply_fixed(method, self.pretrain_values(dataset, method))
        return C.from_dict(
            C.PretrainConfig, {"method": method, "dataset": dataset, "seed": seed, "data_root": data_root, **values}
        )

    def lincls_config(self, dataset: str, method: str, seed: int, data_root: str) -> C.LinclsConfig:
        values = self.stage_values("lincls", dataset, method)
        return C.from_dict(
            C.LinclsConfig, {"method": method, "dataset": dataset, "seed": seed, "data_root": data_root, **values}
        )

    def toy_cnce_seeds(self) -> list[int]:
        return [int(s) for s in (self.toy_cnce or {}).get("seeds", [])]

    def toy_cnce_config(self, seed: int) -> C.ToyCNCEConfig:
        values = {k: v for k, v in (self.toy_cnce or {}).items() if k != "seeds"}
        return C.from_dict(C.ToyCNCEConfig, {**values, "seed": seed})

    # -- Table 4 (optional ``detection:`` block) ---------------------------------------------
    # detection: {source: DATASET, methods: [...], tasks: [...], datasets: embedded|detectron2,
    #             all: {DetectionConfig fields}, by_task: {TASK: {...}}, by_method: {METHOD: {...}}}
    # Later blocks win; their ``overrides`` (Detectron2 keys) merge key by key.  Seeds are the grid's.

    def detection_cells(self) -> list[tuple[str, str, str, int]]:
        """(source dataset, method, task, seed) of every Table 4 cell."""
        if not self.detection:
            return []
        block = self.detection
        return list(product([block["source"]], block["methods"], block["tasks"], self.seeds))

    def detection_config(self, method: str, task: str, seed: int, datasets_root: str) -> C.DetectionConfig:
        block = self.detection
        values, overrides = {}, {}
        for part in (
            block.get("all", {}),
            block.get("by_task", {}).get(task, {}),
            block.get("by_method", {}).get(method, {}),
        ):
            values.update({k: v for k, v in part.items() if k != "overrides"})
            overrides.update(part.get("overrides", {}))
        return C.from_dict(
            C.DetectionConfig,
            {
                "task": task,
                "method": method,
                "source": block["source"],
                "seed": seed,
                "datasets": block.get("datasets", "detectron2"),
                "datasets_root": datasets_root,
                **values,
                "overrides": overrides,
            },
        )

    def study_config(
        self, study: str, method: str, variant: str, seed: int, data_root: str, init_from: str = ""
    ) -> C.PretrainConfig:
        """A study cell's config: the grid's pretraining overrides, then the study's, then the variant's.

        ``init_from`` is the path of the snapshot the variant starts from (the workflow builds it).
        """
        s = self.studies[study]
        values = self.pretrain_values(s.dataset, method)
        # A study's block and variants serve its several methods (k256: bank_negatives and queue_size): each takes
        # the keys it reads.
        values.update(read_only(method, s.pretrain))
        values.update(read_only(method, {k: v for k, v in s.variants[variant].items() if k != "init_from"}))
        values = apply_fixed(method, values)
        return C.from_dict(
            C.PretrainConfig,
            {
                "method": method,
                "dataset": s.dataset,
                "seed": seed,
                "data_root": data_root,
                **values,
                "init_from": init_from,
            },
        )


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
    unread = [k for k in values if k in unread_keys(method)]
    if not unread:
        return
    key = unread[0]
    if key in RING_KEYS:  # the window's settings: name the methods that have one
        what = (
            f"is a Ring setting but {method} has no Ring window, so it would be ignored; remove it or use "
            f"{method}Ring-style methods ({', '.join(n for n, m in METHODS.items() if m.ring)})"
        )
    else:
        readers = [n for n in METHODS if key not in unread_keys(n)]
        what = (
            f"is a setting {method} never reads (only {', '.join(readers)} do), so it would change nothing it "
            "trains; remove it here (under all: or by_dataset it applies only to the methods that read it)"
        )
    raise checks.ConfigError(f"{where}: {key}={values[key]!r} {what}.")


def validate_detection(grid: Grid) -> None:

    block = grid.detection
    for part, values in [
        ("all", block.get("all", {})),
        *((f"by_task {k}", v) for k, v in block.get("by_task", {}).items()),
        *((f"by_method {k}", v) for k, v in block.get("by_method", {}).items()),
    ]:
        check_no_identity_keys(values, f"Grid {grid.file}, block detection {part}")
    if block["source"] not in grid.datasets:
        raise ValueError(
            f"Grid {grid.name}: detection source {block['source']!r} is not one of the grid's datasets "
            f"({', '.join(grid.datasets)}), so no encoder is pretrained on it."
        )
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


def validate(grid: Grid) -> None:
    """Names and config keys; one sentence per problem, raised before anything runs."""
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
    for stage, block in grid.stages.items():
        if stage not in STAGES:
            raise ValueError(f"Grid {grid.name}: unknown stage {stage!r}; stages are {', '.join(STAGES)}.")
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
                C.check_key(STAGES[stage], key, context=f"Grid {grid.name}, stage {stage}: ")
    for seed in (grid.toy_cnce_seeds() or [0]) if grid.toy_cnce is not None else []:
        try:
            cfg = grid.toy_cnce_config(seed)
        except ValueError as err:
            raise ValueError(f"Grid {grid.name}, toy_cnce: {err}") from None
        checks.check(cfg, f"Grid {grid.file}, block toy_cnce, seed {seed}")
    if grid.transfer:
        validate_transfer(grid)
    # Building every cell's config checks every override key against the dataclasses.
    for method, values in grid.stages.get("pretrain", {}).get("by_method", {}).items():
        check_read(method, values, f"Grid {grid.file}, stage pretrain, block by_method {method}")
    for dataset, method, seed in grid.cells():
        for stage, build in (("pretrain", grid.pretrain_config), ("lincls", grid.lincls_config)):
            try:
                cfg = build(dataset, method, seed, "data")
            except ValueError as err:
                raise ValueError(f"Grid {grid.name}, cell {dataset}/{method}/seed{seed}: {err}") from None
            checks.check(cfg, f"Grid {grid.file}, stage {stage}, cell {dataset}/{method}/seed{seed}")
    if grid.detection:
        validate_detection(grid)


def validate_transfer(grid: Grid) -> None:
    block = grid.transfer
    for key in ("source", "datasets"):
        if key not in block:
            raise ValueError(f"Grid {grid.name}: the transfer block needs {key!r}.")
    if block["source"] not in grid.datasets:
        raise ValueError(
            f"Grid {grid.name}: transfer source {block['source']!r} is not one of the grid's datasets "
            f"({', '.join(grid.datasets)}), whose pretraining cells it reuses; add it or change the source."
        )
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


def validate_study(grid: Grid, study: Study) -> None:
    where = f"Grid {grid.name}, study {study.name}"
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
    cells = study.cells()
    for method, variant, seed in cells:
        ref = study.init_source(variant)
        # The snapshot path the workflow passes (its folder does not matter to the checks).
        init = C.SNAPSHOT_FILE.format(epoch=ref.get("epoch")) if ref else ""
        try:
            cfg = grid.study_config(study.name, method, variant, seed, "data")
        except ValueError as err:
            raise ValueError(f"{where}, cell {method}/{variant}/seed{seed}: {err}") from None
        if ref is None:
            checks.check(
                cfg,
                f"Grid {grid.file}, stage studies ({study.name}), cell {study.dataset}/{method}/{variant}/seed{seed}",
            )
            continue
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
        cfg.init_from = init
        checks.check(
            cfg, f"Grid {grid.file}, stage studies ({study.name}), cell {study.dataset}/{method}/{variant}/seed{seed}"
        )


def _study(name: str, values: dict) -> Study:
    return Study(
        name=name,
        dataset=values["dataset"],
        methods=list(values["methods"]),
        seeds=[int(s) for s in values["seeds"]],
        variants=dict(values["variants"]),
        variant_methods=dict(values.get("variant_methods", {})),
        pretrain=dict(values.get("pretrain", {})),
        description=values.get("description", ""),
    )


def from_dict(name: str, values: dict, source: str = "") -> Grid:
    grid = Grid(
        source=str(source),
        name=name,
        description=values.get("description", ""),
        datasets=list(values["datasets"]),
        methods=list(values["methods"]),
        seeds=[int(s) for s in values["seeds"]],
        stages={k: values[k] for k in STAGES if k in values},
        resources=values.get("resources", {}),
        toy_cnce=values.get("toy_cnce"),
        detection=values.get("detection", {}),
        tables={k: dict(v) for k, v in values.get("tables", {}).items()},
        studies={k: _study(k, v) for k, v in values.get("studies", {}).items()},
    )
    validate(grid)
    for study in grid.studies.values():
        validate_study(grid, study)
    return grid


def resolve(value: str, grid_dir: str | Path) -> Path:
    """A grid's file: ``NAME`` is ``grid_dir/NAME.yaml``; ``PATH.yaml`` is that file, anywhere, unless
    its stem (which names the results folder) is another grid's of ``grid_dir``.  One sentence otherwise."""
    grid_dir = Path(grid_dir)
    if Path(value).expanduser().is_dir():
        raise ValueError(
            f"grid={value!r} is a folder; give a grid file in it (grid=path/to/mine.yaml) or a name of {grid_dir}."
        )
    if value.endswith((".yaml", ".yml")):
        path = Path(value).expanduser()
        if not path.is_file():
            raise ValueError(f"grid={value!r} names no file; give an existing grid file or a name of {grid_dir}.")
        if not GRID_NAME.fullmatch(path.stem):
            raise ValueError(
                f"grid={value!r}: the file's name {path.stem!r} names the results folder results/{path.stem}/, "
                "so it must be a plain name (letters, digits, - and _); rename the file."
            )
        named = grid_dir / f"{path.stem}.yaml"
        if named.is_file() and named.resolve() != path.resolve():
            raise ValueError(
                f"grid={value!r} would write results/{path.stem}/, which belongs to {named}; "
                "rename your file (its name names the results folder)."
            )
        return path
    if not GRID_NAME.fullmatch(value):
        raise ValueError(
            f"grid={value!r} is neither a grid name (letters, digits, - and _) of {grid_dir} nor a "
            "path ending in .yaml; give one of those."
        )
    path = grid_dir / f"{value}.yaml"
    if not path.is_file():
        names = sorted(p.stem for p in grid_dir.glob("*.yaml"))
        raise ValueError(
            f"grid={value!r} has no file {path}; choose one of {', '.join(names)} "
            "or give the path of a grid file (grid=path/to/mine.yaml)."
        )
    return path


def read(path: str | Path) -> dict:
    """A grid file's keys, before the schema sees them; one sentence for a file that holds none (empty, comments
    only) or holds a list or a single value instead of ``key: value`` lines."""
    path = Path(path)
    values = C.read_yaml(path, "Grid file")
    if values is None:
        raise ValueError(
            f"Grid file {path} is empty (no keys, at most comments); write its datasets:, methods: and "
            "seeds: (ring/resources/grids/smoke.yaml is an example)."
        )
    if not isinstance(values, dict):
        kind = "a list" if isinstance(values, list) else f"a single {type(values).__name__} value"
        raise ValueError(
            f"Grid file {path} holds {kind}, not key: value lines; write its datasets:, methods: and "
            "seeds: as keys at the top level (ring/resources/grids/smoke.yaml is an example)."
        )
    return values


def load(path: str | Path) -> Grid:
    path = Path(path)
    return from_dict(path.stem, read(path), source=str(path))


def datasets_read(grid: Grid) -> list[str]:
    """Every dataset a grid reads: pretraining, tables, studies, transfer, and Detectron2's for Table 4."""
    names = [d for d, _, _ in grid.cells()] + [s.dataset for s in grid.studies.values()]
    names += list(grid.transfer.get("datasets", []))
    if grid.detection and grid.detection.get("datasets", "detectron2") != "embedded":
        tasks = grid.detection["tasks"]
        names += ["coco"] * any(t.startswith("coco") for t in tasks)
        names += ["voc2007", "voc2012"] * any(t.startswith("voc") for t in tasks)
    return list(dict.fromkeys(names))
