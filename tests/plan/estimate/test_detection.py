"""ring.plan.estimate.detection: Table 4's cells priced from the end-to-end detection figure of their task, scaled to
their schedule and input, and on a device without a figure of its own from the host's at the ratio it states."""

import json
import math
from pathlib import Path

from ring.core.config import DetectionConfig
from ring.plan.estimate import blocks, load_figures
from tests.plan.estimate.test_figures import _write_figures
from tests.plan.estimate.test_pricing import RECORD, write_price

FIXED = {"start and imports": 20.0, "data check": 0.0, "setup": 3.0, "compile warm-up": 0.0}


def write_detection(folder: Path) -> None:
    """price_detection-cpu.json: every task 2 s an iteration of 2 images of 64 x 64 pixels, 5 s a job, 4 test
    images; 23 s of fixed costs per job."""
    task = {
        "record": RECORD,
        "clock": "wall",
        "shape": {"ims_per_batch": 2, "pixels": 64 * 64},
        "seconds_per_iteration": 2.0,
        "seconds_per_job": 5.0,
        "test_images": 4,
        "iterations": [2, 8],
    }
    doc = {
        "machine": {"device": "cpu", "date": "2026-12-02T05:00:00Z"},
        "clock": "wall",
        "tasks": dict.fromkeys(("coco_det_seg", "coco_kp", "voc_det"), task),
        "fixed": {"record": RECORD, "clock": "wall", "per_job_s": FIXED, "checkpoint_write_s": 0.0, "cells": 3},
    }
    (folder / "price_detection-cpu.json").write_text(json.dumps(doc))


def _cell(**overrides) -> DetectionConfig:
    return DetectionConfig(task="voc_det", method="IR", source="imagenet", overrides=overrides)


def test_a_detection_cell_is_priced_from_its_tasks_figure_at_its_schedule_and_input(tmp_path):
    _write_figures(tmp_path, "cpu", "2026-11-26T10:00:00Z", 10.0, image_size=16)
    write_price(tmp_path)
    write_detection(tmp_path)
    figures = load_figures("cpu", results=tmp_path)
    smoke = DetectionConfig(
        task="coco_kp",
        method="IR",
        source="digits",
        datasets="embedded",
        overrides={"SOLVER.MAX_ITER": 30, "SOLVER.IMS_PER_BATCH": 2, "INPUT.MIN_SIZE_TRAIN": [64]},
    )
    price = blocks.price_cell("detection", smoke, figures, restarts=1)
    # 30 iterations of 2 images and the 4 test images at 1 s an image, and the job's 5 s.
    assert math.isclose(price.seconds["detection"], (30 * 2 + 4) * 1.0 + 5.0)
    assert math.isclose(price.seconds["fixed costs"], 2 * 23.0)  # two processes
    assert price.sources["detection"] == "end-to-end (price_detection-cpu.json, cpu's)" and not price.unpriced
    # The paper's VOC schedule: 24k iterations of 16 images, short sides 480-800 (mean 640) at 4:3, 4952 test images.
    paper = blocks.price_cell("detection", _cell(), figures)
    per_image = 1.0 * (640 * 640 * 4 / 3) / (64 * 64)
    assert math.isclose(paper.seconds["detection"], (24_000 * 16 + 4952) * per_image + 5.0)


def test_a_device_without_detection_figures_is_priced_from_the_hosts_at_the_stated_ratio(tmp_path):
    _write_figures(tmp_path, "cpu", "2026-11-26T10:00:00Z", 10.0, image_size=16)
    _write_figures(tmp_path, "GPU X", "2026-11-26T11:00:00Z", 5000.0)
    write_price(tmp_path)
    write_detection(tmp_path)
    figures = load_figures("GPU X", results=tmp_path)
    price = blocks.price_cell("detection", _cell(), figures)
    # The two devices' ResNet-18 steps: 10,000 images/s at 224 px against 20 at 16 px.
    ratio = (10_000 * 224**2) / (20 * 16**2)
    per_image = 1.0 * (640 * 640 * 4 / 3) / (64 * 64)
    assert math.isclose(price.seconds["detection"], ((24_000 * 16 + 4952) * per_image + 5.0) / ratio)
    assert f"at GPU X / cpu = {ratio:,.0f}, the ratio of their ResNet-18 training steps" in price.sources["detection"]
    assert math.isclose(price.seconds["fixed costs"], 23.0)  # host-side: at ratio 1
    assert not price.unpriced
