"""The three Table 4 models: Detectron2 base config, paper schedule and which metrics they report;
and the sentence that says how to install Detectron2 when it is missing (:func:`missing_detectron2`).

Torch-free (the workflow client and ``ring.reports.tables`` import it).  Each task starts from Detectron2's
own model-zoo config and changes only what the paper's appendix ("Detectron2 Experiments") and
MoCo's detection configs, whose hyperparameters the paper follows, change.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from ring import resources


@dataclass(frozen=True)
class Task:
    base_config: str  # path inside detectron2/model_zoo/configs
    results: dict[str, str]  # Detectron2 result group ("bbox", ...) -> Table 4 column prefix
    schedule: dict = field(default_factory=dict)  # Detectron2 keys the paper's schedule changes
    roi_heads: str | None = None  # ROI head replacing the base config's, when R18 needs another


TASKS = {
    # Mask R-CNN R18-FPN, COCO 1x (90k iterations, lr steps at 60k/80k: the base config's schedule).
    "coco_det_seg": Task(
        "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml", {"bbox": "coco_det", "segm": "coco_seg"}
    ),
    # Keypoint R-CNN R18-FPN, COCO 1x.
    "coco_kp": Task("COCO-Keypoints/keypoint_rcnn_R_50_FPN_1x.yaml", {"keypoints": "coco_kp"}),
    # Faster R-CNN R18-C4 on VOC 07+12 trainval, tested on VOC07 test.  MoCo's VOC schedule: 24k
    # iterations with steps at 18k/22k (Detectron2's own config trains 18k).  Detectron2's
    # Res5ROIHeads always builds Bottleneck blocks, which an R18 checkpoint cannot fill.
    "voc_det": Task(
        "PascalVOC-Detection/faster_rcnn_R_50_C4.yaml",
        {"bbox": "voc_det"},
        schedule={"SOLVER.MAX_ITER": 24000, "SOLVER.STEPS": (18000, 22000)},
        roi_heads="BasicRes5ROIHeads",
    ),
}

METRICS = ("AP", "AP50", "AP75")

# Table 4's columns, in the paper's order: published-results.yaml table4_detection.columns.
COLUMNS = [f"{prefix}_{metric}" for task in TASKS.values() for prefix in task.results.values() for metric in METRICS]


def task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"Unknown detection task {name!r}; choose from {', '.join(TASKS)}.")
    return TASKS[name]


def _detection_modules() -> set[str]:
    """Detectron2 and the runtime requirements envs/install-detectron2-cpu.sh installs with it."""
    names = {"detectron2"}
    requirements = resources.DETECTION_REQUIREMENTS
    if requirements.is_file():
        for line in requirements.read_text().splitlines():
            line = line.split("#")[0].strip()
            if line:
                names.add(line.split("==")[0].strip().replace("-", "_"))
    return names


def missing_detectron2(err: ModuleNotFoundError) -> str | None:
    """One sentence on how to install the detection environment, if ``err`` is Detectron2 (or one of
    its requirements) missing; None for any other missing module."""
    if not err.name or err.name.split(".")[0] not in _detection_modules():
        return None
    return (
        f"Detectron2 is not installed in this Python environment ({sys.executable}: no module {err.name!r}); "
        f"install the detection environment with `bash envs/install-detectron2-cpu.sh {sys.executable}` "
        "(its Python code, CPU; envs/install.sh runs it) or, on a GPU cluster, `bash envs/detection-cluster.sh` "
        "(README, Detection)."
    )
