"""The package installs anywhere: its wheel, installed into a fresh environment outside the checkout, runs the
login-node commands (``ring estimate``, ``ring describe``, a user grid's plan checks and status) from another
folder, reading its grids, schemas, default configs and figures from the package (ring/resources, package data) and
nothing of the checkout.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import yaml

import ring
from ring import resources
from ring.core.methods import display_name
from ring.plan import estimate, grid
from tests import ROOT
from tests.workflow.runs import job_counts

# The versions envs/install.sh installs (README, "torch first"): the fresh environment gets torch and torchvision at
# these pins from the same index, and every other dependency under the same constraints file.
REQUIREMENTS, CONSTRAINTS = ROOT / "envs" / "requirements-cpu.txt", ROOT / "envs" / "constraints-cpu.txt"
TORCH = [line.split("#")[0].strip() for line in REQUIREMENTS.read_text().splitlines() if line.startswith("torch")]
# The paper grid's plan (README, "The paper grid"), which the installed `ring run` plans from any folder.
PAPER_PLAN_JOBS = json.loads((resources.FIGURES / "orchestration-cpu.json").read_text())["jobs_planned"]
# What setup.py ships as ring/resources/workflow/ (MANIFEST.in): the workflow `ring run` runs.
SHIPPED_WORKFLOW = ("Snakefile", "workflow", "profiles")

# sitecustomize of the fresh environment: every file or folder a process opens or lists under the checkout is
# appended to $RING_CHECKOUT_LOG (an audit hook sees what sys.modules cannot: data files).
WATCH = textwrap.dedent("""
    import os, sys

    _ROOT, _LOG = os.environ.get("RING_CHECKOUT"), os.environ.get("RING_CHECKOUT_LOG")

    def _watch(event, args):
        if event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, os.PathLike)):
            path = os.path.realpath(os.fspath(args[0]))
            if path.startswith(_ROOT + os.sep):
                with open(_LOG, "a") as log:  # the log lies outside the checkout: no recursion
                    log.write(f"{sys.argv} {event} {path}\\n")

    if _ROOT and _LOG:
        sys.addaudithook(_watch)
""")


def run(*args, check=True, timeout=600, **kw) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, **kw)
    assert not check or result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    """(the fresh environment's folder, the environment variables of a user's shell in it, a work folder).

    The wheel, built from a copy of the sources (so the build's folders land there, not in the checkout) with this
    environment's `build` and setuptools, is installed as README says a user installs it: a new venv with its own
    pip, torch and torchvision first at envs/'s pins, then the wheel with every dependency it names resolved by pip
    under envs/constraints-cpu.txt, from the index envs/install.sh installs from.  Nothing of this environment or
    the checkout is visible to it (no --no-deps, no .pth).  `--no-compile`: Python compiles what the commands import
    when they import it, not torch's thousands of modules up front.  One environment for the session: the install
    is most of this module's time.  The venv (6.0 GB, torch's CUDA libraries most of it) lies outside pytest's
    folder, whose footprint tests/footprint.py bounds for the tests' own data, and goes when the session ends."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    ignore = shutil.ignore_patterns("__pycache__", ".tiny-*", ".snakemake")
    for name in ("ring", *SHIPPED_WORKFLOW):  # setup.py copies the workflow into the package
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy(ROOT / name, source / name)
    for name in ("pyproject.toml", "README.md", "setup.py", "MANIFEST.in"):
        shutil.copy(ROOT / name, source / name)
    run(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", tmp / "dist", source)
    (wheel,) = (tmp / "dist").glob("ring_bench-*.whl")
    venv = Path(tempfile.mkdtemp(prefix="ring-wheel-venv-")) / "venv"
    try:
        run(sys.executable, "-m", "venv", venv)
        pip = [
            venv / "bin" / "python",
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-compile",
            "--disable-pip-version-check",
        ]
        run(*pip, *TORCH, "-c", CONSTRAINTS, timeout=1200)
        run(*pip, wheel, "-c", CONSTRAINTS, timeout=1200)
        (site_packages,) = (venv / "lib").glob("python3*/site-packages")
        (site_packages / "sitecustomize.py").write_text(WATCH)
        work = tmp / "work"
        work.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env.update(
            PATH=os.pathsep.join([str(venv / "bin"), env.get("PATH", "")]),
            RING_CHECKOUT=str(ROOT.resolve()),
            RING_CHECKOUT_LOG=str(tmp / "checkout.log"),
        )
        yield venv, env, work
    finally:
        shutil.rmtree(venv.parent)
    log = tmp / "checkout.log"
    assert not log.exists(), f"the installed ring read the checkout:\n{log.read_text()}"


def ring_command(installed, *args, check=True) -> subprocess.CompletedProcess:
    venv, env, work = installed
    return run(venv / "bin" / "ring", *args, check=check, cwd=work, env=env)


def python(installed, code: str) -> subprocess.CompletedProcess:
    venv, env, work = installed
    return run(venv / "bin" / "python", "-c", code, cwd=work, env=env)


def table(report: str) -> list[str]:
    """The estimate's table, from its header line on (the lines above name the figures' files and their age)."""
    lines = report.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("stage ")) :]


