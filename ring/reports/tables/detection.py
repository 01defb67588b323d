"""Table 4: frozen backbones in Detectron2 (COCO detection and instance segmentation, COCO keypoints, VOC07
detection), AP / AP50 / AP75 per task; each cell's ``metrics.json`` holds its task's columns (ring.detection).

    ring table table4 --out results/<grid>/tables/table4 --methods M ... --metrics FILE ...
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ring.core.methods import METHODS
from ring.plan.detection_tasks import COLUMNS
from ring.reports.tables.cells import read_metrics, stale_reason
from ring.reports.tables.entry import check_names, methods_argument, metrics_argument, out_argument
from ring.reports.tables.layout import layout, markdown, write
from ring.reports.tables.protocol import protocol_differences
from ring.reports.tables.published import published_value
from ring.reports.tables.summary import summarize


@dataclass(frozen=True)
class DetectionTable:
    """Methods x the paper's 12 columns (4 tasks x AP/AP50/AP75), columns without cells shown empty."""

    name: str = "table4"
    published_key: str = "table4_detection"
    help: str = (
        "Frozen ResNet-18 backbones in Detectron2: COCO detection and instance segmentation (Mask R-CNN R18-FPN 1x), "
        "COCO keypoints (Keypoint R-CNN R18-FPN 1x), VOC07 detection (Faster R-CNN R18-C4), AP / AP50 / AP75"
    )

    def arguments(self, parser: argparse.ArgumentParser) -> None:
        out_argument(parser)
        methods_argument(parser)
        metrics_argument(parser, "detection cells")

    def paper(self, method: str, column: str) -> float:
        return published_value(self.published_key, method, column)

    def build(self, metric_files: list[str | Path], methods: list[str], prefix: str | Path) -> pd.DataFrame:
        check_names("--methods", "registered method", methods, METHODS)
        same = str  # Table 4's column names are the published file's own
        summary = summarize(collect_columns(metric_files), self.paper, methods, COLUMNS, display=same)
        wide = layout(summary, methods, COLUMNS, display=same)
        write(self.name, self.help, summary, wide, prefix)
        return wide

    def run(self, args: argparse.Namespace) -> str:
        return markdown(self.build(args.metrics, args.methods, args.out))


TABLE = DetectionTable()


def collect_columns(metric_files: list[str | Path]) -> pd.DataFrame:
    """Cells that report several columns (ring.detection's metrics.json): one row per column."""
    rows = []
    for path in metric_files:
        m = read_metrics(path, ("method", "seed", "columns"))
        differs = ", ".join(protocol_differences(path))
        stale = stale_reason(path, m)
        rows.extend(
            {
                "dataset": column,
                "method": m["method"],
                "seed": int(m["seed"]),
                "value": math.nan if stale else float(value),
                "differs": differs,
                "stale": stale,
            }
            for column, value in m["columns"].items()
        )
    return pd.DataFrame(rows, columns=["dataset", "method", "seed", "value", "differs", "stale"])


def build_table4(metric_files: list[str | Path], methods: list[str], prefix: str | Path) -> pd.DataFrame:
    """Table 4's files, and its layout."""
    return TABLE.build(metric_files, methods, prefix)
