"""The finished grid's tests: edits, undos, reruns, prunes and the price check, each on a copy of one grid of IR,
IRing and MoCo cells trained once for the module.  Apart from tests/workflow/test_workflow.py, so that pytest-xdist's
two workers (one file each at a time) run the two side by side."""

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.documented import documented_commands
from tests.helpers import copy_workflow
from tests.workflow.runs import ONE_CELL_RETRAINED, SMALL, entry, job_counts, ring_status, snakemake

pytestmark = pytest.mark.slow  # whole Snakemake runs: outside the developer loop (pytest -m 'not slow')


# The finished grid four tests start from: a grid file kept outside the repository (issue #22), its IR, IRing and MoCo
# cells on digits, seed 0, and every table built.  Each test built its own before (four all_tables runs: six
# pretraining and four evaluation jobs); one run serves them all, each test editing a copy of it.  Its linear
# evaluations train one epoch, not SMALL's two: these tests check what reruns, what is kept and what a table shows,
# which one epoch writes as two do, and the file trains about eight evaluations (about 2 s an epoch alone here).
FINISHED = {
    **SMALL,
    "methods": ["IR", "IRing", "MoCo"],
    "seeds": [0],
    "lincls": {"all": {**SMALL["lincls"]["all"], "epochs": 1}},
}


@pytest.fixture(scope="module")
def finished_grid(module_tmp) -> Path:
    root = copy_workflow(module_tmp("finished"))
    grid_file = root / "elsewhere" / "mine.yaml"
    grid_file.parent.mkdir()
    grid_file.write_text(yaml.safe_dump(FINISHED))
    snakemake(root, "--profile", "profiles/local", "all_tables", "--config", f"grid={grid_file}")
    return root


def _copy_to_edit(grid_root: Path, to: Path) -> tuple[Path, Path]:
    """A copy of a trained grid's folder (its modification times kept, as Snakemake reads them): the folder to run
    Snakemake in and its grid file.  Its results folder is recorded as the copied grid file's, as its own first run
    would have recorded it (ring.plan.ownership: an edited file of the same name elsewhere is refused)."""
    from ring.plan import ownership

    workdir = Path(shutil.copytree(grid_root, to, symlinks=True))
    grid_file, results = workdir / "elsewhere" / "mine.yaml", workdir / "results" / "mine"
    (results / ownership.MARKER).unlink()
    ownership.claim(grid_file, results)
    return workdir, grid_file


@pytest.fixture
def finished(finished_grid, tmp_path) -> tuple[Path, Path, dict]:
    """A copy of ``finished_grid`` to edit: the folder to run Snakemake in, its grid file, and the grid's values."""
    return (*_copy_to_edit(finished_grid, tmp_path / "finished"), copy.deepcopy(FINISHED))


# The edit two tests start from: IR's pretraining lr, and MoCo dropped from the grid (no IR or IRing cell reads it).
# Each test made it on its own copy of finished_grid before (one IR pretraining and evaluation, and a Snakemake run,
# twice); one run serves both, each test going on from a copy of it.
EDITED = {
    **FINISHED,
    "methods": ["IR", "IRing"],
    "pretrain": {**FINISHED["pretrain"], "by_method": {"IR": {"lr": 0.01}}},
}


@pytest.fixture(scope="module")
def edited_grid(finished_grid, module_tmp) -> tuple[Path, str]:
    """A copy of ``finished_grid`` after its all_tables run on EDITED, and what that run printed."""
    workdir, grid_file = _copy_to_edit(finished_grid, module_tmp("edited") / "finished")
    grid_file.write_text(yaml.safe_dump(EDITED))
    result = snakemake(workdir, "--profile", "profiles/local", "all_tables", "--config", f"grid={grid_file}")
    return workdir, result.stdout + result.stderr


