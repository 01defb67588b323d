"""The price suite's detection figures: Table 4's Detectron2 models timed per iteration through ring/detection's entry
point (``python -m benchmarks.price --device cpu --detection``, a few minutes on 2 cores).

Each task of the smoke grid (:data:`TASKS`) runs as the workflow's detection job runs it (``ring.cluster.launch
detection``, one process, one thread) on the embedded dataset at the smoke grid's input size and batch, but with the
paper's model: the smoke grid's narrowed heads and proposal counts are left out, so that the figure is the paper's
model per pixel.  Each task runs twice, :data:`SHORT` and :data:`LONG` iterations: the difference of their ``detection``
seconds over ``LONG - SHORT`` iterations is an iteration's (its first iterations, the model's build and the evaluation
are in both runs and cancel), and what the short run spent beyond its iterations is the cost per job (the trainer's
build, the evaluation of the embedded test images); the per-job fixed costs are the segments' own.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

from ring import resources
from ring.core import config
from ring.plan import grid
from ring.plan.estimate import detection
from ring.plan.estimate.measured import fixed_figure, seconds_of

SHORT, LONG = 2, 6  # iterations: the short run's first is Detectron2's warm-up, LONG - SHORT are timed


def paper_model(cfg: config.DetectionConfig, iterations: int) -> config.DetectionConfig:
    """The smoke cell with the paper's model (its narrowing keys left out; its input, batch, test threshold stay) at
    ``iterations``; a low lr, which changes no iteration's work, keeps so short a run's loss finite."""
    overrides = {k: v for k, v in cfg.overrides.items() if not k.startswith(detection.NARROWING)}
    overrides.update(
        {"SOLVER.MAX_ITER": iterations, "SOLVER.STEPS": [], "SOLVER.WARMUP_ITERS": 1, "SOLVER.BASE_LR": 0.001}
    )
    return config.from_dict(config.DetectionConfig, {**config.to_dict(cfg), "overrides": overrides})


def backbone(root: Path) -> Path:
    """A freshly initialised ResNet-18 encoder converted to Detectron2's format (the figure times the model, not the
    weights): as ring.detection.convert converts a pretrained one."""
    code = (
        "import sys, torch; from pathlib import Path; from ring.detection import convert;"
        "from ring.engine.encoder import Encoder, save_trunks, torchvision_state_dict;"
        "torch.manual_seed(0); out = Path(sys.argv[1]);"
        "save_trunks({'encoder.pt': torchvision_state_dict(Encoder())}, out);"
        "convert.convert(out / 'encoder.pt', out / 'backbone.pkl')"
    )
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", code, str(root)], check=True, capture_output=True, timeout=600)
    return root / "backbone.pkl"


def measure(run_stage, record, root: Path, clock: str) -> dict:
    """Per task: the seconds per iteration and per job of the ``detection`` pass on ``clock``, the record of what ran
    (images per batch, input sides) and the per-job fixed costs.  ``run_stage`` and ``record``: benchmarks.price's."""
    smoke = grid.load(resources.GRIDS / "smoke.yaml")
    datasets = root / "datasets"
    subprocess.run([sys.executable, "-m", "ring.detection.embedded", "--out", str(datasets)], check=True, timeout=600)
    weights = backbone(root / "backbone")
    out, fixed = {}, []
    for task in smoke.detection["tasks"]:
        cfg = smoke.detection_config("IR", task, 0, str(datasets))
        spent = {}
        for iterations in (SHORT, LONG):
            cell = root / task / f"iter{iterations}"
            segment = run_stage("detection", paper_model(cfg, iterations), cell, "--weights", str(weights))
            spent[iterations] = seconds_of(segment, clock)["detection"]
        fixed.append(fixed_figure(segment, record(cfg), clock))
        per_iteration = (spent[LONG] - spent[SHORT]) / (LONG - SHORT)
        if not per_iteration > 0:
            raise ValueError(
                f"{task}: {LONG} iterations took no longer than {SHORT} ({spent}); the figure cannot be honest: rerun."
            )
        test_images = embedded_test_images(datasets, task)
        shape = detection.shape(paper_model(cfg, SHORT), test_images)
        out[task] = {
            "record": record(cfg),
            "clock": clock,
            "shape": {"ims_per_batch": shape.ims_per_batch, "pixels": shape.pixels},
            "overrides": paper_model(cfg, SHORT).overrides,
            "iterations": [SHORT, LONG],
            "detection_s": spent,
            "seconds_per_iteration": per_iteration,
            # The short run beyond its iterations: the trainer's build and the evaluation of the test images.
            "seconds_per_job": max(spent[SHORT] - SHORT * per_iteration, 0.0),
            "test_images": test_images,
        }
    per_job = {k: statistics.median(f["per_job_s"][k] for f in fixed) for k in fixed[0]["per_job_s"]}
    return {"tasks": out, "fixed": {**fixed[0], "per_job_s": per_job, "cells": len(fixed)}}


def embedded_test_images(datasets: Path, task: str) -> int:
    """The test images the short run evaluated (the embedded dataset's val2017 or VOC2007 test split)."""
    if task.startswith("coco"):
        return len(list((datasets / "coco" / "val2017").glob("*.jpg")))
    return len((datasets / "VOC2007" / "ImageSets" / "Main" / "test.txt").read_text().split())
