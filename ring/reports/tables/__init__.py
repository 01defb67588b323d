"""Aggregation of finished cells into the paper's tables (CSV, Markdown, LaTeX): ``ring table NAME ...``.

    python -m ring.reports.tables table1 --out results/<grid>/tables/table1 --methods ... --datasets ... --metrics M1
    M2 ...

One module per family of tables, each an entry of :mod:`~ring.reports.tables.registry` carrying its own arguments and
builder: :mod:`~ring.reports.tables.evaluation` (Tables 1-3 and the LA variants), :mod:`~ring.reports.tables.detection`
(Table 4), :mod:`~ring.reports.tables.toy` (the appendix's toy table) and :mod:`~ring.reports.tables.cost` (GPU-hours,
opened by when the grid will end).  What they share: reading cells (:mod:`~ring.reports.tables.cells`), the paper's
protocol and numbers (:mod:`~ring.reports.tables.protocol`, :mod:`~ring.reports.tables.published`), the statistics
(:mod:`~ring.reports.tables.summary`) and the layout and files (:mod:`~ring.reports.tables.layout`).

Each cell of a table is the mean +- std over seeds of the cells' metric; a Ring row also shows its
difference to its base method (IRing vs IR, ...), recomputed from our numbers, marked ``*`` where it
exceeds the seed noise by Welch's t-test (:data:`~ring.reports.tables.summary.SIGNIFICANCE`,
:func:`~ring.reports.tables.summary.welch_p`); and each cell stands beside the paper's published number
(``ring/data/published-results.yaml``) and our difference to it.  A cell whose linear evaluation diverged
(``metrics.json`` holds ``diverged``, no accuracy: :func:`ring.engine.health.divergence`, a non-finite loss or a top-1
at chance) shows "diverged" and its sentence, never a number; one whose probe's loss stayed high but whose top-1 is
above chance (``loss_note``: :func:`ring.engine.health.loss_note`) shows its number marked ``[hN]``, its footnote the
loss and the protocol.  The CSV is long-format (one row per method x dataset) for further analysis.
"""

from ring.reports.tables.cells import MetricsError, read_metrics
from ring.reports.tables.cost import gpu_hours
from ring.reports.tables.detection import build_table4
from ring.reports.tables.evaluation import build
from ring.reports.tables.protocol import PAPER_GRID
from ring.reports.tables.published import PUBLISHED, published
from ring.reports.tables.registry import REGISTRY, main
from ring.reports.tables.toy import toy_cnce, toy_paper

__all__ = [
    "PAPER_GRID",
    "PUBLISHED",
    "REGISTRY",
    "MetricsError",
    "build",
    "build_table4",
    "gpu_hours",
    "main",
    "published",
    "read_metrics",
    "toy_cnce",
    "toy_paper",
]
