import json
import math

import pandas as pd
import pytest
import yaml

from ring import toy_cnce
from ring.reports import tables
from ring.reports.tables import cells, protocol, summary, toy
from tests.helpers import PAPER_TRANSFER_DATASETS


def _evaluated_cell(root, dataset, method, seed, pre_cfg, lin_cfg, top1, encoder=b"trunk bytes"):
    """A pretraining and a linear-evaluation cell as the stages leave them: configs, an encoder with its
    checksum record, and metrics that record what they were made from.  Returns the metrics path."""
    from ring.core import config as C
    from ring.core.files import record_checksums

    pre, lin = (root / stage / dataset / method / f"seed{seed}" for stage in ("pretrain", "lincls"))
    for cell, cfg in ((pre, pre_cfg), (lin, lin_cfg)):
        cell.mkdir(parents=True, exist_ok=True)
        C.save(cfg, cell / "config.yaml")
    (pre / "encoder.pt").write_bytes(encoder)
    record = record_checksums(pre, ["encoder.pt"], config_hash=C.config_hash(pre_cfg))
    metrics = lin / "metrics.json"
    metrics.write_text(
        json.dumps(
            {
                "dataset": dataset,
                "method": method,
                "seed": seed,
                "top1": top1,
                "config_hash": C.config_hash(lin_cfg),
                "encoder_config_hash": C.config_hash(pre_cfg),
                "protocol": {"encoder_files": record["files"]},
            }
        )
    )
    return metrics


def _detection_cell(root, method, pre_cfg, det_cfg, columns=None):
    """A Table 4 cell as the stages leave it: the pretraining cell's config and encoder record, the converted
    backbone and its record, the detection config and metrics that record what they were made from."""
    from ring.core import config as C
    from ring.core.files import record_checksums

    pre = root / "pretrain" / "imagenet" / method / "seed0"
    pre.mkdir(parents=True)
    C.save(pre_cfg, pre / "config.yaml")
    (pre / "encoder.pt").write_bytes(b"trunk")
    encoder = record_checksums(pre, ["encoder.pt"], config_hash=C.config_hash(pre_cfg))
    conv = root / "detection" / "imagenet" / method / "seed0"
    conv.mkdir(parents=True)
    (conv / "backbone.pkl").write_bytes(b"backbone")
    backbone = record_checksums(
        conv, ["backbone.pkl"], encoder_files=encoder["files"], encoder_config_hash=encoder["config_hash"]
    )
    cell = conv.parent / "voc_det" / "seed0"
    cell.mkdir(parents=True)
    C.save(det_cfg, cell / "config.yaml")
    (cell / "metrics.json").write_text(
        json.dumps(
            {
                "task": "voc_det",
                "method": method,
                "seed": 0,
                "config_hash": C.config_hash(det_cfg),
                "backbone_sha256": backbone["files"]["backbone.pkl"],
                "encoder_files": encoder["files"],
                "encoder_config_hash": encoder["config_hash"],
                "columns": columns or {"voc_det_AP": 6.0, "voc_det_AP50": 15.0, "voc_det_AP75": 3.5},
            }
        )
    )
    return cell / "metrics.json"


def _metrics(tmp_path, rows):
    paths = []
    for i, (dataset, method, seed, top1) in enumerate(rows):
        path = tmp_path / f"m{i}.json"
        path.write_text(json.dumps({"dataset": dataset, "method": method, "seed": seed, "top1": top1}))
        paths.append(path)
    return paths


def test_table1_means_stds_ring_deltas_and_paper_numbers(tmp_path):
    files = _metrics(
        tmp_path,
        [
            ("cifar10", "IR", 0, 80.0),
            ("cifar10", "IR", 1, 82.0),
            ("cifar10", "IRing", 0, 84.0),
            ("cifar10", "IRing", 1, 85.0),
            ("cifar10", "MoCo", 0, 83.0),
        ],
    )
    wide = tables.build("table1", files, ["IR", "IRing", "MoCo", "MoCoRing"], ["cifar10"], tmp_path / "t" / "table1")
    assert wide.loc["IR", "CIFAR10"] == "81.0 ± 1.4"
    assert wide.loc["IRing", "CIFAR10"] == "84.5 ± 0.7 (+3.5)"
    assert wide.loc["IR", "CIFAR10 paper (ours − paper)"] == "81.2 (-0.2)"
    assert wide.loc["MoCoRing", "CIFAR10"] == "—"  # no cell finished: shown, never dropped
    assert wide.loc["MoCoRing", "CIFAR10 paper (ours − paper)"] == "86.1"
    csv = pd.read_csv(tmp_path / "t" / "table1.csv")
    iring = csv[csv.method == "IRing"].iloc[0]
    assert (iring.n, iring["mean"], iring.delta_to_base, iring.paper) == (2, 84.5, 3.5, 83.9)
    assert iring.diff_to_paper == pytest.approx(0.6)
    assert "| IRing" in (tmp_path / "t" / "table1.md").read_text()
    assert "\\begin{table}" in (tmp_path / "t" / "table1.tex").read_text()


