"""A method's implementation class read from its module's source, never imported.

The plan checks ask whether the class a plug-in's objective names (``"module:Class"``) exists and takes the calls
the pretraining stage makes; importing it would load torch into Snakemake's parse, the estimate and every waiting
client (about 6 s and 500 MB each), so its source is parsed instead.  A call is looked up in the class, then in its
base classes that can be read the same way (a name defined or imported from another readable module); one that only
a base from outside (``nn.Module``, a star import, a computed class) could provide is reported missing.  A name
bound in a way a parser cannot follow (an assignment, a decorator that is not ``staticmethod``/``classmethod``) is
taken as fine: the stage's own call tells.
"""

from __future__ import annotations

import ast
import inspect
import sys
from importlib.machinery import PathFinder
from pathlib import Path

UNKNOWN = object()  # bound, but not in a way the parser can follow
_DEPTH = 8  # imports and base classes followed, at most


def source_file(module: str) -> Path | None:
    """The ``.py`` file of ``module``, found without importing it or its packages (whose ``__init__`` may import
    torch); None if there is none.  Its top-level package is looked up as ``import`` looks it up, so that every way
    of installing one is seen: a folder on ``sys.path`` (site-packages, PYTHONPATH, an editable install's ``.pth``
    path) and the finders an editable install adds to ``sys.meta_path`` (setuptools' ``pip install -e``)."""
    parts = module.split(".")
    spec = _top_level_spec(parts[0])
    for i in range(1, len(parts)):
        locations = spec.submodule_search_locations if spec else None
        spec = PathFinder.find_spec(".".join(parts[: i + 1]), locations) if locations else None
    origin = spec.origin if spec else None
    return Path(origin) if origin and origin.endswith(".py") else None


def _top_level_spec(name: str):
    """The spec of top-level module ``name`` from the finders of ``sys.meta_path``, in import's order.  A finder
    imports nothing for a top-level name: there is no parent package to run."""
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        spec = find_spec(name, None) if find_spec else None
        if spec is not None:
            return spec
    return None


def _tree(module: str) -> ast.Module | None:
    file = source_file(module)
    return ast.parse(file.read_text(), str(file)) if file else None


def _imported_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")[: len(module.split(".")) - node.level + is_package]
    return ".".join(base + ([node.module] if node.module else []))


def find_class(module: str, name: str, depth: int = _DEPTH):
    """``(module, ClassDef)`` of the class ``name`` in ``module`` (following ``from X import name``), UNKNOWN,
    or None when the module does not define it.  SyntaxError and OSError pass on (the caller's sentence)."""
    tree = _tree(module)
    if tree is None or depth <= 0:
        return None if tree is None else UNKNOWN
    is_package = source_file(module).name == "__init__.py"
    found = None
    for node in tree.body:  # the last binding at the top level wins, as at run time
        if isinstance(node, ast.ClassDef) and node.name == name:
            found = (module, node)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    origin = _imported_from(node, module, is_package)
                    found = find_class(origin, alias.name, depth - 1) if source_file(origin) else None
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.FunctionDef, ast.Import)) and name in _bound(node):
            found = UNKNOWN
    return found


def _bound(node) -> set[str]:
    if isinstance(node, ast.Import):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    if isinstance(node, ast.FunctionDef):
        return {node.name}
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def find_call(found, call: str, depth: int = _DEPTH):
    """The ``FunctionDef`` of ``call`` in the class ``found`` (:func:`find_class`) or its readable bases,
    UNKNOWN, or None."""
    if found is UNKNOWN or depth <= 0:
        return UNKNOWN
    module, cls = found
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == call:
            return node
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and call in _bound(node):
            return UNKNOWN
    for base in cls.bases:
        parent = find_class(module, base.id, depth - 1) if isinstance(base, ast.Name) else None
        if parent is not None and (fn := find_call(parent, call, depth - 1)) is not None:
            return fn
    return None


def signature(fn: ast.FunctionDef) -> inspect.Signature | None:
    """The signature a call through the class sees (``cls`` dropped for a classmethod), or None when a
    decorator other than staticmethod/classmethod may change it."""
    decorators = {d.id for d in fn.decorator_list if isinstance(d, ast.Name)}
    if len(decorators) < len(fn.decorator_list) or decorators - {"staticmethod", "classmethod"}:
        return None
    a, P = fn.args, inspect.Parameter
    positional = a.posonlyargs + a.args
    defaults = [P.empty] * (len(positional) - len(a.defaults)) + [_Source(ast.unparse(d)) for d in a.defaults]
    params = [
        P(arg.arg, P.POSITIONAL_ONLY if i < len(a.posonlyargs) else P.POSITIONAL_OR_KEYWORD, default=d)
        for i, (arg, d) in enumerate(zip(positional, defaults, strict=True))
    ]
    params += [P(a.vararg.arg, P.VAR_POSITIONAL)] if a.vararg else []
    params += [
        P(arg.arg, P.KEYWORD_ONLY, default=P.empty if d is None else _Source(ast.unparse(d)))
        for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
    ]
    params += [P(a.kwarg.arg, P.VAR_KEYWORD)] if a.kwarg else []
    return inspect.Signature(params[1:] if "classmethod" in decorators else params)


class _Source(str):
    """A default value shown as written in the source."""

    def __repr__(self) -> str:
        return str(self)


def class_problem(
    module: str, name: str, calls: dict[str, tuple[str, ...]], former: dict[str, str] | None = None
) -> str | None:
    """Why ``module:name`` cannot take ``calls`` ({call: its positional arguments}), as a clause, or None.  ``former``:
    {call: the call it replaced}, said for a class that defines the former call and not today's."""
    try:
        if source_file(module) is None:
            return f"names module {module}, which is not installed (no {module} on the path)"
        found = find_class(module, name)
        fns = {} if found is None else {call: find_call(found, call) for call in calls}
        olds = {
            call: old
            for call, old in (former or {}).items()
            if found is not None and fns.get(call) is None and find_call(found, old) is not None
        }
    except (SyntaxError, OSError, UnicodeDecodeError) as err:  # a base's module too
        return f"names module {module}, which cannot be read ({type(err).__name__}: {err})"
    if found is None:
        return f"names {name}, which module {module} does not define"
    for call, args in calls.items():
        fn = fns[call]
        if fn is None and call in olds:
            return (
                f"names {name}, written for the former protocol: it defines {olds[call]} where the stage now calls "
                f"{call}({', '.join(args)}) (docs/adding-a-method.md, 'From from_config to from_settings')"
            )
        if fn is None:
            return f"names {name}, whose {call} is missing (the stage calls {call}({', '.join(args)}))"
        sig = None if fn is UNKNOWN else signature(fn)
        if sig is not None:
            try:
                sig.bind(*args)
            except TypeError:
                return f"names {name}, whose {call} takes {sig} (the stage calls {call}({', '.join(args)}))"
    return None
