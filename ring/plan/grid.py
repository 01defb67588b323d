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
Its checks (names, keys, every cell's config) are :mod:`ring.plan.checks.grid`, run by :func:`from_dict`.
This module is torch-free: the workflow client imports it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path

from ring.core import catalog, config
from ring.core.methods import METHODS, apply_fixed
from ring.core.stages import stages_with
from ring.core.yaml_reading import read_yaml
from ring.data import decode_place
from ring.plan.checks.grid import validate, validate_study

# A grid file's stem names its results folder (results/<name>/): a plain name, nothing that is a path.
GRID_NAME = re.compile(r"[A-Za-z0-9_-]+")


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
    ) -> config.TransferConfig:
        values = self.stage_values("transfer", dataset, method)
        return config.from_dict(
            config.TransferConfig,
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
        only to the methods that read it (ring.core.methods.Method.reads): the others keep its default, in config.yaml
        and hash.  ``by_method`` keys are its method's own (:func:`validate` refuses one it never reads)."""
        block = self.stages.get("pretrain", {})
        values = _read_by(method, {**block.get("all", {}), **block.get("by_dataset", {}).get(dataset, {})})
        values.update(block.get("by_method", {}).get(method, {}))
        return values

    def pretrain_config(
        self, dataset: str, method: str, seed: int, data_root: str, recorded: str | None = None
    ) -> config.PretrainConfig:
        """``recorded``: the decoder the cell recorded when it was first planned (:func:`recorded_decoder`)."""
        values = apply_fixed(method, self.pretrain_values(dataset, method))
        cfg = config.from_dict(
            config.PretrainConfig,
            {"method": method, "dataset": dataset, "seed": seed, "data_root": data_root, **values},
        )
        return with_decoder(cfg, recorded)

    def lincls_config(self, dataset: str, method: str, seed: int, data_root: str) -> config.LinclsConfig:
        values = self.stage_values("lincls", dataset, method)
        return config.from_dict(
            config.LinclsConfig, {"method": method, "dataset": dataset, "seed": seed, "data_root": data_root, **values}
        )

    def toy_cnce_seeds(self) -> list[int]:
        return [int(s) for s in (self.toy_cnce or {}).get("seeds", [])]

    def toy_cnce_config(self, seed: int) -> config.ToyCNCEConfig:
        values = {k: v for k, v in (self.toy_cnce or {}).items() if k != "seeds"}
        return config.from_dict(config.ToyCNCEConfig, {**values, "seed": seed})

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

    def detection_config(self, method: str, task: str, seed: int, datasets_root: str) -> config.DetectionConfig:
        block = self.detection
        values, overrides = {}, {}
        for part in (
            block.get("all", {}),
            block.get("by_task", {}).get(task, {}),
            block.get("by_method", {}).get(method, {}),
        ):
            values.update({k: v for k, v in part.items() if k != "overrides"})
            overrides.update(part.get("overrides", {}))
        return config.from_dict(
            config.DetectionConfig,
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
    ) -> config.PretrainConfig:
        """A study cell's config: the grid's pretraining overrides, then the study's, then the variant's.

        ``init_from`` is the path of the snapshot the variant starts from (the workflow builds it).
        """
        s = self.studies[study]
        values = self.pretrain_values(s.dataset, method)
        # A study's block and variants serve its several methods (k256: bank_negatives and queue_size): each takes
        # the keys it reads.
        values.update(_read_by(method, s.pretrain))
        values.update(_read_by(method, {k: v for k, v in s.variants[variant].items() if k != "init_from"}))
        values = apply_fixed(method, values)
        cfg = config.from_dict(
            config.PretrainConfig,
            {
                "method": method,
                "dataset": s.dataset,
                "seed": seed,
                "data_root": data_root,
                **values,
                "init_from": init_from,
            },
        )
        return with_decoder(cfg)


def _read_by(method: str, values: dict) -> dict:
    """``values`` (a block several methods share) without the keys ``method`` never reads; all of them for a name the
    registry does not hold (the checks refuse it)."""
    m = METHODS[method] if method in METHODS else None
    return {k: v for k, v in values.items() if m is None or m.reads(k)}


def with_decoder(cfg: config.PretrainConfig, recorded: str | None = None) -> config.PretrainConfig:
    """``cfg`` with the decoder of its store's records resolved and recorded (``store_decoder``,
    :func:`ring.data.decode_place.planned`), unless it names one already or its choice is one the checks refuse."""
    if cfg.store_decoder or cfg.store_decode not in decode_place.CHOICES or cfg.method not in METHODS:
        return cfg
    spec = catalog.DATASETS.get(cfg.dataset)
    # The GPU's decoder serves a cell reading the jpeg95 store into device views on a GPU (ring.data.views.decode_of).
    reads = bool(spec and spec.store_size == cfg.resize) and cfg.store == "jpeg95" and cfg.device != "cpu"
    reads = reads and cfg.augment not in ("cpu", "dali")
    m = METHODS[cfg.method]
    return dataclasses.replace(
        cfg, store_decoder=decode_place.planned(cfg.store_decode, reads, m.objective.family(m), recorded)
    )


def recorded_decoder(config_yaml: str | Path) -> str | None:
    """The decoder a planned cell recorded in its ``config.yaml``: its ``store_decoder``, or ``cpu`` for a cell
    planned with ``store_decode: auto`` before the key existed (its jobs decoded in the loader's workers: no committed
    figure had measured the GPU's decoder faster); None for a cell not planned yet, one whose file cannot be read
    (planned afresh), or one whose choice was not ``auto``."""
    try:
        values = read_yaml(config_yaml, "the cell's config")
    except (OSError, ValueError):
        return None
    if not isinstance(values, dict) or values.get("store_decode", "auto") != "auto":
        return None
    return values.get("store_decoder") or "cpu"


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
        stages={k: values[k] for k in stages_with("grid_block") if k in values},
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
    values = read_yaml(path, "Grid file")
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
