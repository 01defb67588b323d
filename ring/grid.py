"""Grids of cells: which (dataset, method, seed) a study trains, and each cell's full config.

A grid file (``workflow/grids/<name>.yaml``, structure in ``workflow/schemas/grid.schema.yaml``)
lists datasets, methods and seeds and overrides the paper's defaults of
:class:`ring.config.PretrainConfig` / :class:`ring.config.LinclsConfig`.  Overrides apply in
this order, the later winning: the stage's ``all`` block, then ``by_dataset``, then ``by_method``.
A method's defining values (a lesion's ``ring_anneal: none``, see :mod:`ring.methods`) are applied
last, and an override contradicting them is an error.

An optional ``tables:`` block names further tables, each with its own datasets x methods (Table 2,
the LA-variants table); the grid's cells are the union of the top-level datasets x methods (Table
1) and every table's product, without duplicates, in that order.
This module is torch-free: the workflow client imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product
from pathlib import Path

import yaml

from ring import catalog
from ring import config as C
from ring.methods import METHODS, apply_fixed

STAGES = {"pretrain": C.PretrainConfig, "lincls": C.LinclsConfig}


@dataclass
class Grid:
    name: str
    description: str
    datasets: list[str]
    methods: list[str]
    seeds: list[int]
    stages: dict[str, dict] = field(default_factory=dict)
    resources: dict[str, dict] = field(default_factory=dict)
    tables: dict[str, dict] = field(default_factory=dict)  # table name -> {datasets, methods}

    def table_axes(self, table: str) -> tuple[list[str], list[str]]:
        """(methods, datasets) of a table: Table 1 is the top level, the others their ``tables:`` entry."""
        if table == "table1":
            return list(self.methods), list(self.datasets)
        if table not in self.tables:
            raise ValueError(f"Grid {self.name} has no table {table!r}; its tables are table1, {', '.join(self.tables)}.")
        return list(self.tables[table]["methods"]), list(self.tables[table]["datasets"])

    def table_cells(self, table: str) -> list[tuple[str, str, int]]:
        methods, datasets = self.table_axes(table)
        return list(product(datasets, methods, self.seeds))

    def table_names(self) -> list[str]:
        return ["table1", *self.tables]

    def cells(self) -> list[tuple[str, str, int]]:
        return list(dict.fromkeys(c for t in self.table_names() for c in self.table_cells(t)))

    def stage_values(self, stage: str, dataset: str, method: str) -> dict:
        block = self.stages.get(stage, {})
        values = dict(block.get("all", {}))
        values.update(block.get("by_dataset", {}).get(dataset, {}))
        values.update(block.get("by_method", {}).get(method, {}))
        return values

    def pretrain_config(self, dataset: str, method: str, seed: int, data_root: str) -> C.PretrainConfig:
        values = apply_fixed(method, self.stage_values("pretrain", dataset, method))
        return C.from_dict(C.PretrainConfig, {"method": method, "dataset": dataset, "seed": seed,
                                              "data_root": data_root, **values})

    def lincls_config(self, dataset: str, method: str, seed: int, data_root: str) -> C.LinclsConfig:
        values = self.stage_values("lincls", dataset, method)
        return C.from_dict(C.LinclsConfig, {"method": method, "dataset": dataset, "seed": seed,
                                            "data_root": data_root, **values})


def validate(grid: Grid) -> None:
    """Names and config keys; one sentence per problem, raised before anything runs."""
    if "table1" in grid.tables:
        raise ValueError(f"Grid {grid.name}: table1's cells are the top-level datasets x methods; remove it from tables.")
    for table, axes in [("", {"methods": grid.methods, "datasets": grid.datasets}), *grid.tables.items()]:
        where = f"table {table}: " if table else ""
        for name in axes["datasets"]:
            catalog.spec(name)
        for name in axes["methods"]:
            if name not in METHODS:
                raise ValueError(f"Grid {grid.name}: {where}unknown method {name!r}; choose from {', '.join(METHODS)}.")
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


def from_dict(name: str, values: dict) -> Grid:
    grid = Grid(
        name=name,
        description=values.get("description", ""),
        datasets=list(values["datasets"]),
        methods=list(values["methods"]),
        seeds=[int(s) for s in values["seeds"]],
        stages={k: values[k] for k in STAGES if k in values},
        resources=values.get("resources", {}),
        tables={k: dict(v) for k, v in values.get("tables", {}).items()},
    )
    validate(grid)
    return grid


def load(path: str | Path) -> Grid:
    path = Path(path)
    with open(path) as fh:
        return from_dict(path.stem, yaml.safe_load(fh))
