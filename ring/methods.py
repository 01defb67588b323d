"""The methods of the paper, by the names its tables use (torch-free, read by the workflow too).

A method is a base objective (``"ir"`` memory bank, ``"moco"`` queue, ...) plus whether it selects
negatives with Ring.  Methods that later work adds are listed with ``implemented=False`` so that
the paper grid plans them and their jobs fail with one clear sentence, never silently.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Method:
    objective: str
    ring: bool
    base: str  # the method a Ring variant is compared with in the tables
    implemented: bool = True
    note: str = ""


METHODS: dict[str, Method] = {
    "IR": Method("ir", ring=False, base="IR"),
    "IRing": Method("ir", ring=True, base="IR"),
    "CMC": Method("cmc", ring=False, base="CMC", implemented=False, note="CMC's two L/ab encoders are issue #4"),
    "CMCRing": Method("cmc", ring=True, base="CMC", implemented=False, note="CMCRing is issue #4"),
    "MoCo": Method("moco", ring=False, base="MoCo"),
    "MoCoRing": Method("moco", ring=True, base="MoCo"),
    "LA": Method("la", ring=False, base="LA", implemented=False, note="Local Aggregation is issue #4"),
}


def method(name: str, *, require_implemented: bool = True) -> Method:
    if name not in METHODS:
        raise ValueError(f"Unknown method {name!r}; choose one of {', '.join(METHODS)}.")
    m = METHODS[name]
    if require_implemented and not m.implemented:
        raise NotImplementedError(
            f"Method {name} is not implemented yet ({m.note}); remove it from the grid to run the other cells."
        )
    return m
