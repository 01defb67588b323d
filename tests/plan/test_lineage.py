"""No stale number reaches a table: metrics <- this encoder <- this cell's config (ring.plan.lineage,
ring.reports.tables)."""

import json
import re

import pandas as pd
import pytest

from ring.core import config
from ring.core.files import record_checksums
from ring.plan import lineage
from ring.reports import tables
from tests.helpers import lincls_config, pretrain_config
from tests.reports.tables.fixtures import _evaluated_cell


@pytest.fixture
def grid(tmp_path):
    """IR and IRing cells of one seed, every chain holding; returns (results root, {method: metrics path})."""
    root = tmp_path / "results" / "mine"
    files = {
        m: _evaluated_cell(root, "digits", m, 0, pretrain_config(m), lincls_config(method=m, seed=0), top1)
        for m, top1 in (("IR", 80.0), ("IRing", 83.0))
    }
    return root, files


def _table(tmp_path, files):
    wide = tables.build("table1", list(files.values()), ["IR", "IRing"], ["digits"], tmp_path / "table1")
    return wide, (tmp_path / "table1.md").read_text()


def test_a_holding_chain_gives_numbers(tmp_path, grid):
    root, files = grid
    assert all(lineage.stale_reason(p, json.loads(p.read_text())) is None for p in files.values())
    wide, _ = _table(tmp_path, files)
    assert wide.loc["IRing", "Digits"] == "83.0 (+3.0 untested)"  # one seed a side


def test_an_edited_evaluation_config_makes_its_cell_stale_and_names_the_rerun(tmp_path, grid, capsys):
    root, files = grid
    config.save(lincls_config(method="IRing", seed=0, lr=0.1), files["IRing"].parent / "config.yaml")
    wide, md = _table(tmp_path, files)
    assert wide.loc["IRing", "Digits"] == "stale [s1]"
    cell = files["IRing"].parent
    sentence = (
        f"{cell} was evaluated with another config than its config.yaml; rerun it: snakemake --profile "
        f"profiles/local all_tables -R {files['IRing']} (profiles/slurm on a cluster)."
    )
    assert f"[s1] stale: {sentence}" in md and f"ring: stale: {sentence}" in capsys.readouterr().err
    assert wide.loc["IR", "Digits"] == "80.0"  # the rest of the table is unaffected
    csv = pd.read_csv(tmp_path / "table1.csv", keep_default_na=False).set_index("method")
    assert csv.loc["IRing", "mean"] == "" and csv.loc["IRing", "stale"] == sentence


def test_a_retrained_encoder_makes_its_evaluation_stale_and_no_delta_is_taken_to_it(tmp_path, grid):
    root, files = grid
    pre = root / "pretrain" / "digits" / "IR" / "seed0"
    (pre / "encoder.pt").write_bytes(b"another trunk")
    record_checksums(pre, ["encoder.pt"], config_hash=config.config_hash(pretrain_config("IR")))
    wide, md = _table(tmp_path, files)
    assert wide.loc["IR", "Digits"] == "stale [s1]"
    assert wide.loc["IRing", "Digits"] == "83.0"  # no difference to a base whose number is not current
    assert "evaluated another encoder than the one" in md and "(it was retrained)" in md


def test_an_edited_pretraining_config_not_yet_retrained_is_stale(tmp_path, grid):
    root, files = grid
    pre = root / "pretrain" / "digits" / "IRing" / "seed0"
    config.save(pretrain_config("IRing", ring_w_l=[0.0, 50.0]), pre / "config.yaml")
    wide, md = _table(tmp_path, files)
    assert wide.loc["IRing", "Digits"] == "stale [s1]"
    assert (
        f"{pre} holds an encoder made with another config than its config.yaml, and {files['IRing'].parent} "
        f"evaluated it; rerun them: snakemake --profile profiles/local all_tables -R {pre / 'encoder.pt'}"
    ) in md


def test_a_missing_encoder_or_an_unrecorded_evaluation_is_stale(tmp_path, grid):
    root, files = grid
    (root / "pretrain" / "digits" / "IR" / "seed0" / "encoder.pt").unlink()
    doc = json.loads(files["IRing"].read_text())
    del doc["config_hash"]
    files["IRing"].write_text(json.dumps(doc))
    wide, md = _table(tmp_path, files)
    assert wide.loc["IR", "Digits"] == "stale [s1]" and wide.loc["IRing", "Digits"] == "stale [s2]"
    assert "no longer holds (retraining or failed)" in md and "before ring-bench recorded what each number" in md


