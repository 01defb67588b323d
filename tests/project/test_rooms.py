"""Short rooms: no module of ``ring/`` over 500 lines, no function over 60, no class over 200, each with headroom
(none within 5% of its cap); and every stage's cell (pretraining, linear evaluation, transfer, detection) has its
method, dataset (or task) looked up by name once, at the stage's entry point (:func:`ring.pretrain.resolve`,
:func:`ring.lincls.resolve`, :func:`ring.transfer.resolve`, :func:`ring.detection.runner.resolve`), then handed down as
objects (no module of the compute side names the catalog below its entry points)."""

import ast
import inspect
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

import ring
from ring.core import catalog, methods, plugins
from ring.core.config import TransferConfig
from ring.data import datasets, folders, listings, metadataset
from ring.plan import detection_tasks
from tests import ROOT
from tests.helpers import lincls_config, pretrain_config

# DEVELOPERS' rule (issue 33, "Short rooms"), with issue 42's headroom: a room grows by a fix or two between two
# reviews, so none may stand within 5% of its cap, where the next fix would break it.
CAPS = {"module": 500, "function": 60, "class": 200}
HEADROOM = 0.05
# What looks a dataset up by its name: the catalog's lookup functions and tables.
CATALOG_NAMES = {"spec", "hint", "DATASETS", "TRANSFER"}


def rooms(path: Path) -> list[tuple[str, str, int]]:
    """(kind, name, lines) of a module and of every function (methods, nested ones included) and class in it; a
    room's lines run from its ``def``/``class`` line to its last, blank lines, comments and docstrings included
    (decorators left out), a module's are all of its lines."""
    text = path.read_text()
    found = [("module", "", len(text.splitlines()))]
    for node in ast.walk(ast.parse(text, str(path))):
        kind = {ast.FunctionDef: "function", ast.AsyncFunctionDef: "function", ast.ClassDef: "class"}.get(type(node))
        if kind:
            found.append((kind, f"{node.name}:{node.lineno}", node.end_lineno - node.lineno + 1))
    return found


