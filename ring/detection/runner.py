"""One Table 4 cell: train a Detectron2 model on a frozen converted encoder, evaluate, write metrics.

    python -m ring.detection --config CELL/config.yaml --weights CONVERTED/backbone.pkl --out CELL

In order, before any training step: the cell config (:class:`ring.core.config.DetectionConfig`), the
datasets (Detectron2's layout under ``datasets_root``), the converted weights file and the
Detectron2 config (base config + paper + schedule + cell overrides, written to
``CELL/detectron2.yaml``) are checked, each failure one sentence; then the model is built and
:func:`ring.detection.convert.check_loaded` proves it holds every converted backbone tensor.
Training is Detectron2's ``DefaultTrainer``; evaluation its COCO / Pascal VOC evaluators after the
last iteration.  ``CELL/metrics.json`` holds Detectron2's results and the Table 4 columns.

Resume is the default: Detectron2 checkpoints every ``SOLVER.CHECKPOINT_PERIOD`` iterations and on
a preemption signal, and a rerun continues from ``CELL/last_checkpoint``; a checkpoint written
under another config or from another backbone is never continued: that run moves to ``CELL/runs/``
(ring.core.cell_runs, as the other stages' runs do; the workflow's config rule has moved it already), and
a kept run of this config and backbone comes back instead (finished: nothing trains).  Several GPUs:
``num_gpus`` processes through Detectron2's ``launch`` on one node, or, under SLURM with one task per
GPU (ring.cluster.launch), Detectron2's distributed worker joined from submitit's environment.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path

from ring.core import cell_runs
from ring.core.config import DetectionConfig, config_hash
from ring.core.files import CHECKSUMS, FileError, check_writable, verify_checksum, write_json, write_text
from ring.core.metrics import NonFinite, check_metrics
from ring.core.stages import STAGES
from ring.detection import configs
from ring.detection.convert import check_loaded, read_converted
from ring.engine import clock, health, provenance
from ring.engine.runtime import setup_threads
from ring.plan import checks
from ring.plan.detection_tasks import METRICS, Task, missing_detectron2
from ring.plan.detection_tasks import task as get_task

METRICS_FILE = "metrics.json"
D2_CONFIG = "detectron2.yaml"
HASH_FILE = "config_hash"
REDO_CONVERSION = "rerun its conversion (rule detection_convert)"


def weights_lineage(path: str | Path) -> dict:
    """What a detection cell's number is made from: the backbone's SHA-256 and the encoder it was converted from."""
    record = json.loads(Path(path).with_name(CHECKSUMS).read_text())
    return {
        "backbone_sha256": record["files"][Path(path).name],
        "encoder_files": record.get("encoder_files"),
        "encoder_config_hash": record.get("encoder_config_hash"),
    }


def table_columns(task: Task, results: dict) -> dict[str, float]:
    """Detectron2's result groups -> Table 4 columns (coco_det_AP, ...); NaN where a group is absent."""
    columns = {}
    for group, prefix in task.results.items():
        for metric in METRICS:
            columns[f"{prefix}_{metric}"] = float(results.get(group, {}).get(metric, math.nan))
    return columns


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def keep_unrecorded_run(out: Path, cfg: DetectionConfig) -> None:
    """A cell from before run.json was kept names its config only in its ``config_hash`` stamp: checkpoints of
    another config are kept under runs/, named by that stamp, as ring.core.cell_runs keeps any other run."""
    stamp = out / HASH_FILE
    if cell_runs.read_run_record(out) is not None or not stamp.is_file():
        return
    old = stamp.read_text().strip()
    if old == config_hash(cfg):
        return
    aside = cell_runs.set_aside(out, cell_runs.run_key(old, "unrecorded"), STAGES["detection"].run_files)
    if aside is not None:
        say(f"ring: {out}: its Detectron2 run was made with another config ({old}); it is kept in {aside}")
        cell_runs.drop_checkpoints(aside, cfg, log=say)


def bring_in_line(out: Path, cfg: DetectionConfig, backbone: str) -> bool:
    """The cell's folder made this config's run on this backbone (SHA-256 ``backbone``): another config's or
    backbone's run kept under runs/, a kept run of these restored (ring.core.cell_runs.prepare); True when that run is
    finished, its outputs verified (nothing trains).  Rank 0 alone moves files: under SLURM's one task per GPU the
    launcher collected a finished cell before submitting it, so the other ranks train whenever rank 0 does."""
    if int(os.environ.get("RANK", "0")) != 0:
        return False
    cell_runs.prepare(out, "detection", cfg, log=say, encoder=backbone)
    keep_unrecorded_run(out, cfg)
    if cell_runs.finished(out, "detection", cfg, backbone):
        return True
    cell_runs.write_record(out, cfg, backbone)  # from now on, every file here is this config's and backbone's
    write_text(out / HASH_FILE, config_hash(cfg) + "\n")
    return False


