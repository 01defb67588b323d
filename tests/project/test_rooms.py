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
