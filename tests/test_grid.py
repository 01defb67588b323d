import pytest

from ring import grid as G
from ring.config import config_hash


def test_paper_grid_is_table1_with_the_papers_hyperparameters(root):
    paper = G.load(root / "workflow" / "grids" / "paper.yaml")
    assert paper.datasets == ["cifar10", "cifar100", "stl10", "imagenet"]
    assert paper.methods == ["IR", "IRing", "CMC", "CMCRing", "MoCo", "MoCoRing", "LA"]
    assert len(paper.table_cells("table1")) == 4 * 7 * len(paper.seeds)
    ir = paper.pretrain_config("cifar10", "IR", 0, "data")
    assert (ir.lr, ir.momentum, ir.weight_decay, ir.batch_size, ir.epochs) == (0.03, 0.9, 1e-4, 256, 300)
    assert (ir.lr_milestones, ir.lr_gamma, ir.resize, ir.crop, ir.temperature) == ([200, 250], 0.1, 256, 224, 0.07)
    assert (ir.bank_negatives, ir.out_dim) == (4096, 128)
    assert paper.pretrain_config("cifar10", "CMC", 0, "data").batch_size == 128
    assert paper.pretrain_config("imagenet", "MoCo", 0, "data").queue_size == 65536
    lin = paper.lincls_config("stl10", "IRing", 1, "data")
    assert (lin.lr, lin.momentum, lin.weight_decay, lin.epochs, lin.crop) == (0.01, 0.9, 0.0, 100, 224)


def test_smoke_grid_runs_every_method_once(root):
    smoke = G.load(root / "workflow" / "grids" / "smoke.yaml")
    table1 = ["IR", "IRing", "CMC", "CMCRing", "MoCo", "MoCoRing", "LA"]
    new = ["IRingNoAnneal", "IRingBall", "IRCave", "CMCCave", "IRingCi", "CMCRingCi"]
    assert smoke.cells() == [("digits", m, 0) for m in table1 + new]
    assert smoke.table_cells("table2") == [("digits", m, 0) for m in ["IR", "IRing", "IRingNoAnneal", "IRingBall"]]


def test_paper_grid_plans_table2_and_the_la_variants(root):
    paper = G.load(root / "workflow" / "grids" / "paper.yaml")
    assert paper.table_axes("table2") == (["IR", "IRing", "IRingNoAnneal", "IRingBall"], ["cifar10", "imagenet"])
    assert paper.table_axes("table_la_variants") == (["LA", "IRCave", "CMCCave", "IRingCi", "CMCRingCi"], ["cifar10"])
    # the union: Table 1's 28 pairs, the 4 lesion cells and the 4 new variants on CIFAR10
    assert len(paper.cells()) == (28 + 4 + 4) * len(paper.seeds)
    assert paper.pretrain_config("cifar10", "CMCRingCi", 0, "data").batch_size == 128
    assert paper.pretrain_config("imagenet", "IRingNoAnneal", 0, "data").ring_anneal == "none"
    assert paper.pretrain_config("imagenet", "LA", 0, "data").kmeans_k == 30000


def test_cell_configs_differ_only_where_they_should(root):
    paper = G.load(root / "workflow" / "grids" / "paper.yaml")
    a = paper.pretrain_config("cifar10", "IR", 0, "data")
    assert config_hash(a) == config_hash(paper.pretrain_config("cifar10", "IR", 0, "/elsewhere"))  # runtime only
    assert config_hash(a) != config_hash(paper.pretrain_config("cifar10", "IR", 1, "data"))


@pytest.mark.parametrize(
    "values, message",
    [
        ({"methods": ["IR", "SimCLR"]}, "unknown method 'SimCLR'"),
        ({"datasets": ["cifar11"]}, "Unknown dataset 'cifar11'"),
        ({"pretrain": {"all": {"lr_rate": 0.1}}}, "Unknown PretrainConfig key 'lr_rate'. Did you mean 'lr_gamma'"),
        ({"lincls": {"by_method": {"MoCo": {"epoch": 3}}}}, "Unknown LinclsConfig key 'epoch'. Did you mean 'epochs'"),
        ({"pretrain": {"by_method": {"BYOL": {}}}}, "by_method names unknown method 'BYOL'"),
        ({"tables": {"table2": {"datasets": ["digits"], "methods": ["IRingX"]}}}, "table table2: unknown method 'IRingX'"),
        ({"tables": {"table1": {"datasets": ["digits"], "methods": ["IR"]}}}, "table1's cells are the top-level"),
    ],
)
def test_bad_grids_fail_with_one_sentence(values, message):
    base = {"datasets": ["digits"], "methods": ["IR"], "seeds": [0]}
    with pytest.raises(ValueError, match=message):
        G.from_dict("bad", {**base, **values})
