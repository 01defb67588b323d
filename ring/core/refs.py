"""Code named by a "module" or "module:name" string, imported only where it runs: the ground floor's declarations
(a stage's entry module, collector and check, a dataset's loader and listing, a method's implementation) name code in
the floors above it, which it cannot import."""

from __future__ import annotations

import importlib


def resolve(ref: str):
    """A "module" or "module:name" string as the object it names, imported now."""
    module, _, name = ref.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, name) if name else loaded
