"""Detectron2 configs and datasets of a Table 4 cell.

A cell's Detectron2 config is Detectron2's own model-zoo config of the task, then the paper's
overrides (appendix "Detectron2 Experiments"), then the task's schedule (MoCo's), then the cell's
own ``overrides`` (the smoke grid shrinks sizes and iterations there).  The result is written to
``CELL/detectron2.yaml``; ``python -m ring.detection.train_net --config-file CELL/detectron2.yaml``
reruns it by hand with Detectron2's trainer.

Datasets are registered under Detectron2's builtin names and relative paths
(``detectron2.data.datasets.builtin``) below the cell's ``datasets_root``, the folder Detectron2
calls ``$DETECTRON2_DATASETS``; they are re-registered per cell so one process can use several roots.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from ring.core.config import DetectionConfig
from ring.plan.detection_tasks import Task

# The appendix's changes to Detectron2's defaults for a frozen torchvision ResNet-18.
PAPER = {
    "INPUT.FORMAT": "RGB",  # torchvision encoders take RGB
    "MODEL.BACKBONE.FREEZE_AT": 5,  # stem and res2-res5 of the backbone frozen
    # torchvision's ImageNet normalisation in 0-255 units.  The appendix prints the mean as
    # (123.675, 103.53, 116.28), which swaps G and B; RGB order is (R 123.675, G 116.28, B 103.53),
    # the order torchvision normalised with during pretraining.
    "MODEL.PIXEL_MEAN": [123.675, 116.28, 103.53],
    "MODEL.PIXEL_STD": [58.395, 57.12, 57.375],
    "MODEL.RESNETS.DEPTH": 18,
    "MODEL.RESNETS.RES2_OUT_CHANNELS": 64,  # R18/R34 have 64-channel res2 (R50: 256)
    "MODEL.RESNETS.STRIDE_IN_1X1": False,  # torchvision strides in the 3x3 convolution
}

VOC_SPLITS = {  # Detectron2's builtin Pascal VOC names: folder, split, year
    "voc_2007_trainval": ("VOC2007", "trainval", 2007),
    "voc_2007_train": ("VOC2007", "train", 2007),
    "voc_2007_val": ("VOC2007", "val", 2007),
    "voc_2007_test": ("VOC2007", "test", 2007),
    "voc_2012_trainval": ("VOC2012", "trainval", 2012),
    "voc_2012_train": ("VOC2012", "train", 2012),
    "voc_2012_val": ("VOC2012", "val", 2012),
}

DATASETS_HINT = (
    "put the datasets in Detectron2's layout (coco/annotations/*.json, coco/train2017, coco/val2017, "
    "VOC2007/{Annotations,JPEGImages,ImageSets/Main}, VOC2012/...) under that folder, or point "
    "DETECTRON2_DATASETS (the workflow's detection datasets_root) to where they are"
)


def base_config_path(name: str) -> Path:
    import detectron2

    return Path(detectron2.__file__).parent / "model_zoo" / "configs" / name


def _all_keys(node, prefix: str = "") -> list[str]:
    keys = []
    for key, value in node.items():
        full = f"{prefix}{key}"
        keys.extend(_all_keys(value, full + ".") if isinstance(value, dict) else [full])
    return keys


def apply(d2cfg, values: dict, source: str) -> None:
    """Set dotted Detectron2 keys; an unknown key or a value of the wrong type is one sentence."""
    known = set(_all_keys(d2cfg))
    for key, value in values.items():
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"Unknown Detectron2 config key {key!r} in {source}.{hint}")
        try:
            d2cfg.merge_from_list([key, value])
        except (ValueError, AssertionError, TypeError) as err:
            detail = " ".join(str(err).split())
            raise ValueError(f"Detectron2 config key {key!r} in {source} cannot take {value!r} ({detail}).") from None


def resolve_device(cfg: DetectionConfig) -> str:
    import torch

    if cfg.device != "auto":
        return cfg.device
    return "cuda" if cfg.num_gpus > 0 and torch.cuda.is_available() else "cpu"


def build(cfg: DetectionConfig, task: Task, weights: str | Path, out_dir: str | Path):
    """The cell's frozen Detectron2 config; ``task``: the cell's, looked up by its stage's entry point."""
    from detectron2.config import get_cfg

    import ring.detection.heads  # noqa: F401  (registers BasicRes5ROIHeads)

    d2cfg = get_cfg()
    d2cfg.merge_from_file(str(base_config_path(task.base_config)))
    ours = {**PAPER, **task.schedule}
    if task.roi_heads:
        ours["MODEL.ROI_HEADS.NAME"] = task.roi_heads
    ours.update(
        {
            "MODEL.WEIGHTS": str(weights),
            "OUTPUT_DIR": str(out_dir),
            "SEED": cfg.seed,
            "MODEL.DEVICE": resolve_device(cfg),
            "DATALOADER.NUM_WORKERS": cfg.num_workers,
            "TEST.EVAL_PERIOD": 0,  # evaluate once, after the last iteration (Detectron2's EvalHook)
        }
    )
    apply(d2cfg, ours, f"the {cfg.task} settings")
    apply(d2cfg, cfg.overrides, f"the overrides of cell {cfg.method}/{cfg.task}")
    d2cfg.freeze()
    return d2cfg


def dataset_files(name: str, root: str | Path) -> list[Path]:
    """What Detectron2 reads for a builtin dataset name, below ``root``."""
    from detectron2.data.datasets.builtin import _PREDEFINED_SPLITS_COCO

    root = Path(root)
    for splits in _PREDEFINED_SPLITS_COCO.values():
        if name in splits:
            image_root, json_file = splits[name]
            return [root / json_file, root / image_root]
    if name in VOC_SPLITS:
        folder, split, _ = VOC_SPLITS[name]
        return [
            root / folder / "ImageSets" / "Main" / f"{split}.txt",
            root / folder / "Annotations",
            root / folder / "JPEGImages",
        ]
    raise ValueError(f"Dataset {name!r} is not one of Detectron2's builtin COCO or Pascal VOC datasets.")


def check_datasets(names, root: str | Path) -> None:
    for name in names:
        for path in dataset_files(name, root):
            if not path.exists():
                raise FileNotFoundError(f"Dataset {name} is missing: {path} does not exist; {DATASETS_HINT}.")


def register(names, root: str | Path) -> None:
    """(Re-)register builtin dataset names with their files under ``root``."""
    from detectron2.data import DatasetCatalog, MetadataCatalog
    from detectron2.data.datasets import register_coco_instances
    from detectron2.data.datasets.builtin import _PREDEFINED_SPLITS_COCO
    from detectron2.data.datasets.builtin_meta import _get_builtin_metadata
    from detectron2.data.datasets.pascal_voc import register_pascal_voc

    root = Path(root)
    for name in names:
        if name in DatasetCatalog.list():
            DatasetCatalog.remove(name)
        if name in MetadataCatalog.list():
            MetadataCatalog.remove(name)
        if name in VOC_SPLITS:
            folder, split, year = VOC_SPLITS[name]
            register_pascal_voc(name, str(root / folder), split, year)
            MetadataCatalog.get(name).evaluator_type = "pascal_voc"  # as detectron2's builtin registration
            continue
        for key, splits in _PREDEFINED_SPLITS_COCO.items():
            if name in splits:
                image_root, json_file = splits[name]
                register_coco_instances(name, _get_builtin_metadata(key), str(root / json_file), str(root / image_root))