@pytest.mark.parametrize(
    "change, sentence",
    [
        ({"method": "IR"}, "is labelled method='IR' (its folder says 'IRing'); it belongs to another cell"),
        ({"seed": 2}, "is labelled seed=2 (its folder says 0)"),
        ({"top1": 183.0}, "holds top1=183.0, not a percentage in [0, 100]"),
        ({"top1": -1}, "holds top1=-1, not a percentage in [0, 100]"),
    ],
)
def test_a_mislabelled_or_out_of_range_metrics_file_is_refused_naming_it(tmp_path, grid, change, sentence):
    root, files = grid
    doc = {**json.loads(files["IRing"].read_text()), **change}
    files["IRing"].write_text(json.dumps(doc))
    with pytest.raises(tables.MetricsError, match=re.escape(f"The metrics file {files['IRing']} {sentence}")):
        _table(tmp_path, files)


def test_a_detection_cell_whose_backbone_or_encoder_changed_is_stale_in_table4(tmp_path):
    from ring.plan import grid as grid_plan
    from tests.reports.tables.fixtures import _detection_cell

    paper = grid_plan.load(tables.PAPER_GRID)
    root = tmp_path / "results" / "mine"
    files = [
        _detection_cell(
            root,
            m,
            paper.pretrain_config("imagenet", m, 0, "/data"),
            paper.detection_config(m, "voc_det", 0, "/datasets"),
        )
        for m in ("IR", "IRing")
    ]
    wide = tables.build_table4(files, ["IR", "IRing"], tmp_path / "table4")
    assert wide.loc["IR", "voc_det_AP"] == "6.0" and wide.loc["IRing", "voc_det_AP"] == "6.0 (+0.0 untested)"
    # IR's backbone converted again (from a retrained encoder): its detection cell no longer describes it.
    conv = root / "detection" / "imagenet" / "IR" / "seed0"
    (conv / "backbone.pkl").write_bytes(b"another backbone")
    record_checksums(conv, ["backbone.pkl"])
    # IRing's encoder retrained: the backbone it trained on was converted from the old one.
    pre = root / "pretrain" / "imagenet" / "IRing" / "seed0"
    (pre / "encoder.pt").write_bytes(b"retrained")
    record_checksums(
        pre, ["encoder.pt"], config_hash=config.config_hash(paper.pretrain_config("imagenet", "IRing", 0, "/d"))
    )
    wide = tables.build_table4(files, ["IR", "IRing"], tmp_path / "table4")
    assert wide.loc["IR", "voc_det_AP"] == "stale [s1]" and wide.loc["IRing", "voc_det_AP"] == "stale [s2]"
    md = (tmp_path / "table4.md").read_text()
    assert f"trained on another backbone than {conv / 'backbone.pkl'} (it was converted again, or is gone)" in md
    assert f"evaluated another encoder than the one {pre} holds now (it was retrained)" in md


def test_stale_target_names_the_file_to_rerun_or_none(tmp_path, grid):
    root, files = grid
    assert lineage.stale_target(files["IRing"]) is None  # the chain holds
    assert lineage.stale_target(root / "lincls" / "digits" / "LA" / "seed0" / "metrics.json") is None  # no number yet
    config.save(lincls_config(method="IRing", seed=0, lr=0.1), files["IRing"].parent / "config.yaml")
    assert lineage.stale_target(files["IRing"]) == files["IRing"]  # the evaluation itself reruns
    files["IR"].write_text("{truncated")
    assert lineage.stale_target(files["IR"]) is None  # unreadable: no record to judge (its table says so)


def _exported(metrics_path):
    """The evaluation's outputs kept under exported/ (a copy) and recorded, as ring.lincls leaves them."""
    from ring.core import cell_runs

    cell = metrics_path.parent
    m = json.loads(metrics_path.read_text())
    cell_runs.keep_outputs(cell, "lincls", config.load(config.LinclsConfig, cell / "config.yaml"), "sha")
    assert m["top1"] and (cell / "exported" / "metrics.json").read_bytes() == metrics_path.read_bytes()


