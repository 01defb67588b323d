"""The Python code's house style: ruff formats and lints it (pyproject.toml's [tool.ruff]), and an import inside a
function says why it is not at the top of its module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT

CODE = ["ring", "tests", "benchmarks"]


@pytest.mark.parametrize("command", [["format", "--check"], ["check"]], ids=["format", "lint"])
def test_ruff_is_clean(command):
    result = subprocess.run([sys.executable, "-m", "ruff", *command, *CODE], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def _late_imports(path: Path):
    """The project's own imports made inside a function, with the comment (same line or the line above) that
    says why: a cycle, torch kept off the login node, an optional package."""
    lines = path.read_text().splitlines()
    tree = ast.parse("\n".join(lines))
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").split(".")[0] == "ring"
                or (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "ring" for a in node.names))
            ):
                here, above = lines[node.lineno - 1], lines[node.lineno - 2] if node.lineno > 1 else ""
                if "#" not in here and not above.strip().startswith("#"):
                    yield f"{path.relative_to(ROOT)}:{node.lineno}: {here.strip()}"


def test_every_function_level_import_of_ring_says_why():
    bare = [line for path in sorted((ROOT / "ring").rglob("*.py")) for line in _late_imports(path)]
    assert not bare, "function-level imports without a comment saying why:\n" + "\n".join(bare)
