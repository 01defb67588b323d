"""The linear-evaluation tables: Table 1 (pretraining datasets), Table 2 (lesions), Table 3 (transfer) and the LA
variants, each over (method, dataset) cells whose ``metrics.json`` holds a top-1.

    ring table table1 --out results/<grid>/tables/table1 --methods M ... --datasets D ... --metrics FILE ...
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ring.core.methods import METHODS
from ring.reports.tables.cells import collect
from ring.reports.tables.entry import check_names, methods_argument, metrics_argument, out_argument
from ring.reports.tables.layout import layout, markdown, write
from ring.reports.tables.published import DISPLAY, published_value
from ring.reports.tables.summary import summarize


@dataclass(frozen=True)
class EvaluationTable:
    """A table of linear-evaluation top-1 (%): methods as rows, datasets as columns, each beside the paper's."""

    name: str
    published_key: str  # its entry in ring/data/published-results.yaml
    help: str  # its caption
    single_column: str | None = None  # the one column of a published table that names none
    metric: str = "top1"  # the metrics.json key it averages

    def arguments(self, parser: argparse.ArgumentParser) -> None:
        out_argument(parser)
        methods_argument(parser)
        parser.add_argument("--datasets", nargs="+", required=True, help="column order")
        metrics_argument(parser)

    def paper(self, method: str, column: str) -> float:
        return published_value(self.published_key, method, column, self.single_column)

    def build(
        self, metric_files: list[str | Path], methods: list[str], datasets: list[str], prefix: str | Path
    ) -> pd.DataFrame:
        check_names("--methods", "registered method", methods, METHODS)
        check_names("--datasets", "dataset", datasets, DISPLAY)
        summary = summarize(collect(metric_files, self.metric), self.paper, methods, datasets)
        wide = layout(summary, methods, datasets)
        write(self.name, self.help, summary, wide, prefix)
        return wide

    def run(self, args: argparse.Namespace) -> str:
        return markdown(self.build(args.metrics, args.methods, args.datasets, args.out))


TABLES = (
    EvaluationTable("table1", "table1_linear_eval", "Linear evaluation top-1 (%) on frozen ResNet-18 features"),
    EvaluationTable(
        "table2", "table2_lesions", "Lesioning the effects of annealing and choice of w_u (linear evaluation top-1, %)"
    ),
    EvaluationTable(
        "table3",
        "table3_meta_dataset_transfer",
        "Transfer of encoders pretrained on the source dataset: linear evaluation top-1 (%) on each new image "
        "distribution (frozen ResNet-18 features, each dataset's own normalisation)",
    ),
    EvaluationTable(
        "table_la_variants",
        "table_la_variants",
        "Variants of Ring: Cave and +C_i beside LA (linear evaluation top-1, %)",
        single_column="CIFAR10",  # the published table reports CIFAR10 only, and names no column
    ),
)
BY_NAME = {table.name: table for table in TABLES}


def build(
    name: str, metric_files: list[str | Path], methods: list[str], datasets: list[str], prefix: str | Path
) -> pd.DataFrame:
    """Build the table ``name`` (one of :data:`TABLES`) and return its layout."""
    return BY_NAME[name].build(metric_files, methods, datasets, prefix)
