import contextlib
import io
import json
import os
import pickle
import subprocess
import sys

import pytest
import torch

from ring.core import cell_runs, stop
from ring.core.config import DetectionConfig, config_hash, save
from ring.core.files import record_checksums, sha256_file
from ring.core.stop import Preempted
from ring.detection import runner
from ring.plan import grid
from ring.plan.detection_tasks import TASKS
from tests.conftest import ROOT
from tests.helpers import run_module
from tests.project.test_rooms import count_lookups, refuse_lookups


def smoke_config(method, task, datasets_root, **changes) -> DetectionConfig:
    """The smoke grid's cell config (the embedded default's exact settings)."""
    cfg = grid.load(ROOT / "ring" / "resources" / "grids" / "smoke.yaml").detection_config(
        method, task, 0, str(datasets_root)
    )
    for key, value in changes.items():
        setattr(cfg, key, value)
    return cfg


def run_cell(cfg, weights, out) -> int:
    out.mkdir(parents=True, exist_ok=True)
    save(cfg, out / "config.yaml")
    return runner.main(["--config", str(out / "config.yaml"), "--weights", str(weights), "--out", str(out)])


def run_main(cfg, weights, out, capsys) -> tuple[int, list[str]]:
    status = run_cell(cfg, weights, out)
    return status, [line for line in capsys.readouterr().err.splitlines() if line.startswith("ring:")]


@pytest.fixture(scope="module")
def voc_det_cells(backbone_pkl, datasets_root, module_tmp) -> list:
    """Two workflow runs of the smoke grid's IRing voc_det cell, the process's RNGs in another state before each (the
    cell's seed must decide).  Shared: test_each_model_trains_and_evaluates_on_the_embedded_default[voc_det] reads
    the first, test_one_seed_gives_one_head_initialisation_data_order_and_result_on_every_path compares the two; each
    trained its own cell before (one voc_det run, about 25 s in CI, twice)."""
    cfg = smoke_config("IRing", "voc_det", datasets_root)
    cells = [module_tmp("voc_det") / name for name in ("a", "b")]
    torch.manual_seed(1)  # whatever state the process's RNGs are in, the cell's seed decides
    for cell in cells:
        said = io.StringIO()
        with contextlib.redirect_stderr(said):  # capsys is a test's, not a module fixture's
            status = run_cell(cfg, backbone_pkl, cell)
        assert status == 0, said.getvalue()[-3000:]
        torch.rand(7)
    return cells


@pytest.mark.parametrize("task", ["coco_det_seg", "coco_kp", "voc_det"])
@pytest.mark.slow
def test_each_model_trains_and_evaluates_on_the_embedded_default(
    task, backbone_pkl, datasets_root, tmp_path, capsys, request
):
    cfg = smoke_config("IRing", task, datasets_root)
    if task == "voc_det":  # the cell voc_det_cells trained, with this config
        cell = request.getfixturevalue("voc_det_cells")[0]
    else:
        cell = tmp_path / "cell"
        status, lines = run_main(cfg, backbone_pkl, cell, capsys)
        assert status == 0, lines
    metrics = json.loads((cell / runner.METRICS_FILE).read_text())
    expected = {"coco_det_seg": ["bbox", "segm"], "coco_kp": ["bbox", "keypoints"], "voc_det": ["bbox"]}[task]
    assert sorted(metrics["results"]) == expected
    assert metrics["columns"] and all(0.0 <= v <= 100.0 for v in metrics["columns"].values())  # evaluated, not NaN
    if task == "coco_kp":  # the smoke grid's keypoint settings learn the keypoints (AP 37.6, AP50 100 here)
        assert metrics["columns"]["coco_kp_AP"] > 0 and metrics["columns"]["coco_kp_AP50"] > 0, metrics["columns"]
    assert (metrics["method"], metrics["task"], metrics["seed"]) == ("IRing", task, 0)
    assert (cell / "model_final.pth").exists() and f"MAX_ITER: {cfg.overrides['SOLVER.MAX_ITER']}" in (
        cell / runner.D2_CONFIG
    ).read_text()
    if task == "voc_det":  # README: rerun a cell by hand from its written config, with Detectron2's command line
        again = run_module(
            "ring.detection.train_net",
            "--config-file",
            cell / runner.D2_CONFIG,
            "--eval-only",
            "MODEL.WEIGHTS",
            cell / "model_final.pth",
            "OUTPUT_DIR",
            tmp_path / "by_hand",
            env={**os.environ, "DETECTRON2_DATASETS": str(datasets_root)},
        )
        assert "copypaste: AP,AP50,AP75" in again.stdout + again.stderr


