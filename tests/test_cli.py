"""The ``ring`` command (ring/cli.py): every subcommand is a module's own main, ``ring --help`` lists them,
the console script of pyproject.toml is it, and the docs type ``ring ...`` rather than module paths."""

import ast
import contextlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import tomllib

import ring
from ring import cli
from tests import ROOT


def test_help_lists_every_command_with_its_line_and_loads_no_torch():
    code = (
        "import sys; from ring.cli import main\n"
        "try: main(['--help'])\n"
        "except SystemExit as stop: assert stop.code == 0\n"
        "assert 'torch' not in sys.modules, 'ring --help imported torch'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    listed = re.findall(r"^  (\S+) +(.+)$", out.split("commands:\n")[1], re.MULTILINE)
    assert listed == [(command.name, command.help) for command in cli.COMMANDS]
    assert "usage: ring [-h] [--version] COMMAND ..." in out


def test_every_command_calls_a_main_that_exists():
    for command in cli.COMMANDS:
        module, function = command.target.split(":")
        source = Path(importlib.util.find_spec(module).origin).read_text()
        defined = {node.name for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}
        assert function in defined, f"ring {command.name}: {command.target} does not exist"


def test_every_subcommand_of_a_delegated_main_is_a_ring_command(capsys):
    """A main that takes its own subcommand (batch's submit/status/..., the data check, the dataset tools): each
    of its choices is reachable as ``ring CHOICE``; a subcommand added to the module and not here fails."""
    for target in sorted({c.target for c in cli.COMMANDS if c.argv}):
        with contextlib.suppress(SystemExit):
            next(c for c in cli.COMMANDS if c.target == target).function()(["--help"])
        usage = capsys.readouterr().out
        choices = re.search(r"(?<!\w )\{([\w,-]+)\}", usage).group(1).split(",")  # the positional's, not --stage's
        reachable = {c.argv[0] for c in cli.COMMANDS if c.target == target}
        assert set(choices) <= reachable, f"{target}: {set(choices) - reachable} not in ring/cli.py's COMMANDS"


def test_a_subcommand_runs_its_module_with_the_rest_of_the_line():
    out = subprocess.run(
        [sys.executable, "-m", "ring.cli", "describe", "pretrain", "ring_w_l"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.startswith("pretrain.ring_w_l: list[float] = [0.0, 90.0]")
    bad = subprocess.run(
        [sys.executable, "-m", "ring.cli", "estimat", "--grid", "paper"], cwd=ROOT, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "invalid choice: 'estimat'" in bad.stderr and "Traceback" not in bad.stderr
    options = subprocess.run(
        [sys.executable, "-m", "ring.cli", "fetch", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert options.startswith("usage: ring fetch ")


def test_version_is_the_packages_and_the_changelogs():
    out = subprocess.run(
        [sys.executable, "-m", "ring.cli", "--version"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out == f"ring-bench {ring.__version__}\n"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ring.__version__"}
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert released[0] == ring.__version__, "CHANGELOG.md's newest entry is not the package's version"


def test_the_console_script_is_ring_cli_main():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"ring": "ring.cli:main"}
    module, function = scripts["ring"].split(":")
    assert getattr(importlib.import_module(module), function) is cli.main


def test_ring_holds_the_stages_the_subpackages_and_the_command_only():
    top = sorted(p.name for p in (ROOT / "ring").glob("*.py"))
    # fetch.py: `ring fetch`, the workflow's fetch_data stage (a grid's datasets, over ring.data.download).
    # monitor.py: pretraining's kNN monitors, which read ring.data and ring.engine, so they stand above both (the
    # layer under the stages in .importlinter), not in either.
    assert top == [
        "__init__.py",
        "cli.py",
        "fetch.py",
        "lincls.py",
        "monitor.py",
        "prepare.py",
        "pretrain.py",
        "toy_cnce.py",
        "transfer.py",
    ]


def test_the_docs_type_ring_commands_that_exist():
    """README and docs/ name commands as ``ring X``: no module path a user would type (docs/library.md's one
    sentence on ``python -m`` aside), and every ``ring X`` they show is a command."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text()
        if page.name == "library.md":
            text = text.replace("`python -m ring.cluster.batch estimate --grid paper`", "")
        assert "python -m ring." not in text, f"{page.name} types a module path; use its ring command"
        for name in re.findall(r"`(?:\.venv/bin/)?ring ([a-z][\w-]*)", text) + re.findall(
            r"^(?:\S+=\S+ )?(?:\.venv/bin/)?ring ([a-z][\w-]*)", text, re.MULTILINE
        ):
            assert name in cli.REGISTRY, f"{page.name} shows `ring {name}`, which ring/cli.py lacks"
