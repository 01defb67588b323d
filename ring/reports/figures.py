"""Figures and tables of the appendix's studies, built from the study cells' logs.

    python -m ring.reports.figures hard_negatives    --out results/<grid>/tables/fig_hard_negatives    --cells CELL ...
    python -m ring.reports.figures anneal_policies   --out results/<grid>/tables/fig_anneal_policies   --cells CELL ...
    python -m ring.reports.figures negatives_k       --out results/<grid>/tables/fig_negatives_k       --cells CELL ...
    python -m ring.reports.figures table_negatives_k --out results/<grid>/tables/table_negatives_k     --cells CELL ...
    python -m ring.reports.figures ring_window       --out results/<grid>/tables/fig_ring_window       --cells CELL ...
    python -m ring.reports.figures table_ring_window --out results/<grid>/tables/table_ring_window     --cells CELL ...

A cell is a study cell's folder (``results/<grid>/study/<study>/<dataset>/<method>/<variant>/seed<seed>``):
its ``config.yaml`` says what it trained and its ``log.jsonl`` holds one record per epoch (loss, kNN
and 1-NN top-1 on the test split, Ring window).  Each figure is written as PNG and PDF with the
plotted numbers beside it as a long-format CSV; curves are means over the cells' seeds.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display (cluster login nodes, CI)
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from ring.core.files import FileError, atomic_write, write_text  # noqa: E402
from ring.core.methods import METHODS  # noqa: E402
from ring.core.yaml_reading import read_yaml  # noqa: E402

# The y-axis of the appendix's figures: "for each test example, we predict the label of its L2
# nearest neighbor in the training split".
ACCURACY = ("nn1_top1", "1-NN top-1 (%)")


def read_cell(path: str | Path) -> pd.DataFrame:
    """One row per logged epoch of a cell, with its method, variant, seed and threshold (100 - w_l)."""
    path = Path(path)
    missing = [name for name in ("config.yaml", "log.jsonl") if not (path / name).is_file()]
    if missing:
        raise FileNotFoundError(f"Study cell {path} has no {' or '.join(missing)}; run its pretraining first.")
    cfg = read_yaml(path / "config.yaml", "Study cell config")
    records = [json.loads(line) for line in (path / "log.jsonl").read_text().splitlines() if line.strip()]
    if not records:
        raise ValueError(f"Study cell {path} has an empty log.jsonl; rerun its pretraining.")
    rows = pd.DataFrame(records).reindex(columns=["epoch", "loss", "knn_top1", "nn1_top1", "w_l", "window_same_class"])
    rows.insert(0, "seed", int(cfg["seed"]))
    rows.insert(0, "variant", path.parent.name)
    rows.insert(0, "method", cfg["method"])
    rows["threshold"] = 100.0 - rows["w_l"]
    rows["start"] = int(records[0]["epoch"])  # the snapshot epoch a cell started from (0 from scratch)
    rows["k"] = cfg[METHODS[cfg["method"]].objective.k_key]
    rows["anneal"] = cfg["ring_anneal"] if METHODS[cfg["method"]].ring else "none"
    rows["epochs"] = int(cfg["epochs"])
    return rows


def read_cells(paths) -> pd.DataFrame:
    if not paths:
        raise ValueError("No study cells given; the grid's study lists none.")
    return pd.concat([read_cell(p) for p in paths], ignore_index=True)


def mean_curves(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (method, variant, epoch): the mean over seeds, and how many seeds it averages."""
    keys = ["method", "variant", "start", "epoch"]
    values = ["loss", "knn_top1", "nn1_top1", "threshold"]
    out = rows.groupby(keys, sort=False)[values].mean()
    out["seeds"] = rows.groupby(keys, sort=False)["seed"].nunique()
    return out.reset_index()


def _epoch_axes(*axes, legend_size: int = 8, **legend) -> None:
    """The epoch panels' common style: whole epochs on the x-axis, a light grid, the legend."""
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=legend_size, **legend)


