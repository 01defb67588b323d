"""The method plug-ins' imports tried first in a child process, so that one that ends its process cannot end ours.

A plug-in (an entry point of :data:`ring.core.methods.ENTRY_POINT_GROUP`) runs its module's code when it is imported.
An exception there is caught where the registry loads it; a ``KeyboardInterrupt`` raised by the module, an
``os._exit``, a crash of the interpreter or an import that never returns cannot be told from the user's Ctrl-C or
cannot be caught at all: every command (the plan, ``ring status``, each stage) would end with a long traceback, or
exit without a word.  So the registry first asks a child process (:func:`probe`, :mod:`ring.core.plugin_child`): it
imports each entry point in turn and reports on each as one JSON line in a file the parent names (never a pickle;
the plug-in's own prints go to the child's stdout, which is discarded); a child that dies leaves the entry point it
was importing without a verdict, that entry point is broken with the way it ended, and a fresh child goes on with
the rest.  Only the entry points the child imported whole are then loaded here.  Costs one interpreter start per
process that reads the registry, and only where a plug-in is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from importlib.metadata import EntryPoint
from pathlib import Path

TIMEOUT_S = 120  # an import that takes longer is broken (a plug-in that waits for input, or for a device)
CHILD = "ring.core.plugin_child"  # the child's module (it imports the registry, which imports this one)


def key(ep: EntryPoint) -> str:
    """An entry point as the child finds it again: its name and its value."""
    return f"{ep.name}={ep.value}"


def probe(eps: list[EntryPoint], timeout_s: float = TIMEOUT_S) -> dict[str, str | None]:
    """Entry point name -> None when a child process imported it whole, else the clause saying how it failed."""
    verdicts: dict[str, str | None] = {}
    todo = [key(ep) for ep in eps]
    names = {key(ep): ep.name for ep in eps}
    # The child sees this process's path (a test's, a plug-in folder added at run time), not only $PYTHONPATH.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    while todo:
        with tempfile.TemporaryDirectory(prefix="ring-plugins-") as tmp:
            report = Path(tmp) / "verdicts.jsonl"
            command = [sys.executable, "-m", CHILD, str(report), *todo]
            try:
                ended = subprocess.run(command, env=env, capture_output=True, timeout=timeout_s).returncode
            except subprocess.TimeoutExpired:
                ended = None
            lines = report.read_text().splitlines() if report.is_file() else []
        done = dict(_verdict(line) for line in lines if line.strip())
        verdicts.update({names[k]: done[k] for k in todo if k in done})
        todo = [k for k in todo if k not in done]
        if todo:  # the child ended importing the first of the rest: that one is broken, the others are tried again
            verdicts[names[todo[0]]] = _ending(ended, timeout_s)
            todo = todo[1:]
    return verdicts


def _verdict(line: str) -> tuple[str, str | None]:
    record = json.loads(line)
    return record["entry_point"], record["failure"]


def _ending(returncode: int | None, timeout_s: float) -> str:
    if returncode is None:
        return f"its import had not returned after {timeout_s:g} s"
    if returncode < 0:
        return f"it ended the process with signal {-returncode} while being imported"
    return f"it ended the process (exit status {returncode}) while being imported"
