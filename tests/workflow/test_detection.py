"""Table 4's cells under the workflow's records (workflow/rules/detection.smk): an edited cell keeps its previous run,
a damaged converted backbone is converted again.  Finished cells are laid out without training (tests/helpers.py's
``finished_detection``); Snakemake plans them, or runs only the light config rules."""

import copy

import yaml

from ring.cluster import batch
from ring.core import cell_runs, config
from ring.core.files import sha256_file
from ring.plan import grid
from tests.helpers import finished_detection
from tests.workflow.runs import DETECTION as GRID
from tests.workflow.runs import job_counts, snakemake, write_grid

CELL = "results/tiny/detection/digits/IR/voc_det/seed0"
CONFIG = ("--config", "grid=tiny")


def _finished(workdir, config_files=True):
    """The tiny grid's one Table 4 cell, finished, with every input its plan reads: the data check's marker and the
    generated datasets' folder."""
    write_grid(workdir, "tiny", GRID)
    results = workdir / "results"
    (results / "tiny" / "data").mkdir(parents=True)
    (results / "tiny" / "data" / "digits.ok").write_text("")
    (results / "tiny" / "detection" / "datasets").mkdir(parents=True)
    return finished_detection(results, grid.from_dict("tiny", GRID), "IR", "voc_det", config_files=config_files)


def test_a_flipped_byte_in_a_backbone_is_named_by_status_and_converted_again(workdir, capsys, monkeypatch):
    """Issue 52 item 5: a damaged backbone.pkl was never reported (status listed no detection cell), the plan said
    "Nothing to be done", and a forced rerun called the cell complete."""
    cell = _finished(workdir)
    backbone = cell.parents[1] / "seed0" / "backbone.pkl"
    monkeypatch.chdir(workdir)
    status = ["status", "--grid", "tiny", "--grids-dir", "ring/resources/grids"]
    assert batch.main(status) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("detection")]
    assert row.split()[1:5] == ["digits", "IR/voc_det", "seed0", "done"], row
    backbone.write_bytes(b"backbonE")  # one byte flipped, its checksum record untouched
    assert batch.main(status) == 0
    lines = capsys.readouterr().out.splitlines()
    (row,) = [line for line in lines if line.startswith("detection")]
    assert row.split()[4] == "damaged" and f"{backbone.relative_to(workdir)} differs from the SHA-256" in row, row
    assert "1 damaged" in next(line for line in lines if line.startswith("total "))
    plan = snakemake(workdir, "-n", "--profile", "profiles/local", f"{CELL}/metrics.json", *CONFIG, timeout=300)
    counts = job_counts(plan.stdout + plan.stderr)
    assert counts == {"detection_convert": 1, "detection": 1, "total": 2}, plan.stdout[-3000:]


def test_an_edit_of_a_finished_detection_cell_keeps_its_run_in_runs_and_replans_it(workdir):
    """Issue 52 item 5: an edited SOLVER.MAX_ITER deleted the cell's live metrics.json and its job then refused ("move
    the cell folder away"), keeping nothing; now the config rule keeps the run under runs/ as every stage's."""
    cell = _finished(workdir, config_files=False)
    snakemake(
        workdir, "--profile", "profiles/local", f"{CELL}/config.yaml", *CONFIG, timeout=300
    )  # the config rules run
    old = config.load(config.DetectionConfig, cell / "config.yaml")
    metrics = (cell / "metrics.json").read_text()
    edited = copy.deepcopy(GRID)
    edited["detection"]["all"]["overrides"]["SOLVER.MAX_ITER"] = 40
    (workdir / "ring" / "resources" / "grids" / "tiny.yaml").write_text(yaml.safe_dump(edited))
    result = snakemake(workdir, "--profile", "profiles/local", f"{CELL}/config.yaml", *CONFIG, timeout=300)
    kept = (
        cell
        / "runs"
        / cell_runs.run_key(config.config_hash(old), sha256_file(cell.parents[1] / "seed0" / "backbone.pkl"))
    )
    assert f"its config changed (overrides): the previous run is kept in {kept.relative_to(workdir)}" in result.stderr
    record = cell_runs.read_run_record(kept)
    assert record["config"]["overrides"]["SOLVER.MAX_ITER"] == 30 and (kept / "metrics.json").read_text() == metrics
    assert (kept / "metrics.json").stat().st_nlink == 1 and (kept / "exported" / "metrics.json").stat().st_nlink == 1
    assert (kept / "log.txt").is_file() and not list(kept.glob("model_*.pth"))  # keep_superseded: results
    assert not (cell / "metrics.json").exists() and not (cell / "last_checkpoint").exists()
    plan = snakemake(workdir, "-n", "--profile", "profiles/local", f"{CELL}/metrics.json", *CONFIG, timeout=300)
    assert job_counts(plan.stdout + plan.stderr) == {"detection": 1, "total": 1}, plan.stdout[-3000:]
