"""Grids of cells: which (dataset, method, seed) a study trains, and each cell's full config.

A grid file (``workflow/grids/<name>.yaml``, structure in ``workflow/schemas/grid.schema.yaml``)
lists datasets, methods and seeds and overrides the paper's defaults of
:class:`ring.config.PretrainConfig` / :class:`ring.config.LinclsConfig`.  Overrides apply in
this order, the later winning: the stage's ``all`` block, then ``by_dataset``, then ``by_method``.

An optional ``studies`` block plans the appendix's studies (:class:`Study`): each names a dataset,
methods, seeds and variants (sets of pretraining overrides applied over the grid's own, e.g.
``k16: {bank_negatives: 16}``); a variant may start from another cell's snapshot
(``init_from: {method: IR, variant: source, epoch: 50}``, same study, dataset and seed).
This module is torch-free: the workflow client imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product
from pathlib import Path

import yaml

from ring import catalog
from ring import config as C
from ring.methods import METHODS

STAGES = {"pretrain": C.PretrainConfig, "lincls": C.LinclsConfig}
# The appendix's studies, each with its figure builder in ring.figures (the study's name is its figure's).
STUDIES = ("hard_negatives", "anneal_policies", "negatives_k")
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
        return [(m, v, s) for m in self.methods for v in self.variants
                if m in self.variant_methods.get(v, self.methods) for s in self.seeds]

    def init_source(self, variant: str) -> dict | None:
        """The cell a variant starts from, ``{method, variant, epoch}``, or None."""
        ref = self.variants[variant].get("init_from")
        if ref and not isinstance(ref, dict):
            raise ValueError(f"Study {self.name}, variant {variant}: init_from must be {{method, variant, epoch}} "
                             f"naming a cell of the study, not {ref!r}.")
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
    studies: dict[str, Study] = field(default_factory=dict)

    def cells(self) -> list[tuple[str, str, int]]:
        return list(product(self.datasets, self.methods, self.seeds))

    def stage_values(self, stage: str, dataset: str, method: str) -> dict:
        block = self.stages.get(stage, {})
        values = dict(block.get("all", {}))
        values.update(block.get("by_dataset", {}).get(dataset, {}))
        values.update(block.get("by_method", {}).get(method, {}))
        return values

    def pretrain_config(self, dataset: str, method: str, seed: int, data_root: str) -> C.PretrainConfig:
        values = self.stage_values("pretrain", dataset, method)
        return C.from_dict(C.PretrainConfig, {"method": method, "dataset": dataset, "seed": seed,
                                              "data_root": data_root, **values})

    def lincls_config(self, dataset: str, method: str, seed: int, data_root: str) -> C.LinclsConfig:
        values = self.stage_values("lincls", dataset, method)
        return C.from_dict(C.LinclsConfig, {"method": method, "dataset": dataset, "seed": seed,
                                            "data_root": data_root, **values})

    def study_config(self, study: str, method: str, variant: str, seed: int, data_root: str,
                     init_from: str = "") -> C.PretrainConfig:
        """A study cell's config: the grid's pretraining overrides, then the study's, then the variant's.

        ``init_from`` is the path of the snapshot the variant starts from (the workflow builds it).
        """
        s = self.studies[study]
        values = self.stage_values("pretrain", s.dataset, method)
        values.update(s.pretrain)
        values.update({k: v for k, v in s.variants[variant].items() if k != "init_from"})
        return C.from_dict(C.PretrainConfig, {"method": method, "dataset": s.dataset, "seed": seed,
                                              "data_root": data_root, **values, "init_from": init_from})


def validate(grid: Grid) -> None:
    """Names and config keys; one sentence per problem, raised before anything runs."""
    for name in grid.datasets:
        catalog.spec(name)
    for name in grid.methods:
        if name not in METHODS:
            raise ValueError(f"Grid {grid.name}: unknown method {name!r}; choose from {', '.join(METHODS)}.")
    for stage, block in grid.stages.items():
        if stage not in STAGES:
            raise ValueError(f"Grid {grid.name}: unknown stage {stage!r}; stages are {', '.join(STAGES)}.")
        for name in block.get("by_dataset", {}):
            catalog.spec(name)
        for name in block.get("by_method", {}):
            if name not in METHODS:
                raise ValueError(f"Grid {grid.name}: by_method names unknown method {name!r}.")
        overrides = [block.get("all", {}), *block.get("by_dataset", {}).values(), *block.get("by_method", {}).values()]
        for values in overrides:
            for key in values:
                C.check_key(STAGES[stage], key, context=f"Grid {grid.name}, stage {stage}: ")
    # Building every cell's config checks every override key against the dataclasses.
    for dataset, method, seed in grid.cells():
        for build in (grid.pretrain_config, grid.lincls_config):
            try:
                build(dataset, method, seed, "data")
            except ValueError as err:
                raise ValueError(f"Grid {grid.name}, cell {dataset}/{method}/seed{seed}: {err}") from None


def validate_study(grid: Grid, study: Study) -> None:
    where = f"Grid {grid.name}, study {study.name}"
    if study.name not in STUDIES:
        raise ValueError(f"{where}: unknown study; studies are {', '.join(STUDIES)}.")
    catalog.spec(study.dataset)
    for name in study.methods:
        if name not in METHODS:
            raise ValueError(f"{where}: unknown method {name!r}; choose from {', '.join(METHODS)}.")
    for variant, methods in study.variant_methods.items():
        if variant not in study.variants or not set(methods) <= set(study.methods):
            raise ValueError(f"{where}: variant_methods {variant}: {methods} must name a variant and methods of the study.")
    cells = study.cells()
    for method, variant, seed in cells:
        try:
            cfg = grid.study_config(study.name, method, variant, seed, "data")
        except ValueError as err:
            raise ValueError(f"{where}, cell {method}/{variant}/seed{seed}: {err}") from None
        ref = study.init_source(variant)
        if ref is None:
            continue
        if sorted(ref) != sorted(INIT_KEYS) or (ref["method"], ref["variant"], seed) not in cells:
            raise ValueError(f"{where}, variant {variant}: init_from {ref} must be {{method, variant, epoch}} "
                             "naming a cell of the same study.")
        source = grid.study_config(study.name, ref["method"], ref["variant"], seed, "data")
        if ref["epoch"] not in source.snapshot_epochs or not ref["epoch"] < cfg.epochs:
            raise ValueError(f"{where}, variant {variant}: init_from epoch {ref['epoch']} must be in the snapshot_epochs "
                             f"{source.snapshot_epochs} of {ref['method']}/{ref['variant']} and below epochs={cfg.epochs}.")


def _study(name: str, values: dict) -> Study:
    return Study(name=name, dataset=values["dataset"], methods=list(values["methods"]),
                 seeds=[int(s) for s in values["seeds"]], variants=dict(values["variants"]),
                 variant_methods=dict(values.get("variant_methods", {})), pretrain=dict(values.get("pretrain", {})),
                 description=values.get("description", ""))


def from_dict(name: str, values: dict) -> Grid:
    grid = Grid(
        name=name,
        description=values.get("description", ""),
        datasets=list(values["datasets"]),
        methods=list(values["methods"]),
        seeds=[int(s) for s in values["seeds"]],
        stages={k: values[k] for k in STAGES if k in values},
        resources=values.get("resources", {}),
        studies={k: _study(k, v) for k, v in values.get("studies", {}).items()},
    )
    validate(grid)
    for study in grid.studies.values():
        validate_study(grid, study)
    return grid


def load(path: str | Path) -> Grid:
    path = Path(path)
    with open(path) as fh:
        return from_dict(path.stem, yaml.safe_load(fh))
