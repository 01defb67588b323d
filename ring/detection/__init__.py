"""Table 4: frozen ResNet-18 encoders as Detectron2 backbones (COCO detection, instance
segmentation and keypoints with R18-FPN, Pascal VOC detection with R18-C4).

Modules: :mod:`.tasks` (the three models, torch-free), :mod:`.convert` (torchvision encoder ->
Detectron2 ``.pkl`` with completeness and numerical checks), :mod:`.heads` (the BasicBlock res5
ROI head R18-C4 needs), :mod:`.configs` (Detectron2 configs from its own base configs plus the
paper's overrides), :mod:`.embedded` (the generated COCO/VOC-format default dataset),
:mod:`.runner` (the stage's entry point, ``python -m ring.detection``) and :mod:`.train_net`
(Detectron2's own command line for rerunning a cell's written config by hand).
Importing this package does not import torch or Detectron2.
"""

import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]


def _detection_modules() -> set[str]:
    """Detectron2 and the runtime requirements envs/install-detectron2-cpu.sh installs with it."""
    names = {"detectron2"}
    requirements = _REPO / "envs" / "requirements-detection.txt"
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
    return (f"Detectron2 is not installed in this Python environment ({sys.executable}: no module {err.name!r}); "
            f"install the detection environment with `bash envs/install-detectron2-cpu.sh {sys.executable}` "
            "(its Python code, CPU; envs/install.sh runs it) or, on a GPU cluster, `bash envs/detection-cluster.sh` "
            "(README, Detection).")
