"""A new method added the way a user adds one: a module outside ``ring/`` and an entry point, no file of ours edited.

The module below is the whole method: an objective (in-batch negatives, each image's other view its positive) whose
Ring variant keeps only the negatives inside Ring's window, and its two registry entries.  It goes through the plan
checks, the estimate, and the workflow (pretraining, linear evaluation, Table 1) of a copy of the repository.
"""

import dataclasses
import importlib
import json
import re
import shutil
import sys
import textwrap

import pytest

from ring.plan import checks
from ring.plan import estimate as E
from ring.plan import grid as G
from ring.core import methods as M

from .test_workflow import ROOT, snakemake, write_grid

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
        def build_encoder(cfg):
            return Encoder(cfg.head, cfg.out_dim)

        @classmethod
        def from_config(cls, m, cfg, model, n_train, max_chunk_elements):
            return cls(cfg.temperature, m.ring)

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

GRID = {
    "datasets": ["digits"], "methods": ["Toy", "ToyRing"], "seeds": [0],
    "pretrain": {"all": {"epochs": 1, "batch_size": 64, "lr_milestones": [], "resize": 32, "crop": 32,
                         "ring_anneal_epochs": 1, "knn_every": 0, "num_workers": 0}},
    "lincls": {"all": {"epochs": 2, "batch_size": 64, "resize": 32, "crop": 32, "augmentation": "none", "num_workers": 0}},
    "resources": {"pretrain": {"threads": 1}, "lincls": {"threads": 1}},
}


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The method's module and an installed distribution's entry point for it, on the path of this process and of
    every process it starts; the registry is restored afterwards."""
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "toy_method.py").write_text(PLUGIN)
    info = folder / "toy_method-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-method\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{M.ENTRY_POINT_GROUP}]\ntoy = toy_method\n")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", str(folder))
    before = dict(M.METHODS)
    importlib.invalidate_caches()
    M._load_entry_points()
    yield folder
    M.METHODS.clear()
    M.METHODS.update(before)
    sys.modules.pop("toy_method", None)


def test_the_plugins_methods_pass_the_plan_checks_and_its_own_check_speaks_one_sentence(plugin):
    assert M.METHODS["ToyRing"].objective.n_views == 2 and M.METHODS["ToyRing"].base == "Toy"
    grid = G.from_dict("ext", GRID)
    cfg = grid.pretrain_config("digits", "ToyRing", 0, "data")
    checks.check(cfg, "cell digits/ToyRing/seed0")  # its own check passes at batch 64
    bad = {**GRID, "pretrain": {"all": {**GRID["pretrain"]["all"], "batch_size": 2}}}
    with pytest.raises(checks.ConfigError, match=r"^Grid ext, stage pretrain, cell digits/Toy/seed0: batch_size=2 must be "
                                                 r"an integer of at least 4; set batch_size to 4 or more \(the batch holds "
                                                 r"the negatives\)\.$"):
        G.from_dict("ext", bad)  # the plan checks the workflow runs when it loads a grid, before any job


def test_a_name_taken_or_unsafe_is_refused():
    with pytest.raises(ValueError, match="Method IR is already registered; choose another name."):
        M.register("IR", M.Method(M.MOCO, ring=False, base="IR"))
    with pytest.raises(ValueError, match="must be one word of letters, digits and _"):
        M.register("My Method", M.Method(M.IR, ring=False, base="IR"))


def test_the_estimate_refuses_a_family_it_has_no_figures_for_then_prices_it_from_its_own(plugin, tmp_path):
    grid = G.from_dict("ext", GRID)
    figures = E.load_figures("cpu")
    with pytest.raises(ValueError, match=r"^Method Toy is priced by the throughput of InBatch, which the cpu figures do "
                                         r"not have \(they have CMC, IR, LA, MoCo\); run benchmarks/throughput.py "):
        E.estimate(grid, figures)
    results = tmp_path / "results"
    shutil.copytree(E.RESULTS, results)
    ir = json.loads((results / "throughput_IR-cpu.json").read_text())
    (results / "throughput_InBatch-cpu.json").write_text(json.dumps({**ir, "method": "InBatch"}))
    figures = E.load_figures("cpu", results)
    cfg = {m: grid.pretrain_config("digits", m, 0, "data") for m in ("Toy", "ToyRing")}
    toy, toy_ring = (E.pretrain_hours(cfg[m], figures) for m in ("Toy", "ToyRing"))
    # Its figures are IR's: the same cell as IR costs the same (no k-means, no monitors in this grid).
    assert toy == pytest.approx(E.pretrain_hours(dataclasses.replace(cfg["Toy"], method="IR"), figures))
    assert toy_ring == pytest.approx(toy * E._ring_ratio(figures, "MoCoRing", 64))  # priced as its objective says


@pytest.mark.slow
def test_the_plugin_runs_through_the_workflow_to_table1(plugin, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    for name in ("Snakefile", "workflow", "profiles"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, work / name)
    write_grid(work, "ext", GRID)
    snakemake(work, "--profile", "profiles/local", "table1", "--config", "grid=ext")
    assert (work / "results/ext/pretrain/digits/ToyRing/seed0/encoder.pt").is_file()
    table = (work / "results/ext/tables/table1.md").read_text()
    for name in ("Toy", "ToyRing"):
        assert re.search(rf"\| {name} +\| (\d+\.\d|diverged \[d\d\]) ", table), table
