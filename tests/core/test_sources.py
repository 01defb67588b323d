"""ring.core.sources: a plug-in's class and the calls it takes, read from its source without importing it."""

import ast
import sys
import textwrap

import pytest

from ring.core import sources

FILES = {
    # Importing the package would fail: the parser must never run it.
    "plug/__init__.py": "raise ImportError('plug must not be imported by the plan checks')\n",
    "plug/base.py": """
        class Base:
            @staticmethod
            def build_encoder(cfg):
                pass

            @classmethod
            def from_config(cls, method, cfg, model, n_train, max_chunk_elements=0):
                pass
        """,
    "plug/impl.py": """
        import os
        from .base import Base
        from plug.base import Base as Parent
        from elsewhere_not_installed import Outside

        class Good(Base):
            def step(self, batch, epoch, *, flag=False):
                pass

        class Narrow(Parent):
            @staticmethod
            def build_encoder():
                pass

        class FromOutside(Outside):
            pass

        class Decorated(Base):
            @cached
            def build_encoder(cfg):
                pass

        class Assigned(Base):
            from_config = make_from_config()

        Alias = Good
        """,
    "plug/broken.py": "class X(:\n",
    "plug/twice.py": """
        from plug.base import Base as Thing

        class Thing:
            pass
        """,
}
CALLS = {"build_encoder": ("cfg",), "from_config": ("method", "cfg", "model", "n_train", "max_chunk_elements")}


@pytest.fixture(autouse=True)
def plug(tmp_path, monkeypatch):
    for rel, text in FILES.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    assert "plug" not in sys.modules  # nothing was imported


def test_source_file_finds_a_module_without_importing_its_package(plug):
    assert sources.source_file("plug.impl") == plug / "plug" / "impl.py"
    assert sources.source_file("plug") == plug / "plug" / "__init__.py"
    assert sources.source_file("plug.absent") is None and sources.source_file("no_such_top_level_pkg") is None
    assert sources.source_file("sys") is None  # built in: no .py file to read


def test_find_class_follows_imports_and_tells_unknown_bindings():
    module, cls = sources.find_class("plug.impl", "Good")
    assert (module, cls.name) == ("plug.impl", "Good") and isinstance(cls, ast.ClassDef)
    assert sources.find_class("plug.impl", "Base")[0] == "plug.base"  # a relative import
    assert sources.find_class("plug.impl", "Parent")[1].name == "Base"  # an absolute one, renamed
    assert sources.find_class("plug.impl", "Alias") is sources.UNKNOWN  # an assignment: not followed
    assert sources.find_class("plug.impl", "os") is sources.UNKNOWN
    assert sources.find_class("plug.impl", "Outside") is None  # imported from a module that is not there
    assert sources.find_class("plug.impl", "Missing") is None
    assert sources.find_class("plug.twice", "Thing")[0] == "plug.twice"  # the last binding wins, as at run time


def test_find_call_looks_in_the_class_then_its_readable_bases():
    good = sources.find_class("plug.impl", "Good")
    assert sources.find_call(good, "step").name == "step"
    assert sources.find_call(good, "from_config").name == "from_config"  # inherited from plug.base
    assert sources.find_call(good, "forward") is None
    assert sources.find_call(sources.find_class("plug.impl", "FromOutside"), "forward") is None
    assert sources.find_call(sources.find_class("plug.impl", "Assigned"), "from_config") is sources.UNKNOWN
    assert sources.find_call(sources.UNKNOWN, "anything") is sources.UNKNOWN


def test_signature_is_the_one_a_call_through_the_class_sees():
    good, base = sources.find_class("plug.impl", "Good"), sources.find_class("plug.base", "Base")
    assert str(sources.signature(sources.find_call(good, "step"))) == "(self, batch, epoch, *, flag=False)"
    assert str(sources.signature(sources.find_call(base, "from_config"))) == (
        "(method, cfg, model, n_train, max_chunk_elements=0)"  # cls dropped
    )
    assert str(sources.signature(sources.find_call(base, "build_encoder"))) == "(cfg)"
    decorated = sources.find_call(sources.find_class("plug.impl", "Decorated"), "build_encoder")
    assert sources.signature(decorated) is None  # a decorator may change it: not judged


@pytest.mark.parametrize(
    "module, name, problem",
    [
        ("plug.impl", "Good", None),
        ("plug.impl", "Decorated", None),  # unjudgeable: the stage's own call tells
        ("plug.impl", "Assigned", None),
        ("plug.gone", "Good", "names module plug.gone, which is not installed (no plug.gone on the path)"),
        ("plug.impl", "Missing", "names Missing, which module plug.impl does not define"),
        (
            "plug.impl",
            "FromOutside",
            "names FromOutside, whose build_encoder is missing (the stage calls build_encoder(cfg))",
        ),
        ("plug.impl", "Narrow", "names Narrow, whose build_encoder takes () (the stage calls build_encoder(cfg))"),
    ],
)
def test_class_problem_is_a_clause_naming_what_is_wrong(module, name, problem):
    assert sources.class_problem(module, name, CALLS) == problem


def test_a_module_that_cannot_be_parsed_is_a_clause_too():
    problem = sources.class_problem("plug.broken", "X", CALLS)
    assert problem.startswith("names module plug.broken, which cannot be read (SyntaxError: ")


def test_source_file_finds_a_package_that_only_a_meta_path_finder_knows(tmp_path, monkeypatch):
    """setuptools' `pip install -e` puts no folder on sys.path for a flat project: a finder on sys.meta_path maps
    the package's name to the checkout (its __editable___*_finder), and import finds it there; so must the checks."""
    import importlib.util

    checkout = tmp_path / "elsewhere" / "edited"
    checkout.mkdir(parents=True)
    (checkout / "__init__.py").write_text("raise ImportError('edited must not be imported by the plan checks')\n")
    (checkout / "impl.py").write_text("class Impl:\n    pass\n")

    class EditableFinder:  # what setuptools' _EditableFinder does: a mapping from top-level names to folders
        @staticmethod
        def find_spec(fullname, path=None, target=None):
            if fullname != "edited":
                return None
            init = checkout / "__init__.py"
            return importlib.util.spec_from_file_location(fullname, init, submodule_search_locations=[str(checkout)])

    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, EditableFinder])
    assert sources.source_file("edited.impl") == checkout / "impl.py"
    assert sources.class_problem("edited.impl", "Impl", {}) is None
    assert "edited" not in sys.modules


def test_a_class_written_for_a_former_call_is_told_the_call_that_replaced_it():
    """The pretraining stage's protocol (ring.core.methods.IMPLEMENTATION_CALLS, FORMER_CALLS): a plug-in that defines
    from_config, the former call, is told what the stage calls now; one that defines neither hears it is missing."""
    from ring.core.methods import FORMER_CALLS, IMPLEMENTATION_CALLS

    assert sources.class_problem("plug.impl", "Good", IMPLEMENTATION_CALLS, FORMER_CALLS) == (
        "names Good, written for the former protocol: it defines from_config where the stage now calls "
        "from_settings(settings, model, n_train, max_chunk_elements) (docs/adding-a-method.md, 'From from_config to "
        "from_settings')"
    )
    assert sources.class_problem("plug.twice", "Thing", IMPLEMENTATION_CALLS, FORMER_CALLS) == (
        "names Thing, whose build_encoder is missing (the stage calls build_encoder(settings))"
    )
    assert sources.class_problem("plug.impl", "Missing", IMPLEMENTATION_CALLS, FORMER_CALLS) == (
        "names Missing, which module plug.impl does not define"
    )