def test_dataset_without_published_numbers(tmp_path):
    files = _metrics(tmp_path, [("digits", "IR", 0, 90.0), ("digits", "IRing", 0, 91.5)])
    wide = tables.build("table1", files, ["IR", "IRing"], ["digits"], tmp_path / "table1")
    assert wide.loc["IRing", "Digits"] == "91.5 (+1.5)"
    assert wide.loc["IRing", "Digits paper (ours − paper)"] == "—"


def test_published_numbers_are_the_papers(root):
    ours = yaml.safe_load(tables.PUBLISHED.read_text())
    assert ours["table1_linear_eval"]["rows"]["MoCoRing"] == [86.1, 61.5, 65.2, 54.6]
    shared = root.parent / "shared" / "paper" / "published-results.yaml"
    if shared.exists():  # the project's copy must not drift from the checked transcription
        assert ours == yaml.safe_load(shared.read_text())


def test_gpu_hours_add_up_requeued_segments(tmp_path):
    cells = []
    for stage, gpus, walls, restarts in [("pretrain", 2, [1800, 1800], [0, 1]), ("lincls", 1, [360], [0])]:
        cell = tmp_path / "results" / "g" / stage / "cifar10" / "IR" / "seed0"
        cell.mkdir(parents=True)
        segments = [{"wall_s": w, "gpus": gpus, "restart_count": r} for w, r in zip(walls, restarts, strict=True)]
        doc = {
            "segments": segments,
            "wall_s": sum(walls),
            "gpu_hours": sum(walls) * gpus / 3600,
            "requeues": max(restarts),
        }
        (cell / "provenance.json").write_text(json.dumps(doc))
        cells.append(cell / "provenance.json")
    summary = tables.gpu_hours(cells, tmp_path / "gpu_hours")
    assert summary.loc["pretrain", "gpu_hours"] == pytest.approx(2.0)
    assert summary.loc["total", "gpu_hours"] == pytest.approx(2.1)
    assert summary.loc["pretrain", "requeues"] == 1 and summary.loc["total", "cells"] == 2
    assert (
        "| pretrain |       1 |          2 |          1 |    1.000 |       2.000 |"
        in (tmp_path / "gpu_hours.md").read_text()
    )


def test_gpu_hours_show_predicted_beside_measured(tmp_path, monkeypatch):
    from ring.core import config as C
    from ring.plan import estimate
    from tests.plan.estimate.test_figures import _write_figures

    figures_dir = tmp_path / "figures"
    figures_dir.mkdir()
    _write_figures(figures_dir, "GPU X", "2026-11-26T11:00:00Z", 5000.0)
    monkeypatch.setattr(estimate, "RESULTS", figures_dir)
    cells = []
    for stage, cfg in [
        ("pretrain", C.PretrainConfig(method="MoCo", dataset="cifar10", knn_every=0)),
        ("transfer", None),
    ]:
        cell = tmp_path / "results" / "g" / stage / "cifar10" / "MoCo" / "seed0"
        cell.mkdir(parents=True)
        if cfg:
            C.save(cfg, cell / "config.yaml")
        doc = {
            "segments": [{"wall_s": 3600, "gpus": 1, "restart_count": 0}],
            "wall_s": 3600,
            "gpu_hours": 1.0,
            "requeues": 0,
        }
        (cell / "provenance.json").write_text(json.dumps(doc))
        cells.append(cell / "provenance.json")
    summary = tables.gpu_hours(cells, tmp_path / "gpu_hours")
    expected = 300 * 50_000 / 5000 / 3600  # ring.plan.estimate's model: epochs x images / images per second
    assert summary.loc["pretrain", "predicted_gpu_hours"] == f"{expected:.3f}"
    assert summary.loc["transfer", "predicted_gpu_hours"] == "n/a"  # a stage the model does not price
    assert summary.loc["total", "predicted_gpu_hours"] == f"{expected:.3f}"
    assert "GPU X figures" in (tmp_path / "gpu_hours.md").read_text()


