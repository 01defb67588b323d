"""Issue 40 item 1: every command that reads a grid opens it through one gate (ring.plan.gate): schema, repeated keys
and merge keys, the results folder's owner, plug-ins; each problem one sentence, and nothing under results/ changes.
"""

import contextlib
import json
import os
import re
import sys
from pathlib import Path

import pytest

from ring.cluster import batch
from ring.core.methods import METHODS
from ring.plan import gate, ownership
from tests.project.test_plugin_guide import loaded

GOOD = """\
datasets: [digits]
methods: [IR]
seeds: [0]
tables:
  table2: {datasets: [digits], methods: [IR, IRingNoAnneal]}
pretrain:
  all: {epochs: 2, bank_negatives: 256}
"""
# Each kind of bad grid: the file's text, and what its one sentence says.
BAD = {
    # The workflow's schema refuses it; before, status counted Table 2's cells as unnamed and prune deleted them.
    "misspelt key": (GOOD.replace("tables:", "Tables:"), r"key \(top level\): Additional properties are not allowed"),
    "seed no integer": (GOOD.replace("seeds: [0]", "seeds: [a]"), r"key seeds/0: 'a' is not of type 'integer'"),
    "repeated key": (GOOD + "seeds: [1]\n", r"gives the key 'seeds' twice, at lines 3 and 8"),
    "repeated merge key": (
        GOOD
        + "lincls:\n  by_method:\n    IR: &a {epochs: 1}\n    IRingNoAnneal:\n      <<: *a\n      <<: {epochs: 3}\n",
        r"gives the merge key '<<' twice in one mapping, at lines 12 and 13",
    ),
    "another grid's folder": (GOOD, r"The results folder .* holds the cells of grid file .*other.*, not of"),
    "a plug-in that exits at import": (
        GOOD.replace("methods: [IR]", "methods: [IR, Toy]"),
        r"method 'Toy' is not registered and may be a broken plug-in's: the ring\.methods entry point toy "
        r"\(toy_method\) failed to load \(it called sys\.exit\(3\) while being imported\)",
    ),
}
COMMANDS = {
    "status": ["status"],
    "estimate": ["estimate", "--device", "cpu"],
    "prune": ["prune", "--yes"],
    "prune --dry-run": ["prune", "--dry-run"],
    "submit": ["submit", "--stage", "pretrain"],
    "cancel": ["cancel"],
}


@contextlib.contextmanager
def plugin(tmp_path: Path, monkeypatch, source: str):
    """``source`` as module toy_method behind the entry point ``toy``, loaded into this process's registry (restored
    afterwards, the torch-importing plug-ins' record included)."""
    heavy = dict(METHODS.heavy)
    try:
        with loaded(tmp_path, monkeypatch, source):
            yield
    finally:
        METHODS.heavy.clear()
        METHODS.heavy.update(heavy)


def results_folder(tmp_path: Path) -> Path:
    """results/tiny with finished files in a cell of Table 1, one of Table 2 and one the grid no longer names."""
    base = tmp_path / "results" / "tiny"
    for cell in ("pretrain/digits/IR/seed0", "pretrain/digits/IRingNoAnneal/seed0", "lincls/digits/IR/seed7"):
        (base / cell).mkdir(parents=True)
        (base / cell / "encoder.pt").write_bytes(os.urandom(1000))
        (base / cell / "config.yaml").write_text("epochs: 2\n")
    return base


def snapshot(folder: Path) -> dict:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def grid_dir(tmp_path: Path, text: str) -> Path:
    grids = tmp_path / "grids"
    grids.mkdir(exist_ok=True)
    (grids / "tiny.yaml").write_text(text)
    return grids


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", BAD)
def test_every_command_refuses_each_kind_of_bad_grid_in_one_sentence_and_changes_nothing(
    tmp_path, capsys, monkeypatch, command, kind
):
    text, sentence = BAD[kind]
    grids = grid_dir(tmp_path, text)
    base = results_folder(tmp_path)
    if kind == "another grid's folder":  # results/tiny made by another file named tiny.yaml, of other cells
        other = tmp_path / "other" / "tiny.yaml"
        other.parent.mkdir()
        other.write_text(GOOD.replace("seeds: [0]", "seeds: [0, 1]"))
        ownership.claim(other, base)
    before = snapshot(base)
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm"))  # a command that got past the gate could not reach SLURM
    args = [*COMMANDS[command], "--grid", "tiny", "--grids-dir", str(grids), "--results", str(tmp_path / "results")]
    with plugin(tmp_path, monkeypatch, "import sys\nsys.exit(3)\n") if "plug-in" in kind else contextlib.nullcontext():
        assert batch.main(args) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("ring: warning: ")]
    assert len(lines) == 1 and lines[0].startswith("ring: ") and re.search(sentence, lines[0]), err
    assert lines[0].endswith("."), lines[0]
    assert snapshot(base) == before


