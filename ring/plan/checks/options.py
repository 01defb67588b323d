"""The values the plan-time checks accept for the keys that take a word, and the smallest view: one list per key,
which the code that implements the choices keeps equal to it (each list's comment names that code)."""

# Smallest crop/resize a ResNet-18 trunk takes meaningfully: its total stride is 32 (conv1 2, max
# pool 2, layer2-4 2 each), so a 16 px view reaches layer4 as 1 x 1 after layer3's stride-2
# convolutions still combined 2 x 2 positions.  Below 16 px layer3 and layer4 both see a single
# position (their 3 x 3 kernels reduce to the centre tap on zero padding): the net trains and
# writes an encoder, but half its stages no longer see spatial structure.  16 px is also the size
# of the smoke grid's study cells.
MIN_INPUT_PX = 16
# ring_anneal names (ring.engine.anneal.ANNEAL_POLICIES builds them; it asserts the two lists agree).
ANNEAL_POLICIES = (
    "linear",
    "step",
    "exponential",
    "adaptive_val",
    "adaptive_loss",
    "none",
    "step_authors",
    "exponential_authors",
    "adaptive_loss_authors",
    "adaptive_val_authors",
)
HEADS = ("linear", "mlp")  # ring.engine.encoder builds them
LA_OWN_ENTRY_RULES = ("topk", "positive")  # ring.engine.objectives.la implements them
CMC_NEGATIVE_DRAWS = ("shared", "per_view")  # ring.engine.objectives.cmc implements them
NEGATIVES_COUNTS = ("excluding_positive", "including_positive")  # ring.engine.objectives.ir implements them
AUGMENT_PLACES = ("auto", "cpu", "device", "dali")  # ring.data.augment makes the views there
STORE_FORMATS = ("jpeg95", "raw", "none")  # ring.plan.stores.CHOICES (tests keep them equal)
COMPILE = ("auto", "on", "off")  # ring.engine.encoder.resolve_compile resolves them
PRECISIONS = ("auto", "bf16", "fp32")
CHANNELS_LAST = ("auto", "on", "off")
KEEP_SUPERSEDED = ("results", "all")  # ring.plan.rerun.KEEP_SUPERSEDED: what a superseded run keeps
KEEP_CHECKPOINT = ("last", "none")  # what a finished cell keeps of its checkpoints (ring.engine.checkpoint)
AUGMENTATIONS = ("crop_flip", "none")
DETECTION_DATASETS = ("detectron2", "embedded")
VALIDATION_POLICIES = ("adaptive_val", "adaptive_val_authors")  # the policies that read a validation accuracy