def test_toy_cnce_table_means_stds_paper_and_true_mi(tmp_path):
    files = []
    for seed, (nce, cnce50) in enumerate([(0.010, -0.10), (0.014, -0.14)]):
        metrics = {"seed": seed, "true_mi": 0.0204110, "nce_critic": {"NCE": nce, "CNCE50": cnce50}}
        if seed == 0:
            metrics["own_critics"] = {"NCE": nce, "CNCE50": 3e-5}
            metrics["own_critics_train"] = {"NCE": 0.013, "CNCE50": 7e-5}
        files.append(tmp_path / f"toy{seed}.json")
        files[-1].write_text(json.dumps(metrics))
    wide = tables.toy_cnce(files, tmp_path / "t" / "table_toy_cnce")
    assert list(wide.columns) == ["True", "NCE", "CNCE w_l=50"]
    assert wide.loc["ours, NCE's critic: mean (2 seeds)"].tolist() == ["0.02041", "0.012", "-0.12"]
    assert wide.loc["ours, NCE's critic: std"].tolist() == ["—", "0.002828", "0.02828"]
    assert wide.loc["ours, own critics: mean (1 seed)"].tolist() == ["0.02041", "0.01", "3e-05"]
    # (0.012 - 0.01345) / 0.001 = -1.45 -> -1.4 (half to even); (-0.12 - 7.29e-5) / 9e-6 = -13341.0
    assert wide.loc["ours, NCE's critic: (mean - paper) / paper stdev"].tolist() == ["—", "-1.4", "-1.334e+04"]
    assert wide.loc["training data, own critics: mean (1 seed)"].tolist() == ["0.02041", "0.013", "7e-05"]
    # The published w_l = 50 mean lies below its ceiling (no mark); NCE's k -> inf ceiling is the true MI.
    assert wide.loc["paper: mean († above the ceiling)"].tolist() == ["0.02041", "0.01345", "7.29e-05"]
    assert wide.loc["paper: stdev"].tolist() == ["—", "0.001", "9e-06"]
    assert wide.loc["ceiling, k → ∞ (any critic)"].tolist() == [
        "—",
        "0.02041",
        f"{toy_cnce.cnce_ceiling(0.2, 50.0):.4g}",
    ]
    assert wide.loc["ceiling, k = 101 (any critic)"].tolist() == [
        "—",
        "—",
        f"{toy_cnce.cnce_ceiling(0.2, 50.0, 101):.4g}",
    ]
    summary = pd.read_csv(tmp_path / "t" / "table_toy_cnce.csv")
    row = summary[(summary.protocol == "nce_critic") & (summary.estimator == "CNCE50")].iloc[0]
    assert (row.n, row.percentile, row.paper_mean) == (2, 50.0, 7.29e-05)
    assert row.paper_mean < row.ceiling_k < row.ceiling_inf and not row.paper_above_ceiling


def test_toy_table_marks_a_published_mean_above_the_ceiling(tmp_path, monkeypatch):
    # The ceiling itself is tested in tests/core/test_gaussian.py; here only the marking: a ceiling placed
    # between the paper's w_l = 10 and w_l = 25 means marks the first and not the second.
    monkeypatch.setattr(toy, "toy_ceiling", lambda e: (math.nan, 0.005) if e != "NCE" else (math.nan, 0.02041))
    path = tmp_path / "toy0.json"
    path.write_text(
        json.dumps({"seed": 0, "true_mi": 0.0204110, "nce_critic": {"NCE": 0.01, "CNCE10": 0.0, "CNCE25": 0.0}})
    )
    wide = tables.toy_cnce([path], tmp_path / "t" / "table_toy_cnce")
    assert wide.loc["paper: mean († above the ceiling)"].tolist() == ["0.02041", "0.01345", "0.01241 †", "0.0022"]
    assert "† a published mean above" in (tmp_path / "t" / "table_toy_cnce.md").read_text()
    assert "Looseness of CNCE" in (tmp_path / "t" / "table_toy_cnce.md").read_text()
    assert "tab:toy_cnce" in (tmp_path / "t" / "table_toy_cnce.tex").read_text()


