"""README's quick start, command (1) then (3), run as written in a copy of the workflow: every table and figure of
the smoke grid, and the report.  A file of its own: the suite's longest test, which pytest-xdist's --dist loadfile
can then run beside the rest of tests/workflow/test_workflow.py."""

import csv
import json
import re
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest

from tests import ROOT
from tests.documented import documented_commands
from tests.workflow.runs import caption_text, entry, job_counts, report_captions, snakemake

pytestmark = pytest.mark.slow  # a whole Snakemake run: outside the developer loop (pytest -m 'not slow')


def test_readme_quick_start_builds_every_table_and_figure_and_the_report(workdir):
    """README command (1), minus the install, then the report: every table and figure of the smoke grid."""
    result = snakemake(workdir, "--profile", "profiles/local", "all_tables", timeout=2400)
    printed = result.stdout + result.stderr
    # A number in every cell of Tables 1, 2 and the LA variants (issue 32): the colour digits give CMC's ab view the
    # digit to see, and a probe whose loss stayed high (the one-epoch lesions IRingNoAnneal and IRingBall, losses near
    # 2e3 on this CPU) shows its accuracy marked [hN] where it is above chance, not "diverged".
    assert "holds grey images" not in printed
    tables = workdir / "results" / "smoke" / "tables"
    for name in ("table1.md", "table2.md", "table_la_variants.md"):
        assert "diverged [d" not in (tables / name).read_text(), name
    for method in (
        "IR",
        "IRing",
        "MoCo",
        "MoCoRing",
        "LA",
        "IRCave",
        r"IRing \(\+C_i\)",
        "CMC",
        "CMCRing",
        "CMCCave",
        r"CMCRing \(\+C_i\)",
        r"IRing \(No Anneal\)",
        r"IRing \(w_u = 100\)",
    ):
        assert re.search(rf"\| {method} +\| \d+\.\d", printed), method

    def rows(name: str, dataset: str) -> int:  # rows, not mentions: a diverged row's sentence names its cell's path
        with open(tables / name, newline="") as fh:
            return sum(dataset in (row.get("dataset"), row.get("column")) for row in csv.DictReader(fh))

    assert rows("table1.csv", "digits_colour") == 7
    assert rows("table2.csv", "digits_colour") == 4
    assert rows("table_la_variants.csv", "digits_colour") == 5
    # Table 3: every Table 1 method's digits encoder transferred to the generated shapes.
    assert rows("table3.csv", "shapes") == 7
    # Table 4 on the embedded default: every method x column evaluated (2 methods x 3 models).
    table4 = (tables / "table4.csv").read_text().splitlines()
    assert len(table4) == 1 + 2 * 12 and all(",1," in row for row in table4[1:])  # n = 1 seed per column
    assert "**table4**" in printed
    assert "CNCE w_l=95" in (tables / "table_toy_cnce.md").read_text()
    # The appendix's studies at smoke size: three figures and the k table, every method at both k.
    for study in ("hard_negatives", "anneal_policies", "negatives_k"):
        assert all((tables / f"fig_{study}.{ext}").stat().st_size > 0 for ext in ("png", "pdf", "csv")), study
    k_table = (tables / "table_negatives_k.md").read_text()
    for method in ("IR", "IRing"):
        assert re.search(rf"\| {method} +\| \d+\.\d +\| \d+\.\d", k_table), method
    # The report (README): every table and figure, each captioned with the cells that produced it.
    snakemake(workdir, "--profile", "profiles/local", "--report", "report.html", "all_tables")
    html = (workdir / "report.html").read_text()
    for name in (
        "table1.csv",
        "table2.csv",
        "table_la_variants.csv",
        "table3.csv",
        "table4.csv",
        "table_toy_cnce.csv",
        "fig_hard_negatives.png",
        "fig_anneal_policies.png",
        "fig_negatives_k.png",
        "table_negatives_k.csv",
        "gpu_hours.csv",
    ):
        assert name in html, name
    # Table 2's caption lists its cells.
    assert "results/smoke/lincls/digits_colour/IRingBall/seed0/metrics.json" in html
    assert "results/smoke/study/hard_negatives/digits/IRing/" in html
    # Captions say what ran: Table 1's rows, columns and the feature maps its cells recorded (32-pixel crops:
    # ResNet-18's layer4 is 1 x 1; CMC's L and ab maps concatenated), GPU-hours the provenance files it read.
    captions = report_captions(html)
    table1 = caption_text(captions["table1.csv"])
    assert "rows IR, IRing, CMC, CMCRing, MoCo, MoCoRing, LA, columns the pretraining datasets digits_colour" in table1
    assert "IR, IRing, MoCo, MoCoRing, LA: resnet18.layer4 (pre-pool), flattened, 512 x 1 x 1" in table1, table1
    assert (
        "CMC, CMCRing: resnet18.layer4 (pre-pool) of the L and ab encoders, concatenated (CMC's protocol), flattened, "
        "1024 x 1 x 1"
    ) in table1, table1
    assert "512 x 7 x 7" not in html  # the paper's 224-pixel map, which the smoke grid never computes
    assert "results/smoke/pretrain/digits_colour/IR/seed0/provenance.json" in captions["gpu_hours.csv"]
    assert "IRingBall" in captions["table2.csv"] and "CMC" not in captions["table2.csv"]
    # Every link a caption holds resolves from where the report is written (this folder mirrors the checkout's root).
    links = [href for caption in captions.values() for href in re.findall(r'href="([^"]+)"', caption)]
    assert len(links) >= len(captions)
    for href in links:
        if not re.match(r"[a-z]+:", href):
            assert (ROOT / unescape(href).partition("#")[0]).is_file(), href
    # The grid's progress view after the run: every Table 1 and study cell done, nothing else.
    status = subprocess.run(
        [sys.executable, "-m", "ring.cluster.batch", "status", "--grid", "smoke"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert status.returncode == 0, status.stderr
    assert re.fullmatch(
        r"total (\d+) stage runs: \1 done, 0 stale, 0 running, 0 pending, 0 failed, 0 missing",
        status.stdout.splitlines()[-1],
    ), status.stdout.splitlines()[-1]
    assert any(line.startswith("study ") for line in status.stdout.splitlines())

    # README's "Rerunning one cell", its commands run literally (.venv is this interpreter's).
    (workdir / ".venv").symlink_to(Path(sys.executable).parents[1])
    table1 = tables / "table1.md"
    before = table1.stat().st_mtime_ns
    build_one, remove, recompute = documented_commands("README.md", "Rerunning one cell")
    result = subprocess.run(build_one, shell=True, cwd=workdir, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and "Nothing to be done" in result.stdout + result.stderr  # it is built already
    subprocess.run(remove, shell=True, cwd=workdir, check=True)
    result = subprocess.run(recompute, shell=True, cwd=workdir, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    counts = job_counts(result.stdout + result.stderr)
    assert counts["pretrain"] == 1 and counts["lincls"] == 1 and counts["make_table1"] == 1  # the cell, then downstream
    assert table1.stat().st_mtime_ns > before
    iring = json.loads((workdir / "results/smoke/lincls/digits_colour/IRing/seed0/metrics.json").read_text())
    assert re.search(rf"\| IRing +\| {entry(iring)} [(\[]", table1.read_text())
