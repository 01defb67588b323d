"""The registry of tables (ring.reports.tables.registry): every table the workflow runs is an entry, its one parser
dispatches to the entry itself, and a refusal is one ``ring: ...`` sentence."""

import ast
import json
import re
from dataclasses import dataclass

import pytest

from ring.core.files import FileError
from ring.core.metrics import NonFinite
from ring.plan.rules import TableRule
from ring.reports.tables import cells, cost, registry
from tests.reports.tables.fixtures import _metrics

# How a workflow rule runs a table: `{params.python:q} -m ring.reports.tables NAME ...`.
TABLE_CALL = re.compile(r"-m ring\.reports\.tables (\S+)")


def _workflow_tables(root) -> set[str]:
    """Every table name a workflow rule passes to ``python -m ring.reports.tables``: tables.smk's TABLE_RULES makes
    rule make_<name> for each of its keys (its GRID_TABLES spread among them), and each runs
    :meth:`ring.plan.rules.TableRule.command` of its name."""
    text = (root / "workflow" / "rules" / "tables.smk").read_text()
    block = text[text.index("TABLE_RULES = {") : text.index("\n}\n", text.index("TABLE_RULES = {"))]
    names = set(re.findall(r'^    "(\w+)": ', block, re.MULTILINE))
    if "for table in GRID_TABLES}" in block:
        (grid_tables,) = re.findall(r"^GRID_TABLES = (\[.*?\])$", text, re.MULTILINE)
        names.update(ast.literal_eval(grid_tables))
    for name in names:
        command = TableRule(lambda grid: [], "--metrics {input:q}").command(name)
        assert TABLE_CALL.findall(command) == [name], command
    return names


def test_every_table_the_workflow_runs_is_registered_and_every_entry_is_run(root):
    called = _workflow_tables(root)
    # The rule files the brief names: Table 1, 2, the LA variants and GPU-hours in tables.smk; studies.smk runs
    # ring.reports.figures (its tables are that module's), never a name this registry lacks.
    assert {"table1", "table2", "table_la_variants", "gpu_hours"} <= called
    assert not TABLE_CALL.search((root / "workflow" / "rules" / "studies.smk").read_text())
    assert called == set(registry.REGISTRY), f"run but unregistered: {called - set(registry.REGISTRY)}"
    assert [t.name for t in registry.ENTRIES] == list(registry.REGISTRY)  # unique names, in the paper's order


def _subparsers():
    (action,) = [a for a in registry.parser()._actions if a.dest == "table"]
    return action.choices


def test_each_name_parses_to_its_own_entry_and_its_help_renders(capsys):
    """Dispatch is the entry the parser stored, never a comparison of names; each help (with its %) prints."""
    subs = _subparsers()
    assert list(subs) == list(registry.REGISTRY)
    for name, sub in subs.items():
        assert sub.get_default("entry") is registry.REGISTRY[name]
        with pytest.raises(SystemExit) as exit_:
            registry.parser().parse_args([name, "--help"])
        assert exit_.value.code == 0
        assert " ".join(registry.REGISTRY[name].help.split()) in " ".join(capsys.readouterr().out.split())


def test_the_parsers_help_lists_every_table_with_its_line():
    """argparse %-formats a subcommand's help: a table's "top-1 (%)" must print as written."""
    listing = " ".join(registry.parser().format_help().split())
    for table in registry.ENTRIES:
        assert f"{table.name} {' '.join(table.help.split())}" in listing


def test_nothing_in_the_registry_branches_on_a_name():
    """No ``==``/``in``/``match`` against a string literal in the registry or its entry protocol: behaviour lives in
    the entries."""
    import inspect

    from ring.reports.tables import entry

    for module in (registry, entry):
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            assert not isinstance(node, ast.Match), module.__name__
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                assert not any(isinstance(o, ast.Constant) and isinstance(o.value, str) for o in operands), (
                    f"{module.__name__}:{node.lineno} compares with a string"
                )


@dataclass
class _Refusing:
    """An entry whose run raises ``error``: what main makes of it."""

    error: Exception
    name: str = "refusing"
    help: str = "raises"

    def arguments(self, parser):
        pass

    def run(self, args):
        raise self.error


@pytest.mark.parametrize(
    "error",
    [
        cells.MetricsError("m.json lacks top1; rerun its cell."),
        NonFinite("m.json holds a non-finite metric (top1); rerun it with a lower lr."),
        FileError("cells/x/encoder.pt is gone; rerun its pretraining."),
        cost.OutlookError("The outlook o.json is not JSON; pipe python -m ring.cluster.outlook into it."),
    ],
)
def test_each_refusal_is_one_ring_sentence_and_exit_1(monkeypatch, capsys, error):
    assert isinstance(error, registry.REFUSALS)
    monkeypatch.setattr(registry, "ENTRIES", (_Refusing(error),))
    assert registry.main(["refusing"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"ring: {error}\n"


def test_anything_else_is_a_bug_and_keeps_its_traceback(monkeypatch):
    monkeypatch.setattr(registry, "ENTRIES", (_Refusing(KeyError("x")),))
    with pytest.raises(KeyError):
        registry.main(["refusing"])


def test_a_table_prints_its_markdown_and_a_non_finite_metric_is_refused_leaving_it(tmp_path, capsys):
    (good,) = _metrics(tmp_path, [("cifar10", "IR", 0, 80.0)])
    out = tmp_path / "tables" / "table1"
    args = ["table1", "--out", str(out), "--methods", "IR", "--datasets", "cifar10", "--metrics"]
    assert registry.main([*args, str(good)]) == 0
    printed = capsys.readouterr().out
    assert "| IR " in printed and "80.0" in printed
    before = {p: p.read_bytes() for p in out.parent.iterdir()}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"dataset": "cifar10", "method": "IR", "seed": 1, "top1": float("inf")}))
    assert registry.main([*args, str(good), str(bad)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("ring: ") and str(bad) in line and "non-finite" in line
    assert {p: p.read_bytes() for p in out.parent.iterdir()} == before


@pytest.mark.parametrize(
    ("table", "option", "typo", "what"),
    [
        ("table1", "--datasets", "digitz", "dataset"),
        ("table1", "--methods", "IRR", "registered method"),
        ("table4", "--methods", "MoCoo", "registered method"),
    ],
)
def test_an_unknown_method_or_dataset_is_refused_with_the_choices_writing_nothing(
    tmp_path, capsys, table, option, typo, what
):
    # Issue 52 item 3: before, `ring table table1 --datasets digitz` (or --methods IRR) ended in a KeyError traceback.
    from ring.core.methods import METHODS
    from ring.reports.tables.published import DISPLAY

    (good,) = _metrics(tmp_path, [("digits", "IR", 0, 80.0)])
    out = tmp_path / "tables" / table
    given = {"--methods": ["IR"], "--datasets": ["digits"] if table == "table1" else []}
    given[option] = [*given[option], typo]
    args = [table, "--out", str(out), *(w for o, v in given.items() if v for w in (o, *v)), "--metrics", str(good)]
    assert registry.main(args) == 1
    choices = ", ".join(METHODS if option == "--methods" else DISPLAY)
    assert capsys.readouterr().err == f"ring: {option} {typo}: no {what} of that name; choose among {choices}.\n"
    assert not out.parent.exists()
