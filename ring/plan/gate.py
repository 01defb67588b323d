"""The one gate every command that reads a grid passes: the workflow's plan, ``ring status``, ``estimate``, ``prune``,
``submit`` and ``cancel``.

A command that reads a grid by another road than the workflow's sees another grid: a ``Tables:`` typo that the
workflow's schema refuses would leave ``status`` counting Table 2's finished cells as no longer named and ``prune``
deleting them, and a grid file of another folder with the same name would let ``prune`` delete the cells of the
grid that owns ``results/<name>/``.  So each of them opens the grid here, in this order, and stops at the first
problem with one sentence (a ``ValueError``):

1. the file: ``--grid NAME`` or a path (:func:`ring.plan.grid.resolve`);
2. its YAML: a syntax error, a key or a merge key ``<<:`` written twice in one mapping, an empty file
   (:func:`ring.plan.grid.read`, :class:`ring.core.yaml_reading.Loader`);
3. the schema ``ring/resources/schemas/grid.schema.yaml`` (an unknown or misspelt key, a seed that is no integer);
4. every cell's config of every stage (:func:`ring.plan.grid.from_dict`): a method of a plug-in that failed to
   load is named with that plug-in's failure;
5. the results folder ``results/<name>/`` belongs to this grid file (:mod:`ring.plan.ownership`).

Plug-ins that failed to load, or whose declaration imports torch, are warned of on stderr (one line each) when
the grid names none of their methods.  Torch-free: the login-node commands import it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import jsonschema

from ring import resources
from ring.core import catalog
from ring.core.methods import METHODS
from ring.core.yaml_reading import read_yaml
from ring.plan import checks, ownership
from ring.plan import grid as grid_plan

SCHEMA = resources.SCHEMAS / "grid.schema.yaml"


def schema_refusal(error, what: str, schema: str | Path) -> str:
    """The sentence for a jsonschema ``ValidationError`` of ``what`` (a file) against ``schema``: the key path
    (``(top level)`` for the file as a whole), the schema's words, and the schema file to read."""
    path = error.absolute_path
    key = PurePosixPath(*map(str, path)).as_posix() if path else "(top level)"
    return f"{what}: key {key}: {error.message}; fix it (the schema is ring/resources/schemas/{Path(schema).name})."


def schema_check(values: dict, what: str) -> None:
    """``values`` against the grid schema, as the workflow's ``snakemake.utils.validate`` checks them (the schema
    sets no defaults, so both see the same grid); the first failure is one sentence naming the key."""
    schema = read_yaml(SCHEMA, "Schema")
    validator = jsonschema.validators.validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(values))
    if error is not None:
        raise ValueError(schema_refusal(error, what, SCHEMA))


def warnings() -> list[str]:
    """One line per plug-in that failed to load or whose declaration imports torch."""
    broken = [
        f"{clause}; its methods are unavailable until that package is fixed or uninstalled."
        for clause in METHODS.broken.values()
    ]
    return broken + [f"{clause}." for clause in METHODS.heavy.values()]


def open_grid(
    value: str | Path,
    grid_dir: str | Path,
    results: str | Path = "results",
    validate: Callable[[dict, str], None] = schema_check,
) -> grid_plan.Grid:
    """The grid ``value`` names (a name of ``grid_dir`` or a path), through every check of the module docstring;
    ``validate(values, what)`` is the schema check (the workflow passes Snakemake's)."""
    path = grid_plan.resolve(str(value), grid_dir)
    values = grid_plan.read(path)
    validate(values, f"Grid file {path}")
    grid = grid_plan.from_dict(path.stem, values, source=str(path))
    if problem := ownership.conflict(path, Path(results) / grid.name):
        raise ValueError(problem)
    for line in warnings():
        print(f"ring: warning: {line}", file=sys.stderr)
    return grid


def select(
    value: str,
    grid_dir: str | Path,
    validate: Callable[[dict, str], None],
    skip_checksums: bool = False,
    results: str | Path = "results",
    environment: bool = True,
) -> grid_plan.Grid:
    """The grid a workflow run plans: ``grid=value`` through the gate every command that reads a grid passes
    (:func:`open_grid`: resolved, read, schema-checked by ``validate(values, what)``, every cell's
    config of every stage checked, the results folder this file's, a broken or torch-importing plug-in warned of),
    then what stops its jobs on this machine (:func:`ring.plan.checks.environment`, unless ``environment`` is false: a
    lint runs no job) and a ``skip_checksums`` that a
    dataset's loader cannot honour (refused here, not after the data check passed and the job failed).  Only this
    grid's file is read, so a broken neighbour never blocks a run.  Each refusal is one sentence (ValueError)."""
    try:
        path = grid_plan.resolve(value, grid_dir)
    except ValueError as err:
        raise ValueError(f"config {err}") from None
    grid = open_grid(path, grid_dir, results, validate)
    if environment and (problem := checks.environment(grid, results)):
        raise ValueError(problem)
    verifying = [d for d in grid_plan.datasets_read(grid) if d in catalog.DATASETS and catalog.loader_verifies(d)]
    if skip_checksums and verifying:
        raise ValueError(catalog.skip_refusal(verifying[0]))
    return grid