@pytest.fixture
def edited(edited_grid, tmp_path) -> tuple[Path, Path, dict, str]:
    """A copy of ``edited_grid`` to edit further (as ``finished``), the grid's values, and what the edit's run
    printed."""
    workdir, output = edited_grid
    return (*_copy_to_edit(workdir, tmp_path / "edited"), copy.deepcopy(EDITED), output)


def _table_entry(workdir: Path, grid: str, method: str) -> str:
    """The Digits entry of a method's row in Table 1's Markdown."""
    for line in (workdir / "results" / grid / "tables" / "table1.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == method:
            return cells[1]
    raise AssertionError(f"no row {method}")


def test_an_edit_keeps_the_old_encoders_evaluation_and_an_undo_brings_it_back_untrained(finished_grid, edited):
    """Issue 32 item 3: a pretraining edit keeps the finished linear evaluation of the old encoder under the
    evaluation cell's runs/<lincls hash>-<encoder sha256[:12]>/; undoing the edit restores the encoder and that
    evaluation, decided before any job: the same metrics.json and log.jsonl bytes, nothing trained."""
    workdir, grid_file, _, output = edited  # IR's pretraining edited (EDITED), its all_tables run made

    def run():
        return snakemake(workdir, "--profile", "profiles/local", "all_tables", "--config", f"grid={grid_file}")

    cell = workdir / "results" / "mine" / "lincls" / "digits" / "IR" / "seed0"
    before = finished_grid / cell.relative_to(workdir)  # the cell as it was before the edit
    first = {name: (before / name).read_bytes() for name in ("metrics.json", "log.jsonl", "provenance.json")}
    record = json.loads((before / "run.json").read_text())
    kept = cell / "runs" / f"{record['config_hash']}-{record['encoder_sha256'][:12]}"

    assert {name: (kept / name).read_bytes() for name in first} == first  # nothing finished is deleted
    # keep_superseded: results (the default) keeps what a table needs and drops the probe's checkpoint.
    assert not (kept / "checkpoint.pt").exists() and "the encoder it evaluates changed" in output
    edited = (cell / "metrics.json").read_bytes()
    assert edited != first["metrics.json"]

    grid_file.write_text(yaml.safe_dump(FINISHED))  # the edit undone, MoCo back in the grid
    output = (lambda r: r.stdout + r.stderr)(run())
    assert "the evaluation of this encoder with this config is complete" in output
    assert {name: (cell / name).read_bytes() for name in first} == first  # restored, not trained again
    assert json.loads((cell / "run.json").read_text()) == record
    (edited_run,) = (cell / "runs").iterdir()  # the edited encoder's evaluation, kept in turn
    assert (edited_run / "metrics.json").read_bytes() == edited
    assert not list(cell.rglob("checkpoint.stale-*"))
    assert _table_entry(workdir, "mine", "IR").startswith(entry(json.loads(first["metrics.json"])))


def test_edit_a_finished_cell_and_rerun_retrains_exactly_it_and_table1_shows_the_new_number(finished):
    """Issue #22: a grid file kept outside the repository, edited after its cells finished."""
    from ring.core.config import config_hash
    from ring.plan import grid as grid_plan

    workdir, grid_file, values = finished

    def run(*args, **kw):
        return snakemake(
            workdir, "--profile", "profiles/local", "all_tables", *args, "--config", f"grid={grid_file}", **kw
        )

    def pre(method):
        return workdir / "results" / "mine" / "pretrain" / "digits" / method / "seed0"

    def metrics(method):
        return json.loads(
            (workdir / "results" / "mine" / "lincls" / "digits" / method / "seed0" / "metrics.json").read_text()
        )

    first_iring = config_hash(grid_plan.from_dict("mine", values).pretrain_config("digits", "IRing", 0, "data"))
    old_encoder = (pre("IRing") / "encoder.pt").read_bytes()
    old_ir = metrics("IR")

    # 1. The final w_l of IRing: that cell starts over, its previous run kept; then its evaluation and the tables.
    values["pretrain"] = {**values["pretrain"], "by_method": {"IRing": {"ring_w_l": [0.0, 50.0]}}}
    grid_file.write_text(yaml.safe_dump(values))
    result = run()
    output = result.stdout + result.stderr
    assert job_counts(output) == ONE_CELL_RETRAINED
    kept = pre("IRing") / "runs" / first_iring
    assert (
        f"ring: results/mine/pretrain/digits/IRing/seed0: its config changed (ring_w_l): the previous run is kept in "
        f"{kept.relative_to(workdir)} and this cell starts over"
    ) in output
    assert (kept / "encoder.pt").read_bytes() == old_encoder  # nothing finished is deleted
    new = config_hash(grid_plan.from_dict("mine", values).pretrain_config("digits", "IRing", 0, "data"))
    assert (
        json.loads((pre("IRing") / "export.json").read_text())["config_hash"]
        == new
        == metrics("IRing")["encoder_config_hash"]
    )
    assert yaml.safe_load((pre("IRing") / "config.yaml").read_text())["ring_w_l"] == [0.0, 50.0]
    assert _table_entry(workdir, "mine", "IRing").startswith(entry(metrics("IRing")))
    assert metrics("IR") == old_ir  # the other cell is untouched

    # 2. A longer schedule for IR continues its checkpoint.
    values["pretrain"]["all"] = {**values["pretrain"]["all"], "epochs": 2}
    for method in ("IRing", "MoCo"):  # they keep their schedule: only IR changes
        values["pretrain"]["by_method"].setdefault(method, {})["epochs"] = 1
    grid_file.write_text(yaml.safe_dump(values))
    result = run()
    output = result.stdout + result.stderr
    assert (
        "ring: results/mine/pretrain/digits/IR/seed0: its config changed (epochs): continuing from its checkpoint "
        "to epochs=2"
        in output
        and "resuming results/mine/pretrain/digits/IR/seed0 at epoch 1 step 0" in output
    )
    assert output.count("continuing from its checkpoint") == 1  # the job does not say the rule's decision again
    assert job_counts(output)["pretrain"] == 1 and len((pre("IR") / "log.jsonl").read_text().splitlines()) == 2
    assert _table_entry(workdir, "mine", "IR").startswith(entry(metrics("IR")))

    # 3. An edit whose training fails: the run says so, and the next plan retrains (never "Nothing to be done").
    values["pretrain"]["by_method"]["IR"] = {"lr": 1e6}
    grid_file.write_text(yaml.safe_dump(values))
    failed = run(check=False)
    assert failed.returncode != 0 and "the training loss became nan" in failed.stderr
    plan = run("-n")
    assert "Nothing to be done" not in plan.stdout + plan.stderr
    assert {"pretrain", "lincls"} <= set(job_counts(plan.stdout + plan.stderr))
    # ... and undoing the edit brings the finished 2-epoch run back: its number, not a retrained one.
    del values["pretrain"]["by_method"]["IR"]
    grid_file.write_text(yaml.safe_dump(values))
    result = run()
    output = result.stdout + result.stderr
    # Its checkpoints were dropped when the edit set it aside (keep_superseded: results): back as finished, untrained.
    assert (
        "is back in place (finished: its encoder verifies against its checksum record, so nothing retrains)" in output
    )
    assert "nothing to train" in output and "resuming results/mine/pretrain/digits/IR/seed0" not in output
    assert _table_entry(workdir, "mine", "IR").startswith(entry(metrics("IR")))

    # 4. docs/grids.md "Your own grid": rerun just one linear evaluation, its two commands with this grid's names.
    *_, remove, rerun_eval = documented_commands("docs/grids.md", "Your own grid")

    def here(command):
        return (
            command.replace("$HOME/grids/c100_ring50.yaml", str(grid_file))
            .replace("c100_ring50", "mine")
            .replace("cifar100/MoCoRing/seed3", "digits/IRing/seed0")
            .replace(" data_root=/datasets", "")
            .replace(".venv/bin/snakemake", f"{sys.executable} -m snakemake")
        )

    subprocess.run(here(remove), shell=True, cwd=workdir, check=True)
    result = subprocess.run(here(rerun_eval), shell=True, cwd=workdir, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert job_counts(result.stdout + result.stderr) == {
        "lincls": 1,
        "lincls_config": 1,
        "lincls_hash": 1,
        "make_table1": 1,
        "table1": 1,
        "total": 5,
    }
    assert _table_entry(workdir, "mine", "IRing").startswith(entry(metrics("IRing")))

    # 5. Runtime knobs are not edits (issue 32 item 7): the cells' config.yaml take the new values for any later
    # job, and nothing trains, exports or evaluates again.
    encoders = {m: (pre(m) / "encoder.pt").stat().st_mtime_ns for m in FINISHED["methods"]}
    values["pretrain"]["all"] = {**values["pretrain"]["all"], "loss_read_every": 10, "compile": "off", "threads": 1}
    values["lincls"]["all"] = {**values["lincls"]["all"], "num_workers": 1, "threads": 1}
    grid_file.write_text(yaml.safe_dump(values))
    result = run()
    counts = job_counts(result.stdout + result.stderr)
    assert not {"pretrain", "lincls", "make_table1"} & set(counts), counts
    assert counts.get("pretrain_config") == 3 and counts.get("lincls_config") == 3, counts  # every cell's
    assert yaml.safe_load((pre("IR") / "config.yaml").read_text())["loss_read_every"] == 10
    assert {m: (pre(m) / "encoder.pt").stat().st_mtime_ns for m in FINISHED["methods"]} == encoders
    assert "Nothing to be done" in (lambda r: r.stdout + r.stderr)(run("-n"))


def test_a_key_moco_never_reads_under_all_retrains_the_ir_cell_and_leaves_the_finished_moco_cell(finished):
    """Issue 32 item 7: negatives_count counts a memory bank's negatives; MoCo's are its queue, so it never reads it."""
    workdir, grid_file, values = finished

    def pre(m):
        return workdir / "results" / "mine" / "pretrain" / "digits" / m / "seed0"

    # The two cells' encoders, the targets (the grid's IRing, a memory bank's too, is not asked for).
    encoders = [str(pre(m).relative_to(workdir) / "encoder.pt") for m in ("IR", "MoCo")]

    def run(*args):
        return snakemake(workdir, "--profile", "profiles/local", *args, *encoders, "--config", f"grid={grid_file}")

    moco = {name: (pre("MoCo") / name).read_bytes() for name in ("config.yaml", "config.hash")}

    values["pretrain"]["all"] = {**values["pretrain"]["all"], "negatives_count": "including_positive"}
    grid_file.write_text(yaml.safe_dump(values))
    plan = run("-n")
    # The IR cell's hash rule, config rule and training; nothing of MoCo's (its config.yaml and hash unchanged).
    assert job_counts(plan.stdout + plan.stderr) == {
        "pretrain": 1,
        "pretrain_config": 1,
        "pretrain_hash": 1,
        "total": 3,
    }
    assert "method=IR," in plan.stdout and "method=MoCo," not in plan.stdout
    run()
    assert {name: (pre("MoCo") / name).read_bytes() for name in moco} == moco
    assert yaml.safe_load((pre("IR") / "config.yaml").read_text())["negatives_count"] == "including_positive"
    assert "Nothing to be done" in (lambda r: r.stdout + r.stderr)(run("-n"))


def test_superseded_runs_keep_results_not_checkpoints_undo_needs_none_and_prune_removes_them(
    finished_grid, edited, tmp_path
):
    """Issue 32 item 4: a superseded run keeps its encoder, log and records and drops its checkpoints (unless
    keep_superseded: all); an undo brings a finished run back without retraining; status shows what prune removes;
    prune --dry-run lists it with sizes, prune removes superseded runs and the cells of a method the grid dropped."""
    from ring.core.config import config_hash
    from ring.plan import grid as grid_plan

    workdir, grid_file, values, _ = edited  # IR's pretraining edited and MoCo dropped (EDITED), all_tables run

    def run(*args):
        return snakemake(workdir, "--profile", "profiles/local", "all_tables", *args, "--config", f"grid={grid_file}")

    def batch(*args):
        return subprocess.run(
            [sys.executable, "-m", "ring.cluster.batch", *args, "--grid", str(grid_file), "--results", "results"],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=120,
        )

    base = workdir / "results" / "mine"
    cell = base / "pretrain" / "digits" / "IR" / "seed0"
    before = finished_grid / cell.relative_to(workdir)  # the cell as it was before the edit
    first = config_hash(grid_plan.from_dict("mine", FINISHED).pretrain_config("digits", "IR", 0, "data"))
    first_encoder = (before / "encoder.pt").read_bytes()
    assert (before / "checkpoint.pt").is_file()

    kept = cell / "runs" / first
    assert {"encoder.pt", "export.json", "log.jsonl", "provenance.json", "run.json"} <= {p.name for p in kept.iterdir()}
    assert not list(kept.glob("checkpoint*.pt")) and (kept / "encoder.pt").read_bytes() == first_encoder
    edited = config_hash(grid_plan.from_dict("mine", values).pretrain_config("digits", "IR", 0, "data"))

    # Undo, with keep_superseded: all (a runtime key): the finished first run is back, nothing trains, and the edited
    # run set aside keeps its checkpoint.
    values["pretrain"] = {"all": {**SMALL["pretrain"]["all"], "keep_superseded": "all"}}
    grid_file.write_text(yaml.safe_dump(values))
    output = (lambda r: r.stdout + r.stderr)(run())
    assert "nothing retrains" in output and "nothing to train" in output and "ring: seed0 epoch=" not in output
    assert (cell / "encoder.pt").read_bytes() == first_encoder and not (cell / "checkpoint.pt").exists()
    assert (cell / "runs" / edited / "checkpoint.pt").is_file() and not (cell / "runs" / first).exists()

    # status counts what prune removes; --dry-run lists it with sizes and removes nothing.
    status = batch("status")
    assert status.returncode == 0, status.stderr
    disk = status.stdout.splitlines()[-1]
    # The edited pretraining run, and its linear evaluation kept per encoder (issue 32 item 3) in the lincls cell.
    (kept_eval,) = (base / "lincls" / "digits" / "IR" / "seed0" / "runs").iterdir()
    assert disk.startswith("disk: 2 superseded runs (") and "and 2 cell folders the grid no longer names (" in disk
    assert f"prune --grid {grid_file} --dry-run" in disk
    dry = batch("prune", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    dropped = [base / stage / "digits" / "MoCo" / "seed0" for stage in ("pretrain", "lincls")]
    listed = dry.stdout.splitlines()
    assert {line.split()[-1] for line in listed[:-1]} == {
        str(p.relative_to(workdir)) for p in [cell / "runs" / edited, kept_eval, *dropped]
    }
    assert all(re.match(r" *\d+\.\d+ (MB|GB)  ", line) for line in listed[:-1])
    assert re.fullmatch(
        r"total: 2 superseded runs \(.+ MB\) and 2 cell folders the grid no longer names \(.+ MB\); "
        r"would free .+ MB \(--dry-run: nothing removed\)",
        listed[-1],
    ), listed[-1]
    assert all(p.is_dir() for p in [cell / "runs" / edited, kept_eval, *dropped])

    # prune removes them, and the grid's live cells keep every file: the tables build from them unchanged.
    live = {
        p: p.read_bytes() for p in base.rglob("*") if p.is_file() and "MoCo" not in p.parts and "runs" not in p.parts
    }
    pruned = batch("prune", "--yes")
    assert pruned.returncode == 0 and "; freed " in pruned.stdout, pruned.stderr
    assert not (cell / "runs").exists() and not any(p.exists() for p in dropped)
    assert all(p.read_bytes() == data for p, data in live.items() if p.suffix != ".log")
    assert "Nothing to be done" in (lambda r: r.stdout + r.stderr)(run("-n"))
    run("--forcerun", "make_table1")
    assert "disk:" not in batch("status").stdout
    bad = subprocess.run(
        [sys.executable, "-m", "ring.cluster.batch", "prune", "--grid", str(tmp_path / "nope.yaml")],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr

    # Issue 40 item 3: a metrics.json edited in place (its exported/ copy is the same inode), an encoder damaged after
    # its evaluation, a metrics.json deleted: status names each, and the next all_tables replans exactly that cell.
    metrics = base / "lincls" / "digits" / "IR" / "seed0" / "metrics.json"
    encoder, original, table = cell / "encoder.pt", metrics.read_bytes(), (base / "tables" / "table1.md").read_text()

    def planned():
        output = (lambda r: r.stdout + r.stderr)(run("-n"))
        return {} if "Nothing to be done" in output else job_counts(output)

    metrics.write_text(json.dumps({**json.loads(original), "top1": 95.0}))
    assert "lincls    digits     IR         seed0   damaged" in batch("status").stdout
    assert {k: v for k, v in planned().items() if k in ("pretrain", "lincls")} == {"lincls": 1}
    metrics.write_bytes(original)
    with open(encoder, "r+b") as fh:  # damaged in place
        fh.seek(100)
        fh.write(b"\0" * 8)
    assert "pretrain  digits     IR         seed0   damaged" in batch("status").stdout
    assert {k: v for k, v in planned().items() if k in ("pretrain", "lincls")} == {"pretrain": 1, "lincls": 1}
    encoder.write_bytes(first_encoder)
    metrics.unlink()
    assert "its metrics.json is gone, though export.json records it" in batch("status").stdout
    assert {k: v for k, v in planned().items() if k in ("pretrain", "lincls", "make_table1")} == {
        "lincls": 1,
        "make_table1": 1,
    }
    run()  # brought back from its kept copy: nothing trains, the table is the same
    assert metrics.read_bytes() == original and (base / "tables" / "table1.md").read_text() == table
    assert planned() == {}


def test_a_stale_encoder_is_rerun_by_all_tables_and_status_and_the_plan_agree(finished):
    """Issue 34, item 2: an encoder that another config made (as a job of the previous config wrote it after an edit,
    before the launcher checked hashes) makes Table 1 stale; `batch status` says the next all_tables reruns it, a dry
    run plans it (never "Nothing to be done"), all_tables reruns it, and then the table has its number."""
    from ring.cluster import batch
    from ring.plan import lineage

    workdir, grid_file, _ = finished

    def run(*args):
        return snakemake(workdir, "--profile", "profiles/local", "all_tables", *args, "--config", f"grid={grid_file}")

    export = workdir / "results/mine/pretrain/digits/IR/seed0/export.json"
    made = json.loads(export.read_text())
    export.write_text(json.dumps({**made, "config_hash": "0" * 16}))  # the files verify; another config made them
    evaluation = workdir / "results/mine/lincls/digits/IR/seed0/metrics.json"
    assert lineage.stale_reason(evaluation, json.loads(evaluation.read_text()))  # Table 1 would show it stale
    status = ring_status(
        workdir,
        "--grid",
        grid_file,
        "--grids-dir",
        "ring/resources/grids",
        "--configfile",
        *batch.DEFAULT_CONFIGS,
    )
    row = next(line for line in status.splitlines() if line.split()[:3] == ["pretrain", "digits", "IR"])
    assert row.split()[4] == "stale" and "the next all_tables reruns it" in row, status
    plan = run("-n")
    assert {"pretrain": 1, "lincls": 1}.items() <= job_counts(plan.stdout + plan.stderr).items()
    run()
    assert json.loads(export.read_text())["config_hash"] == made["config_hash"]
    metrics = json.loads((workdir / "results/mine/lincls/digits/IR/seed0/metrics.json").read_text())
    table = (workdir / "results/mine/tables/table1.md").read_text()
    assert "stale" not in table and _table_entry(workdir, "mine", "IR").startswith(entry(metrics)), table
    assert "Nothing to be done" in (lambda r: r.stdout + r.stderr)(run("-n"))


def test_the_price_of_the_finished_cells_is_what_they_spent_within_a_factor_of_two(finished, tmp_path):
    """Issue 47, item 3: the grid finished_grid trained here (Snakemake's jobs, two at a time, beside whatever else
    shares the cores), priced from figures the price suite (benchmarks/price.py, as committed for this CPU) measures on
    this host first (its calibration grid, two epochs, two jobs at a time, one thread each; passed as `--figures`
    would pass them): each pass and the total within 25% of what the cells' provenance recorded on the same clock, the
    jobs' own CPU seconds, every row priced end to end; `ring status` says it.  The figures are this host's, not the
    committed ones: a CPU second of these 2-vCPU machines is not one host's as another's (IR's pretraining measured
    4.0 ms of CPU per image on one, 10.8 on another, 2.3 spent in a CI run).

    Within a factor of two, not issue 47's quarter: the suite and the grid run minutes apart beside the other pytest
    worker, whose load changes what a job's CPU second buys on these 2 vCPUs (the same IR pass, 10.8 ms per image
    alone and 18.5 at load 9 on one host), so a quarter would time the neighbour, not the price; it is a benchmark's
    claim, measured on a quiet host and committed (`python -m benchmarks.price --device cpu --check`,
    ring/resources/figures/price_check-cpu.json).  The errors this test guards against are not subtle: a pass left
    out, a one-process figure multiplied by the workers, a per-batch figure read per image, each off by 2x or more."""
    from benchmarks import price
    from benchmarks.common import machine
    from ring.cluster import batch
    from ring.plan import estimate
    from ring.plan import grid as grid_plan

    workdir, grid_file, _ = finished
    mine = tmp_path / "figures"
    mine.mkdir()
    # Two at a time, as Snakemake ran the grid's jobs: a job's CPU seconds grow when the other core is busy.
    run = price.measure("cpu", tmp_path / "suite", FINISHED["methods"], pretrain={"knn_every": 0}, jobs=2)
    (mine / "price-cpu.json").write_text(json.dumps({"machine": machine(), **run}))
    figures = estimate.load_figures("cpu", extra=[mine])
    assert figures.measured.clock == "cpu"  # the jobs' CPU seconds: this busy host's other work leaves them alone
    result = estimate.check.check(grid_plan.load(grid_file), workdir / "results", figures)
    assert (result.cells, result.unrecorded, result.unpriced) == (6, 0, {})
    assert {s for sources in result.sources.values() for s in sources} == {f"end-to-end ({mine / 'price-cpu.json'})"}
    rows = {row: (predicted, spent) for row, (_, predicted, spent) in result.rows.items()}
    assert set(rows) == {"pretraining", "linear evaluation", "fixed costs"}  # knn_every: 0, no k-means method
    for row, (predicted, spent) in [*rows.items(), ("total", result.total())]:
        assert 0.5 <= predicted / spent <= 2.0, (row, predicted, spent, rows)
    status = subprocess.run(
        [sys.executable, "-m", "ring.cluster.batch", "status", "--grid", str(grid_file), "--configfile"]
        + [str(path) for path in batch.DEFAULT_CONFIGS],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "predicted against spent (6 finished cells, cpu figures)" in status, status