def test_a_metrics_file_edited_in_place_is_stale_never_its_number(tmp_path, grid, capsys):
    """Issue 40 item 3: a metrics.json edited to 95.0 reached Table 1 (its kept copy, then a hard link, changed too)."""
    root, files = grid
    _exported(files["IRing"])
    assert lineage.stale_reason(files["IRing"], json.loads(files["IRing"].read_text())) is None
    edited = {**json.loads(files["IRing"].read_text()), "top1": 95.0}
    files["IRing"].write_text(json.dumps(edited))  # in place: exported/metrics.json is the same inode
    reason = lineage.stale_reason(files["IRing"], edited)
    assert reason == (
        f"{files['IRing']} differs from the SHA-256 its checksum record {files['IRing'].parent / 'export.json'} holds "
        f"(it was changed or damaged after its cell finished); rerun its cell: "
        f"{lineage.rerun_command(files['IRing'])}."
    )
    assert lineage.stale_target(files["IRing"]) == files["IRing"]
    wide, md = _table(tmp_path, files)
    assert wide.loc["IRing", "Digits"].startswith("stale") and "95.0" not in md and "differs from the SHA-256" in md


def test_an_encoder_damaged_after_its_evaluation_makes_it_stale_and_names_the_encoder(tmp_path, grid):
    root, files = grid
    encoder = root / "pretrain" / "digits" / "IR" / "seed0" / "encoder.pt"
    encoder.write_bytes(b"trunk bytes, damaged")
    found = lineage.stale(files["IR"], json.loads(files["IR"].read_text()))
    assert found.target == encoder and found.reason.startswith(f"{encoder} differs from the SHA-256 its checksum")
    wide, _ = _table(tmp_path, files)
    assert wide.loc["IR", "Digits"].startswith("stale")
    encoder.write_bytes(b"trunk bytes")  # the recorded bytes back: the chain holds again
    assert lineage.stale(files["IR"], json.loads(files["IR"].read_text())) is None


def test_a_truncated_metrics_file_with_a_record_is_rerun_not_left_to_fail_the_table(tmp_path, grid):
    root, files = grid
    _exported(files["IR"])
    files["IR"].write_text(files["IR"].read_text()[:20])  # cut short: no JSON to read the chain from
    assert lineage.stale_target(files["IR"]) == files["IR"]


def test_a_detection_metrics_file_edited_in_place_is_stale_in_table4(tmp_path):
    from ring.core import cell_runs
    from ring.plan import grid as grid_plan
    from tests.reports.tables.fixtures import _detection_cell

    paper = grid_plan.load(tables.PAPER_GRID)
    cfg = paper.detection_config("IR", "voc_det", 0, "/datasets")
    metrics = _detection_cell(
        tmp_path / "results" / "mine", "IR", paper.pretrain_config("imagenet", "IR", 0, "/d"), cfg
    )
    cell_runs.keep_outputs(metrics.parent, "detection", cfg, json.loads(metrics.read_text())["backbone_sha256"])
    assert tables.build_table4([metrics], ["IR"], tmp_path / "table4").loc["IR", "voc_det_AP"] == "6.0"
    edited = json.loads(metrics.read_text())
    edited["columns"]["voc_det_AP"] = 60.0
    metrics.write_text(json.dumps(edited))
    assert tables.build_table4([metrics], ["IR"], tmp_path / "table4").loc["IR", "voc_det_AP"] == "stale [s1]"
    assert lineage.stale_target(metrics) == metrics


def test_a_detection_cell_whose_backbone_was_damaged_since_is_stale_and_reruns_its_conversion(tmp_path):
    """Issue 52 item 5: one flipped byte in backbone.pkl (its checksum record untouched) left Table 4's number as it
    was, and nothing replanned the conversion."""
    from ring.plan import grid as grid_plan
    from tests.reports.tables.fixtures import _detection_cell

    paper = grid_plan.load(tables.PAPER_GRID)
    metrics = _detection_cell(
        tmp_path / "results" / "mine",
        "IR",
        paper.pretrain_config("imagenet", "IR", 0, "/d"),
        paper.detection_config("IR", "voc_det", 0, "/datasets"),
    )
    backbone = tmp_path / "results" / "mine" / "detection" / "imagenet" / "IR" / "seed0" / "backbone.pkl"
    assert lineage.stale_target(metrics) is None
    backbone.write_bytes(b"backbonE")
    assert lineage.stale_target(metrics) == backbone
    assert lineage.backbone_damage(backbone).target == backbone
    assert f"{backbone} differs from the SHA-256 its checksum record" in lineage.stale_reason(
        metrics, json.loads(metrics.read_text())
    )
    (backbone.parent / "export.json").unlink()  # no record: the stage would refuse it, so it is converted again
    assert lineage.backbone_damage(backbone).target == backbone