def test_preempted_cell_resumes_from_detectron2s_last_checkpoint(
    backbone_pkl, datasets_root, tmp_path, capsys, monkeypatch
):
    cfg = smoke_config("MoCo", "coco_det_seg", datasets_root)
    cell = tmp_path / "cell"
    cell.mkdir()
    save(cfg, cell / "config.yaml")
    monkeypatch.setattr(stop, "_stop_requested", True)  # as SLURM's USR2 does
    with pytest.raises(Preempted):
        runner.run(cfg, TASKS["coco_det_seg"], backbone_pkl, cell)
    assert (cell / "last_checkpoint").read_text().strip() == "model_0000000.pth"
    assert not (cell / runner.METRICS_FILE).exists()
    monkeypatch.setattr(stop, "_stop_requested", False)
    # What a SIGKILL during a checkpoint write leaves: removed at start, never mistaken for a checkpoint.
    stale = cell / ".model_0000001.pth.k1ll3d.tmp"
    stale.write_bytes(b"half a checkpoint")
    status, lines = run_main(cfg, backbone_pkl, cell, capsys)
    assert status == 0, lines
    assert (
        not stale.exists()
        and "left by killed checkpoint writes: .model_0000001.pth.k1ll3d.tmp" in (cell / "log.txt").read_text()
    )
    assert "Starting training from iteration 1" in (cell / "log.txt").read_text()
    provenance = json.loads((cell / "provenance.json").read_text())
    assert [s["outcome"] for s in provenance["segments"]] == ["preempted", "completed"]
    assert not list(cell.glob(".*.tmp"))  # checkpoints are written to temporaries and renamed
    # A changed config never continues these checkpoints: the finished run is kept under runs/, as every stage's
    # (issue 52 item 5: it was refused, "move the cell folder away"), and the cell starts over.
    changed = smoke_config(
        "MoCo",
        "coco_det_seg",
        datasets_root,
        overrides={**cfg.overrides, "SOLVER.BASE_LR": 2 * cfg.overrides["SOLVER.BASE_LR"]},
    )
    metrics = (cell / runner.METRICS_FILE).read_text()
    assert runner.prepare(changed, TASKS["coco_det_seg"], backbone_pkl, cell) is not None
    assert "its config changed (overrides): the previous run is kept in" in capsys.readouterr().err
    kept = cell / "runs" / cell_runs.run_key(config_hash(cfg), sha256_file(backbone_pkl))
    assert (kept / runner.METRICS_FILE).read_text() == metrics and (kept / "log.txt").is_file()
    assert not list(cell.glob("model_*.pth")) and not (cell / "last_checkpoint").exists()
    assert not list(kept.glob("model_*.pth"))  # keep_superseded: results drops Detectron2's checkpoints
    # The edit undone: the finished run comes back from runs/, its outputs verified, and nothing trains.
    log = (kept / "log.txt").read_text()
    status, lines = run_main(cfg, backbone_pkl, cell, capsys)
    assert status == 0 and any(line.endswith("; nothing to train") for line in lines), lines
    assert (cell / runner.METRICS_FILE).read_text() == metrics and (cell / "log.txt").read_text() == log


def _fails_before_training(cell, status, lines, phrase):
    assert status == 1 and len(lines) == 1 and phrase in lines[0], lines
    assert not (cell / "last_checkpoint").exists() and not (cell / "model_final.pth").exists()
    log = cell / "log.txt"
    assert not log.exists() or "Starting training" not in log.read_text()