def test_table3_columns_ring_deltas_recomputed_and_paper_numbers(tmp_path):
    files = _metrics(
        tmp_path,
        [
            ("fashion_mnist", "IR", 0, 91.0),
            ("fashion_mnist", "IRing", 0, 92.0),
            ("cub", "IRing", 0, 18.0),
            ("shapes", "IR", 0, 50.0),
        ],
    )
    datasets = [*PAPER_TRANSFER_DATASETS, "shapes"]
    wide = tables.build("table3", files, ["IR", "IRing"], datasets, tmp_path / "table3")
    assert wide.loc["IRing", "FashionMNIST"] == "92.0 (+1.0)"
    # The paper prints IRing's FashionMNIST delta as (+0.1); its numbers give 91.6 - 91.7 = -0.1.
    assert wide.loc["IRing", "FashionMNIST paper (ours − paper)"] == "91.6 (+0.4)"
    assert wide.loc["IRing", "CUBirds"] == "18.0" and wide.loc["IR", "Aircraft paper (ours − paper)"] == "40.9"
    assert wide.loc["IR", "Shapes paper (ours − paper)"] == "—"
    assert "Transfer of encoders" in (tmp_path / "table3.md").read_text()


def test_table4_means_ring_deltas_and_paper_numbers_per_column(tmp_path):
    files = []
    for i, (method, seed, task, columns) in enumerate(
        [
            ("IR", 0, "voc_det", {"voc_det_AP": 5.0, "voc_det_AP50": 14.0, "voc_det_AP75": 3.0}),
            ("IR", 1, "voc_det", {"voc_det_AP": 6.0, "voc_det_AP50": 15.0, "voc_det_AP75": 3.5}),
            ("IRing", 0, "voc_det", {"voc_det_AP": 7.5, "voc_det_AP50": 20.0, "voc_det_AP75": 4.0}),
            ("IRing", 0, "coco_kp", {"coco_kp_AP": 37.0, "coco_kp_AP50": 66.0, "coco_kp_AP75": 35.0}),
        ]
    ):
        path = tmp_path / f"d{i}.json"
        path.write_text(json.dumps({"task": task, "method": method, "seed": seed, "columns": columns}))
        files.append(path)
    wide = tables.build_table4(files, ["IR", "IRing", "LA"], tmp_path / "table4")
    assert wide.loc["IR", "voc_det_AP"] == "5.5 ± 0.7"
    assert wide.loc["IRing", "voc_det_AP"] == "7.5 (+2.0)"
    assert wide.loc["IRing", "voc_det_AP paper (ours − paper)"] == "7.6 (-0.1)"
    assert wide.loc["IR", "coco_kp_AP"] == "—" and wide.loc["IRing", "coco_kp_AP"] == "37.0"
    assert wide.loc["LA", "coco_det_AP50 paper (ours − paper)"] == "22.0"
    csv = pd.read_csv(tmp_path / "table4.csv")
    assert len(csv) == 3 * 12 and set(csv.column) == set(
        yaml.safe_load(tables.PUBLISHED.read_text())["table4_detection"]["columns"]
    )
    assert "**table4**" in (tmp_path / "table4.md").read_text()


def test_table2_rows_are_the_papers_lesion_labels(tmp_path):
    files = _metrics(
        tmp_path,
        [("cifar10", "IR", 0, 80.0), ("cifar10", "IRingNoAnneal", 0, 81.0), ("imagenet", "IRingBall", 0, 47.0)],
    )
    wide = tables.build(
        "table2", files, ["IR", "IRing", "IRingNoAnneal", "IRingBall"], ["cifar10", "imagenet"], tmp_path / "table2"
    )
    assert list(wide.index) == ["IR", "IRing", "IRing (No Anneal)", "IRing (w_u = 100)"]
    assert wide.loc["IRing (No Anneal)", "CIFAR10"] == "81.0 (+1.0)"  # a lesion is compared with IR
    assert wide.loc["IRing (No Anneal)", "CIFAR10 paper (ours − paper)"] == "81.4 (-0.4)"
    assert wide.loc["IRing (w_u = 100)", "ImageNet paper (ours − paper)"] == "47.3 (-0.3)"


