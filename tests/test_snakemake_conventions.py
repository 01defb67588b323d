"""The Snakemake workflow catalog's conventions: `snakemake --lint` and `snakefmt --check` clean, the
rules' conda environment in step with the pins, and every link of the report's captions resolving."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.test_workflow import ROOT, snakemake, workdir  # noqa: F401  (fixture)

GRIDS = sorted(p.stem for p in (ROOT / "ring" / "resources" / "grids").glob("*.yaml"))


@pytest.mark.parametrize("grid", GRIDS)
def test_snakemake_lint_is_clean_for_every_shipped_grid(workdir, grid):
    # The rules a grid plans depend on it (one per study, Table 4's), so each shipped grid is linted.
    result = snakemake(workdir, "--lint", "--config", f"grid={grid}", "data_root=/nonexistent", check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert "Lints for" not in output and "Congratulations, your workflow is in a good condition!" in output


def test_snakefmt_check_is_clean():
    snakefmt = Path(sys.executable).with_name("snakefmt")  # installed beside this interpreter (envs/install.sh)
    result = subprocess.run([str(snakefmt), "--check", "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    # It read the workflow's files, not nothing: the Snakefile and every rule file.
    assert f"All {1 + len(list((ROOT / 'workflow' / 'rules').glob('*.smk')))} file(s) would be left unchanged" in (
        result.stderr
    ), result.stderr


def pins(lines) -> list[str]:
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def test_the_rules_conda_environment_pins_what_the_install_pins():
    env = yaml.safe_load((ROOT / "workflow" / "envs" / "ring.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert pip == pins((ROOT / "envs" / "requirements-cpu.txt").read_text().splitlines())
    assert any(isinstance(d, str) and d.startswith("python=") for d in env["dependencies"])


def markdown_anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces as '-'."""
    headings = re.findall(r"^#+ (.+)$", path.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def caption_links() -> list[tuple[str, str]]:
    """(caption, target) of every RST hyperlink (`text <target>`_) in the report's captions."""
    return [
        (p.name, target)
        for p in sorted((ROOT / "workflow" / "report").glob("*.rst"))
        for target in re.findall(r"`[^`]*<([^<>\s`]+)>`__?", p.read_text())
    ]


def test_every_caption_link_resolves_from_where_the_report_is_written():
    """README's command (3) writes report.html at the repository root: a relative link there must name a
    file of the checkout and, with a #fragment, one of its headings."""
    links = caption_links()
    assert len(links) >= len(list((ROOT / "workflow" / "report").glob("*.rst")))  # the fidelity link in each
    for caption, target in links:
        if re.match(r"[a-z]+:", target):  # https:, mailto:, the report's own javascript:
            continue
        path, _, fragment = target.partition("#")
        assert (ROOT / path).is_file(), f"{caption}: {target} names no file from the repository root"
        if fragment:
            assert fragment in markdown_anchors(ROOT / path), f"{caption}: {path} has no heading #{fragment}"