def _save(fig, rows: pd.DataFrame, prefix: str | Path) -> list[Path]:
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    paths = [prefix.with_suffix(ext) for ext in (".png", ".pdf", ".csv")]
    # Through ring.core.files: a full disk is one sentence naming the file, and an old figure stays whole.
    atomic_write(paths[0], lambda fh: fig.savefig(fh, format="png", dpi=150, bbox_inches="tight"))
    atomic_write(paths[1], lambda fh: fig.savefig(fh, format="pdf", bbox_inches="tight"))
    plt.close(fig)
    write_text(paths[2], rows.to_csv(index=False, float_format="%.4f"))
    return paths


def hard_negatives(cells, prefix) -> pd.DataFrame:
    """IRing at fixed thresholds started from snapshots of an IR run, beside that IR run (= IRing at 100%).

    x: epochs trained in total (source's and branch's); a branch is drawn from the source's point
    where it started.  Colour: the threshold, the share of the closest bank entries eligible.
    """
    rows = read_cells(cells)
    curves = mean_curves(rows)
    metric, label = ACCURACY
    curves["x"] = curves["epoch"] + 1
    source = curves[curves.method != "IRing"]
    if source["variant"].nunique() != 1:
        raise ValueError("The hard-negatives study needs exactly one source cell (a method other than IRing).")
    branches = curves[curves.method == "IRing"]
    thresholds = sorted(branches["threshold"].unique())
    colours = dict(
        zip(thresholds, plt.cm.viridis([i / max(len(thresholds), 1) for i in range(len(thresholds))]), strict=True)
    )
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(source["x"], source[metric], color="black", lw=2, label=f"{source['method'].iloc[0]} (= IRing 100%)")
    seen = set()
    for (_variant, start), branch in branches.groupby(["variant", "start"], sort=True):
        threshold = branch["threshold"].iloc[0]
        anchor = source[source["x"] == start]
        xs = [*anchor["x"], *branch["x"]]
        ys = [*anchor[metric], *branch[metric]]
        ax.plot(
            xs,
            ys,
            color=colours[threshold],
            marker="o",
            ms=3,
            label=None if threshold in seen else f"IRing {threshold:g}%",
        )
        seen.add(threshold)
    ax.set(xlabel="epoch", ylabel=label, title="Hard negatives: IRing from IR snapshots")
    _epoch_axes(ax, title="threshold")
    _save(fig, curves, prefix)
    return curves


def anneal_policies(cells, prefix) -> pd.DataFrame:
    """IRing with each annealing policy: test accuracy per epoch (left) and the threshold after each epoch (right)."""
    rows = read_cells(cells)
    curves = mean_curves(rows)
    metric, label = ACCURACY
    curves["x"] = curves["epoch"] + 1
    fig, (acc, thr) = plt.subplots(1, 2, figsize=(10, 4))
    for variant, curve in curves.groupby("variant", sort=False):
        # Our parameterisations (variants suffixed _ours) dashed beside the authors' solid ones.
        ls = "--" if variant.endswith("_ours") else "-"
        (line,) = acc.plot(curve["x"], curve[metric], marker="o", ms=3, ls=ls, label=variant)
        acc.plot(curve["x"], curve["knn_top1"], ls=":", color=line.get_color())
        thr.plot(curve["x"], curve["threshold"], marker="o", ms=3, ls=ls, color=line.get_color(), label=variant)
    acc.set(xlabel="epoch", ylabel=f"{label}; dotted: kNN top-1 (%)", title="Annealing policies: accuracy")
    thr.set(xlabel="epoch", ylabel="threshold 100 - $w_\\ell$ (%)", title="Threshold after each epoch", ylim=(0, 105))
    _epoch_axes(acc, thr)
    _save(fig, curves, prefix)
    return curves


def final_accuracy(cells) -> pd.DataFrame:
    """The last epoch's accuracies of every cell, with its number of negatives k."""
    rows = read_cells(cells)
    last = rows[rows["epoch"] == rows["epochs"] - 1]
    return last[["method", "variant", "seed", "k", "knn_top1", "nn1_top1"]].sort_values(["method", "k", "seed"])