def test_la_variants_table_has_the_papers_single_cifar10_column(tmp_path):
    files = _metrics(tmp_path, [("cifar10", "LA", 0, 83.0), ("cifar10", "IRingCi", 0, 84.0)])
    methods = ["LA", "IRCave", "CMCCave", "IRingCi", "CMCRingCi"]
    wide = tables.build("table_la_variants", files, methods, ["cifar10"], tmp_path / "la")
    assert list(wide.columns) == ["CIFAR10", "CIFAR10 paper (ours − paper)"]
    assert wide.loc["IRing (+C_i)", "CIFAR10"] == "84.0 (+1.0)"  # LA and IRing (+C_i) differ only by w_l
    assert wide.loc["CMCRing (+C_i)", "CIFAR10 paper (ours − paper)"] == "87.8"
    assert wide.loc["LA", "CIFAR10 paper (ours − paper)"] == "83.9 (-0.9)"


def test_a_cell_off_the_papers_protocol_gets_a_footnote_instead_of_a_paper_delta(tmp_path):
    from ring.plan import grid as G

    paper = G.load(tables.PAPER_GRID)
    files = []
    # MoCoRing on CIFAR100 as the README's own grid: final w_l 50, 100 epochs, 30 linear epochs; IR as the paper.
    for method, pre, lin, top1 in [
        ("MoCoRing", {"epochs": 100, "ring_w_l": [0.0, 50.0]}, {"epochs": 30}, 60.0),
        ("IR", {}, {}, 60.0),
    ]:
        root = tmp_path / "results" / "mine"
        pre_cfg = paper.pretrain_config("cifar100", method, 3, "/data")
        lin_cfg = paper.lincls_config("cifar100", method, 3, "/data")
        for cfg, values in ((pre_cfg, pre), (lin_cfg, lin)):
            for key, value in values.items():
                setattr(cfg, key, value)
        files.append(_evaluated_cell(root, "cifar100", method, 3, pre_cfg, lin_cfg, top1))
    wide = tables.build("table1", files, ["IR", "MoCoRing"], ["cifar100"], tmp_path / "table1")
    assert wide.loc["MoCoRing", "CIFAR100 paper (ours − paper)"] == "61.5 [1]"
    assert wide.loc["IR", "CIFAR100 paper (ours − paper)"] == "60.4 (-0.4)"  # same protocol: compared
    assert (
        "[1] protocol differs from the paper's in lincls.epochs, pretrain.epochs, pretrain.ring_w_l: no difference "
        "to the paper shown."
    ) in (tmp_path / "table1.md").read_text()
    csv = pd.read_csv(tmp_path / "table1.csv", keep_default_na=False)
    assert csv.set_index("method").loc["MoCoRing", "differs"] == "lincls.epochs, pretrain.epochs, pretrain.ring_w_l"


def test_a_detection_cell_off_the_papers_schedule_gets_a_footnote_in_table4(tmp_path):
    from ring.plan import grid as G

    paper = G.load(tables.PAPER_GRID)
    root = tmp_path / "results" / "mine"
    files = []
    # IR exactly as the paper's cell; IRing trained 2k instead of 24k iterations on an encoder of 100 epochs.
    for method, overrides, pre in [("IR", {}, {}), ("IRing", {"SOLVER.MAX_ITER": 2000}, {"epochs": 100})]:
        pre_cfg = paper.pretrain_config("imagenet", method, 0, "/data")
        for key, value in pre.items():
            setattr(pre_cfg, key, value)
        det_cfg = paper.detection_config(method, "voc_det", 0, "/datasets")
        det_cfg.overrides = {**det_cfg.overrides, **overrides}
        files.append(_detection_cell(root, method, pre_cfg, det_cfg))
    wide = tables.build_table4(files, ["IR", "IRing"], tmp_path / "table4")
    assert wide.loc["IR", "voc_det_AP paper (ours − paper)"] == "5.5 (+0.5)"  # the paper's protocol: compared
    assert wide.loc["IRing", "voc_det_AP paper (ours − paper)"] == "7.6 [1]"
    assert wide.loc["IRing", "coco_kp_AP paper (ours − paper)"] == "37.2"  # no cell: nothing to mark
    assert (
        "[1] protocol differs from the paper's in detection.SOLVER.MAX_ITER, pretrain.epochs: no difference to the "
        "paper shown."
    ) in (tmp_path / "table4.md").read_text()


