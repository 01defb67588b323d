"""The three Table 4 models: Detectron2 base config, paper schedule and which metrics they report;
the sentence that says how to install Detectron2 when it is missing (:func:`missing_detectron2`), and the command
that does it (``ring install-detection``, :func:`install_main`: the installers the package ships).

Torch-free (the workflow client and ``ring.reports.tables`` import it).  Each task starts from Detectron2's
own model-zoo config and changes only what the paper's appendix ("Detectron2 Experiments") and
MoCo's detection configs, whose hyperparameters the paper follows, change.
"""

from __future__ import annotations

import argparse
import subprocess
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
    """Detectron2 and the runtime requirements its installers (ring/resources/install/) install with it."""
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
        "install the detection environment with `ring install-detection` (its Python code for a CPU, from a pinned "
        "sdist; envs/install.sh runs it) or, on a GPU cluster, `ring install-detection --cluster` (built with its "
        "CUDA extension) (docs/detection.md, Install)."
    )


# The installers the package ships (ring/resources/install/): CPU (Python code only), cluster (with the extension).
INSTALLERS = {False: "detectron2-cpu.sh", True: "detectron2-cluster.sh"}


def installer(cluster: bool) -> list[str]:
    """The command that installs Detectron2 into this interpreter's environment: the shipped script, run by bash."""
    return ["bash", str(resources.INSTALLERS / INSTALLERS[cluster]), sys.executable]


def install_main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="ring install-detection",
        description="Install Detectron2 (Table 4's detection stage) into this Python environment, pinned.",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="build it from its git repository with its CUDA extension (a GPU node's toolkit); default: its Python "
        "code only, for a CPU, from a hash-checked sdist on the package index",
    )
    parser.add_argument("--print", action="store_true", help="print the command instead of running it")
    args = parser.parse_args(argv)
    line = installer(args.cluster)
    if args.print:
        print(" ".join(line))
        return 0
    return subprocess.run(line).returncode