def k_summary(final: pd.DataFrame) -> pd.DataFrame:
    """Per (method, k): seeds, mean and sample standard deviation (ddof 1) over seeds of the final accuracies."""
    stats = final.groupby(["method", "k"])[["nn1_top1", "knn_top1"]].agg(["mean", "std"])
    stats.columns = [f"{metric}_{stat}" for metric, stat in stats.columns]
    stats.insert(0, "seeds", final.groupby(["method", "k"])["seed"].nunique())
    order = {m: i for i, m in enumerate(METHODS)}
    return stats.reset_index().sort_values(["method", "k"], key=lambda c: c.map(order) if c.name == "method" else c)


def negatives_k(cells, prefix) -> pd.DataFrame:
    """Final 1-NN accuracy versus k, one line per method, error bars one standard deviation over seeds."""
    final = final_accuracy(cells)
    summary = k_summary(final)
    metric, label = ACCURACY
    fig, ax = plt.subplots(figsize=(6, 4))
    for method, part in summary.groupby("method", sort=False):
        ax.errorbar(
            part["k"],
            part[f"{metric}_mean"],
            yerr=part[f"{metric}_std"].fillna(0.0),
            marker="o",
            ms=4,
            capsize=3,
            ls="--" if METHODS[method].ring else "-",
            label=method,
        )
    ax.set_xscale("log", base=2)
    ks = sorted(summary["k"].unique())
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set(
        xlabel="negatives k (bank samples; MoCo: queue size)",
        ylabel=label,
        title="Bias and variance: accuracy vs k (mean ± std over seeds)",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, final, prefix)
    return summary


def _mean_std(mean: float, std: float) -> str:
    if math.isnan(mean):
        return "—"
    return f"{mean:.1f}" + ("" if math.isnan(std) else f" ± {std:.1f}")


def table_negatives_k(cells, prefix) -> pd.DataFrame:
    """The k sweep as a table: rows methods, columns k, cells 1-NN top-1 mean ± std over seeds."""
    summary = k_summary(final_accuracy(cells))
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    write_text(prefix.with_suffix(".csv"), summary.to_csv(index=False, float_format="%.4f"))
    summary["text"] = [_mean_std(m, s) for m, s in zip(summary["nn1_top1_mean"], summary["nn1_top1_std"], strict=True)]
    wide = summary.pivot(index="method", columns="k", values="text").reindex(summary["method"].unique()).fillna("—")
    wide.columns = [f"k={k}" for k in wide.columns]
    seeds = sorted(summary["seeds"].unique())
    note = (
        f"Final-epoch 1-NN top-1 (%) on the test split; mean ± sample standard deviation (ddof 1) over "
        f"{'/'.join(map(str, seeds))} seed(s) per cell (one seed: no deviation). IR/IRing: k negatives drawn "
        "from the memory bank; MoCo/MoCoRing: queue size k; —: not run."
    )
    write_text(
        prefix.with_suffix(".md"),
        f"**table_negatives_k**: accuracy versus the number of negatives k\n\n"
        f"{wide.to_markdown(disable_numparse=True)}\n\n{note}\n",
    )
    return wide


