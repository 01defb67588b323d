"""A new method added the way a user adds one: a module outside ``ring/`` and an entry point, no file of ours edited.

The module below is the whole method: an objective (in-batch negatives, each image's other view its positive) whose
Ring variant keeps only the negatives inside Ring's window, and its two registry entries.  It goes through the plan
checks, the estimate, and the workflow (pretraining, linear evaluation, Table 1) of a copy of the repository.
At the end, docs/adding-a-method.md's own example (a torch-free declaration and its torch module) is installed with
pip and held to what the guide promises: no torch on the login node, its Ring kinds, its step rules.
"""

import contextlib
import dataclasses
import importlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from ring.cluster import batch
from ring.core import method_keys, methods, plugins
from ring.core.config import PretrainConfig, config_hash
from ring.plan import checks
from ring.plan import estimate as estimator
from ring.plan import grid as grid_plan
from tests import ROOT
from tests.helpers import copy_workflow
from tests.workflow.runs import TINY, snakemake, write_grid

PLUGIN = textwrap.dedent('''
    """In-batch contrast and its Ring variant, registered from outside ring/."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    from ring.engine.encoder import Encoder
    from ring.core.methods import Method, Objective, register
    from ring.engine.objectives.ring import window_mask


    class InBatch(Objective):
        n_views = 2
        k_key = "batch_size"  # its negatives are the batch's other images

        def ring_selection(self, cfg, n_images):
            return "MoCoRing", cfg.batch_size  # the window ranks a materialised row of logits, as MoCoRing's

        def check(self, c, n_images, m):
            c.int_at_least("batch_size", 4, "set batch_size to 4 or more (the batch holds the negatives)")


    class InBatchContrast(nn.Module):
        def __init__(self, temperature, ring):
            super().__init__()
            self.temperature, self.ring = temperature, ring

        @staticmethod
        def build_encoder(settings):
            return Encoder(settings.head, settings.out_dim)

        @classmethod
        def from_settings(cls, settings, model, n_train, max_chunk_elements):
            return cls(settings.temperature, settings.method.ring)

        def forward(self, model, views, index, window=None):
            q, k = F.normalize(model(views[0]), dim=1), F.normalize(model(views[1]), dim=1)
            sims = q @ k.T
            eye = torch.eye(len(q), dtype=torch.bool, device=q.device)
            l_neg = sims.masked_fill(eye, float("-inf"))
            if window is not None:
                l_neg = l_neg.masked_fill(~window_mask(sims.masked_fill(eye, -2.0), *window), float("-inf"))
            logits = torch.cat([sims.diagonal()[:, None], l_neg], dim=1) / self.temperature
            return F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long, device=q.device))


    IN_BATCH = InBatch("in_batch", f"{__name__}:InBatchContrast", cost_family="InBatch")
    register("Toy", Method(IN_BATCH, ring=False, base="Toy"))
    register("ToyRing", Method(IN_BATCH, ring=True, base="Toy"))
''')

# The workflow tests' tiny grid on the plug-in's two methods, without the memory-bank and queue sizes no plug-in reads.
GRID = {
    **TINY,
    "methods": ["Toy", "ToyRing"],
    "seeds": [0],
    "pretrain": {
        "all": {
            k: v for k, v in TINY["pretrain"]["all"].items() if k not in ("bank_negatives", "queue_size", "bn_groups")
        }
    },
}


def install(tmp_path, monkeypatch, source: str = PLUGIN) -> Path:
    """``source`` as module toy_method and an installed distribution's entry point ``toy`` for it, on the path of every
    process this one starts (this repository's ring first, as a fresh clone's editable install gives)."""
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "toy_method.py").write_text(source)
    info = folder / "toy_method-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-method\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{plugins.ENTRY_POINT_GROUP}]\ntoy = toy_method\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), str(ROOT)]))
    return folder


