"""The figures docs/development.md states about the package's imports, computed from the source (tests/project/
test_layers.py checks the page against them): ring's modules, the import edges between them, and the path of a
pretraining cell's config.

The config's path starts at ``ring.pretrain.run(cfg, ...)`` and follows every call that passes the config on: an
argument that is the config itself (a name bound to it, or any ``.cfg`` attribute), or ``self`` inside a class whose
instances hold it.  A callee is resolved through the caller's imports (a function, a class's ``__init__``, a method
called on ``self``); a call through the method registry (``....objective.load().f(...)``) enters the traced cell's
implementation, here CMCRing's.  A call whose callee the source does not name (a method of an object passed in) is not
followed.  Each module a reached function lives in is *entered*; a *climb back to a lower layer* is a call on the path
from a module that is not the entry point into a lower layer than its own that is not the ground floor (ring.core):
a module below the stage reaching down again into a layer other than the shared ground floor, as the compute side did
into the plan (the layers are .importlinter's).
"""

from __future__ import annotations

import ast
import configparser
from dataclasses import dataclass, field
from pathlib import Path

from tests import ROOT

ENTRY = ("ring.pretrain", "run", "cfg")
HOLDER_ATTRIBUTE = "cfg"  # self.cfg, run.cfg, self.run.cfg: the config, wherever an object holds it
NAMES = ("dataset", "method")  # the cell's names: what the catalog and the method registry are looked up by
TRACED_METHOD = "CMCRing"  # a CMC-based Ring cell: its Lab encoder reads the dataset's statistics


def layers() -> list[set[str]]:
    """.importlinter's layers, top first: each a set of ring's top-level packages and stage modules."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    lines = config["importlinter:contract:layers"]["layers"].split("\n")
    return [{f"ring.{name.strip()}" for name in line.split("|")} for line in lines if line.strip()]


def layer_of(module: str) -> int:
    """0 for the top layer; larger is lower."""
    top = ".".join(module.split(".")[:2])
    return next(i for i, layer in enumerate(layers()) if top in layer)


def _file(module: str) -> Path | None:
    """ring's source file of ``module`` (a package's __init__.py), None for anything else."""
    base = ROOT / Path(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if module.split(".")[0] == "ring" and path.is_file():
            return path
    return None


def _source(module: str) -> tuple[ast.Module, Path]:
    path = _file(module)
    return ast.parse(path.read_text(), str(path)), path


@dataclass
class Module:
    """What the analysis needs of one module: its functions and classes, and what its names are bound to."""

    name: str
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)  # "f" and "Class.method"
    classes: set[str] = field(default_factory=set)
    imported: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # local name -> (module, name or None)

    @classmethod
    def read(cls, name: str) -> Module:
        tree, _ = _source(name)
        mod = cls(name)
        package = name if _source(name)[1].name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    is_module = _file(target) is not None
                    mod.imported[alias.asname or alias.name] = (target, None) if is_module else (base, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    mod.imported[alias.asname or alias.name.split(".")[0]] = (alias.name, None)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                mod.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                mod.classes.add(node.name)
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        mod.functions[f"{node.name}.{item.name}"] = item
        return mod


_MODULES: dict[str, Module] = {}


def module(name: str) -> Module:
    if name not in _MODULES:
        _MODULES[name] = Module.read(name)
    return _MODULES[name]


def _defined(mod: str, name: str, depth: int = 0) -> tuple[str, str] | None:
    """(module, qualified name) where ``mod``'s name ``name`` is defined, following re-exports."""
    if _file(mod) is None or depth > 4:
        return None
    m = module(mod)
    if name in m.functions:
        return mod, name
    if name in m.classes:
        return mod, f"{name}.__init__"
    if name in m.imported and m.imported[name][1] is not None:
        return _defined(*m.imported[name], depth + 1)
    return None


def _holds(tree: ast.FunctionDef) -> bool:
    """Whether a class's method stores the config on ``self`` (``self.cfg = ...``)."""
    return any(
        isinstance(t, ast.Attribute)
        and t.attr == HOLDER_ATTRIBUTE
        and isinstance(t.value, ast.Name)
        and t.value.id == "self"
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for t in ([*node.targets[0].elts] if isinstance(node.targets[0], ast.Tuple) else node.targets)
    )


def _implementation(method: str) -> tuple[str, str]:
    from ring.core.methods import METHODS

    mod, cls = METHODS[method].objective.implementation.split(":")
    return mod, cls


@dataclass
class Path_:
    """The config's path: the functions reached and the calls between modules."""

    reached: set[tuple[str, str]] = field(default_factory=set)
    calls: set[tuple[str, str]] = field(default_factory=set)  # (caller module, callee module), caller != callee

    @property
    def modules(self) -> set[str]:
        return {mod for mod, _ in self.reached}

    def climbs(self) -> set[tuple[str, str]]:
        ground = len(layers()) - 1
        return {(a, b) for a, b in self.calls if a != ENTRY[0] and layer_of(a) < layer_of(b) < ground}


