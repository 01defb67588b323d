"""What the checks allow, per key, in words: the configuration reference's "allowed" column (ring.plan.reference)."""

from __future__ import annotations

from ring.core import catalog
from ring.core.config import SNAPSHOT_FILE
from ring.core.method_keys import KEYS
from ring.core.methods import METHODS
from ring.plan.checks import options
from ring.plan.checks.options import (
    AUGMENT_PLACES,
    AUGMENTATIONS,
    CHANNELS_LAST,
    COMPILE,
    DETECTION_DATASETS,
    HEADS,
    KEEP_CHECKPOINT,
    KEEP_SUPERSEDED,
    KNN_SCHEDULES,
    MIN_INPUT_PX,
    PRECISIONS,
    PRETRAIN_PRECISIONS,
    STORE_DECODE,
    STORE_FORMATS,
    VIEW_DRAWS,
)

# Every stage's --help points here: the generated reference of every key (ring describe).
REFERENCE_HINT = "every key is described in docs/configuration.md and by `ring describe`"

# What the checks allow, per key, for the configuration reference (ring.plan.reference); a key
# not listed takes any value of its type.  tests/plan/test_reference.py keeps each entry a real field.
ALLOWED = {
    "method": f"one of {', '.join(METHODS)}",
    "dataset": "a catalog dataset (pretraining: "
    + ", ".join(catalog.DATASETS)
    + "; transfer: "
    + ", ".join(catalog.TRANSFER)
    + ")",
    "source": "a pretraining dataset: " + ", ".join(catalog.DATASETS),
    "epochs": ">= 1",
    "batch_size": ">= 1, at most the training set (catalog count)",
    "lr": "> 0",
    "momentum": "[0, 1)",
    "weight_decay": ">= 0",
    "lr_milestones": "epochs >= 0",
    "lr_gamma": "> 0",
    "resize": f">= {MIN_INPUT_PX} (px)",
    "crop": f">= {MIN_INPUT_PX} (px), <= resize",
    "crop_scale_min": "(0, 1]",
    "head": ", ".join(HEADS),
    "out_dim": ">= 1",
    "temperature": "> 0",
    "bn_groups": ">= 1, divides batch_size; a divisor or a multiple of the processes (nodes x gpus_per_node)",
    "augment": ", ".join(AUGMENT_PLACES),
    "view_draws": ", ".join(VIEW_DRAWS) + " (batch: not with augment: dali)",
    "store": ", ".join(STORE_FORMATS) + " (image folders at the catalog's store size; none: the original files)",
    "store_decode": ", ".join(STORE_DECODE) + " (gpu: the jpeg95 store on a CUDA device with augment: device or auto)",
    "store_decoder": "'', cpu, gpu (recorded by the plan; as store_decode's gpu)",
    "compile": ", ".join(COMPILE),
    "max_chunk_elements": ">= 0 (0: sized by the GPU's memory)",
    "knn_every": ">= 0 (0: never)",
    "knn_schedule": ", ".join(KNN_SCHEDULES),
    "knn_k": ">= 1",
    "knn_temperature": "> 0",
    "snapshot_epochs": "epochs in 0 .. epochs",
    "init_from": f"'' or a {SNAPSHOT_FILE} path whose epoch is < epochs",
    "checkpoint_interval_min": ">= 0 (0: after every step)",
    "loss_read_every": ">= 1",
    "precision": ", ".join(PRECISIONS) + f" (pretraining: {', '.join(PRETRAIN_PRECISIONS)})",
    "channels_last": ", ".join(CHANNELS_LAST),
    "keep_superseded": ", ".join(KEEP_SUPERSEDED) + " (results: checkpoints dropped)",
    "keep_checkpoint": ", ".join(KEEP_CHECKPOINT) + " (the previous checkpoint goes either way)",
    "num_workers": ">= 0",
    "threads": ">= 0 (0: torch's default)",
    "augmentation": ", ".join(AUGMENTATIONS),
    "task": "coco_det_seg, coco_kp, voc_det",
    "datasets": ", ".join(DETECTION_DATASETS),
    "overrides": "Detectron2 keys (dotted upper case); SOLVER.MAX_ITER, SOLVER.IMS_PER_BATCH >= 1, SOLVER.BASE_LR > 0",
    "num_gpus": ">= 0 (0: CPU)",
    "n_points": ">= 1",
    "negatives": ">= 1, <= n_points",
    "eval_points": ">= 1",
    "layers": ">= 1",
    "hidden": ">= 1",
    "percentages": "each in [0, 100)",
    "cov_z": "cov_z + cov_eps positive definite (2 x 2)",
    # A method's own keys: as their declarations say (ring.core.method_keys).
    **{k.name: k.allowed_text(options) for k in KEYS.values()},
}
