"""Table 4 (ring.reports.tables.detection): several columns per cell."""

import json

import pandas as pd
import yaml

from ring.reports import tables
from tests.reports.tables.fixtures import _detection_cell


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
    assert wide.loc["IRing", "voc_det_AP"] == "7.5 (+2.0 untested)"
    assert wide.loc["IRing", "voc_det_AP paper (ours − paper)"] == "7.6 (-0.1)"
    assert wide.loc["IR", "coco_kp_AP"] == "—" and wide.loc["IRing", "coco_kp_AP"] == "37.0"
    assert wide.loc["LA", "coco_det_AP50 paper (ours − paper)"] == "22.0"
    csv = pd.read_csv(tmp_path / "table4.csv")
    assert len(csv) == 3 * 12 and set(csv.column) == set(
        yaml.safe_load(tables.PUBLISHED.read_text())["table4_detection"]["columns"]
    )
    assert "**table4**" in (tmp_path / "table4.md").read_text()
    # IRing's APs come from one seed: the table says their noise is untested instead of showing a bare number.
    assert tables.detection.ONE_SEED in (tmp_path / "table4.md").read_text()


def test_a_detection_cell_off_the_papers_schedule_gets_a_footnote_in_table4(tmp_path):
    from ring.plan import grid

    paper = grid.load(tables.PAPER_GRID)
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


def test_an_ap_of_zero_off_the_papers_protocol_says_the_run_cannot_resolve_it(tmp_path):
    """A 0.0 AP (no prediction matched) from a run off the paper's protocol, as the smoke grid's 30 iterations on 4
    images of 64 px give, is marked unresolved in the table, not shown bare as a measured failure; on the paper's
    protocol a 0.0 is a finding and stays bare."""
    from ring.plan import grid

    paper = grid.load(tables.PAPER_GRID)
    root = tmp_path / "results" / "mine"
    files = []
    zero = {"voc_det_AP": 0.0, "voc_det_AP50": 0.4, "voc_det_AP75": 0.0}
    for method, overrides in [("IR", {}), ("IRing", {"SOLVER.MAX_ITER": 30})]:
        det_cfg = paper.detection_config(method, "voc_det", 0, "/datasets")
        det_cfg.overrides = {**det_cfg.overrides, **overrides}
        pre_cfg = paper.pretrain_config("imagenet", method, 0, "/data")
        files.append(_detection_cell(root, method, pre_cfg, det_cfg, columns=zero))
    wide = tables.build_table4(files, ["IR", "IRing"], tmp_path / "table4")
    assert wide.loc["IR", "voc_det_AP"] == "0.0" and wide.loc["IR", "voc_det_AP75"] == "0.0"
    assert wide.loc["IRing", "voc_det_AP"].startswith("0.0 [u1]") and wide.loc["IRing", "voc_det_AP75"].startswith(
        "0.0 [u1]"
    )
    assert wide.loc["IRing", "voc_det_AP50"].startswith("0.4") and "[u" not in wide.loc["IRing", "voc_det_AP50"]
    md = (tmp_path / "table4.md").read_text()
    assert "[u1] unresolved: 0.0 on every seed, off the paper's protocol" in md, md
