"""What an entry of the table registry is (:mod:`ring.reports.tables.registry`), and the arguments entries share.

An entry carries its own behaviour: the arguments its ``ring table NAME`` takes and what it builds from them.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Protocol


class Table(Protocol):
    name: str  # the subcommand of `ring table`, and the stem of the files it writes under results/<grid>/tables/
    help: str  # one line: what the table shows

    def arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the arguments this table's command line takes."""

    def run(self, args: argparse.Namespace) -> str:
        """Build the table's files from the parsed arguments; return what `ring table` prints (Markdown)."""


def out_argument(parser: argparse.ArgumentParser, exts: str = ".csv, .md and .tex") -> None:
    parser.add_argument("--out", required=True, help=f"path prefix; {exts} are written")


def metrics_argument(parser: argparse.ArgumentParser, cells: str = "cells") -> None:
    parser.add_argument("--metrics", nargs="+", required=True, help=f"metrics.json files of the {cells}")


def methods_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--methods", nargs="+", required=True, help="row order")


class UnknownName(ValueError):
    """A ``--methods`` or ``--datasets`` name no table can show (a typo): refused with the choices, before anything
    is read or written."""


def check_names(option: str, what: str, given: list[str], choices: Iterable[str]) -> None:
    """Each of ``given`` (the values of ``option``) is one of ``choices``, else one sentence naming the first that
    is not, and the choices."""
    choices = list(choices)
    if unknown := next((name for name in given if name not in choices), None):
        raise UnknownName(f"{option} {unknown}: no {what} of that name; choose among {', '.join(choices)}.")
