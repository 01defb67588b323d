"""The configuration reference (docs/configuration.md) is generated from the dataclasses and kept in sync."""

import dataclasses
import subprocess
import sys

from ring.plan import checks, reference
from tests import ROOT
from tests.helpers import run_module


def test_the_committed_reference_is_the_generated_one():
    committed = (ROOT / reference.DOC).read_text()
    assert committed == reference.markdown(), (
        "docs/configuration.md is stale; regenerate it with `ring reference --write docs/configuration.md`"
    )


def test_every_key_is_described_and_every_allowed_entry_is_a_real_key():
    classes = reference.sections()
    fields = {f.name for cls in classes.values() for f in dataclasses.fields(cls)}
    assert set(checks.ALLOWED) <= fields, set(checks.ALLOWED) - fields
    for stage in reference.sections():
        undescribed = [e["key"] for e in reference.entries(stage) if not e["what"].strip()]
        assert not undescribed, f"{stage}: add a comment beside {undescribed} in ring/core/config.py"


def test_describe_prints_one_key_and_suggests_a_typo():
    out = run_module("ring.cli", "describe", "pretrain", "ring_w_l").stdout
    assert out.startswith("pretrain.ring_w_l: list[float] = [0.0, 90.0]\n  allowed: [start, final] with 0 <= start")
    bad = run_module("ring.cli", "describe", "lincls", "epoch", check=False)
    assert bad.returncode == 1 and bad.stderr == "ring: Unknown LinclsConfig key 'epoch'. Did you mean 'epochs'?\n"


def test_every_stage_help_points_to_the_reference():
    code = (
        "import contextlib, io, importlib\n"
        "for name in ('ring.pretrain', 'ring.lincls', 'ring.transfer', 'ring.toy_cnce', 'ring.detection.runner'):\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out):\n"
        "        try: importlib.import_module(name).main(['--help'])\n"
        "        except SystemExit: pass\n"
        "    print(name, ' '.join(out.getvalue().split()))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    lines = result.stdout.splitlines()
    assert len(lines) == 5
    for line in lines:
        assert " ".join(checks.REFERENCE_HINT.split()) in line, line
