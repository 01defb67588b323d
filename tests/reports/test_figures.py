"""The appendix's study figures and the k table, built from synthetic study cells (config.yaml + log.jsonl)."""

import json

import pandas as pd
import pytest

from ring.core.config import PretrainConfig, save
from ring.plan.checks.grid import STUDIES
from ring.reports import figures


def _cell(root, study, method, variant, seed, records, **overrides):
    cell = root / "study" / study / "digits" / method / variant / f"seed{seed}"
    cell.mkdir(parents=True)
    save(PretrainConfig(method=method, dataset="digits", seed=seed, **overrides), cell / "config.yaml")
    (cell / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return cell


def _records(epochs, nn1, w_l=None):
    return [
        {
            "epoch": e,
            "loss": 5.0 - e,
            "lr": 0.03,
            "knn_top1": acc - 5.0,
            "nn1_top1": acc,
            **({} if w_l is None else {"w_l": w_l[i], "w_u": 100.0}),
        }
        for i, (e, acc) in enumerate(zip(epochs, nn1, strict=True))
    ]


def _outputs(prefix):
    return [prefix.with_suffix(ext) for ext in (".png", ".pdf", ".csv")]


def test_every_study_has_a_figure():
    assert set(figures.FIGURES) == set(STUDIES)


def test_hard_negatives_branches_start_where_the_source_was(tmp_path):
    cells = [_cell(tmp_path, "hard_negatives", "IR", "source", 0, _records(range(4), [20, 40, 50, 55]), epochs=4)]
    for threshold, start, accs in [(10, 0, [10, 15, 20, 25]), (10, 2, [60, 65]), (50, 2, [52, 54])]:
        cells.append(
            _cell(
                tmp_path,
                "hard_negatives",
                "IRing",
                f"t{threshold}_e{start}",
                0,
                _records(range(start, 4), accs, w_l=[100.0 - threshold] * (4 - start)),
                epochs=4,
                ring_w_l=[100.0 - threshold] * 2,
                ring_anneal="none",
            )
        )
    prefix = tmp_path / "tables" / "fig_hard_negatives"
    curves = figures.hard_negatives(cells, prefix)
    assert all(p.stat().st_size > 1000 for p in _outputs(prefix)[:2]) and _outputs(prefix)[2].exists()
    late = curves[(curves.variant == "t10_e2")]
    assert list(late["x"]) == [3, 4] and list(late["threshold"]) == [10.0, 10.0] and set(late["start"]) == {2}
    source = pd.read_csv(prefix.with_suffix(".csv")).query("variant == 'source'")
    assert list(source["nn1_top1"]) == [20, 40, 50, 55]


def test_anneal_policies_plot_accuracy_and_threshold_means_over_seeds(tmp_path):
    cells = []
    for seed, offset in [(0, 0.0), (1, 2.0)]:
        cells.append(
            _cell(
                tmp_path,
                "anneal_policies",
                "IRing",
                "linear",
                seed,
                _records(range(3), [30 + offset, 40 + offset, 50 + offset], w_l=[30.0, 60.0, 90.0]),
                epochs=3,
            )
        )
        cells.append(
            _cell(
                tmp_path,
                "anneal_policies",
                "IRing",
                "adaptive_val",
                seed,
                _records(range(3), [31, 41, 51], w_l=[0.0, 30.0, 0.0]),
                epochs=3,
                ring_anneal="adaptive_val",
            )
        )
    prefix = tmp_path / "fig_anneal_policies"
    curves = figures.anneal_policies(cells, prefix).set_index(["variant", "epoch"])
    assert curves.loc[("linear", 1), "nn1_top1"] == 41.0 and curves.loc[("linear", 1), "seeds"] == 2
    assert list(curves.loc["linear", "threshold"]) == [70.0, 40.0, 10.0]
    assert list(curves.loc["adaptive_val", "threshold"]) == [100.0, 70.0, 100.0]
    assert all(p.exists() for p in _outputs(prefix))


def test_negatives_k_mean_and_std_over_seeds_of_the_final_epoch(tmp_path):
    cells = []
    for seed, final in [(0, 60.0), (1, 64.0), (2, 62.0)]:
        cells.append(
            _cell(
                tmp_path,
                "negatives_k",
                "IR",
                "k16",
                seed,
                _records(range(2), [10.0, final]),
                epochs=2,
                bank_negatives=16,
            )
        )
        cells.append(
            _cell(
                tmp_path,
                "negatives_k",
                "MoCo",
                "k256",
                seed,
                _records(range(2), [10.0, final + 10]),
                epochs=2,
                queue_size=256,
                bank_negatives=256,
            )
        )
    cells.append(
        _cell(tmp_path, "negatives_k", "IRing", "k16", 0, _records(range(2), [10.0, 70.0]), epochs=2, bank_negatives=16)
    )
    summary = figures.negatives_k(cells, tmp_path / "fig_negatives_k").set_index(["method", "k"])
    assert summary.loc[("IR", 16), "nn1_top1_mean"] == 62.0
    assert summary.loc[("IR", 16), "nn1_top1_std"] == pytest.approx(2.0)  # sample std (ddof 1)
    assert summary.loc[("MoCo", 256), "nn1_top1_mean"] == 72.0  # k is MoCo's queue size
    assert summary.loc[("IRing", 16), "seeds"] == 1
    wide = figures.table_negatives_k(cells, tmp_path / "table_negatives_k")
    assert wide.loc["IR", "k=16"] == "62.0 ± 2.0" and wide.loc["IRing", "k=16"] == "70.0"
    assert wide.loc["IR", "k=256"] == "—"
    md = (tmp_path / "table_negatives_k.md").read_text()
    assert "| MoCo" in md and "standard deviation (ddof 1) over 1/3 seed(s)" in md


def test_a_cell_without_a_log_fails_with_one_sentence(tmp_path, capsys):
    cell = tmp_path / "study" / "negatives_k" / "digits" / "IR" / "k16" / "seed0"
    cell.mkdir(parents=True)
    assert figures.main(["negatives_k", "--out", str(tmp_path / "f"), "--cells", str(cell)]) == 1
    assert (
        capsys.readouterr().err.strip()
        == f"ring: Study cell {cell} has no config.yaml or log.jsonl; run its pretraining first."
    )


def test_ring_window_figure_and_table_from_cells(tmp_path):
    cells = []
    for seed, (acc, same) in enumerate([(60.0, 30.0), (64.0, 34.0)]):
        records = _records(range(2), [acc - 10, acc], w_l=[0.0, 90.0])
        for r, s in zip(records, [10.0, same], strict=True):
            r["window_same_class"] = s
        cells.append(_cell(tmp_path, "ring_window", "IRing", "wl90_a33", seed, records, epochs=2))
        base = _records(range(2), [acc - 12, acc - 2], w_l=[0.0, 0.0])
        for r in base:
            r["window_same_class"] = 10.0
        cells.append(_cell(tmp_path, "ring_window", "IR", "base", seed, base, epochs=2))
    curves = figures.ring_window(cells, tmp_path / "fig_ring_window")
    assert (tmp_path / "fig_ring_window.png").is_file() and (tmp_path / "fig_ring_window.csv").is_file()
    last = curves[(curves.method == "IRing") & (curves.epoch == 1)].iloc[0]
    assert (last.nn1_top1, last.window_same_class, last.seeds) == (62.0, 32.0, 2)
    wide = figures.table_ring_window(cells, tmp_path / "table_ring_window").set_index(["method", "variant"])
    assert wide.loc[("IRing", "wl90_a33"), "1-NN top-1"] == "62.0 ± 2.8"
    assert wide.loc[("IRing", "wl90_a33"), "same-class in window (%)"] == "32.0 ± 2.8"
    assert wide.loc[("IR", "base"), "same-class in window (%)"] == "10.0 ± 0.0"
    assert "table_ring_window" in (tmp_path / "table_ring_window.md").read_text()