@pytest.mark.slow  # builds a wheel and imports torch in a fresh environment: about a minute on 2 busy cores
def test_the_installed_wheel_runs_the_login_node_commands_from_another_folder(installed):
    venv, env, work = installed
    where = python(
        installed,
        "import json, ring, ring.resources as r; print(json.dumps([ring.__file__, str(r.GRIDS), ring.__version__]))",
    )
    package, grids, version = json.loads(where.stdout)
    assert Path(package).is_relative_to(venv) and Path(grids).is_relative_to(venv), where.stdout
    assert version == ring.__version__
    assert ring_command(installed, "--version").stdout.strip() == f"ring-bench {ring.__version__}"

    # The paper grid's price, from the figures the wheel carries: the checkout's table, line for line.
    priced = ring_command(installed, "estimate", "--grid", "paper")
    here = estimate.report(grid.load(resources.GRIDS / "paper.yaml"), estimate.load_figures())
    assert table(priced.stdout) == table(here), priced.stdout
    cells = sum(1 for _ in grid.load(resources.GRIDS / "paper.yaml").cells())
    total = next(line for line in table(priced.stdout) if line.startswith("total "))
    assert total.split()[:2] == ["total", str(2 * cells)]  # a pretraining and a lincls job each

    # Detectron2's installers ship in the package: `ring install-detection` runs the wheel's own copy.
    for flags, script in (([], "detectron2-cpu.sh"), (["--cluster"], "detectron2-cluster.sh")):
        line = ring_command(installed, "install-detection", "--print", *flags).stdout.split()
        assert line[0] == "bash" and Path(line[1]).is_relative_to(venv) and Path(line[1]).name == script, line
        assert Path(line[1]).is_file() and (Path(line[1]).parent.parent / "requirements-detection.txt").is_file()

    described = ring_command(installed, "describe", "pretrain", "ring_w_l")
    ours = run(sys.executable, "-m", "ring.cli", "describe", "pretrain", "ring_w_l", cwd=ROOT)
    assert described.stdout == ours.stdout and described.stdout.startswith("pretrain.ring_w_l: "), described.stdout

    # A user's grid in the work folder: the plan checks (the grid schema's keys, every cell's config), its price
    # and its cells' status (the package's default configs; no site file there).
    smoke = yaml.safe_load((resources.GRIDS / "smoke.yaml").read_text())
    mine = {key: smoke[key] for key in ("datasets", "pretrain", "lincls")}  # no tables' lesions, no studies
    (work / "mine.yaml").write_text(yaml.safe_dump({**mine, "methods": ["IR", "IRing"], "seeds": [0, 1]}))
    cells = list(grid.load(work / "mine.yaml").cells())
    assert len(cells) == 4  # 2 methods x 2 seeds on one dataset
    mine = ring_command(installed, "estimate", "--grid", "mine.yaml")
    assert table(mine.stdout) == table(estimate.report(grid.load(work / "mine.yaml"), estimate.load_figures())), (
        mine.stdout
    )
    total = next(line for line in table(mine.stdout) if line.startswith("total "))
    assert total.split()[:2] == ["total", str(2 * len(cells))]
    status = ring_command(installed, "status", "--grid", "mine.yaml")
    # The cell rows: not the outlook's per-stage and grid lines ("pretrain: ...", "grid mine: ..."), nor the total.
    rows = [line.split() for line in status.stdout.splitlines() if line.split()[0] in ("pretrain", "lincls")]
    assert len(rows) == 2 * len(cells) and {row[4] for row in rows} == {"missing"}, status.stdout
    (work / "broken.yaml").write_text(yaml.safe_dump({**smoke, "pretrain": {"all": {"bank_negatives": 4096}}}))
    refused = ring_command(installed, "estimate", "--grid", "broken.yaml", check=False)
    assert refused.returncode == 1 and refused.stderr.startswith("ring: Grid broken.yaml, stage pretrain"), refused
    assert "bank_negatives=4096 is larger than the memory bank" in refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.slow  # imports torch in the fresh environment
