"""ring.core.plugin_child, the process ring.core.plugins starts: one JSON line per plug-in it imported, written as
soon as each import returns, so that a plug-in that ends the process leaves the verdicts of those before it."""

import json
import subprocess
import sys

from ring.core import plugins
from tests.core.test_plugins import FINE, install


def test_each_verdict_is_written_before_the_next_import_and_an_exit_ends_the_list(tmp_path, monkeypatch):
    modules = {
        "raiser": "raise ValueError('needs a newer ring')\n",
        "fine": FINE,
        "quitter": "raise SystemExit(2)\n",
        "ender": "import os\nos._exit(3)\n",
        "never": FINE.replace("Fine", "Never"),
    }
    eps = install(tmp_path, monkeypatch, modules)
    report = tmp_path / "report.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "ring.core.plugin_child", str(report), *map(plugins.key, eps)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr  # the fourth plug-in's os._exit, after three verdicts were kept
    verdicts = [json.loads(line) for line in report.read_text().splitlines()]
    assert verdicts == [
        {"entry_point": plugins.key(eps[0]), "failure": "needs a newer ring"},
        {"entry_point": plugins.key(eps[1]), "failure": None},
        {"entry_point": plugins.key(eps[2]), "failure": "it called sys.exit(2) while being imported"},
    ]