@contextlib.contextmanager
def loaded(tmp_path, monkeypatch, source: str = PLUGIN):
    """:func:`install`, then loaded into this process's registry; the registry is restored afterwards."""
    before = (
        dict(methods.METHODS),
        dict(methods.METHODS.broken),
        dict(methods.METHODS.plugins),
    )  # read (loaded) before the install
    folder = install(tmp_path, monkeypatch, source)
    monkeypatch.syspath_prepend(str(folder))
    importlib.invalidate_caches()
    methods.METHODS.load_entry_points()
    try:
        yield folder
    finally:
        methods.METHODS.clear()
        methods.METHODS.update(before[0])
        for mine, kept in zip((methods.METHODS.broken, methods.METHODS.plugins), before[1:], strict=True):
            mine.clear()
            mine.update(kept)
        sys.modules.pop("toy_method", None)


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The method's module and its entry point, in this process and every process it starts."""
    with loaded(tmp_path, monkeypatch) as folder:
        yield folder


def test_the_plugins_methods_pass_the_plan_checks_and_its_own_check_speaks_one_sentence(plugin):
    assert methods.METHODS["ToyRing"].objective.n_views == 2 and methods.METHODS["ToyRing"].base == "Toy"
    grid = grid_plan.from_dict("ext", GRID)
    cfg = grid.pretrain_config("digits", "ToyRing", 0, "data")
    checks.check(cfg, "cell digits/ToyRing/seed0")  # its own check passes at batch 64
    bad = {**GRID, "pretrain": {"all": {**GRID["pretrain"]["all"], "batch_size": 2}}}
    with pytest.raises(
        checks.ConfigError,
        match=r"^Grid ext, stage pretrain, cell digits/Toy/seed0: batch_size=2 must be "
        r"an integer of at least 4; set batch_size to 4 or more \(the batch holds "
        r"the negatives\)\.$",
    ):
        grid_plan.from_dict("ext", bad)  # the plan checks the workflow runs when it loads a grid, before any job


def test_a_plugin_reads_the_key_groups_its_objective_declares_and_no_other(plugin, monkeypatch):
    """An objective that declares no group reads the common keys only (and the Ring window's for a Ring method): a
    key of another group set for its method alone is refused; one that declares a group reads its keys."""
    toy = methods.METHODS["Toy"]
    assert toy.key_groups == () and not toy.reads("queue_size") and methods.METHODS["ToyRing"].reads("ring_w_l")
    with pytest.raises(
        checks.ConfigError,
        match=r"block by_method Toy: queue_size=512 is a setting Toy never reads \(only MoCo, MoCoRing do\)",
    ):
        grid_plan.from_dict(
            "ext", {**GRID, "pretrain": {**GRID["pretrain"], "by_method": {"Toy": {"queue_size": 512}}}}
        )

    class Declared(methods.Objective):
        key_groups = (method_keys.QUEUE,)  # a queue's keys besides the common ones

    monkeypatch.setitem(
        methods.METHODS,
        "Declared",
        methods.Method(Declared("d", "toy_method:InBatchContrast", "InBatch"), ring=True, base="Declared"),
    )
    declared = methods.METHODS["Declared"]
    assert declared.key_groups == (method_keys.QUEUE, method_keys.RING) and not declared.reads("bank_negatives")
    grid = grid_plan.from_dict(
        "ext", {**GRID, "methods": ["Declared"], "pretrain": {"by_method": {"Declared": {"queue_size": 512}}}}
    )
    cell = grid.pretrain_config("digits", "Declared", 0, "data")
    assert cell.queue_size == 512 and config_hash(cell) != config_hash(dataclasses.replace(cell, queue_size=4096))


def test_a_name_taken_or_unsafe_is_refused():
    with pytest.raises(ValueError, match="Method IR is already registered; choose another name."):
        methods.register("IR", methods.Method(methods.MOCO, ring=False, base="IR"))
    with pytest.raises(ValueError, match="must be one word of letters, digits and _"):
        methods.register("My Method", methods.Method(methods.IR, ring=False, base="IR"))