def test_ring_base_differences_beyond_the_seed_noise_are_marked_by_welchs_test(tmp_path):
    files = _metrics(
        tmp_path,
        [
            # CIFAR10: IRing 5 points above IR, seed spread 1 on both sides: t = 6.1 at 4 degrees of freedom, p = 0.004.
            *(("cifar10", "IR", s, v) for s, v in enumerate((80.0, 81.0, 82.0))),
            *(("cifar10", "IRing", s, v) for s, v in enumerate((85.0, 86.0, 87.0))),
            # CIFAR100: 1 point above with a spread of 2 a side: t = 0.6, p = 0.57, within the noise.
            *(("cifar100", "IR", s, v) for s, v in enumerate((50.0, 52.0, 54.0))),
            *(("cifar100", "IRing", s, v) for s, v in enumerate((51.0, 53.0, 55.0))),
            # STL10: one seed a side, 10 points apart: no spread to test against, no mark.
            ("stl10", "IR", 0, 70.0),
            ("stl10", "IRing", 0, 80.0),
        ],
    )
    wide = tables.build("table1", files, ["IR", "IRing"], ["cifar10", "cifar100", "stl10"], tmp_path / "t1")
    assert wide.loc["IR", "CIFAR10"] == "81.0 ± 1.0"
    assert wide.loc["IRing", "CIFAR10"] == "86.0 ± 1.0 (+5.0*)"
    assert wide.loc["IRing", "CIFAR100"] == "53.0 ± 2.0 (+1.0)"
    assert wide.loc["IRing", "STL10"] == "80.0 (+10.0)"
    csv = pd.read_csv(tmp_path / "t1.csv").set_index(["method", "dataset"])
    assert csv.loc[("IRing", "cifar10"), "delta_p"] == pytest.approx(0.00367, abs=1e-4)
    assert csv.loc[("IRing", "cifar100"), "delta_p"] == pytest.approx(0.5734, abs=1e-3)
    assert pd.isna(csv.loc[("IRing", "stl10"), "delta_p"]) and not csv.loc[("IRing", "stl10"), "delta_significant"]
    md = (tmp_path / "t1.md").read_text()
    assert "Welch's two-sided t-test" in md and "p < 0.05" in md and "one seed, which has no spread" in md
    assert "Welch's two-sided t-test" in (tmp_path / "t1.tex").read_text()  # the LaTeX caption states it too


def test_welch_p_agrees_with_the_formula_and_needs_two_seeds_a_side():
    import math

    # Welch: t = 3 / sqrt(1/3 + 4/3) = 2.32, df = (5/3)^2 / ((1/3)^2/2 + (4/3)^2/2) = 2.94; t(2.94) two-sided p = 0.105.
    assert summary.welch_p(13.0, 2.0, 3, 10.0, 1.0, 3) == pytest.approx(0.105, abs=2e-3)
    assert math.isnan(summary.welch_p(13.0, math.nan, 1, 10.0, 1.0, 3))
    assert summary.welch_p(13.0, 0.0, 2, 10.0, 0.0, 2) == 0.0 and summary.welch_p(10.0, 0.0, 2, 10.0, 0.0, 2) == 1.0


def test_table2_and_la_variants_mark_a_significant_difference_too(tmp_path):
    files = _metrics(
        tmp_path,
        [
            *(("cifar10", "IR", s, v) for s, v in enumerate((80.0, 80.5, 81.0))),
            *(("cifar10", "IRingNoAnneal", s, v) for s, v in enumerate((83.0, 83.5, 84.0))),
            *(("cifar10", "LA", s, v) for s, v in enumerate((83.0, 84.0, 85.0))),
            *(("cifar10", "IRingCi", s, v) for s, v in enumerate((83.5, 84.5, 85.5))),
        ],
    )
    table2 = tables.build("table2", files, ["IR", "IRingNoAnneal"], ["cifar10"], tmp_path / "t2")
    assert table2.loc["IRing (No Anneal)", "CIFAR10"] == "83.5 ± 0.5 (+3.0*)"
    la = tables.build("table_la_variants", files, ["LA", "IRingCi"], ["cifar10"], tmp_path / "la")
    assert la.loc["IRing (+C_i)", "CIFAR10"] == "84.5 ± 1.0 (+0.5)"  # t = 0.6: within the seed noise


