"""The values the plan-time checks accept for the keys that take a word, and the smallest view.  Each list is declared
beside the code that implements its choices (ring.engine, ring.data) and read from there; the plan's own lists
(what a superseded run keeps, where detection's datasets are) are declared here."""

from ring.data import AUGMENT_PLACES, AUGMENTATIONS, VIEW_DRAWS
from ring.data.decode_place import CHOICES as STORE_DECODE
from ring.data.decode_place import DECODERS as STORE_DECODERS
from ring.data.store_layout import CHOICES as STORE_FORMATS
from ring.engine import (
    CHANNELS_LAST,
    CMC_NEGATIVE_DRAWS,
    COMPILE,
    HEADS,
    KEEP_CHECKPOINT,
    LA_OWN_ENTRY_RULES,
    NEGATIVES_COUNTS,
    PRECISIONS,
    PRETRAIN_PRECISIONS,
)
from ring.engine.anneal import ANNEAL_POLICIES, VALIDATION_POLICIES
from ring.engine.knn_schedule import KNN_SCHEDULES

__all__ = [
    "AUGMENTATIONS",
    "AUGMENT_PLACES",
    "ANNEAL_POLICIES",
    "CHANNELS_LAST",
    "CMC_NEGATIVE_DRAWS",
    "COMPILE",
    "DETECTION_DATASETS",
    "HEADS",
    "KEEP_CHECKPOINT",
    "KEEP_SUPERSEDED",
    "KNN_SCHEDULES",
    "LA_OWN_ENTRY_RULES",
    "MIN_INPUT_PX",
    "NEGATIVES_COUNTS",
    "PRECISIONS",
    "PRETRAIN_PRECISIONS",
    "STORE_DECODE",
    "STORE_DECODERS",
    "STORE_FORMATS",
    "VALIDATION_POLICIES",
    "VIEW_DRAWS",
]

# Smallest crop/resize a ResNet-18 trunk takes meaningfully: its total stride is 32 (conv1 2, max
# pool 2, layer2-4 2 each), so a 16 px view reaches layer4 as 1 x 1 after layer3's stride-2
# convolutions still combined 2 x 2 positions.  Below 16 px layer3 and layer4 both see a single
# position (their 3 x 3 kernels reduce to the centre tap on zero padding): the net trains and
# writes an encoder, but half its stages no longer see spatial structure.  16 px is also the size
# of the smoke grid's study cells.
MIN_INPUT_PX = 16
KEEP_SUPERSEDED = ("results", "all")  # ring.core.cell_runs.KEEP_SUPERSEDED: what a superseded run keeps
DETECTION_DATASETS = ("detectron2", "embedded")
