"""A grid's checks (ring.plan.checks.grid), run by every grid built: bad names, blocks and cells stop it in one
sentence before anything runs."""

import pytest
import yaml

from ring.plan import grid
from ring.plan.checks.grid import IDENTITY_KEYS
from tests.plan.test_grid import DIGITS_PRETRAIN


@pytest.mark.parametrize(
    "values, message",
    [
        ({"methods": ["IR", "NoSuchMethod"]}, "unknown method 'NoSuchMethod'"),
        ({"datasets": ["cifar11"]}, "Unknown dataset 'cifar11'"),
        ({"pretrain": {"all": {"lr_rate": 0.1}}}, "Unknown PretrainConfig key 'lr_rate'. Did you mean 'lr_gamma'"),
        ({"lincls": {"by_method": {"MoCo": {"epoch": 3}}}}, "Unknown LinclsConfig key 'epoch'. Did you mean 'epochs'"),
        ({"pretrain": {"by_method": {"NoSuchMethod": {}}}}, "by_method names unknown method 'NoSuchMethod'"),
        (
            {"tables": {"table2": {"datasets": ["digits"], "methods": ["NoSuchMethod"]}}},
            "table table2: unknown method 'NoSuchMethod'",
        ),
        ({"tables": {"table1": {"datasets": ["digits"], "methods": ["IR"]}}}, "table1's cells are the top-level"),
    ],
)
def test_bad_grids_fail_with_one_sentence(values, message):
    base = {"datasets": ["digits"], "methods": ["IR"], "seeds": [0]}
    with pytest.raises(ValueError, match=message):
        grid.from_dict("bad", {**base, **values})


@pytest.mark.parametrize(
    "transfer, message",
    [
        ({"source": "cifar10", "datasets": ["cub"]}, "transfer source 'cifar10' is not one of the grid's datasets"),
        ({"source": "digits", "datasets": ["cifar10"]}, "'cifar10' is not a transfer dataset"),
        (
            {"source": "digits", "datasets": ["cub"], "methods": ["MoCo"]},
            "transfer method 'MoCo' is not one of the grid's",
        ),
        ({"source": "digits", "datasets": ["cub"], "all": {"epoch": 3}}, "Unknown TransferConfig key 'epoch'"),
        ({"datasets": ["cub"]}, "the transfer block needs 'source'"),
    ],
)
def test_bad_transfer_blocks_fail_with_one_sentence(transfer, message):
    with pytest.raises(ValueError, match=message):
        grid.from_dict("bad", {"datasets": ["digits"], "methods": ["IR"], "seeds": [0], "transfer": transfer})
    with pytest.raises(ValueError, match="'mnist' is a transfer dataset, not a pretraining one"):
        grid.from_dict("bad", {"datasets": ["mnist"], "methods": ["IR"], "seeds": [0]})


@pytest.mark.parametrize(
    "detection, message",
    [
        ({"source": "cifar10", "methods": ["IR"], "tasks": ["voc_det"]}, "detection source 'cifar10' is not one of"),
        ({"source": "digits", "methods": ["MoCo"], "tasks": ["voc_det"]}, "detection method 'MoCo' is not one of"),
        ({"source": "digits", "methods": ["IR"], "tasks": ["voc"]}, "unknown detection task 'voc'"),
        (
            {"source": "digits", "methods": ["IR"], "tasks": ["voc_det"], "all": {"num_gpu": 1}},
            "Did you mean 'num_gpus'?",
        ),
    ],
)
def test_bad_detection_blocks_fail_with_one_sentence(detection, message):
    values = {"datasets": ["digits"], "methods": ["IR"], "seeds": [0], "detection": detection, **DIGITS_PRETRAIN}
    with pytest.raises(ValueError, match=message):
        grid.from_dict("g", values)


@pytest.mark.parametrize(
    "study, message",
    [
        (
            {"variants": {"a": {"bank_negatves": 16}}},
            "study negatives_k, cell IR/a/seed0: Unknown PretrainConfig key 'bank_negatves'",
        ),
        ({"methods": ["IR", "NoSuchMethod"]}, "study negatives_k: unknown method 'NoSuchMethod'"),
        ({"variant_methods": {"b": ["IR"]}}, "variant_methods b"),
        (
            {"variants": {"s": {}, "x": {"init_from": {"method": "IR", "variant": "s", "epoch": 1}}}},
            r"init_from epoch 1 must be in the snapshot_epochs \[\] of IR/s",
        ),
        (
            {"variants": {"x": {"init_from": {"method": "MoCo", "variant": "x", "epoch": 0}}}},
            "naming a cell of the same study",
        ),
        ({"variants": {"x": {"init_from": "results/x.pt"}}}, "init_from must be .* not 'results/x.pt'"),
    ],
)
def test_bad_studies_fail_with_one_sentence(study, message):
    values = {
        "datasets": ["digits"],
        "methods": ["IR"],
        "seeds": [0],
        **DIGITS_PRETRAIN,
        "studies": {
            "negatives_k": {"dataset": "digits", "methods": ["IR"], "seeds": [0], "variants": {"a": {}}, **study}
        },
    }
    with pytest.raises(ValueError, match=message):
        grid.from_dict("bad", values)