# The linear protocol's words as ring.lincls writes them into a high-loss probe's note.
PROTOCOL = "the linear protocol (SGD lr=0.01, momentum 0.9, weight decay 0, batch 64, 30 epochs, constant lr)"


def _probe(tmp_path, method, top1, loss, seed=0):
    """A digits probe's metrics.json as ring.lincls writes it: its last epoch's scores judged by
    ring.engine.health.probe_verdict (digits: 10 classes, 450 test images)."""
    from ring.engine import health

    verdict = health.probe_verdict(
        {"top1": top1, "top5": min(100.0, 3 * top1)}, loss, 10, 450, f"cells/{method}/seed{seed}", 30, 0.01, PROTOCOL
    )
    path = tmp_path / f"{method}-{seed}.json"
    path.write_text(json.dumps({"dataset": "digits", "method": method, "seed": seed, **verdict}))
    return path


def test_a_high_loss_probe_above_chance_shows_its_accuracy_marked_with_the_loss_and_protocol(tmp_path):
    # README command (1)'s CMC probe: 26.9% top-1 (chance 10%) at a last-epoch loss of 1.5e6 (6500 ln 10).
    files = [
        _probe(tmp_path, "CMC", 26.9, 1.5e6),
        _probe(tmp_path, "CMCRing", 30.0, 2.2e6),
        _probe(tmp_path, "IR", 90.0, 0.2),
    ]
    wide = tables.build("table1", files, ["IR", "CMC", "CMCRing"], ["digits"], tmp_path / "t")
    assert wide.loc["CMC", "Digits"] == "26.9 [h1]"
    assert wide.loc["CMCRing", "Digits"] == "30.0 [h2] (+3.1)"  # a measured number: its delta to CMC too
    assert wide.loc["IR", "Digits"] == "90.0"  # a healthy probe is unmarked
    md = (tmp_path / "t.md").read_text()
    note = md[md.index("[h1] accuracy measured, training loss high: ") :]
    assert "loss 1.5e+06" in note and "ln(10) = 230" in note and PROTOCOL in note.split("[h2]")[0]
    assert "test top-1 26.9% against chance 10.0% + 3 binomial standard errors over 450 test images = 14.2%" in note
    assert "diverged" not in md
    assert cells.collect(files, "top1").set_index("method").loc["CMC", "value"] == 26.9  # the CSV's number too


@pytest.mark.parametrize("top1, loss", [(10.2, 0.3), (10.2, 1.5e6), (14.2, 2.0), (5.0, 2.0)])
def test_a_probe_at_chance_shows_diverged_whatever_its_loss(tmp_path, top1, loss):
    """At chance: top-1 within 3 binomial standard errors of 1/K, 10% + 3 x sqrt(0.1 x 0.9 / 450) = 14.24% on digits."""
    wide = tables.build("table1", [_probe(tmp_path, "CMC", top1, loss)], ["CMC"], ["digits"], tmp_path / "t")
    assert wide.loc["CMC", "Digits"] == "diverged [d1]"
    md = (tmp_path / "t.md").read_text()
    assert f"test top-1 {top1:.1f}% against chance 10.0%" in md and "is at chance" in md
    assert f"{top1:.1f} [" not in md.split("diverged [d1]")[0].split("|")[-1]  # no number in the cell


def test_a_probe_just_above_the_chance_bar_shows_its_number(tmp_path):
    # The bar on digits is 14.24% (ring.engine.health.chance_bar, tests/engine/test_health.py); just above it a number
    # (a learning-nothing probe passes it with probability 0.13%).
    wide = tables.build("table1", [_probe(tmp_path, "IR", 14.3, 0.3)], ["IR"], ["digits"], tmp_path / "t")
    assert wide.loc["IR", "Digits"] == "14.3"


@pytest.mark.parametrize("loss", [math.inf, math.nan])
def test_a_non_finite_loss_shows_diverged_even_with_an_accuracy_above_chance(tmp_path, loss):
    wide = tables.build("table1", [_probe(tmp_path, "IR", 80.0, loss)], ["IR"], ["digits"], tmp_path / "t")
    assert wide.loc["IR", "Digits"] == "diverged [d1]"
    assert "is not finite" in (tmp_path / "t.md").read_text()