def test_rooms_measure_from_their_first_line_to_their_last(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("class A:\n    def f(self):\n        # why\n\n        return 1\n\n\nasync def g():\n    pass\n")
    assert rooms(module) == [("module", "", 9), ("class", "A:1", 5), ("function", "g:8", 2), ("function", "f:2", 4)]


def test_no_room_of_ring_is_within_5_percent_of_its_cap():
    """Modules <= 475 lines, functions <= 57, classes <= 190 (500, 60 and 200 less 5%)."""
    root = Path(ring.__file__).parent
    limits = {kind: round(cap * (1 - HEADROOM)) for kind, cap in CAPS.items()}
    assert limits == {"module": 475, "function": 57, "class": 190}
    long = [
        f"{path.relative_to(root.parent)}{':' + name if name else ''} {kind} ({lines} lines)"
        for path in sorted(root.rglob("*.py"))
        for kind, name, lines in rooms(path)
        if lines > limits[kind]
    ]
    assert not long, (
        f"rooms over their cap less {HEADROOM:.0%} (module {limits['module']}, function {limits['function']}, class "
        f"{limits['class']} lines; split by idea): " + "; ".join(long)
    )


# Where a contributor adds a stage, a method, a policy, a sampler or a dataset: those rooms grow by whole entries.
EXTENSION_HEADROOM = 0.15


def to_add_modules(text: str) -> list[str]:
    """The modules docs/development.md's "To add X, touch Y" table names."""
    table = text.split("## To add X, touch Y", 1)[1].split("\n## ", 1)[0]
    return sorted(set(re.findall(r"`(ring/[\w/]+\.py)`", table)))


def test_every_module_the_to_add_map_names_has_room_to_grow():
    limit = round(CAPS["module"] * (1 - EXTENSION_HEADROOM))
    named = to_add_modules((ROOT / "docs" / "development.md").read_text())
    assert {"ring/core/stages.py", "ring/core/catalog.py", "ring/engine/anneal.py"} <= set(named)  # the parse found it
    full = {path: lines for path in named if (lines := len((ROOT / path).read_text().splitlines())) > limit}
    assert not full, (
        f"modules a contributor extends within 15% of the {CAPS['module']}-line cap (split by idea): {full}"
    )


class _Refused(dict):
    """A table of names after the entry point: any read of it fails the test."""

    def _refuse(self, *args, **kwargs):
        raise AssertionError(f"the catalog's tables read after the entry point: {args}")

    __getitem__ = get = __contains__ = __iter__ = keys = items = values = __len__ = _refuse


# The tables a name is looked up in, as every module imported them (count_lookups swaps ring.core.catalog's own for
# counting ones).
TABLES = (catalog.DATASETS, catalog.TRANSFER, detection_tasks.TASKS)
# The modules whose entry points resolve a cell: their lookups by name are counted, one per name.
STAGE_MODULES = {"ring.pretrain", "ring.lincls", "ring.transfer", "ring.detection.runner"}


def _by_a_stage(frame) -> bool:
    return frame.f_globals.get("__name__") in STAGE_MODULES


class _Counted(dict):
    """A catalog table that counts, by name, the reads a stage's module makes of it (ring.core.catalog's own reads,
    inside ring.core.catalog.spec, are that one lookup's)."""

    def __init__(self, table: dict, counts: Counter):
        super().__init__(table)
        self.counts = counts

    def _read(self, name) -> None:
        if _by_a_stage(sys._getframe(2)):
            self.counts["dataset", name] += 1

    def __getitem__(self, name):
        self._read(name)
        return super().__getitem__(name)

    def __contains__(self, name):
        self._read(name)
        return super().__contains__(name)

    def get(self, name, default=None):
        self._read(name)
        return super().get(name, default)


def count_lookups(monkeypatch) -> Counter:
    """(kind, name) -> how often a stage's module looks ``name`` up: in the dataset catalog (ring.core.catalog.spec
    and its tables), the method registry (ring.core.methods.method, under each name a stage imports it) or
    detection's tasks."""
    from ring import lincls, pretrain
    from ring.detection import runner

    counts = Counter()

    def counting(kind, lookup):
        def counted(name, *args, **kwargs):
            if _by_a_stage(sys._getframe(1)):
                counts[kind, name] += 1
            return lookup(name, *args, **kwargs)

        return counted

    monkeypatch.setattr(catalog, "spec", counting("dataset", catalog.spec))
    for table in ("DATASETS", "TRANSFER"):
        monkeypatch.setattr(catalog, table, _Counted(getattr(catalog, table), counts))
    for module in (pretrain, lincls):
        monkeypatch.setattr(module, "method", counting("method", methods.method))
    monkeypatch.setattr(runner, "get_task", counting("task", runner.get_task))
    return counts


def refuse_lookups(monkeypatch) -> None:
    """From now on every by-name lookup of a dataset, a method or a detection task raises, and so does any read of
    the tables (ring.core.catalog.DATASETS and TRANSFER, detection's TASKS, under whatever name a module holds them)."""
    from ring import lincls, pretrain, transfer
    from ring.detection import runner

    def looked_up(*args, **kwargs):
        raise AssertionError(f"looked up by name after the entry point: {args}")

    get_method = plugins.Registry.__getitem__

    def looked_up_unless_hashing(registry, name):
        # The config hash takes the groups a method never reads at their defaults (ring.core.config.unread_groups):
        # that is the config's identity, computed from the config alone wherever it is needed, not a behaviour
        # looked up again.  Every other use of the registry by name is refused.
        if any(frame.function == "unread_groups" for frame in inspect.stack()[1:3]):
            return get_method(registry, name)
        return looked_up(registry, name)

    for module, attribute in [
        (catalog, "spec"),
        (catalog, "hint"),
        (folders, "check"),
        (folders, "listing"),
        (folders, "manifest"),
        (datasets, "spec"),
        (datasets, "hint"),
        (datasets, "check"),
        (datasets, "source"),
        (datasets, "load"),
        (metadataset, "source"),
        (metadataset, "load"),
        (methods, "method"),
        (pretrain, "method"),
        (pretrain, "resolve"),
        (lincls, "method"),
        (lincls, "resolve"),
        (transfer, "resolve"),
        (detection_tasks, "task"),
        (runner, "get_task"),
        (runner, "resolve"),
    ]:
        monkeypatch.setattr(module, attribute, looked_up)
    for module in [m for n, m in sorted(sys.modules.items()) if n == "ring" or n.startswith("ring.")]:
        for attribute, table in vars(module).copy().items():
            if any(table is t for t in TABLES) or isinstance(table, _Counted):
                monkeypatch.setattr(module, attribute, _Refused())
    monkeypatch.setattr(plugins.Registry, "__getitem__", looked_up_unless_hashing)


@pytest.mark.parametrize("name", ["IRing", "CMCRing"])  # CMC's Lab encoder reads the dataset's statistics
def test_a_pretraining_cell_looks_its_method_and_dataset_up_once(tmp_path, monkeypatch, name):
    """ring.pretrain.resolve looks the method and the dataset up once each; building and training the cell
    (monitors, Ring window, checkpoints, export) then asks neither the catalog nor the registry again.  A study's
    cells are pretraining cells (``init_from``), resolved the same way."""
    from ring import pretrain

    cfg = pretrain_config(name, dataset="digits_colour", epochs=1, lr_milestones=[], resize=16, crop=16)
    cfg.log_window_classes = True
    counts = count_lookups(monkeypatch)
    cell = pretrain.resolve(cfg)
    assert counts == {("dataset", "digits_colour"): 1, ("method", name): 1}
    refuse_lookups(monkeypatch)
    pretrain.Pretraining(cfg, tmp_path / "cell", cell).run()
    record = (tmp_path / "cell" / "log.jsonl").read_text()
    assert '"knn_top1"' in record and '"window_same_class"' in record  # the monitors ran, on the resolved dataset


def test_a_linear_evaluation_cell_looks_its_method_and_dataset_up_once(tmp_path, monkeypatch, encoder_file):
    """The method whose encoder it evaluates (its files) and the dataset, once each; the evaluation then trains,
    evaluates and writes its metrics without a lookup."""
    from ring import lincls

    cfg = lincls_config(method="IRing", epochs=1)
    counts = count_lookups(monkeypatch)
    cell = lincls.LinearEval.RESOLVE(cfg)
    assert counts == {("dataset", "digits"): 1, ("method", "IRing"): 1}
    refuse_lookups(monkeypatch)
    metrics = lincls.LinearEval(cfg, encoder_file, tmp_path / "cell", cell).run()
    assert 0 <= metrics["top1"] <= 100 and metrics["protocol"]["encoder_files"].keys() == {"encoder.pt"}


def test_a_transfer_cell_looks_its_method_and_both_datasets_up_once(tmp_path, monkeypatch, encoder_file):
    """The method, the transfer dataset and the source it was pretrained on, once each; the transfer dataset's
    folder, listing and split manifest are read at the entry point, its images below it without a lookup."""
    from ring import transfer
    from tests.helpers import TINY_LINCLS

    listings.generate_shapes(tmp_path / "data" / "shapes")
    values = {**TINY_LINCLS, "epochs": 1, "dataset": "shapes", "source": "digits", "method": "IRing"}
    cfg = TransferConfig(**values, data_root=str(tmp_path / "data"), stats_cache=str(tmp_path / "stats"))
    counts = count_lookups(monkeypatch)
    cell = transfer.TransferEval.RESOLVE(cfg)
    assert counts == {("dataset", "shapes"): 1, ("dataset", "digits"): 1, ("method", "IRing"): 1}
    refuse_lookups(monkeypatch)
    metrics = transfer.TransferEval(cfg, encoder_file, tmp_path / "cell", cell).run()
    assert 0 <= metrics["top1"] <= 100 and metrics["protocol"]["split_counts"] == {"train": 960, "test": 240}


def test_no_compute_module_names_the_catalog_outside_its_entry_points():
    """The compute side reads the catalog only where a name first becomes a dataset: a stage's entry point calls
    ring.data.datasets.source (or load), the data check and fetch work on a named dataset by design.  Every other
    module under ring/engine and ring/data takes the resolved entry from its caller."""
    allowed = {
        "ring/data/datasets.py": {"source", "load", "<module>"},  # the entry: a name becomes a Source
        "ring/data/folders.py": None,  # the data check of a named dataset's folder
        "ring/data/verify.py": None,
        "ring/data/download.py": None,
        "ring/data/fetch_recipes.py": None,  # what ring fetch gets for a named dataset
        "ring/data/metadataset.py": None,  # the transfer datasets' loaders, by name (ring.transfer's entry)
    }
    root = Path(ring.__file__).parent
    found = []
    for path in sorted([*(root / "engine").rglob("*.py"), *(root / "data").rglob("*.py")]):
        rel = path.relative_to(root.parent).as_posix()
        if rel in allowed and allowed[rel] is None:
            continue
        tree = ast.parse(path.read_text(), rel)
        imported = {  # the catalog's names as this module imports them
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "ring.core.catalog"
            for alias in node.names
            if alias.name in CATALOG_NAMES
        }
        scopes = {"<module>": tree, **{n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}}
        for scope, node in scopes.items():
            if scope in (allowed.get(rel) or ()):
                continue
            body = node.body if scope != "<module>" else [n for n in tree.body if not isinstance(n, ast.FunctionDef)]
            for inner in (x for stmt in body for x in ast.walk(stmt)):
                named = (isinstance(inner, ast.Name) and inner.id in imported and isinstance(inner.ctx, ast.Load)) or (
                    isinstance(inner, ast.Attribute)
                    and inner.attr in CATALOG_NAMES
                    and getattr(inner.value, "id", "") == "catalog"
                )
                if named:
                    found.append(f"{rel}:{inner.lineno} ({scope})")
    assert not found, "the catalog looked up by name below an entry point: " + "; ".join(found)


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
