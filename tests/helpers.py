"""Small configs on the embedded digits data, shared by the stage tests."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ring.core import files
from ring.core.config import LinclsConfig, PretrainConfig, config_hash, save
from ring.core.methods import METHODS, apply_fixed
from tests import ROOT


def copy_workflow(dest: Path) -> Path:
    """``dest`` laid out as a checkout to run Snakemake in: the Snakefile, workflow/, profiles/ and the package's
    data (ring/resources/, where a test writes its grids) copied, the rest of ring/ linked.  A job's ``python -m
    ring...`` puts its working folder first on sys.path: a ring/ holding only resources/ would be imported as a
    namespace package in place of the installed one (no ``ring.__version__``)."""
    for name in ("Snakefile", "workflow", "profiles", "ring/resources"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    for src in (ROOT / "ring").iterdir():
        if src.name not in ("resources", "__pycache__"):
            (dest / "ring" / src.name).symlink_to(src)
    return dest


# The paper's Table 3 (table:meta) columns in its order: the Meta-Dataset transfer datasets of the CIFAR10 encoders.
PAPER_TRANSFER_DATASETS = [
    "aircraft",
    "cub",
    "dtd",
    "fungi",
    "mnist",
    "fashion_mnist",
    "traffic_sign",
    "vgg_flower",
    "mscoco",
]

TINY_PRETRAIN = dict(
    dataset="digits",
    epochs=2,
    batch_size=64,
    lr_milestones=[1],
    resize=32,
    crop=32,
    bank_negatives=256,
    queue_size=256,
    bn_groups=2,
    ring_anneal_epochs=1,
    knn_every=1,
    knn_schedule="every",  # the monitor after every epoch (issue 48: "auto" would run it at the last only)
    num_workers=0,
)

# The same as a grid's `pretrain: all:` block holds it: the dataset is the cell's, named by the grid's datasets.
TINY_PRETRAIN_BLOCK = {k: v for k, v in TINY_PRETRAIN.items() if k != "dataset"}

TINY_LINCLS = dict(dataset="digits", epochs=3, batch_size=64, resize=32, crop=32, augmentation="none", num_workers=0)


def pretrain_config(method: str, **overrides) -> PretrainConfig:
    """A tiny config with the method's defining values set, as a grid sets them (ring.core.methods.apply_fixed)."""
    values = {**TINY_PRETRAIN, **overrides}
    if method in METHODS:
        values = apply_fixed(method, values)
    return PretrainConfig(method=method, **values)


def lincls_config(**overrides) -> LinclsConfig:
    return LinclsConfig(**{**TINY_LINCLS, **overrides})


def launch_command(cell: Path, *options: str) -> list[str]:
    """The command a pretraining rule runs for ``cell`` (its config.yaml written there): ``ring.cluster.launch``
    with ``options`` (the launcher, resources ...), the stage's own arguments after ``--``."""
    stage = ["--config", str(cell / "config.yaml"), "--out", str(cell)]
    return [sys.executable, "-m", "ring.cluster.launch", "pretrain", "--cell", str(cell), *options, "--", *stage]


def run_module(module: str, *args, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True, check=check, **kwargs
    )


def preempt_resume_and_requeue(cell, monkeypatch, cfg: PretrainConfig) -> int:
    """Pretrain ``cfg`` in ``cell`` as a preempted, requeued cell is: preempted 4 steps into epoch 1,
    resumed to the end, then requeued once more from that mid-epoch checkpoint (older than the log),
    which redoes the end of epoch 1.  Returns the steps per epoch."""
    import shutil

    from ring.core import stop
    from ring.pretrain import Pretraining

    first = Pretraining(cfg, cell)
    step, steps = first.optimizer.step, []

    def stop_in_epoch_1(*args, **kwargs):
        steps.append(1)
        if len(steps) == first.steps_per_epoch + 4:  # a preemption 4 steps into epoch 1
            stop.request_stop()
        return step(*args, **kwargs)

    monkeypatch.setattr(first.optimizer, "step", stop_in_epoch_1)
    try:
        first.run()
        raise AssertionError("the preemption did not stop the run")
    except stop.Preempted:
        pass
    monkeypatch.setattr(stop, "_stop_requested", False)
    mid_epoch_1 = cell.parent / "mid_epoch_1.pt"
    shutil.copy(cell / "checkpoint.pt", mid_epoch_1)
    Pretraining(cfg, cell).run()
    shutil.copy(mid_epoch_1, cell / "checkpoint.pt")
    (cell / "encoder.pt").unlink()
    Pretraining(cfg, cell).run()
    return first.steps_per_epoch


