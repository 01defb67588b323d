"""Every table ``ring table`` builds, one entry each (:class:`ring.reports.tables.entry.Table`), and its one parser:
``ring table NAME ...``, each NAME's arguments its entry's own."""

from __future__ import annotations

import argparse
import sys

from ring.core.files import FileError
from ring.core.metrics import NonFinite
from ring.reports.tables import cost, detection, evaluation, toy
from ring.reports.tables.cells import MetricsError
from ring.reports.tables.entry import Table, UnknownName

# In the paper's order: Tables 1-3, Table 4, the LA variants, the appendix's toy table, then the compute spent.
ENTRIES: tuple[Table, ...] = (*evaluation.TABLES, detection.TABLE, toy.TABLE, cost.TABLE)
REGISTRY: dict[str, Table] = {table.name: table for table in ENTRIES}

# What a table refuses in one sentence that names the file (or the grid); the old table files are left untouched.
REFUSALS = (MetricsError, NonFinite, FileError, cost.OutlookError, UnknownName)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        description="Aggregate finished cells into a paper table: CSV, Markdown and LaTeX, beside the paper's numbers."
    )
    tables = top.add_subparsers(dest="table", metavar="TABLE", required=True)
    for table in ENTRIES:
        sub = tables.add_parser(
            table.name, help=table.help.replace("%", "%%"), description=table.help
        )  # argparse %-formats help
        table.arguments(sub)
        sub.set_defaults(entry=table)
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        print(args.entry.run(args))
    except REFUSALS as err:
        print(f"ring: {err}", file=sys.stderr)
        return 1
    return 0