def prepare(cfg: DetectionConfig, task: Task, weights: str | Path, out: str | Path):
    """Every check that needs no model; returns the frozen Detectron2 config and the converted weights, or None
    when the cell's run of this config and backbone is finished already.  ``task``: the cell's, which its entry
    point (:func:`resolve`) looked up."""
    if cfg.datasets not in ("detectron2", "embedded"):
        raise ValueError(f"Unknown detection datasets {cfg.datasets!r}; choose detectron2 or embedded.")
    out = Path(out)
    d2cfg = configs.build(cfg, task, Path(weights).resolve(), out.resolve())
    configs.check_datasets([*d2cfg.DATASETS.TRAIN, *d2cfg.DATASETS.TEST], cfg.datasets_root)
    # Its checksum verified, then read by a restricted unpickler (no code runs); one sentence otherwise.
    backbone = verify_checksum(weights, "converted backbone", REDO_CONVERSION)
    converted = read_converted(weights)
    check_writable(out)  # an unwritable cell folder is one sentence, before the model is built
    out.mkdir(parents=True, exist_ok=True)
    if bring_in_line(out, cfg, backbone):
        return None
    write_text(out / D2_CONFIG, d2cfg.dump())
    return d2cfg, converted


def train_and_evaluate(d2cfg, converted: dict, datasets_root: str, where: str) -> dict:
    """One process's part: register datasets, build, prove the backbone loads, train, evaluate."""
    # Detectron2 loads in the process that trains, after the checks of prepare() ran without it.
    from ring.detection.train_net import SafeCheckpointer, Trainer, setup

    setup(d2cfg)  # logger, and every RNG seeded from the cell's SEED before the heads are initialised
    configs.register([*d2cfg.DATASETS.TRAIN, *d2cfg.DATASETS.TEST], datasets_root)
    trainer = Trainer(d2cfg)
    model = getattr(trainer.model, "module", trainer.model)
    # Detectron2 gets the weights this stage already read safely, never the path to unpickle.
    preloaded = {str(Path(d2cfg.MODEL.WEIGHTS).resolve()): converted}
    SafeCheckpointer(model, preloaded=preloaded).load(d2cfg.MODEL.WEIGHTS)
    check_loaded(model.state_dict(), converted, where)
    trainer.checkpointer.preloaded = preloaded  # a fresh start loads MODEL.WEIGHTS again, through it
    trainer.resume_or_load(resume=True)
    return trainer.train()


def _slurm_worker(d2cfg, converted, datasets_root, where) -> dict:
    """Join Detectron2's process groups from submitit's environment (one SLURM task per GPU)."""
    from detectron2.engine.launch import _distributed_worker

    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    url = f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    box = {}

    def work(*args):
        box["results"] = train_and_evaluate(*args)

    _distributed_worker(
        int(os.environ.get("LOCAL_RANK", rank % local)),
        work,
        world,
        local,
        rank // local,
        url,
        (d2cfg, converted, datasets_root, where),
    )
    return box.get("results", {})


def resolve(config: str | Path) -> tuple[DetectionConfig, Task]:
    """The cell's config, its names checked (ring.plan.checks.stages.check_detection), and its task looked up: here
    and nowhere below.  Its method and source are never looked up: they name the encoder that --weights holds,
    converted, and label its numbers."""
    cfg = checks.load_checked("detection", config)
    return cfg, get_task(cfg.task)


def run(cfg: DetectionConfig, task: Task, weights: str | Path, out: str | Path) -> dict | None:
    """Train and evaluate the cell; ``task``: its own, which :func:`resolve` looked up."""
    clock.start()  # what each pass of this cell costs (ring.engine.clock), recorded with its segment
    setup_threads(cfg.threads)
    with clock.timing("setup"):
        prepared = prepare(cfg, task, weights, out)
    if prepared is None:
        say(f"ring: {out}: this backbone's run with this config is complete (kept outputs verified); nothing to train")
        return json.loads((Path(out) / METRICS_FILE).read_text())
    d2cfg, converted = prepared
    lineage = {"config_hash": config_hash(cfg), **weights_lineage(weights)}
    where = f"the {cfg.task} model ({task.base_config} at RESNETS.DEPTH 18)"
    args = (d2cfg, converted, cfg.datasets_root, where)
    segment = provenance.Segment(out, config_hash(cfg), cfg.seed)
    with segment, non_finite_loss_is_one_sentence(out, cfg), clock.timing("detection"):
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            results = _slurm_worker(*args)
        elif cfg.num_gpus > 1:
            from detectron2.engine import launch

            # Detectron2 spawns one process per GPU; rank 0 writes the metrics from its evaluation.
            launch(_write_metrics_worker, cfg.num_gpus, dist_url="auto", args=(cfg, task, out, lineage, *args))
            return json.loads((Path(out) / METRICS_FILE).read_text())
        else:
            results = train_and_evaluate(*args)
    if int(os.environ.get("RANK", "0")) != 0:
        return None
    return write_metrics(cfg, task, out, results, lineage)


