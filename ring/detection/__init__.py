"""Table 4: frozen ResNet-18 encoders as Detectron2 backbones (COCO detection, instance
segmentation and keypoints with R18-FPN, Pascal VOC detection with R18-C4).

Modules: :mod:`ring.plan.detection_tasks` (the three models and the missing-Detectron2 sentence, torch-free),
:mod:`.convert` (torchvision encoder ->
Detectron2 ``.pkl`` with completeness and numerical checks), :mod:`.heads` (the BasicBlock res5
ROI head R18-C4 needs), :mod:`.configs` (Detectron2 configs from its own base configs plus the
paper's overrides), :mod:`.embedded` (the generated COCO/VOC-format default dataset),
:mod:`.runner` (the stage's entry point, ``python -m ring.detection``) and :mod:`.train_net`
(Detectron2's own command line for rerunning a cell's written config by hand).
Importing this package does not import torch or Detectron2.
"""