def test_a_diverged_evaluation_shows_its_sentence_and_no_non_finite_value_reaches_a_table(tmp_path):
    files = _metrics(
        tmp_path, [("digits", "IR", 0, 90.0), ("digits", "IRing", 0, 91.0), ("digits", "CMCRing", 0, 80.0)]
    )
    sentence = "cells/CMC: the linear evaluation diverged: its last epoch's mean training loss 1.2e+06 exceeds 230."
    diverged = tmp_path / "diverged.json"
    diverged.write_text(json.dumps({"dataset": "digits", "method": "CMC", "seed": 0, "diverged": sentence}))
    methods = ["IR", "IRing", "CMC", "CMCRing", "MoCo"]
    wide = tables.build("table1", [*files, diverged], methods, ["digits"], tmp_path / "t")
    assert wide.loc["CMC", "Digits"] == "diverged [d1]"
    assert wide.loc["CMCRing", "Digits"] == "80.0"  # its base diverged: no difference to it
    assert wide.loc["MoCo", "Digits"] == "—"
    md = (tmp_path / "t.md").read_text()
    assert f"[d1] diverged, no accuracy: {sentence}" in md
    for suffix in (".md", ".tex"):
        text = (tmp_path / "t").with_suffix(suffix).read_text().lower()
        assert "nan" not in text and "inf" not in text.replace("infer", ""), suffix
    csv = pd.read_csv(tmp_path / "t.csv")
    assert csv[csv.method == "CMC"].iloc[0].n == 0 and pd.isna(csv[csv.method == "CMC"].iloc[0]["mean"])
    # A metrics file that is neither an accuracy nor a diverged verdict is still refused.
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"dataset": "digits", "method": "CMC", "seed": 0, "diverged": ""}))
    with pytest.raises(tables.MetricsError, match="lacks top1"):
        tables.build("table1", [bad], methods, ["digits"], tmp_path / "t")


def test_a_lesion_off_the_papers_protocol_gets_its_footnote_and_an_unknown_method_none(tmp_path):
    """Table 2's lesions are cells of the paper grid (its table2 block), not of its top-level methods: their protocol is
    compared too.  A method the paper never ran has no protocol to differ from."""
    from ring.plan import grid as G

    paper = G.load(tables.PAPER_GRID)
    root = tmp_path / "results" / "mine"
    pre_cfg = paper.pretrain_config("cifar10", "IRingNoAnneal", 0, "/data")
    lin_cfg = paper.lincls_config("cifar10", "IRingNoAnneal", 0, "/data")
    pre_cfg.epochs = 50
    metrics = _evaluated_cell(root, "cifar10", "IRingNoAnneal", 0, pre_cfg, lin_cfg, 70.0)
    assert protocol.protocol_differences(metrics) == ["pretrain.epochs"]
    assert "IRingNoAnneal" in protocol.paper_methods() and "NoSuchMethod" not in protocol.paper_methods()


def test_gpu_hours_count_each_job_once_the_runs_an_edit_set_aside_included(tmp_path):
    """Issue 40 item 6: an edited cell's earlier jobs (its run kept under runs/<hash>/) were counted zero times."""
    cell = tmp_path / "results" / "g" / "pretrain" / "digits" / "IR" / "seed0"
    files = []
    for folder, hours in ((cell, 1.0), (cell / "runs" / "0123abcd", 2.0), (cell / "runs" / "4567ef01", 0.5)):
        folder.mkdir(parents=True)
        doc = {"segments": [{"wall_s": 3600 * hours}], "wall_s": 3600 * hours, "gpu_hours": hours, "requeues": 0}
        (folder / "provenance.json").write_text(json.dumps(doc))
        files.append(folder / "provenance.json")
    summary = tables.gpu_hours(files, tmp_path / "gpu_hours")
    assert summary.loc["pretrain", "gpu_hours"] == 3.5 and summary.loc["pretrain", "cells"] == 1
    assert summary.loc["pretrain", "segments"] == 3 and summary.loc["total", "gpu_hours"] == 3.5
    assert "each run an edit set aside in it" in (tmp_path / "gpu_hours.md").read_text()
