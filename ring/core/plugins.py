"""The method plug-ins: the registry they extend, which loads them on its first read, each import tried first in a
child process, so that one that ends its process cannot end ours.

A plug-in (an entry point of :data:`ENTRY_POINT_GROUP`) runs its module's code when it is imported, and that code
calls :func:`ring.core.methods.register`.
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
from collections.abc import MutableMapping
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

TIMEOUT_S = 120  # an import that takes longer is broken (a plug-in that waits for input, or for a device)
CHILD = "ring.core.plugin_child"  # the child's module (it imports ring.core.methods, which imports this one)
# Packages add methods without editing ring/: an entry point of this group names a module that calls register,
# imported at the registry's first read in every process (so the workflow, the plan checks and every stage see the
# same methods).
#   [project.entry-points."ring.methods"]
#   mymethod = "my_package.my_method"
ENTRY_POINT_GROUP = "ring.methods"


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


def reason(err: BaseException) -> str:
    """How a plug-in's import failed, as a clause (the child, :mod:`ring.core.plugin_child`, reports it too)."""
    if isinstance(err, SystemExit):
        return f"it called sys.exit({err.code!r}) while being imported"
    if not isinstance(err, Exception):  # KeyboardInterrupt, in the child only: the module raised it, not the user
        return f"it raised {type(err).__name__} while being imported"
    text = str(err).strip().rstrip(".") or type(err).__name__
    return text if isinstance(err, (ImportError, ValueError, _Broken)) else f"{type(err).__name__}: {text}"


class _Broken(Exception):
    """A plug-in the child process (:func:`probe`) could not import: its clause, as :func:`reason` gives it."""


class Registry(MutableMapping):
    """Method name -> :class:`ring.core.methods.Method`: the paper's (:data:`ring.core.methods.METHODS`), then those
    the installed packages' entry points register.

    The entry points load on the first read, not at import: a plug-in imports ring's modules, which would find each
    other half-initialised while this one loads."""

    def __init__(self, methods: dict):
        self._methods = dict(methods)
        self._loaded = False
        # A plug-in that failed to load leaves no method behind: entry point name -> its one clause.  Which
        # methods it meant to register is unknown, so a name missing from the registry is answered with these.
        self.broken: dict[str, str] = {}
        self.plugins: dict[str, str] = {}  # method name -> the entry point that registered it
        # Entry point name -> the clause saying that its declaration imported torch (it loads, but costs seconds).
        self.heavy: dict[str, str] = {}

    def _ready(self) -> dict:
        if not self._loaded:
            self._loaded = True  # first, so that a plug-in's own reads (register's checks) do not load again
            self.load_entry_points()
        return self._methods

    def __getitem__(self, name: str):
        return self._ready()[name]

    def __setitem__(self, name: str, m) -> None:
        self._ready()[name] = m

    def __delitem__(self, name: str) -> None:
        del self._ready()[name]

    def __iter__(self):
        return iter(self._ready())

    def __len__(self) -> int:
        return len(self._ready())

    def __repr__(self) -> str:
        return f"Registry({', '.join(self)})"

    def load_entry_points(self) -> None:
        """Each entry point on its own: a broken one is recorded in :attr:`broken` and what it registered before
        failing is taken back, so grids that name none of its methods, and every stage of theirs, still run.  A
        plug-in that calls ``sys.exit`` (or raises any other non-Exception) at import is broken too, not the end of
        every command.  Each is imported in a child process first (:func:`probe`): one that raises
        ``KeyboardInterrupt``, calls ``os._exit`` or never returns there is broken and never imported here.  One whose
        declaration imports torch is recorded in :attr:`heavy` (the plan warns)."""
        eps = list(entry_points(group=ENTRY_POINT_GROUP))
        verdicts = probe(eps) if eps else {}
        for ep in eps:
            before = set(self._methods)
            torch_before = "torch" in sys.modules
            try:
                if failure := verdicts.get(ep.name):
                    raise _Broken(failure)
                ep.load()
            except KeyboardInterrupt:
                raise  # the child imported it whole: this one is the user's
            except BaseException as err:  # a broken plug-in names itself, not a traceback deep in ours (nor an exit)
                for name in set(self._methods) - before:
                    del self._methods[name]
                self.broken[ep.name] = (
                    f"the {ENTRY_POINT_GROUP} entry point {ep.name} ({ep.value}) failed to load ({reason(err)})"
                )
                continue
            self.broken.pop(ep.name, None)
            self.plugins.update(dict.fromkeys(set(self._methods) - before, ep.name))
            if not torch_before and "torch" in sys.modules:
                self.heavy[ep.name] = (
                    f"the {ENTRY_POINT_GROUP} entry point {ep.name} ({ep.value}) imports torch in its declaration, "
                    "which every registry reader (the plan, status, estimate, each waiting client) then loads; move "
                    "the torch code into the module its implementation names (docs/adding-a-method.md, the example)"
                )
