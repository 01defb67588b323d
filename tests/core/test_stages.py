"""ring.core.stages: a stage declared once is seen by every table keyed by stage, and no such table elsewhere in ring/
names a stage the registry lacks or disagrees with its declaration."""

import dataclasses
import importlib
import importlib.util
import json
import pkgutil
import sys
import types
from pathlib import Path

import pytest

import ring
from ring.core import cell_runs
from ring.core.config import ToyCNCEConfig, config_hash, save
from ring.core.files import RUN_RECORD
from ring.core.refs import resolve
from ring.core.stages import STAGES, Stage, register_stage, stage, stages_with

TOY_MODULE = "toy_stage_code"  # the toy stage's entry, collector and check: a module that exists only in the test


@dataclasses.dataclass
class ToyConfig(ToyCNCEConfig):
    """The toy stage's own config class, so that a config of it finds the toy stage's check."""


@pytest.fixture
def toy(monkeypatch):
    """A stage declared through ring.core.stages alone; its code records what called it.  Undeclared after."""
    calls = []
    code = types.ModuleType(TOY_MODULE)
    code.main = lambda argv: calls.append(("main", argv)) or 0
    code.collect = lambda job, cell: calls.append(("collect", job.stage)) or True
    code.check = lambda cfg, where: calls.append(("check", where))
    monkeypatch.setitem(sys.modules, TOY_MODULE, code)
    declared = register_stage(
        Stage(
            "toy_stage",
            ToyConfig,
            entry=TOY_MODULE,
            output="toy.json",
            run_files=("toy.json", "toy-log.txt", RUN_RECORD),
            log="toy-log",
            collector=f"{TOY_MODULE}:collect",
            check=f"{TOY_MODULE}:check",
            reference="toy_stage",
            priced=True,
            price_pass="toy pass",
            encoder_flag="--toy-encoder",
            exported=("toy-extra.json", "toy.json"),
        )
    )
    try:
        yield declared, calls
    finally:
        del STAGES["toy_stage"]


def test_a_stage_declared_twice_or_unknown_is_one_sentence(toy):
    with pytest.raises(ValueError, match=r"^Stage 'toy_stage' is declared twice"):
        register_stage(Stage("toy_stage"))
    with pytest.raises(ValueError, match=r"^Unknown stage 'toy_stgae'; stages are pretrain, lincls, .*toy_stage\.$"):
        stage("toy_stgae")


def test_the_launchers_run_and_collect_a_declared_stage(toy, tmp_path):
    from ring.cluster import jobs, launch

    _, calls = toy
    job = jobs.StageJob("toy_stage", ["--out", str(tmp_path)])
    assert job.run_here() == 0 and calls == [("main", ["--out", str(tmp_path)])]
    assert launch.collect_kept(job, tmp_path) and calls[-1] == ("collect", "toy_stage")


def test_the_plan_loads_checks_and_describes_a_declared_stage(toy, tmp_path):
    from ring.plan import checks, reference

    _, calls = toy
    save(ToyConfig(seed=3), tmp_path / "config.yaml")
    cfg = checks.load_checked("toy_stage", tmp_path / "config.yaml")
    assert type(cfg) is ToyConfig and cfg.seed == 3
    assert calls == [("check", f"Config {tmp_path / 'config.yaml'} (toy_stage)")]
    assert reference.sections()["toy_stage"] is ToyConfig
    assert reference.describe("toy_stage", "seed").startswith("toy_stage.seed: int = 0")


def test_a_finished_cell_of_a_declared_stage_is_priced_and_named_by_its_output(toy, tmp_path):
    from ring.cluster.detach import made_with
    from ring.plan.estimate.check import finished

    cell = tmp_path / "grid" / "toy_stage" / "cifar10" / "Ring" / "seed0"
    cell.mkdir(parents=True)
    save(ToyConfig(), cell / "config.yaml")
    (cell / "toy.json").write_text(json.dumps({"config_hash": "abc"}))
    (cell / "provenance.json").write_text(json.dumps({"segments": [{"outcome": "completed"}]}))
    assert [(s, c) for s, c, *_ in finished(tmp_path, "grid")] == [("toy_stage", cell)]
    assert made_with(cell, "toy_stage") == "abc"  # read off the stage's output


def test_an_edit_sets_aside_a_declared_stages_run_files(toy, tmp_path):
    cell_runs.write_record(tmp_path, ToyConfig(seed=1))
    (tmp_path / "toy.json").write_text("{}")
    (tmp_path / "toy-log.txt").write_text("epoch 1\n")
    (tmp_path / "other.txt").write_text("not the stage's")
    assert cell_runs.prepare(tmp_path, "toy_stage", ToyConfig(seed=2), log=lambda _: None) == "start over"
    kept = tmp_path / cell_runs.RUNS / config_hash(ToyConfig(seed=1))
    assert sorted(p.name for p in kept.iterdir()) == ["run.json", "toy-log.txt", "toy.json"]
    assert (tmp_path / "other.txt").exists()


