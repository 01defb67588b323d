"""What an entry of the table registry is (ring.reports.tables.entry) and the arguments entries share."""

import argparse

import pytest

from ring.reports.tables import entry, registry


def test_every_registered_table_is_an_entry_with_its_name_help_arguments_and_builder():
    for table in registry.ENTRIES:
        assert isinstance(table.name, str) and table.name.isidentifier(), table
        assert isinstance(table.help, str) and "\n" not in table.help and table.help, table.name
        assert callable(table.arguments) and callable(table.run), table.name
        sub = argparse.ArgumentParser(prog=table.name)
        table.arguments(sub)
        assert "--out" in sub._option_string_actions, f"{table.name} writes no files under --out"


def _parser(*adders):
    parser = argparse.ArgumentParser(prog="t")
    for add in adders:
        add(parser)
    return parser


def test_shared_arguments_parse_a_prefix_and_lists_in_order():
    parser = _parser(entry.out_argument, entry.metrics_argument, entry.methods_argument)
    args = parser.parse_args(["--out", "t/x", "--metrics", "b.json", "a.json", "--methods", "IRing", "IR"])
    assert (args.out, args.metrics, args.methods) == ("t/x", ["b.json", "a.json"], ["IRing", "IR"])


@pytest.mark.parametrize(
    "argv, missing",
    [
        (["--metrics", "a.json", "--methods", "IR"], "--out"),
        (["--out", "x", "--methods", "IR"], "--metrics"),
        (["--out", "x", "--metrics", "a.json"], "--methods"),
        (["--out", "x", "--metrics", "--methods", "IR"], "--metrics"),  # an empty list is refused too
    ],
)
def test_each_shared_argument_is_required(capsys, argv, missing):
    parser = _parser(entry.out_argument, entry.metrics_argument, entry.methods_argument)
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(argv)
    assert exit_.value.code == 2 and missing in capsys.readouterr().err


def test_the_help_says_which_files_and_which_cells():
    help_ = " ".join(_parser(entry.out_argument, entry.metrics_argument).format_help().split())
    assert "path prefix; .csv, .md and .tex are written" in help_ and "metrics.json files of the cells" in help_
    help_ = " ".join(
        _parser(lambda p: entry.out_argument(p, ".csv and .md"), lambda p: entry.metrics_argument(p, "detection cells"))
        .format_help()
        .split()
    )
    assert "path prefix; .csv and .md are written" in help_ and "metrics.json files of the detection cells" in help_
    assert "row order" in " ".join(_parser(entry.methods_argument).format_help().split())
