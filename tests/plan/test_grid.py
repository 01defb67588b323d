import re

import jsonschema
import pytest
import yaml

from ring.core import catalog
from ring.core.config import config_hash
from ring.core.methods import METHODS
from ring.plan import checks, gate
from ring.plan import grid as grid_plan
from tests import ROOT
from tests.helpers import PAPER_TRANSFER_DATASETS

# The paper's default of 4096 bank negatives exceeds digits' 1347-image bank: grids on digits lower it.
DIGITS_PRETRAIN = {"pretrain": {"all": {"bank_negatives": 1024}}}


def test_paper_grid_is_table1_with_the_papers_hyperparameters(root):
    paper = grid_plan.load(root / "ring" / "resources" / "grids" / "paper.yaml")
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
    smoke = grid_plan.load(root / "ring" / "resources" / "grids" / "smoke.yaml")
    table1 = ["IR", "IRing", "CMC", "CMCRing", "MoCo", "MoCoRing", "LA"]
    new = ["IRingNoAnneal", "IRingBall", "IRCave", "CMCCave", "IRingCi", "CMCRingCi"]
    assert smoke.cells() == [("digits_colour", m, 0) for m in table1 + new]
    lesions = ["IR", "IRing", "IRingNoAnneal", "IRingBall"]
    assert smoke.table_cells("table2") == [("digits_colour", m, 0) for m in lesions]


def test_paper_grid_plans_table2_and_the_la_variants(root):
    paper = grid_plan.load(root / "ring" / "resources" / "grids" / "paper.yaml")
    assert paper.table_axes("table2") == (["IR", "IRing", "IRingNoAnneal", "IRingBall"], ["cifar10", "imagenet"])
    assert paper.table_axes("table_la_variants") == (["LA", "IRCave", "CMCCave", "IRingCi", "CMCRingCi"], ["cifar10"])
    # the union: Table 1's 28 pairs, the 4 lesion cells and the 4 new variants on CIFAR10
    assert len(paper.cells()) == (28 + 4 + 4) * len(paper.seeds)
    assert paper.pretrain_config("cifar10", "CMCRingCi", 0, "data").batch_size == 128
    assert paper.pretrain_config("imagenet", "IRingNoAnneal", 0, "data").ring_anneal == "none"
    assert paper.pretrain_config("imagenet", "LA", 0, "data").kmeans_k == 30000


def test_cell_configs_differ_only_where_they_should(root):
    paper = grid_plan.load(root / "ring" / "resources" / "grids" / "paper.yaml")
    a = paper.pretrain_config("cifar10", "IR", 0, "data")
    assert config_hash(a) == config_hash(paper.pretrain_config("cifar10", "IR", 0, "/elsewhere"))  # runtime only
    assert config_hash(a) != config_hash(paper.pretrain_config("cifar10", "IR", 1, "data"))


def test_paper_grid_plans_every_method_on_the_nine_transfer_datasets(root):
    paper = grid_plan.load(root / "ring" / "resources" / "grids" / "paper.yaml")
    assert paper.transfer["source"] == "cifar10"
    assert paper.transfer["datasets"] == PAPER_TRANSFER_DATASETS
    assert len(paper.transfer_cells()) == 9 * 7 * len(paper.seeds)
    cfg = paper.transfer_config("fungi", "MoCoRing", 2, "data", "results/paper/transfer/fungi")
    lin = paper.lincls_config("cifar10", "MoCoRing", 2, "data")
    assert (cfg.lr, cfg.epochs, cfg.crop, cfg.augmentation, cfg.source) == (
        lin.lr,
        lin.epochs,
        lin.crop,
        lin.augmentation,
        "cifar10",
    )
    assert config_hash(cfg) == config_hash(
        paper.transfer_config("fungi", "MoCoRing", 2, "/x", "elsewhere")
    )  # runtime only


def test_smoke_grid_transfers_the_digits_encoders_to_generated_shapes(root):
    smoke = grid_plan.load(root / "ring" / "resources" / "grids" / "smoke.yaml")
    assert smoke.transfer_cells() == [
        ("shapes", m, 0) for m in ["IR", "IRing", "CMC", "CMCRing", "MoCo", "MoCoRing", "LA"]
    ]
    assert smoke.transfer_config("shapes", "IR", 0, "data").source == "digits_colour"
    assert (
        grid_plan.from_dict(
            "plain", {"datasets": ["digits"], "methods": ["IR"], "seeds": [0], **DIGITS_PRETRAIN}
        ).transfer_cells()
        == []
    )


