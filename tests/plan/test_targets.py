"""The targets of a workflow run (ring.plan.targets): a word that is no rule, and a path in a cell folder the grid
does not name, are refused in one sentence before any plan."""

from pathlib import Path

from ring.plan import grid, targets

GRID = grid.from_dict(
    "tiny",
    {"datasets": ["digits"], "methods": ["IR", "IRing"], "seeds": [0, 1], "pretrain": {"all": {"bank_negatives": 64}}},
    source="grids/tiny.yaml",
)
RULES = {"all_tables": False, "table1": False, "make_table1": False, "pretrain": True, "lincls": True}


def problem(*asked: str) -> str | None:
    return targets.problem(list(asked), RULES, GRID, Path("results"), Path("/work"))


def test_a_rule_or_a_file_of_a_named_cell_passes():
    assert problem() is None
    assert problem("table1", "all_tables", "make_table1") is None
    assert problem("results/tiny/pretrain/digits/IRing/seed1/encoder.pt") is None
    assert problem("/work/results/tiny/lincls/digits/IR/seed0/metrics.json") is None
    assert problem("results/tiny/tables/table1.md", "results/other/pretrain/digits/IR/seed9/encoder.pt") is None


def test_a_misspelt_rule_is_refused_with_the_targets():
    # Issue 52 item 3: Snakemake's MissingRuleException, without the list of targets.
    assert problem("table1", "tabel1") == (
        "'tabel1' is no target of the workflow; choose one of all_tables, table1 (or a file under results/tiny/)."
    )


def test_a_file_of_a_cell_the_grid_does_not_name_is_refused():
    # Issue 52 item 3: `.../seed9/encoder.pt` planned a cell the grid does not name (the wildcards match any seed).
    for asked, cell in [
        ("results/tiny/pretrain/digits/IR/seed9/encoder.pt", "pretrain/digits/IR/seed9"),
        ("/work/results/tiny/lincls/digitz/IR/seed0/metrics.json", "lincls/digitz/IR/seed0"),
    ]:
        assert problem(asked) == (
            f"{asked} lies in {cell}, a cell grid tiny does not name; fix the path (the grid's datasets digits, "
            "methods IR, IRing, seeds 0, 1) or add the cell to grids/tiny.yaml."
        )


def test_the_targets_are_read_from_snakemakes_command_line_only():
    python_m = "/venv/lib/python3.11/site-packages/snakemake/__main__.py"
    argv = ["-n", "table1", "results/x/y.csv", "--config", "grid=smoke", "-j", "2"]
    assert targets.requested([python_m, *argv]) == ["table1", "results/x/y.csv"]
    assert targets.requested(["/venv/bin/snakemake", "--profile", "profiles/local", "all_tables"]) == ["all_tables"]
    assert targets.requested(["/venv/bin/pytest", "tests/plan/test_targets.py"]) == []