def retrain_and_undo(evaluate, encoder_file, cell, outputs=("metrics.json",)) -> None:
    """Issue 32 item 3 at the stage's level: ``evaluate()`` (a fresh LinearEval / TransferEval of ``cell`` on
    ``encoder_file``, run) after the encoder is retrained keeps the old encoder's finished evaluation under
    ``runs/<config hash>-<encoder sha256[:12]>/``; with the old encoder back (an undone pretraining edit) the
    kept evaluation comes back whole and nothing is trained: the same bytes, the same log."""
    import shutil

    import torch

    from ring.core import cell_runs
    from ring.core.files import CHECKSUMS, KEPT
    from ring.engine.encoder import Encoder, save_trunks, torchvision_state_dict

    evaluate()
    first = {name: (cell / name).read_bytes() for name in (*outputs, "log.jsonl", "provenance.json")}
    record = json.loads((cell / files.RUN_RECORD).read_text())
    kept_encoder = encoder_file.parent / "kept-encoder"  # what ring.core.cell_runs keeps of the pretraining run
    kept_encoder.mkdir()
    for name in (encoder_file.name, CHECKSUMS, KEPT):
        os.replace(encoder_file.parent / name, kept_encoder / name)
    torch.manual_seed(1)
    save_trunks({"encoder.pt": torchvision_state_dict(Encoder())}, encoder_file.parent)  # pretraining retrained
    for name in outputs:
        (cell / name).unlink()  # Snakemake deletes the outputs of a job it reruns
    evaluate()
    aside = cell / cell_runs.RUNS / cell_runs.run_key(record["config_hash"], record["encoder_sha256"])
    assert {name: (aside / name).read_bytes() for name in first} == first  # nothing finished is deleted
    # keep_superseded: results (the default) drops the probe's checkpoint; its finished outputs stay.
    assert not list(cell.glob("checkpoint.stale-*")) and not (aside / "checkpoint.pt").exists()
    second = {name: (cell / name).read_bytes() for name in outputs}
    assert second != {name: first[name] for name in outputs}

    shutil.rmtree(encoder_file.parent / KEPT)
    for path in kept_encoder.iterdir():  # the pretraining edit undone: the old encoder restored
        os.replace(path, encoder_file.parent / path.name)
    for name in outputs:
        (cell / name).unlink()
    evaluate()
    assert {name: (cell / name).read_bytes() for name in first} == first  # restored, not recomputed
    assert json.loads((cell / files.RUN_RECORD).read_text()) == record
    (kept_run,) = (cell / cell_runs.RUNS).iterdir()  # the retrained encoder's evaluation is kept in turn
    assert kept_run != aside and {name: (kept_run / name).read_bytes() for name in outputs} == second


# What Detectron2 leaves in a finished Table 4 cell besides the stage's own records: its checkpoints, the pointer to
# the last, its log and config (ring.detection.runner).
DETECTRON2_FILES = ("model_0000009.pth", "model_final.pth", "last_checkpoint", "log.txt", "detectron2.yaml")


def finished_detection(results: Path, grid, method: str, task: str, seed: int = 0, config_files: bool = True) -> Path:
    """One Table 4 cell of ``grid`` under ``results/<grid>/`` as the stages leave it finished, without training: the
    pretraining cell's encoder and checksum record, the converted backbone and its record, the detection cell's
    Detectron2 files, run.json, metrics.json and its kept copy and record.  ``config_files``: with each cell's
    config.yaml and config.hash (the workflow's config rules write them otherwise).  Returns the detection cell."""
    from ring.core import cell_runs
    from ring.core.files import record_checksums

    base, source = results / grid.name, grid.detection["source"]
    pre = base / "pretrain" / source / method / f"seed{seed}"
    conv = base / "detection" / source / method / f"seed{seed}"
    cell = conv.parent / task / f"seed{seed}"
    for folder in (pre, conv, cell):
        folder.mkdir(parents=True, exist_ok=True)
    pre_cfg = grid.pretrain_config(source, method, seed, "data")
    cfg = grid.detection_config(method, task, seed, "datasets")
    for folder, config in ((pre, pre_cfg), (cell, cfg)) if config_files else ():
        (folder / "config.hash").write_text(config_hash(config) + "\n")
        save(config, folder / "config.yaml")  # after the hash and before the outputs, as the workflow writes them
    (pre / "encoder.pt").write_bytes(b"trunk")
    encoder = record_checksums(pre, ["encoder.pt"], config_hash=config_hash(pre_cfg))
    (conv / "backbone.pkl").write_bytes(b"backbone")
    backbone = record_checksums(
        conv, ["backbone.pkl"], encoder_files=encoder["files"], encoder_config_hash=encoder["config_hash"]
    )["files"]["backbone.pkl"]
    cell_runs.write_record(cell, cfg, backbone)
    for name in DETECTRON2_FILES:
        (cell / name).write_text(f"{name} of {config_hash(cfg)}")
    lineage = {"config_hash": config_hash(cfg), "backbone_sha256": backbone, "encoder_files": encoder["files"]}
    metrics = {"task": task, "method": method, "seed": seed, **lineage, "columns": {f"{task}_AP": 6.0}}
    (cell / "metrics.json").write_text(json.dumps(metrics))
    cell_runs.keep_outputs(cell, "detection", cfg, backbone)
    return cell
