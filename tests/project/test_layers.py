"""The package's layers (ring/__init__.py): import-linter's contracts (.importlinter) hold, no import
circle joins ring's modules, and the login-node side imports without torch."""

import subprocess
import sys
from pathlib import Path

from tests import ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def test_the_layer_contracts_hold():
    out = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
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
    """Every module of core, plan, cluster and reports, the workflow's data check and the ring command."""
    import pkgutil

    import ring

    names = [
        f"ring.{pkg}.{m.name}"
        for pkg in ("core", "plan", "cluster", "reports")
        for m in pkgutil.iter_modules([str(Path(ring.__file__).parent / pkg)])
    ]
    names += ["ring.data.metadataset", "ring.detection.tasks", "ring.data.verify", "ring.data.fetch", "ring.cli"]
    code = (
        f"import importlib, sys; [importlib.import_module(n) for n in {names!r}]; "
        "heavy = sorted(m for m in ('torch', 'torchvision', 'detectron2', 'nvidia.dali') if m in sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)
