"""Plan-time checks (ring.plan.checks) of every stage through the real interface: a grid file given by path to
`snakemake -n`.

Each broken grid must stop the plan with one sentence naming the grid file, stage, cell, key, value
and fix, a non-zero exit, no job planned or run and no results/ folder created.
"""

import pytest
import yaml

from ring.core.config import save
from ring.core.yaml_reading import read_yaml
from ring.plan import checks
from tests import ROOT
from tests.helpers import pretrain_config, run_module
from tests.plan.checks import BASE, plan, refusals, with_value
from tests.workflow.runs import snakemake

CELL = "stage pretrain, cell digits/IRing/seed0"
# (grid key path, value, the sentence's expected text after "Grid <file>, ").
CASES = [
    (
        "pretrain/by_method/IRing",
        {"ring_w_l": [50.0, 40.0]},
        f"{CELL}: ring_w_l=[50.0, 40.0] must satisfy 0 <= start <= final < 100",
    ),
    ("pretrain/by_method/IRing", {"ring_w_l": [-5.0, 90.0]}, f"{CELL}: ring_w_l=[-5.0, 90.0] must satisfy"),
    (
        "pretrain/by_method/IRing",
        {"ring_inner": None, "ring_w_u": 120.0},
        f"{CELL}: ring_w_u=120.0 must lie in (0, 100]; choose a percentile, 100 for a ball.",
    ),
    (
        "pretrain/by_method/IRing",
        {"ring_inner": None, "ring_w_u": 80.0},
        f"{CELL}: ring_w_l=[0.0, 90.0] ends at w_l=90.0 >= w_u=80.0 (ring_w_u), a window that selects nothing",
    ),
    ("pretrain/by_method/IRing", {"ring_inner": 1.5}, f"{CELL}: ring_inner=1.5 must lie in [0.0, 1.0)"),
    (
        "pretrain/by_method/IRing",
        {"ring_w_u": 95.0},
        f"{CELL}: ring_w_u=95.0 and ring_inner=0.1 must have exactly one set",
    ),
    (
        "pretrain/by_method/IRing",
        {"ring_anneal": "cosine"},
        f"{CELL}: ring_anneal='cosine' is not one of linear, step, exponential, adaptive_val, adaptive_loss, none",
    ),
    # A key under all: reaches the methods that read it (IR has no Ring window): the first Ring cell names the typo.
    (
        "pretrain/all/ring_anneal",
        "linaer",
        "stage pretrain, cell digits/IRing/seed0: ring_anneal='linaer' is not one of",
    ),
    (
        "pretrain/by_method/IR",
        {"ring_w_l": [0.0, 50.0]},
        "stage pretrain, block by_method IR: ring_w_l=[0.0, 50.0] is a Ring setting but IR has no Ring window",
    ),
    # A key MoCo never reads (its negatives are its queue), set for MoCo alone (issue 32 item 7).
    (
        "pretrain/by_method/MoCo",
        {"negatives_count": 8},
        "stage pretrain, block by_method MoCo: negatives_count=8 is a "
        "setting MoCo never reads (only IR, IRing, CMC, CMCRing, LA, LAOwnPositive, IRingNoAnneal, IRingBall, IRCave, "
        "CMCCave, IRingCi, CMCRingCi do), so it would change nothing it trains; remove it here (under all: or "
        "by_dataset "
        "it applies only to the methods that read it).",
    ),
    (
        "pretrain/all/bank_negatives",
        5000,
        "stage pretrain, cell digits/IR/seed0: bank_negatives=5000 is larger than the "
        "memory bank (1347 digits training images); set it to at most 1347.",
    ),
    (
        "pretrain/all/queue_size",
        32,
        "stage pretrain, cell digits/MoCoRing/seed0: queue_size=32 is smaller than "
        "batch_size=64 (each step enqueues a whole batch); raise queue_size to at least 64.",
    ),
    (
        "pretrain/all/queue_size",
        4096,
        "stage pretrain, cell digits/MoCoRing/seed0: queue_size=4096 is larger than the "
        "1347 digits training images (the queue would hold several keys of one image, a query's own among its "
        "negatives); "
        "set it to at most 1347.",
    ),
    ("pretrain/all/seed", 3, "stage pretrain, block all: 'seed' names the cell, so it cannot be set in a stage block"),
    ("pretrain/all/lr", "3e-2x", "stage pretrain, cell digits/IR/seed0: lr='3e-2x' must be a finite number above 0"),
    ("pretrain/all/epochs", 0, "stage pretrain, cell digits/IR/seed0: epochs=0 must be an integer of at least 1"),
    ("lincls/all/epochs", 0, "stage lincls, cell digits/IR/seed0: epochs=0 must be an integer of at least 1"),
    ("transfer/all/epochs", 0, "stage transfer, cell shapes/IR/seed0: epochs=0 must be an integer of at least 1"),
    ("toy_cnce/negatives", 3000, "block toy_cnce, seed 0: negatives=3000 exceeds the bank of n_points=2000; lower it."),
    ("pretrain/all/lr", -0.1, "stage pretrain, cell digits/IR/seed0: lr=-0.1 must be a finite number above 0"),
    ("lincls/all/lr", 0, "stage lincls, cell digits/IR/seed0: lr=0 must be a finite number above 0"),
    (
        "pretrain/all/keep_checkpoint",
        "all",
        "stage pretrain, cell digits/IR/seed0: keep_checkpoint='all' is not one of last, none",
    ),
    (
        "lincls/all/keep_checkpoint",
        "final",
        "stage lincls, cell digits/IR/seed0: keep_checkpoint='final' is not one of last, none",
    ),
    (
        "pretrain/all/batch_size",
        2048,
        "stage pretrain, cell digits/IR/seed0: batch_size=2048 exceeds the 1347 digits "
        "training images; set batch_size to at most 1347.",
    ),
    ("lincls/all/batch_size", 2048, "stage lincls, cell digits/IR/seed0: batch_size=2048 exceeds the 1347 labelled"),
    ("transfer/all/batch_size", 1024, "stage transfer, cell shapes/IR/seed0: batch_size=1024 exceeds the 960 shapes"),
    ("pretrain/all/crop", 8, f"stage pretrain, cell digits/IR/seed0: crop=8 is below {checks.MIN_INPUT_PX} px"),
    ("lincls/all/resize", 1, f"stage lincls, cell digits/IR/seed0: resize=1 is below {checks.MIN_INPUT_PX} px"),
    ("pretrain/all/crop", 48, "stage pretrain, cell digits/IR/seed0: crop=48 exceeds resize=32"),
    (
        "studies/hard_negatives/variants/source/snapshot_epochs",
        [0, 5],
        "stage studies (hard_negatives), cell digits/IR/source/seed0: snapshot_epochs=[0, 5] must be epochs in "
        "0..epochs=2",
    ),
    # A study's block reaches the study's methods that read each key: IRing's cell names the typo, not IR's.
    (
        "studies/hard_negatives/pretrain/ring_anneal",
        "cosine",
        "stage studies (hard_negatives), cell digits/IRing/t10/seed0: ring_anneal='cosine' is not one of",
    ),
    (
        "detection/all/overrides",
        {"SOLVER.MAX_ITER": 0},
        "stage detection, cell digits/IR/voc_det/seed0: overrides.SOLVER.MAX_ITER=0 must be an integer of at least 1",
    ),
    (
        "detection/all/overrides",
        {"solver.max_iter": 5},
        "stage detection, cell digits/IR/voc_det/seed0: overrides.solver.max_iter=5 is not a Detectron2 config key",
    ),
    (
        "detection/all/num_gpus",
        -1,
        "stage detection, cell digits/IR/voc_det/seed0: num_gpus=-1 must be an integer of at least 0",
    ),
]


