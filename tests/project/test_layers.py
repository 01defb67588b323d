"""The package's layers (ring/__init__.py): import-linter's contracts (.importlinter) hold, no import
circle joins ring's modules, and the login-node side imports without torch."""

import re
import subprocess
import sys
from pathlib import Path

from tests import ROOT
from tests.project import config_path

# import-linter's command, run by this interpreter (its console script may belong to another environment).
LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def test_the_layer_contracts_hold():
    out = subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


def test_no_import_circle_among_rings_modules():
    """grimp's graph, imports inside functions included (as lint-imports sees them)."""
    import grimp

    graph = grimp.build_graph("ring", cache_dir=None)
    modules = sorted(graph.modules)
    circles = []
    for module in modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if graph.chain_exists(importer=imported, imported=module):
                circles.append((module, imported, graph.find_shortest_chain(importer=imported, imported=module)))
    assert not circles, circles[:5]


def test_the_login_node_side_imports_without_torch():
    """Every module of core, plan, cluster and reports, the workflow's data check, ring fetch and the ring command."""
    import pkgutil

    import ring

    names = [
        f"ring.{pkg}.{m.name}"
        for pkg in ("core", "plan", "cluster", "reports")
        for m in pkgutil.iter_modules([str(Path(ring.__file__).parent / pkg)])
    ]
    names += ["ring.data.metadataset", "ring.data.verify", "ring.data.download", "ring.data.fetch_recipes", "ring.cli"]
    # The compute side's torch-free modules, which the plan and the workflow client read, and ring fetch.
    names += [
        "ring.data.folders",
        "ring.data.listings",
        "ring.data.store_layout",
        "ring.engine.anneal",
        "ring.engine.groups",
    ]
    names += ["ring.fetch"]
    code = (
        f"import importlib, sys; [importlib.import_module(n) for n in {names!r}]; "
        "heavy = sorted(m for m in ('torch', 'torchvision', 'detectron2', 'nvidia.dali') if m in sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)


def test_the_compute_side_never_imports_the_plan_or_the_login_node_side():
    """Directly or through another module, imports inside functions included (the layer contract says it too)."""
    import grimp

    graph = grimp.build_graph("ring", cache_dir=None)
    compute = sorted(m for m in graph.modules if m.split(".")[1:2] in (["data"], ["engine"]))
    reaches = [
        (module, above)
        for module in compute
        for above in ("ring.plan", "ring.cluster", "ring.reports")
        if any(graph.chain_exists(importer=module, imported=m) for m in graph.find_descendants(above) | {above})
    ]
    assert not reaches, reaches


def test_the_catalog_is_on_the_ground_floor_and_imports_nothing_of_ring():
    import grimp

    graph = grimp.build_graph("ring", cache_dir=None)
    assert config_path.layer_of("ring.core.catalog") == len(config_path.layers()) - 1
    assert graph.find_modules_directly_imported_by("ring.core.catalog") == set()


MAX_MODULES, MAX_CLIMBS = 8, 3  # issue 42's bound on a pretraining cell's config path


def test_the_development_page_states_the_bounds_and_no_count_that_an_import_changes():
    """docs/development.md states the bounds the tests below hold, and no figure of the import graph that a new module
    or import would make stale (issue 49: a page that stated exact counts had to change with every import)."""
    page = " ".join((ROOT / "docs" / "development.md").read_text().split())
    assert f"enters at most {MAX_MODULES} modules and climbs back to a lower layer at most {MAX_CLIMBS} times" in page
    counts = re.findall(r"(?<!at most )\b\d+ (?:modules|import edges)\b", page)
    assert not counts, f"docs/development.md states import-graph counts; state a bound or generate them: {counts}"


ENTRY_MODULE = config_path.ENTRY[0]


def test_the_config_path_keeps_to_issue_42s_bound():
    """Issue 42 item 4: a pretraining cell's config, followed from ring.pretrain.run, enters at most 8 modules and
    climbs back to a lower layer at most 3 times; the compute side takes the values the entry point resolved (the
    catalog entry, the views' spec, the Ring keys, the objective's settings), never the config.  Before: 13 modules,
    among them ring.data.datasets, ring.data.views, ring.engine.anneal and the objectives."""
    path = config_path.config_path()
    assert len(path.modules) <= MAX_MODULES and len(path.climbs()) <= MAX_CLIMBS, (sorted(path.modules), path.climbs())
    assert "ring.core.catalog" in path.modules and ENTRY_MODULE in path.modules, sorted(path.modules)
    handed_values = {"ring.data.datasets", "ring.data.views", "ring.engine.anneal", "ring.engine.objectives"}
    assert not {m for m in path.modules if m.startswith(tuple(handed_values))}, sorted(path.modules)