def test_a_declared_evaluation_is_collected_kept_and_priced_by_its_declaration(toy, tmp_path, monkeypatch):
    from ring.cluster import jobs, launch
    from ring.plan.estimate import pricing

    seen = []
    monkeypatch.setattr(cell_runs, "collect", lambda cell, stage, cfg, encoder, log: seen.append(encoder) or True)
    save(ToyConfig(), tmp_path / "config.yaml")
    config = ["--config", str(tmp_path / "config.yaml")]
    # The launcher collects it as an evaluation of the encoder its declared argument names, and of no other.
    assert launch.collect_exports(jobs.StageJob("toy_stage", [*config, "--toy-encoder", "enc.pt"]), tmp_path)
    assert not launch.collect_exports(jobs.StageJob("toy_stage", [*config, "--encoder", "other.pt"]), tmp_path)
    assert seen == ["enc.pt"]
    # Its finished outputs are kept, put back and verified as its declaration lists them.
    cell = tmp_path / "cell"
    cell.mkdir()
    for name in ("toy-extra.json", "toy.json"):
        (cell / name).write_text(name)
    cell_runs.keep_outputs(cell, "toy_stage", ToyConfig(), "sha")
    (cell / "toy-extra.json").unlink()
    assert cell_runs.finished(cell, "toy_stage", ToyConfig(), "sha")
    assert (cell / "toy-extra.json").read_text() == "toy-extra.json"
    # Its cells are priced by the pass of the end-to-end figures it names.
    cfg = types.SimpleNamespace(epochs=3, augmentation="none")
    assert pricing.counts("toy_stage", cfg, (0, 10, 5)) == {"toy pass": (1, 15)}


def test_tensorboard_names_a_declared_stages_cells(toy, tmp_path):
    from ring.engine.logs import TensorBoardLog, cell_name

    cell = tmp_path / "results" / "grid" / "toy_stage" / "cifar10" / "Ring" / "seed0"
    assert TensorBoardLog(cell).stage == "toy-log"
    assert cell_name(cell) == "grid/toy_stage/cifar10/Ring/seed0"


def test_every_declared_stage_has_the_facts_its_tables_need():
    """Each reference resolves to what it names; a stage a launcher runs says what it writes last; a stage with a
    config has a check; each TensorBoard name is one a stage of its own writes (a study's cells are pretraining's)."""
    for declared in STAGES.values():
        if declared.entry:
            assert importlib.util.find_spec(declared.entry) is not None, declared
            assert declared.output, declared
        for ref in (declared.collector, declared.check):
            assert ref is None or callable(resolve(ref)), declared
        assert bool(declared.config) == bool(declared.check), declared
        assert declared.config is None or dataclasses.is_dataclass(declared.config), declared
        assert not declared.priced or (declared.output and declared.config), declared
        assert not declared.log or declared.log in STAGES, declared
        # An evaluation is collected as one and keeps its output last; a priced pass is of a stage estimate reads.
        assert bool(declared.encoder_flag) == bool(declared.exported), declared
        assert not declared.exported or declared.exported[-1] == declared.output, declared
        assert not declared.encoder_flag or declared.collector.endswith(":collect_evaluation"), declared
        assert not declared.evaluates_encoder or declared.encoder_flag, declared
        assert not declared.price_pass or declared.priced, declared
        assert not declared.fixed_costs or (declared.priced and not STAGES[declared.fixed_costs].fixed_costs), declared
    assert set(stages_with("grid_block")) <= set(stages_with("config"))


def _torch_free_modules():
    """Every module of core, plan, cluster and reports (not a package's command line, which runs on import)."""
    root = Path(ring.__file__).parent
    for package in ("core", "plan", "cluster", "reports"):
        for found in pkgutil.walk_packages([str(root / package)], prefix=f"ring.{package}."):
            if not found.name.endswith("__main__"):
                yield importlib.import_module(found.name)


def test_no_table_keyed_by_stage_elsewhere_in_ring_names_an_undeclared_stage_or_disagrees():
    from ring.cluster import cells

    tables = []
    for module in _torch_free_modules():
        for name, value in vars(module).items():
            if (
                isinstance(value, dict)
                and value is not STAGES
                and sum(k in STAGES for k in value if type(k) is str) > 1
            ):
                tables.append((module.__name__, name, value))
    assert tables, "the scan found none: it no longer sees the tables it guards"
    for module, name, table in tables:
        assert set(table) <= set(STAGES), (module, name, set(table) - set(STAGES))
    assert all(cells.OUTPUT[n] == STAGES[n].output for n in cells.OUTPUT)