def test_the_installed_wheel_records_its_version_instead_of_a_commit(installed):
    code = python(
        installed, "import json; from ring.engine.provenance import git_state; print(json.dumps(git_state()))"
    )
    assert json.loads(code.stdout) == {
        "commit": None,
        "dirty": None,
        "version": ring.__version__,
        "code": f"installed package ring-bench {ring.__version__}, not a git checkout: no commit recorded",
    }


@pytest.mark.slow  # builds a store of 1,797 images from the installed wheel
def test_the_command_a_damaged_store_names_rebuilds_it_from_the_wheel(installed):
    """Issue 52 item 1: the sentence a damaged store gives names a command that acts where ring-bench is installed
    without a checkout: `ring prepare build ...`, run as printed, mends the shard."""
    venv, env, work = installed
    data = work / "store-data"
    ring_command(installed, "generate", "digits_folder", "--data-root", str(data))
    build = ["prepare", "build", "digits_folder", "--data-root", str(data), "--format", "raw"]
    ring_command(installed, *build)
    shard = data / "digits_folder" / "store" / "raw-32" / "train" / "shard-00000" / "data.bin"
    damaged = bytearray(shard.read_bytes())
    damaged[100] ^= 0xFF
    shard.write_bytes(bytes(damaged))
    check = ["prepare", "check", "digits_folder", "--data-root", str(data), "--format", "raw"]
    refused = ring_command(installed, *check, check=False)
    named = f"`ring {' '.join(build)}`"
    assert refused.returncode == 1 and refused.stderr == (
        f"ring: {shard} does not match its recorded SHA-256 (damaged or edited since the store was built); run "
        f"{named}, which builds that file again.\n"
    ), refused.stderr
    ring_command(installed, *named.strip("`").split()[1:])
    assert ring_command(installed, *check).stdout.startswith(f"prepare: {shard.parents[2]} holds ")


