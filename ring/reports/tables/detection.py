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

# An AP of exactly 0.0 on every seed: no prediction matched a ground truth at any threshold.  On the paper's
# protocol that is a finding; off it (the smoke grid trains 30 iterations and scores 4 images of 64 px) the column
# is below what the run can resolve, and a bare 0.0 would read as a measured failure of the method.
UNRESOLVED = (
    "0.0 on every seed, off the paper's protocol: no prediction matched at any threshold; these detection runs "
    "(their training iterations and evaluation images) are too small to resolve this column, so the 0.0 says "
    "nothing of the method."
)

# Table 4's noise where the seeds give none: a mean of one seed shows no "± std", and without this a reader could not
# tell an AP measured to a point from one that a single matched object moves by tens of points.
ONE_SEED = (
    "one seed: an AP without ± has no spread over seeds, so its noise is untested; it scores one run's evaluation "
    "images, and on few of them (the embedded default: 4 images of 64 px, 6 persons for the keypoints) one object "
    "matched or missed moves it by many points."
)


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
        summary["unresolved"] = [
            UNRESOLVED if row.n and row.mean == 0 and row.differs else "" for row in summary.itertuples()
        ]
        wide = layout(summary, methods, COLUMNS, display=same)
        if (summary.n == 1).any():
            wide.attrs["footnotes"].append(ONE_SEED)
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
