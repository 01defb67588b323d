"""The package installs anywhere: its wheel, installed into a fresh environment outside the checkout, runs the
login-node commands (``ring estimate``, ``ring describe``, a user grid's plan checks and status) from another
folder, reading its grids, schemas, default configs and figures from the package (ring/resources, package data) and
nothing of the checkout.
"""

import json
import os
import re
import shutil
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

import ring
from ring import resources
from ring.plan import estimate as E
from ring.plan import grid as G
from tests import ROOT
from tests.workflow.runs import SMALL, job_counts

# The dependencies' folders (torch, yaml, jsonschema ...): the environment running the tests, which may lie inside the
# checkout (.venv), and any site-packages a .pth of it adds (a worktree's venv over the main one); resolved, as the
# fresh environment's .pth names them.
DEPENDENCIES = list(
    dict.fromkeys(str(Path(p).resolve()) for p in [*site.getsitepackages(), *sys.path] if p.endswith("site-packages"))
)
# The paper grid's plan (README, "The paper grid"), which the installed `ring run` plans from any folder.
PAPER_PLAN_JOBS = json.loads((resources.FIGURES / "orchestration-cpu.json").read_text())["jobs_planned"]
# What setup.py ships as ring/resources/workflow/ (MANIFEST.in): the workflow `ring run` runs.
SHIPPED_WORKFLOW = ("Snakefile", "workflow", "profiles")

# sitecustomize of the fresh environment: every file or folder a process opens or lists under the checkout, other
# than the dependencies', is appended to $RING_CHECKOUT_LOG (an audit hook sees what sys.modules cannot: data files).
WATCH = textwrap.dedent("""
    import os, sys

    _ROOT, _LOG = os.environ.get("RING_CHECKOUT"), os.environ.get("RING_CHECKOUT_LOG")
    _DEPENDENCIES = tuple(os.environ.get("RING_DEPENDENCIES", "").split(os.pathsep))

    def _watch(event, args):
        if event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, os.PathLike)):
            path = os.path.realpath(os.fspath(args[0]))
            if path.startswith(_ROOT + os.sep) and not path.startswith(_DEPENDENCIES):
                with open(_LOG, "a") as log:  # the log lies outside the checkout: no recursion
                    log.write(f"{sys.argv} {event} {path}\\n")

    if _ROOT and _LOG:
        sys.addaudithook(_watch)
""")


def run(*args, check=True, **kw) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, **kw)
    assert not check or result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def installed(module_tmp):
    """(the fresh environment's folder, the environment variables of a user's shell in it, a work folder).

    The fastest robust install: the wheel is built from a copy of the sources (so the build's folders land there, not
    in the checkout) with `python -m build --no-isolation` (no download: this environment's setuptools); the fresh
    venv has no pip (`--without-pip`, a second), and this environment's pip installs the wheel into it
    (`pip --python`, no index, no dependencies).  Its dependencies are this environment's packages, named by one .pth
    file: a .pth only adds folders, so this environment's own ring-bench (an editable install) is not imported,
    while torch and the rest are not installed again (minutes and gigabytes)."""
    tmp = module_tmp("wheel")
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
    venv = tmp / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--quiet", "--no-deps",
        "--no-index", "--disable-pip-version-check", wheel)  # fmt: skip
    (site_packages,) = (venv / "lib").glob("python3*/site-packages")
    (site_packages / "ring-dependencies.pth").write_text("\n".join(DEPENDENCIES) + "\n")
    (site_packages / "sitecustomize.py").write_text(WATCH)
    work = tmp / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(
        PATH=os.pathsep.join([str(venv / "bin"), env.get("PATH", "")]),
        RING_CHECKOUT=str(ROOT.resolve()),
        RING_CHECKOUT_LOG=str(tmp / "checkout.log"),
        RING_DEPENDENCIES=os.pathsep.join(DEPENDENCIES),
    )
    yield venv, env, work
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
    here = E.report(G.load(resources.GRIDS / "paper.yaml"), E.load_figures())
    assert table(priced.stdout) == table(here), priced.stdout
    cells = sum(1 for _ in G.load(resources.GRIDS / "paper.yaml").cells())
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
    cells = list(G.load(work / "mine.yaml").cells())
    assert len(cells) == 4  # 2 methods x 2 seeds on one dataset
    mine = ring_command(installed, "estimate", "--grid", "mine.yaml")
    assert table(mine.stdout) == table(E.report(G.load(work / "mine.yaml"), E.load_figures())), mine.stdout
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