@pytest.mark.slow  # Table 1 of a one-cell grid from the installed wheel: a pretraining and a lincls run
def test_ring_run_runs_the_shipped_workflow_from_an_empty_folder(installed):
    """`ring run` from a folder outside the checkout, as README's wheel lines: the plan of its defaults (the local
    profile, the smoke grid's Table 1), then Table 1 of a user's one-cell grid (the smoke grid's IR cell) on the CPU
    with its results in that folder, and `ring status` of it; nothing of the checkout read (the fixture's audit).
    One cell, not the smoke grid's 14 stage runs: what the wheel adds is the shipped workflow and its package data,
    the same for every cell; README command (1)'s test (tests/workflow/test_quick_start.py) trains and tabulates
    every smoke cell from the checkout.  The paper grid's plan through the slurm profile is the next test's."""
    venv, env, work = installed
    folder = work / "empty"
    folder.mkdir()

    def ring_here(*args, check=True):
        return run(venv / "bin" / "ring", *args, check=check, cwd=folder, env=env, timeout=1200)

    # The defaults: the local profile and the smoke grid, every Table 1 cell of it planned.
    planned = ring_here("run", "-n", "table1")
    counts = job_counts(planned.stdout + planned.stderr)
    smoke = grid.load(resources.GRIDS / "smoke.yaml")
    table1_cells = len(smoke.datasets) * len(smoke.methods) * len(smoke.seeds)
    assert counts["pretrain"] + counts["pretrain_two_encoders"] == table1_cells == counts["lincls"], counts
    assert counts["make_table1"] == 1, counts
    assert "results/smoke/tables/table1.md" in planned.stdout + planned.stderr
    assert not (folder / "results").exists()  # a dry run writes no results

    values = yaml.safe_load((resources.GRIDS / "smoke.yaml").read_text())
    one = {key: values[key] for key in ("datasets", "pretrain", "lincls")}  # the smoke cells' settings, no studies
    (folder / "one.yaml").write_text(yaml.safe_dump({**one, "methods": ["IR"], "seeds": [0]}))
    mine = grid.load(folder / "one.yaml")
    made = ring_here("run", "table1", "--cores", "2", "--grid", "one.yaml")
    assert job_counts(made.stdout + made.stderr)["make_table1"] == 1
    table1 = (folder / "results" / "one" / "tables" / "table1.md").read_text()
    for method in mine.methods:  # a number in every row, as README command (1)'s test asks of the checkout's run
        assert re.search(rf"^\| {re.escape(display_name(method))} +\| \d+\.\d", table1, re.M), (method, table1)
    status = ring_here("status")  # the grid `ring run` last used in this folder: the one-cell grid
    runs = 2 * len(mine.datasets) * len(mine.methods) * len(mine.seeds)  # a pretraining and a lincls each
    totals = [line for line in status.stdout.splitlines() if line.startswith("total ")]  # the price line follows
    # The grid's cells done, none diverged, none missing (it has no tables beyond Table 1, no studies).
    finished = rf"total {runs} stage runs: {runs} done, 0 stale, 0 running, 0 pending, 0 failed, 0 missing"
    assert len(totals) == 1 and re.fullmatch(finished, totals[0]), status.stdout
    assert f"predicted against spent ({runs} finished cells" in status.stdout, status.stdout


@pytest.mark.slow  # plans the paper grid from the installed wheel
def test_ring_run_plans_through_the_slurm_profile_with_the_folders_site_file(installed):
    """The shipped slurm profile from an empty folder: the package's cluster.yaml under ./site.yaml (the site's
    partition in every launch), the paper grid (the profile's) with every cell and Table 1 planned, no cluster
    needed for a plan."""
    venv, env, work = installed
    folder = work / "cluster"
    folder.mkdir()
    (folder / "site.yaml").write_text(yaml.safe_dump({"slurm": {"defaults": {"partition": "mysite-gpu"}}}))
    planned = run(venv / "bin" / "ring", "run", "-n", "all_tables", "--profile", "slurm", cwd=folder, env=env)
    printed = planned.stdout + planned.stderr
    counts = job_counts(printed)
    cells = list(grid.load(resources.GRIDS / "paper.yaml").cells())
    assert counts["pretrain"] + counts["pretrain_two_encoders"] == len(cells) == counts["lincls"], counts
    assert counts["make_table1"] == 1 and counts["total"] == PAPER_PLAN_JOBS, counts
    launches = [line for line in printed.splitlines() if "ring.cluster.launch pretrain" in line]
    assert launches and all('"partition": "mysite-gpu"' in line for line in launches), launches[:1]
    refused = run(venv / "bin" / "ring", "run", "-n", "--profile", "slurm", "--site", "nowhere.yaml", check=False,
                  cwd=folder, env=env)  # fmt: skip
    assert refused.returncode == 1 and refused.stderr.startswith("ring: --site nowhere.yaml names no file"), refused
