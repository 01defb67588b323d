"""The paper's published numbers (``ring/data/published-results.yaml``) and the column names a table shows."""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

from ring.core.catalog import DATASETS, TRANSFER
from ring.core.methods import METHODS, display_name
from ring.core.yaml_reading import read_yaml

PUBLISHED = Path(__file__).resolve().parents[2] / "data" / "published-results.yaml"

# Column name of every dataset a table can show: pretraining and transfer datasets.
DISPLAY = {name: s.display for name, s in {**DATASETS, **TRANSFER}.items()}


@cache
def published() -> dict:
    return read_yaml(PUBLISHED, "Published results file")


def published_value(table_key: str, method: str, column: str, single_column: str | None = None) -> float:
    """The paper's number for (method, column), NaN where the paper has none.  A published table with one column
    names none: ``single_column`` is the one it reports."""
    table = published()[table_key]
    row = table["rows"].get(display_name(method) if method in METHODS else method)
    columns = table.get("columns") or [single_column]
    if row is None or column not in columns:
        return math.nan
    return float(row[columns.index(column)] if isinstance(row, list) else row)


def dataset_display(name: str) -> str:
    return DISPLAY[name]