def test_a_valid_grid_file_anywhere_plans_every_stage(workdir):
    grid, result = plan(workdir, BASE)
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout + result.stderr
    for rule in ("pretrain", "lincls", "transfer", "toy_cnce", "detection", "study_pretrain"):
        assert f"\n{rule} " in out, rule
    assert not (workdir / "results").exists()


@pytest.mark.parametrize("path, value, sentence", CASES, ids=[f"{p}={v}" for p, v, _ in CASES])
def test_each_bad_value_stops_the_plan_in_one_sentence(workdir, path, value, sentence):
    grid, result = plan(workdir, with_value(BASE, path, value))
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("ring: ")]
    assert len(lines) == 1 and lines[0].startswith(f"ring: Grid {grid}, {sentence}"), result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "Job stats" not in result.stdout + result.stderr
    assert not (workdir / "results").exists()


def test_a_repeated_key_in_a_grid_file_stops_the_plan_naming_both_lines(workdir):
    """YAML keeps the last of a repeated key: an appended `pretrain:` block would drop every setting of the first."""
    grid = workdir.parent / "mygrid.yaml"
    text = yaml.safe_dump(BASE, sort_keys=False)
    first = text.splitlines().index("pretrain:") + 1
    last = len(text.splitlines()) + 1
    grid.write_text(text + "pretrain: {all: {epochs: 7}}\n")
    result = snakemake(workdir, "-n", "all_tables", "--config", f"grid={grid}", check=False)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert refusals(result) == [
        f"ring: Grid file {grid} gives the key 'pretrain' twice, at lines {first} and {last} "
        "(YAML would keep only the last); merge the two into one."
    ]
    # Inside one block too (line 3 and line 4 of the block below).
    grid.write_text("datasets: [digits]\nlincls:\n  all: {epochs: 2}\n  all: {epochs: 3}\nmethods: [IR]\nseeds: [0]\n")
    result = snakemake(workdir, "-n", "all_tables", "--config", f"grid={grid}", check=False)
    assert refusals(result) == [
        f"ring: Grid file {grid} gives the key 'all' twice, at lines 3 and 4 "
        "(YAML would keep only the last); merge the two into one."
    ]
    assert not (workdir / "results").exists()