def test_missing_dataset_fails_in_one_sentence(backbone_pkl, tmp_path, capsys):
    cell = tmp_path / "cell"
    status, lines = run_main(smoke_config("IR", "voc_det", tmp_path / "nowhere"), backbone_pkl, cell, capsys)
    _fails_before_training(cell, status, lines, "Dataset voc_2007_trainval is missing")
    assert "DETECTRON2_DATASETS" in lines[0]


def test_unknown_detectron2_key_fails_in_one_sentence(backbone_pkl, datasets_root, tmp_path, capsys):
    cfg = smoke_config("IR", "coco_kp", datasets_root)
    cfg.overrides["MODEL.ROI_KEYPOINT_HEAD.NUM_KEYPOINT"] = 17
    cell = tmp_path / "cell"
    status, lines = run_main(cfg, backbone_pkl, cell, capsys)
    _fails_before_training(cell, status, lines, "Did you mean 'MODEL.ROI_KEYPOINT_HEAD.NUM_KEYPOINTS'?")


def test_bad_converted_checkpoints_fail_in_one_sentence(backbone_pkl, datasets_root, tmp_path, capsys):
    cfg = smoke_config("IR", "voc_det", datasets_root)
    torn = tmp_path / "torn.pkl"
    torn.write_bytes(backbone_pkl.read_bytes()[:1000])
    record_checksums(tmp_path, ["torn.pkl"])  # cut short before it was recorded: the reader's own sentence
    status, lines = run_main(cfg, torn, tmp_path / "a", capsys)
    _fails_before_training(tmp_path / "a", status, lines, "is unreadable")
    # A file missing res5 (altered, or converted from another network) names the file and the conversion.
    doc = pickle.loads(backbone_pkl.read_bytes())
    doc["model"] = {k: v for k, v in doc["model"].items() if not k.startswith("res5.")}
    partial = tmp_path / "partial.pkl"
    partial.write_bytes(pickle.dumps(doc))
    record_checksums(tmp_path, ["partial.pkl"])
    status, lines = run_main(cfg, partial, tmp_path / "b", capsys)
    _fails_before_training(
        tmp_path / "b",
        status,
        lines,
        f"The converted backbone {partial} does not hold a ResNet-18 as ring.detection.convert writes it: ",
    )
    assert "tensors missing (e.g. ['res5.0." in lines[0]
    assert "rerun the conversion (ring convert --encoder" in lines[0]
    assert "ResNet depth" not in lines[0]


def test_a_cell_from_before_run_json_keeps_another_configs_checkpoints_under_runs(tmp_path, capsys):
    """Its config_hash stamp is all such a cell says of its run: another config's checkpoints were refused ("move the
    cell folder away"); they are kept under runs/, named by the stamp, and the cell starts over."""
    cfg = smoke_config("IR", "voc_det", tmp_path)
    cell = tmp_path / "cell"
    cell.mkdir()
    (cell / runner.HASH_FILE).write_text("0123456789abcdef\n")
    for name in ("last_checkpoint", "model_final.pth", "log.txt", runner.METRICS_FILE):
        (cell / name).write_text(name)
    assert not runner.bring_in_line(cell, cfg, "b" * 64)
    kept = cell / "runs" / "0123456789abcdef-unrecorded"
    assert sorted(p.name for p in kept.iterdir()) == ["config_hash", "log.txt", runner.METRICS_FILE]
    assert f"made with another config (0123456789abcdef); it is kept in {kept}" in capsys.readouterr().err
    # the cell's files are this config's from now on
    assert cell_runs.read_run_record(cell)["encoder_sha256"] == "b" * 64
    assert (cell / runner.HASH_FILE).read_text().strip() == config_hash(cfg)