@contextmanager
def non_finite_loss_is_one_sentence(out, cfg: DetectionConfig):
    """Detectron2 stops at the first non-finite loss, before that step's optimizer update and before
    any checkpoint (SimpleTrainer's FloatingPointError); that becomes ring.engine.health's one sentence."""
    try:
        yield
    except FloatingPointError as err:
        match = re.search(r"iteration=(\d+)", str(err))
        step = int(match.group(1)) + 1 if match else "?"
        lr = cfg.overrides.get("SOLVER.BASE_LR") if isinstance(getattr(cfg, "overrides", None), dict) else None
        raise NonFinite(
            f"{out}: the training loss became non-finite at iteration {step} (Detectron2 counts "
            f"iterations, not epochs); {health.likely_cause(lr)}."
        ) from None


def _write_metrics_worker(cfg, task, out, lineage, *args) -> None:
    from detectron2.utils import comm

    results = train_and_evaluate(*args)
    if comm.is_main_process():
        write_metrics(cfg, task, out, results, lineage)


def write_metrics(cfg: DetectionConfig, task: Task, out: str | Path, results: dict, lineage: dict) -> dict:
    """metrics.json: the columns, Detectron2's results, the protocol, and ``lineage`` (the config hash, the
    backbone's SHA-256 and its encoder's identity) that ring.plan.lineage checks before a table shows the cell."""
    metrics = {
        "task": cfg.task,
        "method": cfg.method,
        "source": cfg.source,
        "seed": cfg.seed,
        **lineage,
        "columns": table_columns(task, results),
        "results": {k: {m: float(v) for m, v in d.items()} for k, d in results.items()},
        "protocol": {
            "base_config": task.base_config,
            "backbone": "ResNet-18, frozen (FREEZE_AT 5), FrozenBN",
            "detectron2_config": D2_CONFIG,
            "datasets": cfg.datasets,
        },
    }
    path = Path(out) / METRICS_FILE
    check_metrics(metrics, path, keys=("columns",))
    write_json(path, metrics)
    # Kept with a checksum record naming the backbone: a job that finished while no client watched is collected
    # by the launcher without a new job (ring.core.cell_runs.collect).
    cell_runs.keep_outputs(out, "detection", cfg, lineage["backbone_sha256"])
    return metrics


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config", required=True, help=f"cell config (YAML of DetectionConfig fields; {checks.REFERENCE_HINT})"
    )
    parser.add_argument("--weights", help="backbone.pkl written by ring.detection.convert")
    parser.add_argument("--out", help="cell folder: Detectron2's checkpoints, logs and metrics.json")
    parser.add_argument(
        "--datasets-only",
        action="store_true",
        help="only check that the datasets the cell reads are there (the workflow does, before any job of its run)",
    )
    args = parser.parse_args(argv)
    clock.entered()  # the interpreter's start and the imports: this job's first fixed cost
    if not args.datasets_only and not (args.weights and args.out):
        parser.error("--weights and --out are required (or --datasets-only)")
    try:
        cfg, task = resolve(args.config)
        if args.datasets_only:
            d2cfg = configs.build(cfg, task, "", "")
            configs.check_datasets([*d2cfg.DATASETS.TRAIN, *d2cfg.DATASETS.TEST], cfg.datasets_root)
            return 0
        metrics = run(cfg, task, args.weights, args.out)
    except (ValueError, FileNotFoundError, FileError) as err:  # ConversionError is a ValueError
        print(f"ring: {err}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as err:
        if missing_detectron2(err) is None:
            raise
        print(f"ring: {missing_detectron2(err)}", file=sys.stderr)
        return 1
    if metrics is not None:
        shown = " ".join(f"{k}={v:.1f}" for k, v in metrics["columns"].items())
        print(f"ring: {args.out}: {shown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