@pytest.mark.parametrize(
    "block, key, value, home",
    [
        ({"pretrain": {"all": {}}}, "seed", 1, "the grid's top-level seeds: list"),
        ({"pretrain": {"by_method": {"IRing": {}}}}, "method", "MoCo", "the grid's top-level methods: list"),
        ({"lincls": {"by_dataset": {"digits": {}}}}, "dataset", "cifar10", "the grid's top-level datasets: list"),
        ({"pretrain": {"all": {}}}, "data_root", "/elsewhere", "the workflow config (--config data_root=PATH)"),
        (
            {"transfer": {"source": "digits", "datasets": ["shapes"], "all": {}}},
            "source",
            "cifar10",
            "transfer: source:",
        ),
    ],
)
def test_a_key_that_names_the_cell_is_refused_inside_a_stage_block_saying_where_it_belongs(block, key, value, home):
    values = {"datasets": ["digits"], "methods": ["IR", "IRing"], "seeds": [0, 1], **DIGITS_PRETRAIN}
    stage = next(iter(block))
    inner = block[stage]
    part = next(k for k in ("all", "by_method", "by_dataset") if k in inner)
    target = inner[part] if part == "all" else next(iter(inner[part].values()))
    target[key] = value
    where = part if part == "all" else f"{part} {next(iter(inner[part]))}"
    values[stage] = {**values.get(stage, {}), **inner}
    if stage == "pretrain":
        values["pretrain"]["all"] = {**DIGITS_PRETRAIN["pretrain"]["all"], **inner.get("all", {})}
    with pytest.raises(ValueError) as err:
        grid.from_dict("mine", values, source="grids/mine.yaml")
    assert str(err.value) == (
        f"Grid grids/mine.yaml, stage {stage}, block {where}: {key!r} names the cell, so it cannot "
        f"be set in a stage block (every cell would train the same {key} under its own name); set "
        f"it in {IDENTITY_KEYS[key]} and remove it here."
    )
    assert home in str(err.value)


def test_study_variants_cannot_set_a_key_that_names_the_cell():
    study = {"dataset": "digits", "methods": ["IR"], "seeds": [0], "variants": {"a": {"seed": 3}}}
    values = {
        "datasets": ["digits"],
        "methods": ["IR"],
        "seeds": [0],
        **DIGITS_PRETRAIN,
        "studies": {"negatives_k": study},
    }
    with pytest.raises(ValueError, match="Grid g, study negatives_k, variant a: 'seed' names the cell"):
        grid.from_dict("g", values)


SLURM_HOME = (
    "is a SLURM resource, which every launch reads from the site file, never from a grid, so it would be ignored; set "
    "it under slurm: in your site file (profiles/slurm/site.yaml, or ring run --site; its keys are "
    "ring/resources/cluster.yaml's) and remove it here."
)
NOT_A_GRIDS = (
    "is no resource a grid sets (a grid's resources: holds threads, a local job's CPU threads); remove it (SLURM "
    "resources go under slurm: in your site file, keys as in ring/resources/cluster.yaml)."
)


@pytest.mark.parametrize(
    "block, refusal",
    [
        ({"pretrain": {"threads": 1, "nodes": 2}}, f"pretrain: nodes {SLURM_HOME}"),
        ({"pretrain": {"nodes": 0}}, f"pretrain: nodes {SLURM_HOME}"),
        ({"detection": {"gpus_per_node": 8}}, f"detection: gpus_per_node {SLURM_HOME}"),
        ({"lincls": {"gpus": "two"}}, f"lincls: gpus {NOT_A_GRIDS}"),
    ],
)
def test_a_grids_resources_hold_threads_and_a_slurm_resource_there_is_refused_with_its_home(tmp_path, block, refusal):
    # Issue 52 item 3: before, these were accepted and every launch used the site's 1 node x 1 GPU without a word.
    from ring.plan import gate

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"datasets": ["digits"], "methods": ["IR"], "seeds": [0], "resources": block}))
    with pytest.raises(ValueError) as err:
        gate.open_grid(path, tmp_path, tmp_path / "results")
    assert str(err.value) == f"Grid {path}: resources: {refusal}"
    assert not (tmp_path / "results").exists()
