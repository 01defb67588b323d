"""One grid file, one results folder: two grid files of the same name in different folders would share
``results/<name>/`` and rerun each other's cells; the plan refuses the second (ring.plan.ownership)."""

import json
import re

import yaml

from ring.plan import checks, ownership
from ring.plan import grid as grid_plan
from tests.workflow.runs import snakemake

MINI = {
    "datasets": ["digits"],
    "methods": ["IR"],
    "seeds": [0],
    "pretrain": {
        "all": {
            "epochs": 1,
            "batch_size": 64,
            "bank_negatives": 256,
            "lr_milestones": [],
            "resize": 32,
            "crop": 32,
            "knn_every": 0,
            "num_workers": 0,
        }
    },
    "lincls": {
        "all": {"epochs": 1, "batch_size": 64, "resize": 32, "crop": 32, "augmentation": "none", "num_workers": 0}
    },
}
CONFIG = "results/mini/pretrain/digits/IR/seed0/config.yaml"  # a job that writes into results/mini, in a second


def write(path, values: dict):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(values))
    return path


def test_a_grid_file_of_the_same_name_elsewhere_is_refused_unless_identical(workdir, tmp_path):  # noqa: F811
    mine = write(tmp_path / "mine" / "mini.yaml", MINI)
    other = tmp_path / "other" / "mini.yaml"
    snakemake(workdir, "-n", "--cores", "1", CONFIG, "--config", f"grid={mine}")
    assert not (workdir / "results").exists()  # a dry run claims nothing
    snakemake(workdir, "--cores", "1", CONFIG, "--config", f"grid={mine}")
    marker = json.loads((workdir / "results/mini" / ownership.MARKER).read_text())
    assert marker["path"] == str(mine.resolve())

    write(other, {**MINI, "seeds": [1]})  # before: planned, and its run reran mine's cells as edits
    refused = snakemake(workdir, "-n", "table1", "--config", f"grid={other}", check=False)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert re.search(
        rf"^ring: The results folder results/mini holds the cells of grid file {re.escape(str(mine))}, "
        rf"not of {re.escape(str(other))}, a different file of the same name whose run would share and "
        rf"rerun them; rename mini\.yaml \(its name names the results folder\), or delete "
        rf"results/mini/{ownership.MARKER} if .* was moved to .*\.$",
        refused.stderr,
        re.M,
    ), refused.stderr

    write(other, MINI)  # the same content: the same cells, nothing to lose
    snakemake(workdir, "-n", "table1", "--config", f"grid={other}")
    write(mine, {**MINI, "seeds": [0, 1]})  # the file that made the folder may change: an edit, as ever
    snakemake(workdir, "-n", "table1", "--config", f"grid={mine}")


def test_a_folder_made_before_the_marker_is_attributed_by_its_provenance(tmp_path):
    results = tmp_path / "results"
    theirs = write(tmp_path / "theirs" / "mini.yaml", {**MINI, "seeds": [1]})
    record = results / "mini/pretrain/digits/IR/seed0/provenance.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"grid_file": {"path": str(theirs), "sha256": "0" * 64}, "segments": []}))
    grid = grid_plan.load(write(tmp_path / "mine" / "mini.yaml", MINI))
    assert checks.environment(grid, results).startswith(
        f"The results folder {results / 'mini'} holds the cells of grid file {theirs}, not of "
    )
    ownership.claim(theirs, results / "mini")  # its own next run records it
    assert ownership.recorded_owner(results / "mini")["path"] == str(theirs)
    assert checks.environment(grid, results).startswith(f"The results folder {results / 'mini'} holds the cells of")


def test_a_moved_and_edited_grid_file_takes_its_folder_back_as_the_refusal_advises(tmp_path):
    """Issue 40: the advice (delete grid-file.json if the file was moved) brought the same refusal back, as the jobs'
    provenance records still named the old path."""
    results = tmp_path / "results"
    old = write(tmp_path / "old" / "mini.yaml", MINI)
    record = results / "mini/pretrain/digits/IR/seed0/provenance.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"grid_file": {"path": str(old), "sha256": "0" * 64}, "segments": []}))
    ownership.claim(old, results / "mini")
    new = write(tmp_path / "new" / "mini.yaml", {**MINI, "seeds": [0, 1]})  # moved, then edited
    old.unlink()
    problem = ownership.conflict(new, results / "mini")
    assert problem.endswith(f"or delete {results / 'mini' / ownership.MARKER} if {old} was moved to {new}.")
    (results / "mini" / ownership.MARKER).unlink()  # as advised
    assert ownership.conflict(new, results / "mini") is None
