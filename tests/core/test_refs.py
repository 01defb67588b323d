"""ring.core.refs: code named by "module" or "module:name", imported only when resolved."""

import sys
import types

import pytest

from ring.core.refs import resolve


def test_a_name_resolves_to_the_module_or_its_attribute(monkeypatch):
    module = types.ModuleType("named_code")
    module.build = lambda: "built"
    monkeypatch.setitem(sys.modules, "named_code", module)
    assert resolve("named_code") is module
    assert resolve("named_code:build")() == "built"
    with pytest.raises(AttributeError):
        resolve("named_code:missing")


def test_a_module_is_imported_when_resolved(monkeypatch):
    """Naming code costs nothing: the declaration is a string until something resolves it."""
    monkeypatch.delitem(sys.modules, "ring.core.gaussian", raising=False)
    assert resolve("ring.core.gaussian") is sys.modules["ring.core.gaussian"]
