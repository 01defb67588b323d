import pytest

from ring import grid as G
from ring.config import config_hash


def test_paper_grid_is_table1_with_the_papers_hyperparameters(root):
    paper = G.load(root / "workflow" / "grids" / "paper.yaml")
    assert paper.datasets == ["cifar10", "cifar100", "stl10", "imagenet"]
    assert paper.methods == ["IR", "IRing", "CMC", "CMCRing", "MoCo", "MoCoRing", "LA"]
    assert len(paper.cells()) == 4 * 7 * len(paper.seeds)
    ir = paper.pretrain_config("cifar10", "IR", 0, "data")
    assert (ir.lr, ir.momentum, ir.weight_decay, ir.batch_size, ir.epochs) == (0.03, 0.9, 1e-4, 256, 300)
    assert (ir.lr_milestones, ir.lr_gamma, ir.resize, ir.crop, ir.temperature) == ([200, 250], 0.1, 256, 224, 0.07)
    assert (ir.bank_negatives, ir.out_dim) == (4096, 128)
    assert paper.pretrain_config("cifar10", "CMC", 0, "data").batch_size == 128
    assert paper.pretrain_config("imagenet", "MoCo", 0, "data").queue_size == 65536
    lin = paper.lincls_config("stl10", "IRing", 1, "data")
    assert (lin.lr, lin.momentum, lin.weight_decay, lin.epochs, lin.crop) == (0.01, 0.9, 0.0, 100, 224)


def test_smoke_grid_runs_the_four_implemented_methods(root):
    smoke = G.load(root / "workflow" / "grids" / "smoke.yaml")
    assert smoke.cells() == [("digits", m, 0) for m in ["IR", "IRing", "MoCo", "MoCoRing"]]


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
    ],
)
def test_bad_grids_fail_with_one_sentence(values, message):
    base = {"datasets": ["digits"], "methods": ["IR"], "seeds": [0]}
    with pytest.raises(ValueError, match=message):
        G.from_dict("bad", {**base, **values})


def test_paper_grid_plans_the_appendix_studies_on_cifar10(root):
    paper = G.load(root / "workflow" / "grids" / "paper.yaml")
    hard, policies, k = (paper.studies[name] for name in G.STUDIES)
    assert {s.dataset for s in (hard, policies, k)} == {"cifar10"}
    # One IR source with snapshots at 0/50/100/150, IRing at 10/25/50% from each: 1 + 12 cells.
    assert len(hard.cells()) == 13
    source = paper.study_config("hard_negatives", "IR", "source", 0, "data")
    assert (source.epochs, source.snapshot_epochs) == (200, [0, 50, 100, 150])
    branch = paper.study_config("hard_negatives", "IRing", "t25_e100", 0, "data", init_from="snap.pt")
    assert (branch.ring_w_l, branch.ring_anneal, branch.ring_w_u, branch.init_from) == ([75.0, 75.0], "none", 100.0, "snap.pt")
    assert hard.init_source("t25_e100") == {"method": "IR", "variant": "source", "epoch": 100}
    assert {v for _, v, _ in policies.cells()} == {"linear", "step", "exponential", "adaptive_val", "adaptive_loss"}
    assert paper.study_config("anneal_policies", "IRing", "step", 0, "data").epochs == 200
    # k sweep: the appendix's lists, with Table 1's hyperparameters otherwise.
    ks = {(m, paper.study_config("negatives_k", m, v, s, "data").bank_negatives if m.startswith("IR")
           else paper.study_config("negatives_k", m, v, s, "data").queue_size) for m, v, s in k.cells()}
    assert sorted(kk for m, kk in ks if m == "IRing") == [16, 32, 64, 128, 256, 512, 1024, 4096]
    assert sorted(kk for m, kk in ks if m == "MoCoRing") == [256, 512, 1024, 4096]
    assert len(k.cells()) == (8 * 2 + 4 * 2) * 3
    moco = paper.study_config("negatives_k", "MoCo", "k512", 1, "data")
    assert (moco.bn_groups, moco.epochs, moco.lr, moco.seed) == (8, 300, 0.03, 1)


@pytest.mark.parametrize(
    "study, message",
    [
        ({"variants": {"a": {"bank_negatves": 16}}}, "study negatives_k, cell IR/a/seed0: Unknown PretrainConfig key 'bank_negatves'"),
        ({"methods": ["IR", "BYOL"]}, "study negatives_k: unknown method 'BYOL'"),
        ({"variant_methods": {"b": ["IR"]}}, "variant_methods b"),
        ({"variants": {"s": {}, "x": {"init_from": {"method": "IR", "variant": "s", "epoch": 1}}}},
         r"init_from epoch 1 must be in the snapshot_epochs \[\] of IR/s"),
        ({"variants": {"x": {"init_from": {"method": "MoCo", "variant": "x", "epoch": 0}}}}, "naming a cell of the same study"),
        ({"variants": {"x": {"init_from": "results/x.pt"}}}, "init_from must be .* not 'results/x.pt'"),
    ],
)
def test_bad_studies_fail_with_one_sentence(study, message):
    values = {"datasets": ["digits"], "methods": ["IR"], "seeds": [0],
              "studies": {"negatives_k": {"dataset": "digits", "methods": ["IR"], "seeds": [0], "variants": {"a": {}}, **study}}}
    with pytest.raises(ValueError, match=message):
        G.from_dict("bad", values)