def test_the_estimate_refuses_a_family_it_has_no_figures_for_then_prices_it_from_its_own(plugin, tmp_path, capsys):
    grid = grid_plan.from_dict("ext", GRID)
    figures = estimator.load_figures("cpu")
    with pytest.raises(
        ValueError,
        match=r"^Method Toy is priced by the throughput of InBatch, which the cpu figures do "
        r"not have \(they have CMC, IR, LA, MoCo\); run benchmarks/throughput.py --method InBatch on that device and "
        r"put its JSON in the folder your plug-in's ring.figures entry point names, or pass --figures DIR ",
    ):
        estimator.estimate(grid, figures)
    # Its own figures, in a folder of its own: the package's folder is read as it is, never written to.
    package = sorted((f.name, f.stat().st_mtime_ns) for f in estimator.RESULTS.iterdir())
    own = tmp_path / "figures"
    own.mkdir()
    ir = json.loads((estimator.RESULTS / "throughput_IR-cpu.json").read_text())
    (own / "throughput_InBatch-cpu.json").write_text(json.dumps({**ir, "method": "InBatch"}))
    figures = estimator.load_figures("cpu", extra=[own])
    assert figures.eager_files["InBatch"] == str(own / "throughput_InBatch-cpu.json")  # the report names it
    cfg = {m: grid.pretrain_config("digits", m, 0, "data") for m in ("Toy", "ToyRing")}
    toy, toy_ring = (estimator.pretrain_hours(cfg[m], figures) for m in ("Toy", "ToyRing"))
    # Its figures are IR's: the same cell as IR costs the same (no k-means, no monitors in this grid).
    assert toy == pytest.approx(estimator.pretrain_hours(dataclasses.replace(cfg["Toy"], method="IR"), figures))
    # Priced as its objective says: MoCoRing's ratio, measured on device tensors, multiplies the step only.
    step_s = (cfg["Toy"].crop / figures.image_size) ** 2 / figures.step_images_per_s["InBatch"]
    extra = (
        (estimator.ring_ratio(figures, "ToyRing", "MoCoRing", 64) - 1)
        * cfg["Toy"].epochs
        * estimator.SIZES["digits"][0]
        * step_s
        / 3600
    )
    assert toy_ring == pytest.approx(toy + extra)
    # The command, `ring estimate --figures DIR` (in this process: the plug-in is loaded here, and torch with it).
    assert (
        batch.main(["estimate", "--device", "cpu", "--grid", str(grid_file(tmp_path, GRID)), "--figures", str(own)])
        == 0
    )
    out = capsys.readouterr().out
    rate, file = ir["images_per_s"]["pil"], own / "throughput_InBatch-cpu.json"
    line = f"InBatch: eager 'pil' pipeline {rate:,.0f} images/s ({file})"
    assert line in out, out
    assert batch.main(["estimate", "--grid", "smoke", "--figures", str(tmp_path / "none")]) == 1
    # The toy's declaration imports torch: the registry warns of it where this process had not loaded torch before
    # (this test alone), not where an earlier test had; the refusal is the one other line either way.
    lines = [line for line in capsys.readouterr().err.splitlines() if "imports torch in its declaration" not in line]
    assert lines == [
        f"ring: --figures {tmp_path / 'none'} is not a folder; give the folder that holds the throughput JSON."
    ]
    assert sorted((f.name, f.stat().st_mtime_ns) for f in estimator.RESULTS.iterdir()) == package


