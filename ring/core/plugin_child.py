"""The child process of :mod:`ring.core.plugins`: imports the plug-ins it is given, one JSON line per verdict.

python -m ring.core.plugin_child REPORT NAME=VALUE ...
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import entry_points
from pathlib import Path

from ring.core import methods
from ring.core.plugins import ENTRY_POINT_GROUP, key, reason


def child(report: Path, wanted: list[str]) -> None:
    """Import each of ``wanted`` (``name=value``) in turn, one JSON line per verdict, appended and closed at once (an
    ``os._exit`` in the next import keeps it)."""
    methods.METHODS._loaded = True  # a plug-in's register() reads the registry: it must not load the entry points
    found = {key(ep): ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    for name in wanted:
        failure = None
        try:
            found[name].load()
        except BaseException as err:  # noqa: BLE001 - KeyboardInterrupt and SystemExit included: reported, not raised
            failure = reason(err)
        with open(report, "a") as fh:
            fh.write(json.dumps({"entry_point": name, "failure": failure}) + "\n")


if __name__ == "__main__":
    child(Path(sys.argv[1]), sys.argv[2:])