def test_a_backbone_altered_after_its_conversion_fails_its_checksum(backbone_pkl, datasets_root, tmp_path, capsys):
    altered = tmp_path / "backbone.pkl"
    data = bytearray(backbone_pkl.read_bytes())
    (tmp_path / "export.json").write_text((backbone_pkl.parent / "export.json").read_text())
    data[len(data) // 2] ^= 0xFF  # one flipped byte: still a loadable pickle of arrays, a wrong backbone
    altered.write_bytes(bytes(data))
    status, lines = run_main(smoke_config("IR", "voc_det", datasets_root), altered, tmp_path / "cell", capsys)
    _fails_before_training(tmp_path / "cell", status, lines, f"The converted backbone {altered} fails its checksum")
    assert "rerun its conversion (rule detection_convert)" in lines[0]


def _final_weights(cell):
    import torch

    return torch.load(cell / "model_final.pth", map_location="cpu", weights_only=True)["model"]


@pytest.mark.slow
def test_one_seed_gives_one_head_initialisation_data_order_and_result_on_every_path(
    voc_det_cells, datasets_root, tmp_path
):
    """Two workflow runs of one cell (voc_det_cells), and the cell rerun by hand with Detectron2's command line, agree
    bit for bit on the CPU (same thread count): the seed drives every RNG on both entry points."""
    cells = voc_det_cells
    metrics = [json.loads((cell / runner.METRICS_FILE).read_text())["results"] for cell in cells]
    assert metrics[0] == metrics[1]
    logs = [(cell / "log.jsonl").read_text().splitlines() for cell in cells]
    losses = [[{k: v for k, v in json.loads(line).items() if "loss" in k} for line in log] for log in logs]
    assert losses[0] == losses[1] and losses[0]  # same data order and heads: same losses at every logged step
    weights = [_final_weights(cell) for cell in cells]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    # Detectron2's command line from the cell's written config, in another folder, with the threads the cells had
    # (the smoke grid's threads: 0 keeps torch's own count, which differs between a plain pytest process and a
    # pytest-xdist worker, tests/conftest.py).
    threads = torch.get_num_threads()
    by_hand = tmp_path / "by_hand"
    run_module(
        "ring.detection.train_net",
        "--config-file",
        cells[0] / runner.D2_CONFIG,
        "OUTPUT_DIR",
        by_hand,
        env={**os.environ, "DETECTRON2_DATASETS": str(datasets_root), "OMP_NUM_THREADS": str(threads)},
    )
    again = _final_weights(by_hand)
    assert all(torch.equal(weights[0][k], again[k]) for k in weights[0])
    assert not (by_hand / "config.yaml").exists()  # the shared setup never writes over a cell's config.yaml


@pytest.mark.parametrize("module", ["ring.detection", "ring.detection.convert"])
def test_detectron2_missing_says_how_to_install_the_detection_environment(
    module, backbone_pkl, encoder_file, datasets_root, tmp_path
):
    cell = tmp_path / "cell"
    cell.mkdir()
    save(smoke_config("IR", "voc_det", datasets_root), cell / "config.yaml")
    args = {
        "ring.detection": ["--config", cell / "config.yaml", "--weights", backbone_pkl, "--out", cell],
        "ring.detection.convert": ["--encoder", encoder_file, "--out", tmp_path / "backbone.pkl"],
    }[module]
    # An environment without Detectron2: None in sys.modules makes every import of it fail.
    code = (
        f"import runpy, sys; sys.modules['detectron2'] = None; sys.argv = ['{module}', *sys.argv[1:]]; "
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    )
    result = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("ring: Detectron2 is not installed in this Python environment (")
    assert "install the detection environment with `ring install-detection`" in result.stderr


class _Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_a_planted_pickle_payload_in_the_converted_weights_never_runs(backbone_pkl, datasets_root, tmp_path, capsys):
    """Neither the stage nor Detectron2's checkpointer unpickles the file: a restricted unpickler reads it."""
    from ring.detection.train_net import SafeCheckpointer

    marker = tmp_path / "payload-ran"
    doc = pickle.loads(backbone_pkl.read_bytes())
    doc["model"]["stem.conv1.weight"] = _Payload(marker)
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps(doc))
    record_checksums(tmp_path, ["evil.pkl"])  # recorded as the cell's own: the restricted unpickler still refuses it
    status, lines = run_main(smoke_config("IR", "voc_det", datasets_root), evil, tmp_path / "cell", capsys)
    _fails_before_training(
        tmp_path / "cell", status, lines, f"The converted backbone {evil} is unreadable (it names posix.mkdir"
    )
    with pytest.raises(ValueError, match="is unreadable"):  # Detectron2's own path (train_net by hand) too
        SafeCheckpointer(torch.nn.Linear(1, 1))._load_file(str(evil))
    assert not marker.exists()