@pytest.mark.slow  # the benchmark builds and steps ResNet-18 for the plug-in's two methods
def test_a_plugins_own_ring_kind_is_priced_from_its_figures_after_the_benchmark_of_its_method(tmp_path, monkeypatch):
    """A Ring kind of the plug-in's own: refused with the command that measures it, measured by that command into the
    plug-in's figures folder (its ring.figures entry point), then priced beside the package's kinds."""
    # Before: the benchmark timed IRing and MoCoRing only, and the package's file was the only one read.
    # PLUGIN as the guide lays a plug-in out: a torch-free declaration, its torch module beside it.
    objective, implementation = PLUGIN.index("class InBatch(Objective)"), PLUGIN.index("class InBatchContrast")
    declaration = "from ring.core.methods import Method, Objective, register\n\n\n" + (
        PLUGIN[objective:implementation] + PLUGIN[PLUGIN.index("IN_BATCH = ") :]
    ).replace('return "MoCoRing", cfg.batch_size', 'return "InBatchRing", cfg.batch_size').replace(
        'f"{__name__}:InBatchContrast"', '"toy_torch:InBatchContrast"'
    )
    folder = install(tmp_path, monkeypatch, declaration)
    torch_module = (
        PLUGIN[: PLUGIN.index("class InBatch(Objective)")] + PLUGIN[implementation : PLUGIN.index("IN_BATCH")]
    )
    (folder / "toy_torch.py").write_text(torch_module)
    figures = folder / "toy_figures"  # the plug-in's folder of figures: its eager throughput, a stand-in of IR's
    figures.mkdir()
    (figures / "__init__.py").write_text('"""The toy plug-in\'s measured figures."""\n')
    ir = json.loads((estimator.RESULTS / "throughput_IR-cpu.json").read_text())
    (figures / "throughput_InBatch-cpu.json").write_text(json.dumps({**ir, "method": "InBatch"}))
    points = folder / "toy_method-0.1.dist-info" / "entry_points.txt"
    points.write_text(points.read_text() + f"[{estimator.FIGURES_GROUP}]\ntoy = toy_figures\n")
    grid = grid_file(tmp_path, {**GRID, "methods": ["ToyRing"]})

    def run(*args, **env) -> subprocess.CompletedProcess:
        environ = {**os.environ, **env}
        return subprocess.run(
            [sys.executable, *args], capture_output=True, text=True, timeout=600, cwd=ROOT, env=environ
        )

    refused = run("-m", "ring.cli", "estimate", "--device", "cpu", "--grid", str(grid))
    assert refused.returncode == 1 and refused.stderr == (
        "ring: ToyRing's Ring kind InBatchRing has no measured step-time ratio in the cpu figures (they have IRing, "
        "MoCoRing); measure it on that device with `RING_BENCH_RESULTS=DIR python benchmarks/ring_selection.py "
        "--method ToyRing` (DIR: its plug-in's figures folder), or price the grid with figures that have it "
        "(`--device cpu` reads the CPU's).\n"
    ), refused.stderr
    measured = run("benchmarks/ring_selection.py", "--method", "ToyRing", RING_BENCH_RESULTS=str(figures))
    assert measured.returncode == 0, measured.stderr[-3000:]
    (row,) = json.loads((figures / "ring_selection-cpu.json").read_text())["steps"]
    assert (row["ring"], row["method"], row["base"], row["n"]) == ("InBatchRing", "ToyRing", "Toy", 64)
    assert row["ratio"] > 0
    priced = run("-m", "ring.cli", "estimate", "--device", "cpu", "--grid", str(grid))
    assert priced.returncode == 0, priced.stderr
    source = figures / "ring_selection-cpu.json"
    line = f"InBatchRing: step-time ratio {row['ratio']:.3g} at 64, of the step only ({source})"
    assert line in priced.stdout and "IRing: step-time ratio" in priced.stdout, priced.stdout


# GRID at 16 pixels, as the workflow tests run SMALL: this test is about the plug-in's cells going through the
# workflow's stages to Table 1, not their accuracy; 16-pixel views make each job's compute about 4x smaller, and the
# table's entries (a number or a diverged verdict) and the encoder's file are what fails when a stage does not run.
GRID_16PX = {
    **GRID,
    "pretrain": {"all": {**GRID["pretrain"]["all"], "resize": 16, "crop": 16}},
    "lincls": {"all": {**GRID["lincls"]["all"], "resize": 16, "crop": 16}},
}


@pytest.mark.slow
def test_the_plugin_runs_through_the_workflow_to_table1(plugin, workdir):
    work = workdir
    write_grid(work, "ext", GRID_16PX)
    snakemake(work, "--profile", "profiles/local", "table1", "--config", "grid=ext")
    assert (work / "results/ext/pretrain/digits/ToyRing/seed0/encoder.pt").is_file()
    table = (work / "results/ext/tables/table1.md").read_text()
    for name in ("Toy", "ToyRing"):
        assert re.search(rf"\| {name} +\| (\d+\.\d|diverged \[d\d\]) ", table), table


# A grid of the paper's methods only, and the plug-in's grid: both given by path, as a user gives their own.
IR_GRID = {**GRID, "methods": ["IR"], "pretrain": {"all": {**GRID["pretrain"]["all"], "bank_negatives": 256}}}


def grid_file(tmp_path, values: dict, name: str = "ext") -> Path:
    path = tmp_path / "grids" / f"{name}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(values))
    return path