def test_every_yaml_file_is_read_through_the_one_loader():
    """ring.core.yaml_reading.read_yaml (its Loader refuses repeated keys) is the only YAML reader of ring/ and the
    workflow."""
    import re

    root = ROOT
    sources = [*(root / "ring").rglob("*.py"), *(root / "workflow").rglob("*.smk"), root / "Snakefile"]
    readers = [
        f"{path.relative_to(root)}:{n}"
        for path in sources
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\byaml\.(safe_load|load|full_load|unsafe_load|load_all|safe_load_all)\(", line)
    ]
    assert len(readers) == 1 and readers[0].startswith("ring/core/yaml_reading.py:"), readers


def test_a_repeated_key_in_the_slurm_profiles_site_yaml_stops_theplan(workdir):
    """Snakemake reads the profile's config files itself (last key wins); the workflow reads them again to refuse."""
    site = workdir / "profiles" / "slurm" / "site.yaml"
    lines = len(site.read_text().splitlines())
    site.write_text(site.read_text() + "launcher: slurm\nlauncher: local\n")
    result = snakemake(workdir, "-n", "all_tables", "--profile", "profiles/slurm", check=False)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert refusals(result) == [
        f"ring: Config file {site} gives the key 'launcher' twice, at lines {lines + 1} and "
        f"{lines + 2} (YAML would keep only the last); merge the two into one."
    ]


@pytest.mark.parametrize(
    "text, holds",
    [
        ("", "is empty (no keys, at most comments)"),
        ("# my grid, to be written\n\n# datasets: [digits]\n", "is empty (no keys, at most comments)"),
        ("- datasets: [digits]\n- methods: [IR]\n", "holds a list, not key: value lines"),
        ("digits\n", "holds a single str value, not key: value lines"),
    ],
    ids=["empty", "comments", "list", "word"],
)
def test_a_grid_file_without_keys_stops_the_plan_in_one_sentence(workdir, text, holds):
    grid = workdir.parent / "mygrid.yaml"
    grid.write_text(text)
    result = snakemake(workdir, "-n", "all_tables", "--config", f"grid={grid}", check=False)
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    found = refusals(result)
    assert len(found) == 1 and found[0].startswith(f"ring: Grid file {grid} {holds}"), found
    assert "ring/resources/grids/smoke.yaml is an example" in found[0]


def test_an_unquoted_on_or_off_gets_a_sentence_telling_to_quote_it(workdir):
    """`compile: on` is YAML's boolean True: the sentence says to write compile: 'on', not merely 'not one of'."""
    grid = workdir.parent / "mygrid.yaml"
    text = yaml.safe_dump(BASE, sort_keys=False).replace("    epochs: 2\n", "    epochs: 2\n    compile: on\n", 1)
    grid.write_text(text)
    result = snakemake(workdir, "-n", "all_tables", "--config", f"grid={grid}", check=False)
    assert result.returncode != 0
    assert refusals(result) == [
        f"ring: Grid {grid}, stage pretrain, cell digits/IR/seed0: compile=True is a YAML boolean: YAML reads an "
        "unquoted on/yes/true as True, and this key takes a word; write compile: 'on' (quoted)."
    ]
    grid.write_text(text.replace("compile: on", "compile: 'on'"))
    assert snakemake(workdir, "-n", "all_tables", "--config", f"grid={grid}", check=False).returncode == 0


def test_a_hand_written_stage_config_refuses_repeated_keys_booleans_and_emptiness(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("method: IR\ndataset: digits\nbank_negatives: 256\nchannels_last: off\n")
    boolean = r"channels_last=False is a YAML boolean: .*; write channels_last: 'off'"
    with pytest.raises(checks.ConfigError, match=boolean):
        checks.load_checked("pretrain", cfg)
    cfg.write_text("method: IR\ndataset: digits\nepochs: 2\nepochs: 20\n")
    with pytest.raises(ValueError, match=r"^Config file .* gives the key 'epochs' twice, at lines 3 and 4 \("):
        checks.load_checked("pretrain", cfg)
    cfg.write_text("# nothing yet\n")
    with pytest.raises(ValueError, match=r"^Config file .* is empty \(no keys, at most comments\)"):
        checks.load_checked("pretrain", cfg)
    cfg.write_text("epochs: 2\n")
    with pytest.raises(ValueError, match=r"^Config file .* does not set method and dataset, which PretrainConfig"):
        checks.load_checked("pretrain", cfg)
    # A merge key (<<:) may be overridden: YAML means it so, and it is not a repeated key.
    cfg.write_text("base: &b {epochs: 2, lr: 0.1}\nother:\n  <<: *b\n  epochs: 3\n")
    assert read_yaml(cfg) == {"base": {"epochs": 2, "lr": 0.1}, "other": {"epochs": 3, "lr": 0.1}}


def test_a_broken_sibling_grid_does_not_block_another(workdir):
    (workdir / "ring" / "resources" / "grids" / "broken.yaml").write_text("datasets: [digits\nmethods: [IR]\n")
    (workdir / "ring" / "resources" / "grids" / "wrong.yaml").write_text(
        yaml.safe_dump(with_value(BASE, "pretrain/all/epochs", 0))
    )
    assert snakemake(workdir, "-n", "all_tables", "--config", "grid=smoke", check=False).returncode == 0
    result = snakemake(workdir, "-n", "all_tables", "--config", "grid=broken", check=False)
    assert result.returncode != 0
    assert (
        f"ring: Grid file {workdir / 'ring' / 'resources' / 'grids' / 'broken.yaml'} is not valid YAML at line 2, "
        "column 8: expected ',' or ']', but got ':'; fix the syntax there."
    ) in result.stderr


def test_schema_errors_name_the_grid_file_and_key_path(workdir):
    grid, result = plan(workdir, with_value(BASE, "pretrain/by_methods", {}))
    assert result.returncode != 0
    assert (
        f"ring: Grid file {grid}: key pretrain: Additional properties are not allowed ('by_methods' was unexpected); "
        "fix it (the schema is ring/resources/schemas/grid.schema.yaml)."
    ) in result.stderr


def test_a_grid_file_named_like_a_shipped_grid_is_refused(workdir):
    other = workdir.parent / "smoke.yaml"
    other.write_text(yaml.safe_dump(BASE))
    result = snakemake(workdir, "-n", "all_tables", "--config", f"grid={other}", check=False)
    assert result.returncode != 0
    assert f"ring: config grid='{other}' would write results/smoke/, which belongs to" in result.stderr


def test_entry_points_and_launch_run_the_same_checks_on_a_hand_written_config(tmp_path):
    cfg = tmp_path / "config.yaml"
    save(pretrain_config("MoCoRing", queue_size=32), cfg)
    expected = (
        f"ring: Config {cfg} (pretrain): queue_size=32 is smaller than batch_size=64 (each step enqueues a whole "
        "batch); raise queue_size to at least 64."
    )
    cell = tmp_path / "cell"
    launched = run_module(
        "ring.cluster.launch", "pretrain", "--cell", cell, "--", "--config", cfg, "--out", cell, check=False
    )
    assert launched.returncode == 1 and launched.stderr.strip() == expected
    direct = run_module("ring.pretrain", "--config", cfg, "--out", cell, check=False)
    assert direct.returncode == 1 and direct.stderr.strip() == expected
    assert not cell.exists()