def test_a_retargeted_symlink_is_another_grid_file(tmp_path, capsys):
    """A grid given through a link that now names another file of other cells: refused as that file."""
    first, second = tmp_path / "a" / "tiny.yaml", tmp_path / "b" / "tiny.yaml"
    for path, seeds in ((first, "[0]"), (second, "[0, 1]")):
        path.parent.mkdir()
        path.write_text(GOOD.replace("[0]", seeds, 1))
    link = tmp_path / "tiny.yaml"
    link.symlink_to(first)
    base = results_folder(tmp_path)
    results = ["--results", str(tmp_path / "results"), "--grids-dir", str(tmp_path / "grids")]
    assert batch.main(["status", "--grid", str(link), *results]) == 0
    ownership.claim(link, base)  # as the first run did
    link.unlink()
    link.symlink_to(second)
    capsys.readouterr()
    before = snapshot(base)
    for command in (["prune", "--yes"], ["status"]):
        assert batch.main([*command, "--grid", str(link), *results]) == 1
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and f"holds the cells of grid file {first}, not of {second}" in err, err
    assert snapshot(base) == before


def test_the_good_grid_passes_the_gate_of_every_command_that_needs_no_cluster(tmp_path, capsys):
    grids = grid_dir(tmp_path, GOOD)
    results_folder(tmp_path)
    args = ["--grid", "tiny", "--grids-dir", str(grids), "--results", str(tmp_path / "results")]
    for command in (["status"], ["estimate", "--device", "cpu"], ["prune", "--dry-run"], ["cancel"]):
        assert batch.main([*command, *args]) == 0, capsys.readouterr().err
    assert "would free" in capsys.readouterr().out


def test_the_workflow_and_the_commands_open_a_grid_the_same_way(tmp_path):
    """G.select, the workflow's, is the gate plus the machine's checks: the same sentence for each bad grid."""
    for kind, (text, sentence) in BAD.items():
        if "plug-in" in kind or "folder" in kind:
            continue  # run above through the commands; the workflow's own tests run them through snakemake
        grids = grid_dir(tmp_path, text)
        with pytest.raises(ValueError, match=sentence):
            gate.open_grid("tiny", grids, tmp_path / "results")
        with pytest.raises(ValueError, match=sentence):
            gate.select("tiny", grids, gate.schema_check, results=tmp_path / "results")


def test_a_plugin_whose_declaration_imports_torch_is_warned_of_in_one_sentence(tmp_path, capsys, monkeypatch):
    """Item 4: a declaration that imports torch makes every registry reader load it; the gate says so."""
    fake = tmp_path / "fake-torch"
    fake.mkdir()
    (fake / "torch.py").write_text("")  # an import of torch, without its seconds
    monkeypatch.syspath_prepend(str(fake))
    grids = grid_dir(tmp_path, GOOD)
    real = sys.modules.pop("torch", None)
    try:
        with plugin(tmp_path, monkeypatch, "import torch  # noqa\n"):
            gate.open_grid("tiny", grids, tmp_path / "results")
    finally:  # the real torch back (or none, as before), never the empty stand-in
        sys.modules.pop("torch", None)
        if real is not None:
            sys.modules["torch"] = real
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and re.fullmatch(
        r"ring: warning: the ring\.methods entry point toy \(toy_method\) imports torch in its declaration, which "
        r"every registry reader .* then loads; move the torch code into the module its implementation names "
        r"\(docs/adding-a-method\.md, the example\)\.",
        err,
    ), err


def test_a_plugin_that_exits_at_import_blocks_only_the_grids_that_use_it(tmp_path, capsys, monkeypatch):
    grids = grid_dir(tmp_path, GOOD)
    with plugin(tmp_path, monkeypatch, "raise SystemExit('bye')\n"):
        assert gate.open_grid("tiny", grids, tmp_path / "results").methods == ["IR"]
    err = capsys.readouterr().err.strip()
    assert err == (
        "ring: warning: the ring.methods entry point toy (toy_method) failed to load (it called sys.exit('bye') while "
        "being imported); its methods are unavailable until that package is fixed or uninstalled."
    )
    assert json.dumps(err)  # one line


@pytest.mark.slow
def test_the_workflow_refuses_each_kind_of_bad_grid_in_the_same_sentence(workdir, tmp_path):
    """The workflow's plan (common.smk: ring.plan.gate.select with Snakemake's schema check) on each kind of bad grid
    the commands refuse above; the plug-in's kind runs through snakemake in tests/project/test_plugin_guide.py."""
    from tests.workflow.runs import snakemake

    for kind, (text, sentence) in BAD.items():
        if "plug-in" in kind:
            continue
        grid = tmp_path / kind.replace(" ", "-").replace("'", "") / "tiny.yaml"
        grid.parent.mkdir()
        grid.write_text(text)
        if kind == "another grid's folder":
            other = tmp_path / "other" / "tiny.yaml"
            other.parent.mkdir()
            other.write_text(GOOD.replace("seeds: [0]", "seeds: [0, 1]"))
            ownership.claim(other, workdir / "results" / "tiny")
        result = snakemake(workdir, "-n", "--cores", "1", "table1", "--config", f"grid={grid}", check=False)
        said = [line for line in result.stderr.splitlines() if line.startswith("ring: ")]
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        assert len(said) == 1 and re.search(sentence, said[0]), (kind, result.stderr)