@pytest.fixture
def workdir(tmp_path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    copy_workflow(work)
    return work


def plan(work: Path, grid: Path):
    """The workflow's plan (a dry run: Snakemake's parse runs every plan check) of ``grid``'s Table 1."""
    return snakemake(work, "-n", "table1", "--config", f"grid={grid}", check=False, timeout=120)


def test_a_plugin_whose_implementation_names_a_missing_class_is_refused_by_the_plan(tmp_path, monkeypatch, workdir):
    # Before: it planned (and was priced), and failed in the training job with an AttributeError traceback.
    install(tmp_path, monkeypatch, PLUGIN.replace('f"{__name__}:InBatchContrast"', 'f"{__name__}:InBatchContrst"'))
    result = plan(workdir, grid_file(tmp_path, GRID))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert re.search(
        r"^ring: Grid \S+ext.yaml, stage pretrain, cell digits/Toy/seed0: method='Toy' is registered by "
        r"the toy plug-in, whose implementation 'toy_method:InBatchContrst' names InBatchContrst, which "
        r"module toy_method does not define; fix that package or choose another method\.$",
        result.stderr,
        re.M,
    ), result.stderr


@pytest.mark.parametrize(
    "edit, reason",
    [
        (
            lambda src: src.replace("def from_settings(cls, settings, model,", "def from_settings(cls, model,"),
            r"names InBatchContrast, whose from_settings takes \(model, n_train, max_chunk_elements\) \(the stage "
            r"calls from_settings\(settings, model, n_train, max_chunk_elements\)\)",
        ),
        (
            lambda src: src.replace("def build_encoder(settings)", "def build_encodr(settings)"),
            r"names InBatchContrast, whose build_encoder is missing \(the stage calls build_encoder\(settings\)\)",
        ),
        (  # a plug-in written for the protocol before the objectives took their settings instead of the config
            lambda src: src.replace(
                "def from_settings(cls, settings, model, n_train, max_chunk_elements):\n"
                "        return cls(settings.temperature, settings.method.ring)",
                "def from_config(cls, m, cfg, model, n_train, max_chunk_elements):\n"
                "        return cls(cfg.temperature, m.ring)",
            ),
            r"names InBatchContrast, written for the former protocol: it defines from_config where the stage now "
            r"calls from_settings\(settings, model, n_train, max_chunk_elements\) \(docs/adding-a-method\.md, "
            r"'From from_config to from_settings'\)",
        ),
        (
            lambda src: src.replace('f"{__name__}:InBatchContrast"', '"toy_method_torch:InBatchContrast"'),
            r"names module toy_method_torch, which is not installed \(no toy_method_torch on the path\)",
        ),
        (
            lambda src: src.replace('f"{__name__}:InBatchContrast"', '"toy_method.InBatchContrast"'),
            r"names 'toy_method.InBatchContrast', not 'module:Class'",
        ),
    ],
)
def test_the_plan_checks_resolve_a_plugins_implementation_and_the_calls_the_stage_makes(
    tmp_path, monkeypatch, edit, reason
):
    with loaded(tmp_path, monkeypatch, edit(PLUGIN)):
        with pytest.raises(
            checks.ConfigError,
            match=rf"^Grid ext, stage pretrain, cell digits/Toy/seed0: method='Toy' "
            rf"is registered by the toy plug-in, whose implementation '[^']+' "
            rf"{reason}; fix that package or choose another method\.$",
        ):
            grid_plan.from_dict("ext", GRID)


def test_every_builtin_implementation_resolves():
    """The plan resolves only plug-ins' implementations (ours would import torch into every plan): this is ours'."""
    objectives = {m.objective for name, m in methods.METHODS.items() if name not in methods.METHODS.plugins}
    assert {o.label for o in objectives} >= {"ir", "cmc", "moco"}
    assert {o.label: o.implementation_problem() for o in objectives} == {o.label: None for o in objectives}


BROKEN = {  # how a plug-in breaks -> the reason its sentence gives
    "syntax error": (PLUGIN + "\ndef broken(:\n", r"SyntaxError: [^)]+\(toy_method\.py, line \d+\)"),
    "missing import": ("import no_such_package_of_toy\n" + PLUGIN, r"No module named 'no_such_package_of_toy'"),
    # Torch-free, as each case here: Toy registers first, then is taken back with the plug-in.
    "taken name": (
        "from ring.core.methods import IR, Method, register\n"
        "register('Toy', Method(IR, ring=False, base='Toy'))\n"
        "register('IR', Method(IR, ring=False, base='Toy'))\n",
        r"Method IR is already registered; choose another name",
    ),
    # Issue 40 item 4: before, sys.exit at import ended every command, the plan of grids without Toy included.
    "exit at import": (
        "from ring.core.methods import IR, Method, register\n"
        "register('Toy', Method(IR, ring=False, base='Toy'))\n"
        "import sys\nsys.exit('no GPU here')\n",
        r"it called sys\.exit\('no GPU here'\) while being imported",
    ),
    # Issue 52 item 3: before, KeyboardInterrupt at import broke every command with a 50-line traceback, and os._exit
    # made every command exit 3 without a word; the registry's child process (ring.core.plugins) contains both.
    "KeyboardInterrupt at import": ("raise KeyboardInterrupt\n", r"it raised KeyboardInterrupt while being imported"),
    "os._exit at import": (
        "import os\nos._exit(3)\n",
        r"it ended the process \(exit status 3\) while being imported",
    ),
}


@pytest.mark.parametrize("how", BROKEN)
def test_a_broken_plugin_blocks_only_the_grids_that_name_a_method_it_lacks(tmp_path, monkeypatch, workdir, how):
    # Before: every grid's plan, and every entry point, stopped on its ImportError inside a ~30-line traceback.
    source, reason = BROKEN[how]
    install(tmp_path, monkeypatch, source)
    failed = rf"the ring\.methods entry point toy \(toy_method\) failed to load \({reason}\)"
    ours = plan(workdir, grid_file(tmp_path, IR_GRID, "ours"))
    assert ours.returncode == 0 and "Traceback" not in ours.stderr, ours.stderr
    assert re.search(
        rf"^ring: warning: {failed}; its methods are unavailable until that package is fixed or "
        r"uninstalled\.$",
        ours.stderr,
        re.M,
    ), ours.stderr
    theirs = plan(workdir, grid_file(tmp_path, GRID))
    assert theirs.returncode == 1 and "Traceback" not in theirs.stderr
    assert re.search(
        rf"^ring: Grid ext: method 'Toy' is not registered and may be a broken plug-in's: {failed}; fix "
        r"or uninstall that package\.$",
        theirs.stderr,
        re.M,
    ), theirs.stderr


def test_a_broken_plugin_leaves_the_other_entry_points_working(tmp_path, monkeypatch):
    install(tmp_path, monkeypatch, BROKEN["missing import"][0])

    def estimate(values: dict, name: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "ring.cluster.batch",
                "estimate",
                "--device",
                "cpu",
                "--grid",
                str(grid_file(tmp_path, values, name)),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )

    ours = estimate(IR_GRID, "ours")
    assert ours.returncode == 0 and "Traceback" not in ours.stderr, ours.stderr
    theirs = estimate(GRID, "ext")
    assert theirs.returncode == 1 and re.fullmatch(
        r"ring: Grid ext: method 'Toy' is not registered and may be a broken plug-in's: the ring\.methods entry point "
        r"toy \(toy_method\) failed to load \(No module named 'no_such_package_of_toy'\); fix or uninstall that "
        r"package\.\n",
        theirs.stderr,
    ), theirs.stderr


# -- the guide's example (docs/adding-a-method.md), installed with pip as a user installs it ----------------------

GUIDE = ROOT / "docs" / "adding-a-method.md"
# sitecustomize for every process a test starts: the first import of torch appends that process's command line and
# stack to $RING_TORCH_LOG (Snakemake's parse and its children included, which sys.modules of this one cannot show).
WATCH = textwrap.dedent("""
    import os, sys, traceback

    def _watch(event, args):
        if event == "import" and str(args[0]).partition(".")[0] == "torch" and "torch" not in sys.modules:
            with open(os.environ["RING_TORCH_LOG"], "a") as log:
                log.write(f"{sys.argv}\\n{''.join(traceback.format_stack())}\\n")

    if os.environ.get("RING_TORCH_LOG"):
        sys.addaudithook(_watch)
""")


def guide_files() -> dict[str, str]:
    """The files the guide writes out: each a "File `NAME`" line, then its fenced block."""
    return dict(re.findall(r"^File `([\w./-]+)`[^\n]*\n\n```\w+\n(.*?)^```", GUIDE.read_text(), re.M | re.S))


@pytest.fixture(scope="module")
def guide_site(module_tmp) -> Path:
    """The guide's package installed by pip into a folder of its own (--target), with the torch watch beside it; its
    figures folder holds a stand-in for the measurement the guide runs (IR's CPU figures under the family's name)."""
    source, site = module_tmp("in-batch-method"), module_tmp("site")
    files = guide_files()
    assert sorted(files) == ["in_batch.py", "in_batch_figures/__init__.py", "in_batch_torch.py", "pyproject.toml"]
    for name, text in files.items():
        (source / name).parent.mkdir(exist_ok=True)
        (source / name).write_text(text)
    ir = json.loads((estimator.RESULTS / "throughput_IR-cpu.json").read_text())
    (source / "in_batch_figures" / "throughput_InBatch-cpu.json").write_text(json.dumps({**ir, "method": "InBatch"}))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--disable-pip-version-check",
            "--target",
            str(site),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (site / "sitecustomize.py").write_text(WATCH)
    return site


def test_the_guides_example_installs_and_plans_without_torch(guide_site, tmp_path, monkeypatch, workdir):
    # Before: the guide's one module was entry point and implementation, so every process below imported torch.
    log = tmp_path / "torch.log"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(guide_site), str(ROOT)]))
    monkeypatch.setenv("RING_TORCH_LOG", str(log))

    def run(*args) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300)

    listed = run("-c", "from ring.core.methods import METHODS; list(METHODS); print(*sorted(METHODS.plugins))")
    assert listed.stdout.split() == ["InBatch", "InBatchRing"], listed.stderr
    grid = grid_file(tmp_path, {**GRID, "methods": ["InBatch", "InBatchRing"]}, "guide")
    planned = plan(workdir, grid)  # Snakemake's parse: the plan checks, the implementation read from its source
    assert planned.returncode == 0, planned.stderr
    priced = run("-m", "ring.cli", "estimate", "--device", "cpu", "--grid", str(grid))
    # The declaration was read (its family), and its price from the figures its package ships (docs: Pricing it).
    shipped = guide_site / "in_batch_figures" / "throughput_InBatch-cpu.json"
    assert priced.returncode == 0 and "InBatch: eager 'pil' pipeline" in priced.stdout, priced.stderr
    assert f"({shipped})" in priced.stdout, priced.stdout
    assert not log.exists(), log.read_text()
    # A job builds the encoder and the loss from the implementation module, and there torch loads (the watch sees it).
    job = run(
        "-c",
        "from ring.core import catalog\n"
        "from ring.core.config import PretrainConfig\n"
        "from ring.core.methods import method\n"
        "from ring.engine.objectives import build_encoder, build_objective\n"
        "import torch\n"
        "from ring.pretrain import objective_settings\n"
        "cfg = PretrainConfig(dataset='digits', method='InBatchRing', batch_size=8)\n"
        "settings = objective_settings(cfg, method('InBatchRing'), catalog.spec('digits'))\n"
        "model = build_encoder(settings)\n"
        "loss = build_objective(settings, model, 100, 2**25)(model, [torch.randn(8, 3, 32, 32)] * 2,"
        " torch.arange(8), (0.0, 90.0))\n"
        "assert torch.isfinite(loss), loss\n",
    )
    assert job.returncode == 0, job.stderr
    assert log.read_text().startswith("['-c']") and "ring/engine/objectives/__init__.py" in log.read_text()


