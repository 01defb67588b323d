"""Short rooms: no class of ``ring/`` over 200 lines, and a pretraining cell's method and dataset looked up by name
once, at the stage's entry point (:func:`ring.pretrain.resolve`), then handed down as objects."""

import ast
import inspect
from pathlib import Path

import ring
from ring.core import methods
from ring.data import datasets
from ring.plan import catalog
from tests.helpers import pretrain_config

MAX_CLASS_LINES = 200  # DEVELOPERS' rule (issue 33, "Short rooms")


def test_no_class_is_longer_than_200_lines():
    """From its ``class`` line to its last line, blank lines, comments and docstrings included."""
    root = Path(ring.__file__).parent
    long = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                long.append(
                    f"{path.relative_to(root.parent)}:{node.lineno} {node.name} "
                    f"({node.end_lineno - node.lineno + 1} lines)"
                )
    assert not long, "classes over 200 lines: " + "; ".join(long)


def test_a_resolved_pretraining_cell_trains_without_looking_anything_up_by_name(tmp_path, monkeypatch):
    """After ring.pretrain.resolve, building and training the cell (monitors, Ring window, checkpoints, export) asks
    neither the dataset catalog nor the method registry again: every by-name lookup below raises."""
    from ring import pretrain

    cfg = pretrain_config("IRing", epochs=1, lr_milestones=[], resize=16, crop=16, log_window_classes=True)
    cell = pretrain.resolve(cfg)

    def looked_up(*args, **kwargs):
        raise AssertionError(f"looked up by name after the entry point: {args}")

    get_method = methods.Registry.__getitem__

    def looked_up_unless_hashing(registry, name):
        # The config hash takes the keys a method never reads at their defaults (ring.core.methods.unread_keys):
        # that is the config's identity, computed from the config alone wherever it is needed, not a behaviour
        # looked up again.  Every other use of the registry by name is refused.
        if any(frame.function == "unread_keys" for frame in inspect.stack()[1:3]):
            return get_method(registry, name)
        return looked_up(registry, name)

    for module, name in [
        (catalog, "spec"),
        (catalog, "check"),
        (catalog, "hint"),
        (datasets, "spec"),
        (datasets, "check"),
        (datasets, "source"),
        (datasets, "normalize"),
        (methods, "method"),
        (methods, "check_fixed"),
        (pretrain, "method"),
        (pretrain, "check_fixed"),
        (pretrain, "resolve"),
    ]:
        monkeypatch.setattr(module, name, looked_up)
    monkeypatch.setattr(methods.Registry, "__getitem__", looked_up_unless_hashing)
    pretrain.Pretraining(cfg, tmp_path / "cell", cell).run()
    record = (tmp_path / "cell" / "log.jsonl").read_text()
    assert '"knn_top1"' in record and '"window_same_class"' in record  # the monitors ran, on the resolved dataset


def _test_file_layout() -> tuple[list[str], list[str]]:
    """(modules without their test file, test files that name no module): ring/<pkg>/<mod>.py is tested in
    tests/<pkg>/test_<mod>.py (a stage module ring/<mod>.py in tests/test_<mod>.py); an aspect of a module big enough
    for a file of its own is tests/<pkg>/test_<mod>_<aspect>.py.  tests/workflow and tests/project check the workflow
    and the repository as a whole and name no module."""
    package, tests = Path(ring.__file__).parent, Path(__file__).resolve().parents[1]
    modules = {
        path.relative_to(package).with_suffix("")
        for path in package.rglob("*.py")
        if path.name not in ("__init__.py", "__main__.py")
    }
    untested = sorted(
        f"ring/{module}.py" for module in modules if not (tests / module.parent / f"test_{module.name}.py").is_file()
    )
    orphans = []
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(tests)
        if rel.parts[0] in ("workflow", "project"):
            continue
        name = rel.stem.removeprefix("test_")
        siblings = {m.name for m in modules if m.parent == rel.parent}
        if not any(name == m or name.startswith(f"{m}_") for m in siblings):
            orphans.append(f"tests/{rel.as_posix()}")
    return untested, orphans


def test_every_module_has_its_test_file_and_every_test_file_names_a_module():
    untested, orphans = _test_file_layout()
    assert not (untested or orphans), (
        f"the tests do not mirror the package: {len(untested)} module(s) without tests/<pkg>/test_<mod>.py "
        f"({', '.join(untested) or 'none'}) and {len(orphans)} test file(s) naming no module of ring "
        f"({', '.join(orphans) or 'none'})."
    )
