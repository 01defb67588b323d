"""Claims of the documentation, the comments and the docstrings that the code or the committed data can check: the
README's targets are rules, the compile speed-up is the committed figures' range, every path a project file names
exists, ring/__init__.py names every module, and `snakemake --lint` runs without Detectron2."""

import json
import re
import sys
from pathlib import Path

import pytest

import ring
from ring import resources
from tests import ROOT
from tests.workflow.runs import snakemake


def readme_targets() -> list[str]:
    """The targets of README's table "What `all_tables` builds" (its first column, each name in backticks)."""
    text = (ROOT / "README.md").read_text()
    table = text[text.index("### What `all_tables` builds") :].split("\n## ")[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return [name for row in rows for name in re.findall(r"`(\w+)`", row)]


@pytest.mark.slow  # two dry runs of the workflow
def test_every_target_of_the_readmes_table_is_a_rule_that_plans(workdir):
    # Before: gpu_hours, table_negatives_k and table_ring_window were files of all_tables, not rules (MissingRule).
    targets = readme_targets()
    assert {"table1", "gpu_hours", "table_negatives_k", "fig_ring_window"} <= set(targets), targets
    window = [t for t in targets if "ring_window" in t]  # a study only the ring_digits grid has
    for grid, names in (("smoke", [t for t in targets if t not in window]), ("ring_digits", window)):
        result = snakemake(workdir, "-n", *names, "--config", f"grid={grid}")
        assert "This was a dry-run" in result.stdout + result.stderr


def compile_speedups() -> list[float]:
    """The compiled step's speed-up over the eager one (images/s on device-resident tensors, `synthetic`) of every
    committed pair of figures, family and device alike."""
    ratios = []
    for compiled in sorted(resources.FIGURES.glob("throughput_*_compile-*.json")):
        eager = compiled.with_name(compiled.name.replace("_compile", ""))
        rates = [json.loads(p.read_text())["images_per_s"]["synthetic"] for p in (compiled, eager)]
        ratios.append(rates[0] / rates[1])
    return ratios


def test_the_compile_speedup_the_configuration_states_is_the_committed_range():
    ratios = compile_speedups()
    assert len(ratios) >= 4
    claim = f"a step measured {min(ratios):.2f}-{max(ratios):.2f}x faster"
    for path in ("ring/core/config.py", "docs/configuration.md"):
        text = " ".join((ROOT / path).read_text().replace("#", " ").split())
        assert claim in text, f"{path} should say {claim!r} (ring/resources/figures/throughput_*_compile-*.json)"


# Project files whose comments name repository paths (a moved file leaves them stale).
NAMING_FILES = ["mkdocs.yml", "pyproject.toml", ".importlinter", ".ci/run", "benchmarks/*.sh", ".ci/slurm/*.sh"]
REPO_PATH = re.compile(
    r"(?<![\w./$<{-])((?:\.ci|benchmarks|docs|envs|profiles|results|ring|tests|workflow)/[\w./-]*\w)"
)


def test_every_repository_path_a_project_file_names_exists():
    # Before: mkdocs.yml named tests/test_docs.py and benchmarks/quickstart.sh results/quickstart-cpu.json.
    named = {
        (str(path.relative_to(ROOT)), found)
        for pattern in NAMING_FILES
        for path in ROOT.glob(pattern)
        for found in REPO_PATH.findall(path.read_text())
    }
    assert len(named) > 10
    assert not [pair for pair in sorted(named) if not (ROOT / pair[1]).exists()]


def test_the_packages_docstring_names_every_module():
    """ring/__init__.py lists each package's modules in parentheses after :mod:`ring.<package>`."""
    listed = dict(re.findall(r":mod:`ring\.(\w+)` \(([^)]*)\)", " ".join(ring.__doc__.split())))
    package = Path(ring.__file__).parent
    for folder in sorted(p for p in package.iterdir() if (p / "__init__.py").is_file() and p.name != "resources"):
        modules = {p.stem for p in folder.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}
        modules -= {"__init__", "__main__", "__pycache__"}
        assert folder.name in listed, f"ring/__init__.py does not list ring.{folder.name}'s modules"
        names = {re.split(r"[:\s]", item.strip())[0] for item in listed[folder.name].split(",")}
        assert names == modules, f"ring/__init__.py, ring.{folder.name}: lists {sorted(names)}, has {sorted(modules)}"


# A sitecustomize that hides Detectron2 from every process started with it on the path: import raises
# ModuleNotFoundError and importlib.util.find_spec answers None, as where it is not installed.
NO_DETECTRON2 = "import sys\nsys.modules['detectron2'] = None\n"


@pytest.mark.slow  # a lint, three dry runs and a run stopped before its first job
def test_snakemake_lint_and_plans_run_without_detectron2_and_a_run_that_needs_it_names_it(
    workdir, tmp_path, monkeypatch
):
    # Before: the plan check refused the smoke grid (it has Table 4) at parse time, so --lint needed Detectron2.
    # Issue 51: a plan (-n, a login node's) needed it too, even for table1; now only a run whose jobs import it here.
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(NO_DETECTRON2)
    monkeypatch.setenv("PYTHONPATH", f"{hide}:{ROOT}")
    linted = snakemake(workdir, "--lint", check=False)
    assert linted.returncode == 0 and "Congratulations" in linted.stdout + linted.stderr, linted.stderr[-3000:]
    for plan in (["table1"], ["table4"], ["table4", "--config", "launcher=slurm"]):
        planned = snakemake(workdir, "-n", *plan, check=False)
        assert planned.returncode == 0 and "This was a dry-run" in planned.stdout, planned.stderr[-3000:]
    ran = snakemake(workdir, "--cores", "1", "table4", check=False)  # its detection jobs would import it here
    assert ran.returncode == 1, ran.stderr[-3000:]
    assert "ring: Detectron2 is not installed in this Python environment" in ran.stderr
    assert "`ring install-detection`" in ran.stderr and "no job was started" in ran.stderr
    assert "Finished jobid" not in ran.stdout + ran.stderr and "Traceback" not in ran.stderr
    assert sys.modules.get("detectron2", False) is not None  # this process was left alone


def test_the_chance_bars_docs_methods_quotes_are_what_the_code_computes():
    """Issue 51: docs/methods.md said ImageNet's bar is 10.1% (a 10-class bar); health.chance_bar gives 0.142%.  Each
    bar quoted as "X% on <dataset>'s N (test) images" or "(N shape images, K classes) needs X%" is recomputed."""
    from ring.core import catalog
    from ring.engine import health

    text = (ROOT / "docs" / "methods.md").read_text()
    quoted = re.findall(r"([\d.]+)% on (\w+?)'s? ([\d,]+)", text)
    assert {name for _, name, _ in quoted} >= {"digits", "ImageNet"}, quoted
    classes = {"digits": 10, "ImageNet": 1000}
    for percent, name, images in quoted:
        bar = health.chance_bar(classes[name], int(images.replace(",", "")))
        assert float(percent) == round(bar, len(percent.split(".")[1])), (name, percent, bar)
    for images, k, percent in re.findall(r"\((\d+) shape images, (\d+) classes\) needs ([\d.]+)%", text):
        assert float(percent) == round(health.chance_bar(int(k), int(images)), 1), (images, percent)
        assert (int(images), int(k)) == (catalog.TRANSFER["shapes"].publisher_counts[1], 6)


def test_the_figures_the_docs_generate_are_what_the_code_computes_now():
    """The paper grid's price (docs/cluster.md) and `ring status`'s screen before its first cell (README) are
    generated (benchmarks/docs_figures.py): README's screen said 1,162 GPU-h left and cluster.md 2,066 H200-hours
    after the figures and the estimate had moved on (the code: 1,080).  Each block is what the code prints now."""
    from benchmarks import docs_figures

    stale = docs_figures.stale()
    assert not stale, f"run `{docs_figures.COMMAND}`: the pages differ from the code in {sorted(stale)}: {stale}"
    # The paper grid's plan README quotes is the recorded plan's (benchmarks/orchestration.py), which
    # tests/project/test_wheel.py checks a plan from the installed wheel against.
    recorded = json.loads((resources.FIGURES / "orchestration-cpu.json").read_text())["jobs_planned"]
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"-n all_tables --config grid=paper +# plan: ([\d,]+) jobs", readme).group(1) == f"{recorded:,}"