def test_the_guide_lists_the_ring_kinds_of_the_registry_and_the_figures():
    text = GUIDE.read_text()
    listed = set(re.findall(r"^\| `(\w+)` \|", text[text.index("## The Ring kinds") :], re.M))
    cfg = PretrainConfig(dataset="digits", method="IRing")
    kinds = {m.objective.ring_selection(cfg, 100)[0] for m in methods.METHODS.values() if m.ring}
    assert listed == kinds == set(estimator.load_figures("cpu").ring_ratios)


TWO_RANKS = textwrap.dedent("""
    import json, sys
    import torch
    from torch import nn
    from ring.engine import distributed
    from in_batch_torch import InBatchContrast

    distributed.init_from_env("cpu")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 8))
    views = [torch.randn(16, 3, 2, 2, generator=torch.Generator().manual_seed(seed)) for seed in (1, 2)]
    train = nn.parallel.DistributedDataParallel(model) if distributed.world_size() > 1 else model
    out = {}
    for window in (None, (10.0, 60.0)):
        model.zero_grad()
        loss = InBatchContrast(0.1, window is not None)(train, [distributed.local_rows(v) for v in views], None,
                                                        window)
        loss.backward()
        out[str(window)] = [loss.item(), torch.cat([p.grad.flatten() for p in model.parameters()]).tolist()]
    with open(f"{sys.argv[1]}.{distributed.rank()}", "w") as f:
        json.dump(out, f)
""")