def test_paper_grid_plans_table4_for_five_methods_three_models_three_seeds(root):
    grid = grid_plan.load(root / "ring" / "resources" / "grids" / "paper.yaml")
    cells = grid.detection_cells()
    assert len(cells) == 5 * 3 * 3 and {c[0] for c in cells} == {"imagenet"}
    assert {c[1] for c in cells} == {"IR", "IRing", "MoCo", "MoCoRing", "LA"}
    cfg = grid.detection_config("LA", "voc_det", 2, "/datasets")
    assert (cfg.datasets, cfg.datasets_root, cfg.overrides, cfg.seed) == ("detectron2", "/datasets", {}, 2)


def test_detection_blocks_merge_overrides_key_by_key(root):
    values = {
        "datasets": ["digits"],
        "methods": ["IR", "IRing"],
        "seeds": [0],
        **DIGITS_PRETRAIN,
        "detection": {
            "source": "digits",
            "methods": ["IR", "IRing"],
            "tasks": ["coco_kp", "voc_det"],
            "all": {"num_gpus": 0, "overrides": {"SOLVER.MAX_ITER": 5, "SOLVER.BASE_LR": 0.1}},
            "by_task": {"voc_det": {"overrides": {"SOLVER.MAX_ITER": 7}}},
            "by_method": {"IRing": {"num_workers": 1}},
        },
    }
    grid = grid_plan.from_dict("g", values)
    voc = grid.detection_config("IRing", "voc_det", 0, "d")
    assert voc.overrides == {"SOLVER.MAX_ITER": 7, "SOLVER.BASE_LR": 0.1}
    assert (voc.num_gpus, voc.num_workers) == (0, 1)
    assert grid.detection_config("IR", "coco_kp", 0, "d").overrides["SOLVER.MAX_ITER"] == 5


def test_paper_grid_plans_the_appendix_studies_on_cifar10(root):
    paper = grid_plan.load(root / "ring" / "resources" / "grids" / "paper.yaml")
    hard, policies, k = (paper.studies[name] for name in ("hard_negatives", "anneal_policies", "negatives_k"))
    assert {s.dataset for s in (hard, policies, k)} == {"cifar10"}
    # One IR source with snapshots at 0/50/100/150, IRing at 10/25/50% from each: 1 + 12 cells.
    assert len(hard.cells()) == 13
    source = paper.study_config("hard_negatives", "IR", "source", 0, "data")
    assert (source.epochs, source.snapshot_epochs) == (200, [0, 50, 100, 150])
    branch = paper.study_config("hard_negatives", "IRing", "t25_e100", 0, "data", init_from="snap.pt")
    assert (branch.ring_w_l, branch.ring_anneal, branch.ring_w_u, branch.init_from) == (
        [75.0, 75.0],
        "none",
        100.0,
        "snap.pt",
    )
    assert hard.init_source("t25_e100") == {"method": "IR", "variant": "source", "epoch": 100}
    assert {v for _, v, _ in policies.cells()} == {
        "linear",
        "step",
        "adaptive_val",
        "adaptive_loss",
        "step_ours",
        "exponential_ours",
        "adaptive_val_ours",
        "adaptive_loss_ours",
    }
    step = paper.study_config("anneal_policies", "IRing", "step", 0, "data")
    assert (step.epochs, step.ring_anneal) == (200, "step_authors")  # the appendix's curves: the authors' policies
    assert paper.study_config("anneal_policies", "IRing", "adaptive_val_ours", 0, "data").ring_anneal == "adaptive_val"
    # k sweep: the appendix's lists, with Table 1's hyperparameters otherwise.
    ks = {
        (
            m,
            paper.study_config("negatives_k", m, v, s, "data").bank_negatives
            if m.startswith("IR")
            else paper.study_config("negatives_k", m, v, s, "data").queue_size,
        )
        for m, v, s in k.cells()
    }
    assert sorted(kk for m, kk in ks if m == "IRing") == [16, 32, 64, 128, 256, 512, 1024, 4096]
    assert sorted(kk for m, kk in ks if m == "MoCoRing") == [256, 512, 1024, 4096]
    assert len(k.cells()) == (8 * 2 + 4 * 2) * 3
    moco = paper.study_config("negatives_k", "MoCo", "k512", 1, "data")
    assert (moco.bn_groups, moco.epochs, moco.lr, moco.seed) == (8, 300, 0.03, 1)


def test_ring_digits_grid_sweeps_the_final_window_and_the_annealing_length(root):
    g = grid_plan.load(root / "ring" / "resources" / "grids" / "ring_digits.yaml")
    assert (g.methods, g.seeds) == (["IR", "IRing", "MoCo", "MoCoRing"], [0, 1, 2])  # Table 1 at the study's 3 seeds
    study = g.studies["ring_window"]
    cells = study.cells()
    assert len(cells) == 2 * 3 + 2 * 4 * 3  # IR and MoCo once; IRing and MoCoRing per w_l and annealing length
    assert {v for m, v, _ in cells if m == "IR"} == {"base"} and {s for _, _, s in cells} == {0, 1, 2}
    cfg = g.study_config("ring_window", "MoCoRing", "wl90_a67", 1, "data")
    assert (cfg.ring_w_l, cfg.ring_anneal_epochs, cfg.epochs, cfg.log_window_classes) == ([0.0, 90.0], 10, 15, True)
    assert g.study_config("ring_window", "IRing", "wl50_a33", 2, "data").ring_anneal_epochs == 5
    assert g.pretrain_config("digits", "IRing", 0, "data").ring_w_l == [0.0, 90.0]  # Table 1: the paper's final w_l


