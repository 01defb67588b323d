"""A cell off the paper's protocol (ring.reports.tables.protocol) gets a footnote, not a difference to the paper."""

import pandas as pd

from ring.reports import tables
from ring.reports.tables import protocol
from tests.reports.tables.fixtures import _evaluated_cell


def test_a_cell_off_the_papers_protocol_gets_a_footnote_instead_of_a_paper_delta(tmp_path):
    from ring.plan import grid

    paper = grid.load(tables.PAPER_GRID)
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


def test_a_lesion_off_the_papers_protocol_gets_its_footnote_and_an_unknown_method_none(tmp_path):
    """Table 2's lesions are cells of the paper grid (its table2 block), not of its top-level methods: their protocol is
    compared too.  A method the paper never ran has no protocol to differ from."""
    from ring.plan import grid

    paper = grid.load(tables.PAPER_GRID)
    root = tmp_path / "results" / "mine"
    pre_cfg = paper.pretrain_config("cifar10", "IRingNoAnneal", 0, "/data")
    lin_cfg = paper.lincls_config("cifar10", "IRingNoAnneal", 0, "/data")
    pre_cfg.epochs = 50
    metrics = _evaluated_cell(root, "cifar10", "IRingNoAnneal", 0, pre_cfg, lin_cfg, 70.0)
    assert protocol.protocol_differences(metrics) == ["pretrain.epochs"]
    assert "IRingNoAnneal" in protocol.paper_methods() and "NoSuchMethod" not in protocol.paper_methods()