def ring_window(cells, prefix) -> pd.DataFrame:
    """Ring on the embedded default (ring/resources/grids/ring_digits.yaml): per (method, variant) the 1-NN
    accuracy per epoch (left) and the percent of same-class images among the window's entries (right;
    base methods: the whole bank, i.e. chance), means over seeds."""
    rows = read_cells(cells)
    keys = ["method", "variant", "epoch"]
    curves = rows.groupby(keys, sort=False)[["nn1_top1", "knn_top1", "window_same_class", "threshold"]].mean()
    curves["seeds"] = rows.groupby(keys, sort=False)["seed"].nunique()
    curves = curves.reset_index()
    curves["x"] = curves["epoch"] + 1
    metric, label = ACCURACY
    fig, (acc, same) = plt.subplots(1, 2, figsize=(11, 4))
    for (method, variant), curve in curves.groupby(["method", "variant"], sort=False):
        ls = "--" if METHODS[method].ring else "-"
        (line,) = acc.plot(curve["x"], curve[metric], ls=ls, marker="o", ms=2, label=f"{method} {variant}")
        same.plot(
            curve["x"],
            curve["window_same_class"],
            ls=ls,
            marker="o",
            ms=2,
            color=line.get_color(),
            label=f"{method} {variant}",
        )
    acc.set(xlabel="epoch", ylabel=label, title="Accuracy (dashed: Ring)")
    same.set(xlabel="epoch", ylabel="same-class entries in the window (%)", title="Window's same-class share")
    _epoch_axes(acc, same, legend_size=6)
    _save(fig, curves, prefix)
    return curves


def table_ring_window(cells, prefix) -> pd.DataFrame:
    """Final-epoch 1-NN and kNN top-1 and the window's same-class share, mean ± std over seeds per (method, variant)."""
    rows = read_cells(cells)
    last = rows[rows["epoch"] == rows["epochs"] - 1]
    stats = last.groupby(["method", "variant"], sort=False)[["nn1_top1", "knn_top1", "window_same_class"]].agg(
        ["mean", "std"]
    )
    stats.columns = [f"{metric}_{stat}" for metric, stat in stats.columns]
    stats.insert(0, "seeds", last.groupby(["method", "variant"], sort=False)["seed"].nunique())
    summary = stats.reset_index()
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    write_text(prefix.with_suffix(".csv"), summary.to_csv(index=False, float_format="%.4f"))
    wide = pd.DataFrame(
        {
            "method": summary["method"],
            "variant": summary["variant"],
            "seeds": summary["seeds"],
            "1-NN top-1": [
                _mean_std(m, s) for m, s in zip(summary["nn1_top1_mean"], summary["nn1_top1_std"], strict=True)
            ],
            "kNN top-1": [
                _mean_std(m, s) for m, s in zip(summary["knn_top1_mean"], summary["knn_top1_std"], strict=True)
            ],
            "same-class in window (%)": [
                _mean_std(m, s)
                for m, s in zip(summary["window_same_class_mean"], summary["window_same_class_std"], strict=True)
            ],
        }
    )
    note = (
        "Final epoch, test split; mean ± sample standard deviation over seeds. Variants: wl<final w_l>_a<percent "
        "of training the window anneals over>; base: the base method. Same-class share: of the entries in the "
        "final window of each training image (base methods: the whole bank, i.e. chance)."
    )
    write_text(
        prefix.with_suffix(".md"),
        f"**table_ring_window**: Ring on the embedded default\n\n"
        f"{wide.to_markdown(index=False, disable_numparse=True)}\n\n{note}\n",
    )
    return wide


FIGURES = {
    "hard_negatives": hard_negatives,
    "anneal_policies": anneal_policies,
    "negatives_k": negatives_k,
    "ring_window": ring_window,
}
TABLES = {"table_negatives_k": table_negatives_k, "table_ring_window": table_ring_window}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Build a figure or table of the appendix's studies from study cells.")
    parser.add_argument("what", choices=[*FIGURES, *TABLES])
    parser.add_argument(
        "--out", required=True, help="path prefix; a figure writes .png, .pdf and .csv, a table .csv and .md"
    )
    parser.add_argument("--cells", nargs="+", required=True, help="study cell folders (config.yaml and log.jsonl)")
    args = parser.parse_args(argv)
    try:
        result = {**FIGURES, **TABLES}[args.what](args.cells, args.out)
    except (ValueError, FileNotFoundError, FileError) as err:
        print(f"ring: {err}", file=sys.stderr)
        return 1
    print(
        result.to_markdown(disable_numparse=True) if args.what in TABLES else f"ring: wrote {args.out}.png, .pdf, .csv"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
