"""The appendix's toy table, "Looseness of CNCE as w_l increases": NCE and CNCE estimates of the mutual information of
the paper's Gaussian, over the toy cells' seeds, beside the paper's numbers and the bound's ceiling for any critic.

    ring table table_toy_cnce --out results/<grid>/tables/table_toy_cnce --metrics FILE ...
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ring.core import gaussian
from ring.core.config import ToyCNCEConfig
from ring.core.metrics import check_metrics
from ring.reports.tables.cells import read_metrics
from ring.reports.tables.entry import metrics_argument, out_argument
from ring.reports.tables.layout import write_texts
from ring.reports.tables.published import published

TOY_PROTOCOLS = {
    "nce_critic": "ours, NCE's critic",  # one NCE-trained critic, every bound evaluated on it (held out)
    "own_critics": "ours, own critics",  # each estimator's critic trained with its own bound (held out)
    # The same critics on the training pairs and the training bank at the end of training: what a
    # training log shows, the protocol closest to the appendix's (README, "Fidelity").
    "nce_critic_train": "training data, NCE's critic",
    "own_critics_train": "training data, own critics",
}


def toy_paper(estimator: str) -> tuple[float, float]:
    """The paper's (mean, stdev) of an estimator of the toy table ("NCE", "CNCE10", ...)."""
    table = published()["table_toy_cnce"]
    if estimator == "NCE":
        entry = table["nce"]
    else:
        entry = {float(p): v for p, v in table["cnce"].items()}.get(float(estimator[len("CNCE") :]))
    return (float(entry["mean"]), float(entry["stdev"])) if entry else (math.nan, math.nan)


def toy_summary(metric_files: list[str | Path]) -> pd.DataFrame:
    """One row per (protocol, estimator): seeds, mean and std over seeds, the paper's, the true MI."""
    rows = []
    for path in metric_files:
        m = read_metrics(path, ("seed", "true_mi"))
        check_metrics(m, path, TOY_PROTOCOLS)  # the estimates it shows (a protocol not run is absent)
        for protocol in TOY_PROTOCOLS:
            sems = m.get(f"{protocol}_sem") or {}
            for estimator, value in m.get(protocol, {}).items():
                rows.append(
                    {
                        "protocol": protocol,
                        "estimator": estimator,
                        "seed": m["seed"],
                        "value": value,
                        "sem": float(sems.get(estimator, math.nan)),
                        "true_mi": m["true_mi"],
                    }
                )
    cells = pd.DataFrame(rows, columns=["protocol", "estimator", "seed", "value", "sem", "true_mi"])
    out = (
        cells.groupby(["protocol", "estimator"], sort=False)
        .agg(
            n=("value", "count"),
            mean=("value", "mean"),
            std=("value", "std"),
            sem=("sem", "first"),
            true_mi=("true_mi", "first"),
        )
        .reset_index()
    )
    out["se"] = [standard_error(row) for row in out.itertuples()]
    # Our mean's sign is resolved where it lies beyond 2 standard errors of zero; a distance in paper stdevs is
    # resolved where our standard error is at most the paper's stdev (else it measures our noise, not a deviation).
    # (An unknown standard error, from a metrics file without ``*_sem``, marks no sign and resolves no distance.)
    out["sign_resolved"] = ~(out["mean"].abs() <= 2 * out["se"]) if len(out) else []
    out["percentile"] = [0.0 if e == "NCE" else float(e[len("CNCE") :]) for e in out.estimator]
    out["paper_mean"], out["paper_std"] = zip(*map(toy_paper, out.estimator), strict=True) if len(out) else ([], [])
    # How far our mean lies from the paper's, in units of the paper's stdev (its own seed spread).
    out["paper_stds_away"] = (out["mean"] - out["paper_mean"]) / out["paper_std"] if len(out) else []
    out["deviation_resolved"] = (out["se"] <= out["paper_std"]) if len(out) else []
    out["ceiling_k"], out["ceiling_inf"] = zip(*map(toy_ceiling, out.estimator), strict=True) if len(out) else ([], [])
    out["paper_above_ceiling"] = out["paper_mean"] > out["ceiling_inf"] if len(out) else []
    return out


def standard_error(row) -> float:
    """Our mean's standard error: the seeds' std / sqrt(n) over 2+ seeds, else the one seed's over its held-out
    points (ring.toy_cnce's ``*_sem``; NaN where a metrics file has none): the noise the table's size leaves."""
    return row.std / math.sqrt(row.n) if row.n >= 2 else row.sem


def _g(x: float) -> str:
    return "—" if x is None or math.isnan(x) else f"{x:.4g}"