@pytest.mark.slow  # a workflow run of two cells from the installed wheel: about a minute on 2 busy cores
def test_ring_run_runs_the_shipped_workflow_from_an_empty_folder(installed):
    """`ring run` from a folder outside the checkout: the paper grid's plan, a tiny grid run to Table 1 on the CPU with
    its results in that folder, and `ring status` of it; nothing of the checkout read (the fixture's audit)."""
    venv, env, work = installed
    folder = work / "empty"
    folder.mkdir()

    def ring_here(*args, check=True):
        return run(venv / "bin" / "ring", *args, check=check, cwd=folder, env=env)

    paper = ring_here("run", "-n", "all_tables", "--profile", "local", "--grid", "paper")
    counts = job_counts(paper.stdout + paper.stderr)
    cells = list(G.load(resources.GRIDS / "paper.yaml").cells())
    assert counts["pretrain"] + counts["pretrain_two_encoders"] == len(cells) == counts["lincls"], counts
    assert counts["make_table1"] == 1 and counts["total"] == PAPER_PLAN_JOBS, counts
    assert not (folder / "results").exists()  # a dry run writes no results

    (folder / "tiny.yaml").write_text(yaml.safe_dump({**SMALL, "methods": ["IRing"], "seeds": [0]}))
    made = ring_here("run", "table1", "--grid", "tiny.yaml", "--cores", "2")  # the local profile, by default
    assert job_counts(made.stdout + made.stderr)["make_table1"] == 1
    table1 = (folder / "results" / "tiny" / "tables" / "table1.md").read_text()
    assert re.search(r"\| IRing +\| (\d+\.\d|diverged)", table1), table1
    status = ring_here("status")  # the grid `ring run` last used in this folder
    # The tiny encoder's probe may sit at chance: the table then says "diverged", and so does status (not "done").
    evaluation = "1 done, 0 stale, 0 running, 0 pending, 0 failed, 0 missing, 1 diverged"
    diverged = re.search(r"^\| *IRing *\|.*diverged", table1, re.M)  # its row, not a note that explains the word
    finished = evaluation if diverged else "2 done, 0 stale, 0 running, 0 pending, 0 failed, 0 missing"
    totals = [line for line in status.stdout.splitlines() if line.startswith("total ")]  # the price line follows
    assert totals == [f"total 2 stage runs: {finished}"], (status.stdout, table1)
    assert "predicted against spent (2 finished cells" in status.stdout, status.stdout


@pytest.mark.slow  # plans the paper grid from the installed wheel
def test_ring_run_plans_through_the_slurm_profile_with_the_folders_site_file(installed):
    """The shipped slurm profile from an empty folder: the package's cluster.yaml under ./site.yaml (the site's
    partition in every launch), the paper grid (the profile's), no cluster needed for a plan."""
    venv, env, work = installed
    folder = work / "cluster"
    folder.mkdir()
    (folder / "site.yaml").write_text(yaml.safe_dump({"slurm": {"defaults": {"partition": "mysite-gpu"}}}))
    planned = run(venv / "bin" / "ring", "run", "-n", "all_tables", "--profile", "slurm", cwd=folder, env=env)
    printed = planned.stdout + planned.stderr
    assert job_counts(printed)["total"] == PAPER_PLAN_JOBS
    launches = [line for line in printed.splitlines() if "ring.cluster.launch pretrain" in line]
    assert launches and all('"partition": "mysite-gpu"' in line for line in launches), launches[:1]
    refused = run(venv / "bin" / "ring", "run", "-n", "--profile", "slurm", "--site", "nowhere.yaml", check=False,
                  cwd=folder, env=env)  # fmt: skip
    assert refused.returncode == 1 and refused.stderr.startswith("ring: --site nowhere.yaml names no file"), refused
