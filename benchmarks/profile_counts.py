"""Host-call budgets: how many ATen operators a piece of code launches from Python, read from torch.profiler.

A *top-level* ATen call is a profiler event whose name starts with ``aten::`` and that has no
ancestor event named ``aten::...``: one operator the host dispatched itself, not the operators it
runs inside (``aten::to`` -> ``aten::_to_copy`` -> ``aten::copy_`` counts once, as ``aten::to``).
On a GPU each top-level call is host work (dispatch, and usually one or more kernel launches), so
their number bounds a step that launching work, not the device, limits; unlike wall time it is the
same on every machine, which makes it a budget a CPU-only test can check.

Usage::

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        work()
    calls = top_level_aten_calls(prof)
    assert sum(calls.values()) <= BUDGET and not any(calls[name] for name in SYNC_OPS)
"""

from __future__ import annotations

import collections

# Operators that make the host wait for the device: reading a value (``.item()``, ``int(t)``,
# ``.tolist()``, Python branching on a tensor) ends in ``_local_scalar_dense``; ``nonzero`` must learn
# its output size.  Not all of them are top-level: boolean-mask indexing calls ``nonzero`` inside
# ``aten::index``, so a check for none at all looks at every event of ``prof.events()``.
SYNC_OPS = ("aten::_local_scalar_dense", "aten::item", "aten::nonzero")


def _is_aten(event) -> bool:
    return event.name.startswith("aten::")


def top_level_aten_calls(prof) -> collections.Counter:
    """Name -> count of the top-level ATen calls (see the module's docstring) recorded by ``prof``,
    a finished ``torch.profiler.profile``."""
    calls = collections.Counter()
    for event in prof.events():
        if not _is_aten(event):
            continue
        parent = event.cpu_parent
        while parent is not None and not _is_aten(parent):
            parent = parent.cpu_parent
        if parent is None:
            calls[event.name] += 1
    return calls