# ---- a grid cannot name a cell wrongly (issue #22) -------------------------------------------------


@pytest.mark.parametrize(
    "name, sentence",
    [
        (".hidden.yaml", "the file's name '.hidden' names the results folder results/.hidden/"),
        (
            "my grid.yaml",
            "the file's name 'my grid' names the results folder results/my grid/, so it must be a plain name",
        ),
        ("a.b.yaml", "the file's name 'a.b' names the results folder results/a.b/, so it must be a plain name"),
    ],
)
def test_a_grid_file_whose_name_is_not_a_plain_name_is_refused(tmp_path, name, sentence):
    path = tmp_path / name
    path.write_text("datasets: [digits]\nmethods: [IR]\nseeds: [0]\n")
    with pytest.raises(ValueError, match=re.escape(sentence)):
        grid_plan.resolve(str(path), tmp_path / "grids")


def test_grid_naming_a_folder_or_a_path_without_yaml_gets_a_sentence(tmp_path):
    (tmp_path / "grids").mkdir()
    with pytest.raises(
        ValueError, match=re.escape(f"grid={str(tmp_path / 'grids')!r} is a folder; give a grid file in it")
    ):
        grid_plan.resolve(str(tmp_path / "grids"), tmp_path / "grids")
    with pytest.raises(ValueError, match="is neither a grid name .* nor a path ending in .yaml"):
        grid_plan.resolve("../results/x", tmp_path / "grids")


def test_the_papers_per_method_values_come_with_the_methods_unless_the_grid_sets_them():
    base = {
        "datasets": ["digits"],
        "methods": ["IR", "CMC", "CMCRing", "MoCo", "MoCoRing"],
        "seeds": [0],
        "pretrain": {"all": {"bank_negatives": 1024, "queue_size": 1024}},
    }
    own = grid_plan.from_dict("own", base)
    assert [own.pretrain_config("digits", m, 0, "data").batch_size for m in base["methods"]] == [
        256,
        128,
        128,
        256,
        256,
    ]
    assert [own.pretrain_config("digits", m, 0, "data").bn_groups for m in base["methods"]] == [1, 1, 1, 8, 8]
    assert own.pretrain_config("digits", "CMC", 0, "data").cmc_negatives == "shared"
    base["pretrain"]["all"].update(batch_size=64, bn_groups=2)  # the grid's own values win
    set_ = grid_plan.from_dict("own", base)
    assert {
        (c.batch_size, c.bn_groups) for c in (set_.pretrain_config("digits", m, 0, "data") for m in base["methods"])
    } == {(64, 2)}


def _grid_dir(tmp_path, **grids):
    folder = tmp_path / "grids"
    folder.mkdir()
    for name, values in grids.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(values))
    return folder


def _no_schema(values, what):
    pass


def test_select_reads_checks_and_schema_validates_only_the_named_grid(tmp_path):
    seen = []
    cells = {"datasets": ["digits"], "methods": ["IR"], "seeds": [0]}
    grids = _grid_dir(tmp_path, mine={**cells, **DIGITS_PRETRAIN}, broken=cells)
    grid = gate.select("mine", grids, lambda values, what: seen.append((values["methods"], what)), results=tmp_path)
    assert (grid.name, grid.cells(), grid.source) == ("mine", [("digits", "IR", 0)], str(grids / "mine.yaml"))
    assert seen == [(["IR"], f"Grid file {grids / 'mine.yaml'}")]  # the broken neighbour: never validated
    with pytest.raises(ValueError, match=r"^config grid='nothere' has no file .*; choose one of broken, mine "):
        gate.select("nothere", grids, _no_schema, results=tmp_path)
    with pytest.raises(ValueError, match=r"^Grid .*broken.yaml, stage pretrain, cell digits/IR/seed0: bank_negatives="):
        gate.select("broken", grids, _no_schema, results=tmp_path)