def toy_layout(summary: pd.DataFrame) -> pd.DataFrame:
    """The paper's layout: columns True, NCE, CNCE at each w_l; rows mean and stdev, ours then the paper's."""
    estimators = list(dict.fromkeys(summary.estimator))
    columns = ["True"] + [("NCE" if e == "NCE" else f"CNCE w_l={e[len('CNCE') :]}") for e in estimators]
    true = _g(summary.true_mi.iloc[0]) if len(summary) else "—"
    rows = {}
    for protocol, label in TOY_PROTOCOLS.items():
        part = summary[summary.protocol == protocol].set_index("estimator")
        if len(part):
            n = int(part.n.min())
            rows[f"{label}: mean ({n} seed{'s' * (n != 1)})"] = [true] + [
                _g(part.loc[e, "mean"]) + ("" if part.loc[e, "sign_resolved"] else f" {SIGN_MARK}") for e in estimators
            ]
            rows[f"{label}: std"] = ["—"] + [_g(part.loc[e, "std"]) for e in estimators]
            rows[f"{label}: standard error"] = ["—"] + [_g(part.loc[e, "se"]) for e in estimators]
            rows[f"{label}: (mean - paper) / paper stdev"] = ["—"] + [deviation_text(part.loc[e]) for e in estimators]
    paper = summary.drop_duplicates("estimator").set_index("estimator")
    # A published mean above the k -> inf ceiling (the larger one) is marked: no critic reaches it.
    rows["paper: mean († above the ceiling)"] = [_g(published()["table_toy_cnce"]["true_mi"])] + [
        _g(paper.loc[e, "paper_mean"]) + (" †" if paper.loc[e, "paper_above_ceiling"] else "") for e in estimators
    ]
    rows["paper: stdev"] = ["—"] + [_g(paper.loc[e, "paper_std"]) for e in estimators]
    k = ToyCNCEConfig().negatives + 1
    rows[f"ceiling, k = {k} (any critic)"] = ["—"] + [_g(paper.loc[e, "ceiling_k"]) for e in estimators]
    rows["ceiling, k → ∞ (any critic)"] = ["—"] + [_g(paper.loc[e, "ceiling_inf"]) for e in estimators]
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns).rename_axis("")


def deviation_text(row) -> str:
    """The distance to the paper's mean in paper stdevs, or "unresolved" where our standard error exceeds the paper's
    stdev: a smoke run's few points put -1.2e5 paper stdevs there, a number that measures its size, not the method."""
    return _g(round(row.paper_stds_away, 1)) if row.deviation_resolved else UNRESOLVED


def toy_ceiling(estimator: str) -> tuple[float, float]:
    """(at the paper's k, as k -> inf) the largest value the estimator's bound takes for any critic on the
    paper's Gaussian (ring.core.gaussian.cnce_ceiling); NCE's at k -> inf is the true MI, at finite k not computed."""
    cfg = ToyCNCEConfig()  # the paper's Gaussian and its 100 negatives, whatever a grid overrides
    cov = np.add(cfg.cov_z, cfg.cov_eps)  # the joint covariance (ring.toy_cnce.joint_covariance)
    rho = gaussian.correlation(cov)
    if estimator == "NCE":
        return math.nan, gaussian.true_mi(cov)
    percentile = float(estimator[len("CNCE") :])
    return gaussian.cnce_ceiling(rho, percentile, cfg.negatives + 1), gaussian.cnce_ceiling(rho, percentile)


SIGN_MARK = "‡"  # beside a mean within 2 standard errors of zero
UNRESOLVED = "unresolved"
CAPTION = "Looseness of CNCE as w_l increases (appendix toy example), estimates in nats"
NOTE = (
    "ours: held-out estimates of each bound (fresh pairs, independent fresh bank); training data: the same "
    "critics on the training pairs and training bank at the end of training; CNCE w_l = p draws the 100 "
    "negatives from the closest (100 - p)% of the bank; NCE's critic: one critic trained with NCE, every bound "
    "evaluated on it (Theorem 1's fixed f), where CNCE lies below zero (its closest negatives score above a typical "
    "positive; the paper's tiny positive CNCE values are what a critic trained with CNCE reaches, a constant one "
    "scoring 0); own critics: each estimator trained its own critic; "
    "standard error: of our mean, the seeds' std / sqrt(seeds), or with one seed over its held-out points; "
    f"{SIGN_MARK} a mean within 2 standard errors of zero: at this size (seeds, evaluation points) its sign is not "
    "resolved; (mean - paper) / paper stdev: the distance to the paper's mean in units of the paper's seed spread, "
    f"{UNRESOLVED!r} where our standard error exceeds the paper's stdev: there the size of this run cannot resolve a "
    "distance in those units (compare the mean ± 2 standard errors with the paper's mean instead); "
    "ceiling: the largest value the bound takes for any critic on the paper's Gaussian, at the paper's k "
    "(100 negatives + the positive) and as k → ∞ (ring.core.gaussian.cnce_ceiling; NCE's is the true MI); "
    "† a published mean above the k → ∞ ceiling, which no critic reaches."
)


def toy_cnce(metric_files: list[str | Path], prefix: str | Path) -> pd.DataFrame:
    """results/<grid>/tables/table_toy_cnce.{csv,md,tex} from the toy cells' metrics.json."""
    summary = toy_summary(metric_files)
    wide = toy_layout(summary)
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    write_texts(
        {
            prefix.with_suffix(".csv"): summary.to_csv(index=False, float_format="%.6g"),
            prefix.with_suffix(".md"): f"**table_toy_cnce**: {CAPTION}\n\n{wide.to_markdown()}\n\n{NOTE}\n",
            prefix.with_suffix(".tex"): wide.to_latex(caption=f"{CAPTION}. {NOTE}", label="tab:toy_cnce", escape=True),
        }
    )
    return wide


@dataclass(frozen=True)
class ToyTable:
    name: str = "table_toy_cnce"
    help: str = CAPTION

    def arguments(self, parser: argparse.ArgumentParser) -> None:
        out_argument(parser)
        metrics_argument(parser, "toy cells")

    def run(self, args: argparse.Namespace) -> str:
        return toy_cnce(args.metrics, args.out).to_markdown()


TABLE = ToyTable()