@pytest.mark.slow  # three processes of torch and a gloo group
def test_the_guides_example_on_two_processes_equals_one(guide_site, tmp_path):
    """The guide's step rule: an in-batch method gathers the other ranks' keys with their gradients, so two
    processes, each with half the batch, give one process's loss and gradient on the whole batch."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(guide_site), str(ROOT)]),
        "OMP_NUM_THREADS": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }
    runs = [("one", 1, 0), ("two", 2, 0), ("two", 2, 1)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TWO_RANKS, str(tmp_path / name)],
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**env, "WORLD_SIZE": str(world), "RANK": str(rank), "LOCAL_RANK": str(rank)},
        )
        for name, world, rank in runs
    ]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    one, *two = (json.loads((tmp_path / f"{name}.{rank}").read_text()) for name, _, rank in runs)
    for window, (loss, grad) in one.items():
        # Each rank's loss is the mean over its half: their mean is the whole batch's.  DDP averages the ranks'
        # gradients; the same float32 sums in another order, hence the relative tolerance.
        assert loss == pytest.approx((two[0][window][0] + two[1][window][0]) / 2, rel=1e-5)
        assert two[0][window][1] == two[1][window][1]  # DDP's all-reduce: one gradient on both ranks
        assert grad == pytest.approx(two[0][window][1], rel=1e-4, abs=1e-6), window


# How a user installs the guide's package: a regular install, `pip install -e` (setuptools' editable finder for a flat
# project; a .pth path for a src-layout one, as every PEP 660 backend can write) and a plain folder on PYTHONPATH.
INSTALLS = ("regular", "editable-finder", "editable-pth", "pythonpath")
CHECK = (
    "import json, sys\n"
    "from ring.core.methods import METHODS, implementation_problem\n"
    "list(METHODS)  # reads the entry points\n"
    "names = sorted(METHODS.plugins)\n"
    "print(json.dumps([names, [implementation_problem(n) for n in names], 'torch' in sys.modules]))\n"
)


@pytest.mark.slow  # a fresh environment and a pip install each: seconds
@pytest.mark.parametrize("how", INSTALLS)
def test_the_guides_example_is_found_and_checked_without_torch_however_it_is_installed(tmp_path, how):
    # Before: an editable install with setuptools' finder was refused by every plan ("not installed").
    source = tmp_path / "in-batch-method"
    for name, text in guide_files().items():
        path = source / ("src/" if how == "editable-pth" and name != "pyproject.toml" else "") / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if how == "editable-pth":  # the src layout: setuptools' editable install then writes the src folder into a .pth
        toml = source / "pyproject.toml"
        toml.write_text(
            toml.read_text().replace("[tool.setuptools]\n", '[tool.setuptools]\npackage-dir = {"" = "src"}\n')
        )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    (site_packages,) = (venv / "lib").glob("python3*/site-packages")
    dependencies = [p for p in sys.path if p.endswith("site-packages")]
    (site_packages / "ring-dependencies.pth").write_text("\n".join([str(ROOT), *dependencies]) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    if how == "pythonpath":
        folder = tmp_path / "folder"  # the modules and their metadata (the entry points), nothing installed
        folder.mkdir()
        for name in ("in_batch.py", "in_batch_torch.py"):
            (folder / name).write_text((source / name).read_text())
        info = folder / "in_batch_method-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: in-batch-method\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[{plugins.ENTRY_POINT_GROUP}]\nin_batch = in_batch\n")
        env["PYTHONPATH"] = str(folder)
    else:
        editable = ["-e"] if how.startswith("editable") else []
        pip = [sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--quiet", "--no-deps"]
        pip += ["--no-build-isolation", "--no-index", "--disable-pip-version-check", *editable, source]
        subprocess.run(pip, check=True, capture_output=True, text=True, timeout=300, env=env)
        pth = "".join(p.read_text() for p in site_packages.glob("__editable__*.pth"))
        assert ("_finder" in pth) == (how == "editable-finder"), pth  # each editable kind is the one it names
    checked = subprocess.run(
        [venv / "bin" / "python", "-c", CHECK], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path
    )
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout) == [["InBatch", "InBatchRing"], [None, None], False], checked.stdout
