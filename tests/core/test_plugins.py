"""The plug-ins' imports tried in a child process first (ring.core.plugins): a plug-in that raises KeyboardInterrupt,
calls os._exit or hangs at import is named as broken, and the registry of the process that reads it goes on."""

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

import pytest

from ring.core import plugins
from ring.core.methods import METHODS
from tests import ROOT

FINE = "from ring.core.methods import IR, Method, register\nregister('Fine', Method(IR, ring=False, base='Fine'))\n"
HOW = {  # how a plug-in ends the process that imports it -> the clause naming it
    "os._exit": ("import os\nprint('bye')\nos._exit(3)\n", "it ended the process (exit status 3) while being imported"),
    "KeyboardInterrupt": ("raise KeyboardInterrupt\n", "it raised KeyboardInterrupt while being imported"),
    "a signal": ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "it ended the process with signal 9"),
}


def install(tmp_path, monkeypatch, modules: dict[str, str]) -> list:
    """Each module (name -> source) and an installed distribution with an entry point of the same name for each, on
    this process's path and the path of every process it starts; returns the entry points, in their order."""
    folder = tmp_path / "site"
    info = folder / "plugs-0.1.dist-info"
    info.mkdir(parents=True)
    for name, source in modules.items():
        (folder / f"{name}.py").write_text(source)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugs\nVersion: 0.1\n")
    lines = "".join(f"{name} = {name}\n" for name in modules)
    (info / "entry_points.txt").write_text(f"[{plugins.ENTRY_POINT_GROUP}]\n{lines}")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), str(ROOT)]))
    found = {ep.name: ep for ep in entry_points(group=plugins.ENTRY_POINT_GROUP)}
    return [found[name] for name in modules]


@pytest.mark.parametrize("how", HOW)
def test_a_plugin_that_ends_its_process_is_named_and_the_next_one_is_still_tried(tmp_path, monkeypatch, how):
    source, clause = HOW[how]
    eps = install(tmp_path, monkeypatch, {"ender": source, "fine": FINE})
    verdicts = plugins.probe(eps)
    assert verdicts["fine"] is None and verdicts["ender"].startswith(clause), verdicts
    assert "Fine" not in METHODS._methods  # the child's registrations stay in the child


def test_a_plugin_whose_import_never_returns_is_broken_after_the_timeout(tmp_path, monkeypatch):
    eps = install(tmp_path, monkeypatch, {"sleeper": "import time\ntime.sleep(600)\n"})
    assert plugins.probe(eps, timeout_s=3) == {"sleeper": "its import had not returned after 3 s"}


READ = textwrap.dedent("""
    import json
    from ring.core.methods import METHODS
    print(json.dumps({"methods": sorted(METHODS), "broken": METHODS.broken}))
""")


@pytest.mark.parametrize("how", ["os._exit", "KeyboardInterrupt"])
def test_every_reader_of_the_registry_goes_on_with_the_other_plugins_methods(tmp_path, monkeypatch, how):
    # Issue 52 item 3: before, a plug-in raising KeyboardInterrupt at import broke every command with a 50-line
    # traceback, and one calling os._exit(3) made every command exit 3 without a word.
    source, clause = HOW[how]
    install(tmp_path, monkeypatch, {"ender": source, "fine": FINE})
    read = subprocess.run([sys.executable, "-c", READ], capture_output=True, text=True, timeout=120)
    assert read.returncode == 0 and "Traceback" not in read.stderr, read.stderr
    found = json.loads(read.stdout)
    assert "Fine" in found["methods"] and "IR" in found["methods"]
    assert found["broken"] == {
        "ender": f"the {plugins.ENTRY_POINT_GROUP} entry point ender (ender) failed to load ({clause})"
    }