def test_a_diverging_cell_stops_at_the_first_non_finite_loss_in_one_sentence(
    backbone_pkl, datasets_root, tmp_path, capsys
):
    cfg = smoke_config("IR", "voc_det", datasets_root)
    cfg.overrides = {**cfg.overrides, "SOLVER.BASE_LR": 1e20}
    cell = tmp_path / "cell"
    status, lines = run_main(cfg, backbone_pkl, cell, capsys)
    assert status == 1 and len(lines) == 1, lines
    assert f"ring: {cell}: the training loss became non-finite at iteration" in lines[0] and "lr=1e+20" in lines[0]
    assert not (cell / runner.METRICS_FILE).exists() and not (cell / "model_final.pth").exists()


def test_weights_that_step_to_inf_after_a_finite_loss_are_never_checkpointed(
    backbone_pkl, datasets_root, tmp_path, capsys
):
    # One iteration: its loss is finite (Detectron2's own check passes), its update (gradients up to
    # ~3.4 here, times 3e38) overflows the weights, and no later loss would notice; the final
    # checkpoint must refuse them.
    cfg = smoke_config("IR", "voc_det", datasets_root)
    cfg.overrides = {**cfg.overrides, "SOLVER.MAX_ITER": 1, "SOLVER.BASE_LR": 3e38, "SOLVER.WARMUP_FACTOR": 1.0}
    cell = tmp_path / "cell"
    status, lines = run_main(cfg, backbone_pkl, cell, capsys)
    assert status == 1 and len(lines) == 1, lines
    assert f"ring: {cell}: tensor " in lines[0] and "became non-finite after iteration 1" in lines[0], lines
    assert "lr=3e+38" in lines[0]
    assert not (cell / runner.METRICS_FILE).exists() and not (cell / "model_final.pth").exists()
    assert not (cell / "last_checkpoint").exists() and not list(cell.glob(".*.tmp"))


def test_a_detection_cell_looks_its_task_up_once_and_its_method_and_source_never(
    backbone_pkl, datasets_root, tmp_path, monkeypatch
):
    """ring.detection.runner.resolve checks the cell's names and looks its task up once; its method and source only
    label the converted encoder.  Preparing, training (one iteration) and evaluating the cell and writing its metrics
    then look no task, method or dataset up by name (tests/project/test_rooms.py, the other stages' cells)."""
    cfg = smoke_config("IRing", "voc_det", datasets_root)
    cfg.overrides = {**cfg.overrides, "SOLVER.MAX_ITER": 1}
    save(cfg, tmp_path / "config.yaml")
    counts = count_lookups(monkeypatch)
    cfg, task = runner.resolve(tmp_path / "config.yaml")
    assert counts == {("task", "voc_det"): 1}
    refuse_lookups(monkeypatch)
    metrics = runner.run(cfg, task, backbone_pkl, tmp_path / "cell")
    assert metrics["columns"].keys() == {"voc_det_AP", "voc_det_AP50", "voc_det_AP75"}  # evaluated by the task's
    assert metrics["protocol"]["base_config"] == "PascalVOC-Detection/faster_rcnn_R_50_C4.yaml"
    assert (metrics["method"], metrics["source"]) == ("IRing", "digits_colour")