def test_select_refuses_what_stops_the_jobs_here_and_an_unhonourable_skip_checksums(tmp_path, capsys):
    grids = _grid_dir(tmp_path, c10={"datasets": ["cifar10"], "methods": ["IR"], "seeds": [0]})
    (tmp_path / "results").write_text("a file where the results folder goes")
    with pytest.raises(ValueError) as err:
        gate.select("c10", grids, _no_schema, results=tmp_path / "results")
    assert str(err.value) == checks.environment(grid_plan.load(grids / "c10.yaml"), tmp_path / "results")
    assert gate.select("c10", grids, _no_schema, results=tmp_path).name == "c10"
    with pytest.raises(ValueError, match=re.escape(catalog.skip_refusal("cifar10"))):
        gate.select("c10", grids, _no_schema, skip_checksums=True, results=tmp_path)
    assert capsys.readouterr().err == ""  # no plug-in is broken: no warning


def test_select_warns_of_a_broken_plugin_without_refusing(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(METHODS.broken, "mine", "method plug-in 'mine' failed to load (ImportError: no torch)")
    grids = _grid_dir(tmp_path, g={"datasets": ["digits"], "methods": ["IR"], "seeds": [0], **DIGITS_PRETRAIN})
    assert gate.select("g", grids, _no_schema, results=tmp_path).name == "g"
    assert capsys.readouterr().err == (
        "ring: warning: method plug-in 'mine' failed to load (ImportError: no torch); its methods are unavailable "
        "until that package is fixed or uninstalled.\n"
    )


def test_schema_refusal_names_the_key_path_or_the_top_level():
    schema = {"type": "object", "properties": {"pretrain": {"type": "object"}}, "required": ["seeds"]}
    with pytest.raises(jsonschema.ValidationError) as nested:
        jsonschema.validate({"seeds": [0], "pretrain": []}, schema)
    assert gate.schema_refusal(nested.value, "Grid file g.yaml", "../schemas/grid.schema.yaml") == (
        "Grid file g.yaml: key pretrain: [] is not of type 'object'; fix it (the schema is "
        "ring/resources/schemas/grid.schema.yaml)."
    )
    with pytest.raises(jsonschema.ValidationError) as top:
        jsonschema.validate({}, schema)
    assert gate.schema_refusal(top.value, "Workflow config", "config.schema.yaml").startswith(
        "Workflow config: key (top level): 'seeds' is a required property;"
    )


def test_datasets_read_lists_each_dataset_once_detectron2s_only_when_not_embedded(root):
    paper = grid_plan.load(root / "ring" / "resources" / "grids" / "paper.yaml")
    read = grid_plan.datasets_read(paper)
    assert len(read) == len(set(read)) and read[: len(paper.datasets)] == paper.datasets
    assert set(paper.transfer["datasets"]) | {"coco", "voc2007", "voc2012"} <= set(read)
    smoke = grid_plan.load(root / "ring" / "resources" / "grids" / "smoke.yaml")  # Table 4 on the generated datasets
    assert smoke.detection["datasets"] == "embedded" and not {"coco", "voc2007"} & set(grid_plan.datasets_read(smoke))


def test_the_plan_records_the_decoder_once_and_hashes_it_only_as_the_gpu(tmp_path, monkeypatch):
    """Issue 48: an ImageNet cell of the paper grid is planned with the workers' decode (no committed figure measured
    the GPU's faster) under the hash it had before the record existed.  Once a figure says the GPU's decoder is
    faster, a new cell is planned with it (another hash: other pixels), while a cell planned before, its config.yaml
    with or without the record, keeps the workers' decode and its hash."""
    import dataclasses
    import json

    from ring import resources
    from ring.core.config import dump, save

    paper = grid_plan.load(ROOT / "ring" / "resources" / "grids" / "paper.yaml")
    planned = paper.pretrain_config("imagenet", "IR", 0, "data")
    assert planned.store_decode == "auto" and planned.store_decoder == "cpu"
    assert config_hash(planned) == config_hash(dataclasses.replace(planned, store_decoder=""))
    before = tmp_path / "before.yaml"  # a config.yaml written before the record existed
    before.write_text("".join(line for line in dump(planned).splitlines(True) if "store_decoder" not in line))
    again = tmp_path / "again.yaml"
    save(planned, again)
    doc = {"images_per_s": {"store": 3674.0, "store_gpu": 9000.0}, "workers": 8, "store_timed_steps": 48}
    (tmp_path / "throughput_IR_compile-NVIDIA_H200.json").write_text(json.dumps(doc))
    monkeypatch.setattr(resources, "FIGURES", tmp_path)
    fresh = paper.pretrain_config("imagenet", "IR", 0, "data")
    assert fresh.store_decoder == "gpu" and config_hash(fresh) != config_hash(planned)
    for path in (before, again):
        kept = paper.pretrain_config("imagenet", "IR", 0, "data", recorded=grid_plan.recorded_decoder(path))
        assert kept == planned and config_hash(kept) == config_hash(planned)
    assert grid_plan.recorded_decoder(tmp_path / "missing.yaml") is None
    cifar = paper.pretrain_config("cifar10", "IR", 0, "data")  # no store: the workers, whatever the figures say
    assert cifar.store_decoder == "cpu"