class Tracer:
    def __init__(self):
        self.path = Path_()
        self.seen: set[tuple[str, str, frozenset]] = set()
        self.holders = {
            (mod, qual.partition(".")[0])
            for mod in ()  # filled lazily per module
            for qual in ()
        }

    def holder_class(self, mod: str, cls: str) -> bool:
        m = module(mod)
        return any(q.startswith(f"{cls}.") and _holds(f) for q, f in m.functions.items())

    def trace(self, mod: str, qual: str, tainted: frozenset) -> None:
        key = (mod, qual, tainted)
        if key in self.seen:
            return
        self.seen.add(key)
        self.path.reached.add((mod, qual))
        fn = module(mod).functions[qual]
        cls = qual.partition(".")[0] if "." in qual else None
        names = set(tainted)
        if cls and (self.holder_class(mod, cls) or "self" in tainted):
            names.add("self")
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and self._is_config(node.value, names):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple):
                for target in node.targets:
                    if isinstance(target, ast.Tuple):
                        for t, v in zip(target.elts, node.value.elts, strict=False):
                            if isinstance(t, ast.Name) and self._is_config(v, names):
                                names.add(t.id)
        loaded = {  # names bound to a method's implementation class (the registry's load())
            t.id
            for node in ast.walk(fn)
            if isinstance(node, ast.Assign) and _is_load(node.value)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                self._call(mod, cls, node, names, loaded)

    def _is_config(self, expr, names: set[str]) -> bool:
        """The config, an object holding it, or one of the cell's names read from it (``cfg.dataset``)."""
        if isinstance(expr, ast.Name):
            return expr.id in names and expr.id != "self"
        if isinstance(expr, ast.Attribute) and expr.attr in NAMES:
            return self._is_config(expr.value, names) or expr.value == "self"
        return isinstance(expr, ast.Attribute) and expr.attr == HOLDER_ATTRIBUTE

    def _passes(self, node: ast.Call, names: set[str]) -> dict[int | str, bool]:
        passed = {}
        for i, arg in enumerate(node.args):
            if self._is_config(arg, names) or (isinstance(arg, ast.Name) and arg.id == "self" and "self" in names):
                passed[i] = True
        for kw in node.keywords:
            if kw.arg and self._is_config(kw.value, names):
                passed[kw.arg] = True
        return passed

    def _callee(self, mod: str, cls: str | None, func, loaded: set[str]) -> tuple[str, str] | None:
        m = module(mod)
        if isinstance(func, ast.Name):
            return _defined(mod, func.id) if func.id not in m.imported else _defined(*m.imported[func.id])
        if not isinstance(func, ast.Attribute):
            return None
        value = func.value
        if isinstance(value, ast.Name) and value.id == "self" and cls and f"{cls}.{func.attr}" in m.functions:
            return mod, f"{cls}.{func.attr}"
        if isinstance(value, ast.Name) and value.id in m.imported and m.imported[value.id][1] is None:
            return _defined(m.imported[value.id][0], func.attr)
        if _is_load(value) or (isinstance(value, ast.Name) and value.id in loaded):
            impl_mod, impl_cls = _class_defining(*_implementation(TRACED_METHOD), func.attr)  # the registry's class
            return impl_mod, f"{impl_cls}.{func.attr}"
        return None

    def _call(self, mod: str, cls: str | None, node: ast.Call, names: set[str], loaded: set[str]) -> None:
        passed = self._passes(node, names)
        if not passed:
            return
        callee = self._callee(mod, cls, node.func, loaded)
        if callee is None or callee[1] not in module(callee[0]).functions:
            return
        target_mod, target = callee
        params = [a.arg for a in module(target_mod).functions[target].args.args]
        if "." in target and params and params[0] in ("self", "cls"):
            bound = isinstance(node.func, ast.Attribute) or target.endswith("__init__")
            params = params[1:] if bound else params
        tainted = frozenset(
            params[k] if isinstance(k, int) and k < len(params) else k
            for k in passed
            if not isinstance(k, int) or k < len(params)
        )
        if target_mod != mod:
            self.path.calls.add((mod, target_mod))
        self.trace(target_mod, target, tainted)
        if target.endswith(".__init__"):  # the object now holds the config: any of its methods may pass it on
            cls = target.partition(".")[0]
            for qual in module(target_mod).functions:
                if qual.startswith(f"{cls}.") and qual != target:
                    self.trace(target_mod, qual, frozenset({"self"}))


def _is_load(expr) -> bool:
    """``<...>.objective.load()``: the method registry's implementation class."""
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "load"


def _class_defining(mod: str, cls: str, method: str, depth: int = 0) -> tuple[str, str]:
    """(module, class) of ``cls``'s first base class (its source's) that defines ``method``, ``cls`` itself if none."""
    tree, _ = _source(mod)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls and depth < 5:
            if any(isinstance(i, ast.FunctionDef) and i.name == method for i in node.body):
                return mod, cls
            for base in node.bases:
                found = _defined(mod, base.id) if isinstance(base, ast.Name) else None
                if found:
                    return _class_defining(found[0], found[1].partition(".")[0], method, depth + 1)
    return mod, cls


def config_path() -> Path_:
    tracer = Tracer()
    mod, fn, param = ENTRY
    tracer.trace(mod, fn, frozenset({param}))
    return tracer.path


def import_graph() -> tuple[int, int]:
    """(ring's modules, direct import edges between them), as grimp (and import-linter) count them."""
    import grimp

    graph = grimp.build_graph("ring", cache_dir=None)
    modules = graph.modules
    edges = sum(len(graph.find_modules_directly_imported_by(m) & modules) for m in modules)
    return len(modules), edges


if __name__ == "__main__":
    path = config_path()
    print("modules, import edges:", import_graph())
    print("config path modules:", len(path.modules), sorted(path.modules))
    print("calls between modules:", sorted(path.calls))
    print("climbs back:", sorted(path.climbs()))
