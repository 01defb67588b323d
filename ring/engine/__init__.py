"""The compute side (torch): encoder, objectives, anneal, runtime, logs, distributed, checkpoint, health,
knn, provenance; and groups (the processes' batch and BatchNorm layout, torch-free).

The engine's option lists are declared here, beside the modules that implement them and torch-free: the plan's checks
(:mod:`ring.plan.checks`) read them from here, so that a config is refused at plan time by the very list the job
reads; the annealing policies are :data:`ring.engine.anneal.ANNEAL_POLICIES` itself (a torch-free module).
"""

HEADS = ("linear", "mlp")  # the projection heads ring.engine.encoder builds
COMPILE = ("auto", "on", "off")  # ring.engine.encoder.resolve_compile: "auto" compiles on a GPU
PRECISIONS = ("auto", "bf16", "fp32")  # ring.engine.encoder.resolve_precision
# Pretraining also runs wholly in float64 (ring.engine.encoder.compute_dtype): a verification setting, whose rounding
# is small enough that runs on other process counts agree over whole runs (docs/cluster.md).
PRETRAIN_PRECISIONS = (*PRECISIONS, "fp64")
CHANNELS_LAST = ("auto", "on", "off")  # ring.engine.encoder.resolve_precision's memory format
KEEP_CHECKPOINT = ("last", "none")  # what a finished cell keeps of its checkpoints (ring.engine.checkpoint)
# The objectives' (ring.engine.objectives): how many negatives a bank's loss counts (negatives_count, see
# ring.engine.objectives.ir), LA's rules for the instance's own entry (la), how CMC's two views draw negatives (cmc).
NEGATIVES_COUNTS = ("excluding_positive", "including_positive")
LA_OWN_ENTRY_RULES = ("topk", "positive")
CMC_NEGATIVE_DRAWS = ("shared", "per_view")
