"""The pretraining keys only some methods read, declared by what reads them (torch-free, read by the workflow too).

Each key (a :class:`ring.core.key_declaration.Key`) carries its type, default, one-line doc and what the checks allow;
each group (a :class:`ring.core.key_declaration.KeyGroup`: a memory bank's keys, MoCo's queue's, CMC's, LA's, the
k-means methods', the Ring window's) carries the checks that relate its keys to the cell, and makes the frozen config
its part receives. The registry's objectives name the groups they read (:attr:`ring.core.methods.Objective.key_groups`),
and a method's objective is built from those groups' configs alone
(:class:`ring.core.objective_settings.ObjectiveSettings`). Grid and config files still write each key under its flat
name, and :class:`ring.core.config.PretrainConfig` is that flat view (what config.yaml and the hash are made of, as they
were); :mod:`ring.plan.reference` documents the keys from here, and :mod:`ring.plan.checks` runs their checks:

* a key's own check (its value alone: a type, a range, a choice) on every pretraining cell, so a typo is one wherever
  it is written;
* a group's check (the key against the training set, the batch, the epochs, the method) on the cells of the methods
  whose objective declares it read.

A check takes the plan's checker ``c`` (:class:`ring.plan.checks.checker.Checker`, duck-typed: core never imports the
plan), whose ``c.options`` are the plan's option lists; an ``allowed`` that is a callable gets those lists too.
"""

from __future__ import annotations

from ring.core.key_declaration import Key, KeyGroup, integer_key, word_key

# -- a memory bank's (ring.engine.objectives.ir) -------------------------------------------------------------------


def _bank(c, n_images: int, m) -> None:
    cfg = c.cfg
    # LA's background neighbours exclude the instance's own entry: strictly fewer than the bank.
    limit = n_images - 1 if m.sampler == "background" else n_images
    if cfg.bank_negatives > limit:
        c.fail(
            "bank_negatives",
            f"is larger than the memory bank ({n_images} {cfg.dataset} training images"
            f"{', its own entry excluded' if limit < n_images else ''})",
            f"set it to at most {limit}",
        )
    if cfg.negatives_count == "including_positive" and cfg.bank_negatives < 2:
        c.fail(
            "bank_negatives",
            "counts the positive (negatives_count: including_positive), so no negative is left",
            "set it to at least 2",
        )


_BANK = "Memory bank (IR, IRing): k negatives per query; bank entries move with momentum 0.5 (IR)."
BANK = KeyGroup(
    "bank",
    (
        integer_key("bank_negatives", 4096, 1, _BANK, allowed="1 .. the bank (training images; LA: one fewer)"),
        Key("bank_momentum", "float", 0.5, "", "[0, 1)", _BANK, lambda c: c.in_range("bank_momentum", 0.0, 1.0)),
        word_key(
            "negatives_count",
            "excluding_positive",
            'What bank_negatives counts (ring.engine.objectives.ir): "excluding_positive", k drawn negatives and the '
            "positive (IR's and CMC's code: a softmax over 4,097 entries), or \"including_positive\", the positive and "
            "k - 1 drawn negatives (the authors' NCE/NCERing: 4,096 entries).  LA's k background neighbours keep "
            "their count.",
            lambda o: o.NEGATIVES_COUNTS,
            note=" (including_positive: bank_negatives >= 2)",
            late=True,
        ),
    ),
    _bank,
)


# -- MoCo's queue and key encoder (ring.engine.objectives.moco) ----------------------------------------------------


def _queue(c, n_images: int, m) -> None:
    cfg = c.cfg
    if not isinstance(cfg.queue_size, int) or cfg.queue_size < cfg.batch_size:
        c.fail(
            "queue_size",
            f"is smaller than batch_size={cfg.batch_size} (each step enqueues a whole batch)",
            f"raise queue_size to at least {cfg.batch_size}",
        )
    if cfg.queue_size > n_images:
        c.fail(
            "queue_size",
            f"is larger than the {n_images} {cfg.dataset} training images (the queue would hold "
            "several keys of one image, a query's own among its negatives)",
            f"set it to at most {n_images}",
        )


QUEUE = KeyGroup(
    "queue",
    (
        Key(
            "queue_size",
            "int",
            4096,
            "MoCo queue.  4096 matches IR's k, so both objectives see as many negatives, and is the top of the "
            "appendix's MoCo sweep; ImageNet cells use MoCo's 65536 (set in the paper grid).",
            ">= batch_size, <= the training images",
        ),
        Key(
            "key_momentum",
            "float",
            0.999,
            "The key encoder's exponential moving average of the query encoder (MoCo's m): each step moves it 0.1% of "
            "the way.",
            "[0, 1)",
            check=lambda c: c.in_range("key_momentum", 0.0, 1.0),
        ),
    ),
    _queue,
)


# -- CMC's two banks' draw (ring.engine.objectives.cmc) and LA's background sampler (ring.engine.objectives.la) ----

CMC = KeyGroup(
    "cmc",
    (
        word_key(
            "cmc_negatives",
            "per_view",
            "CMC's negatives (ring.engine.objectives.cmc): \"shared\" (CMC's code: one index set for both views) or "
            '"per_view".  The CMC methods default to "shared" (ring.core.methods, applied by grids and config '
            "files); the field's default is the draw CMC cells trained with before the switch, so their configs keep "
            "their hash.",
            lambda o: o.CMC_NEGATIVE_DRAWS,
            late=True,
        ),
    ),
)
LA = KeyGroup(
    "la",
    (
        word_key(
            "la_own_entry",
            "positive",
            'LA\'s own-entry rule (ring.engine.objectives.la): "topk" (LA\'s code) or "positive" (ours).  Each LA '
            'method fixes it (LA: "topk", LAOwnPositive: "positive"); the default is the rule LA cells trained with '
            "before the switch existed, so their configs keep their hash.",
            lambda o: o.LA_OWN_ENTRY_RULES,
            late=True,
        ),
    ),
)


# -- the k-means methods' clusterings (Method.uses_kmeans; ring.engine.objectives.kmeans) ---------------------------


def _kmeans(c, n_images: int, m) -> None:
    cfg = c.cfg
    if not isinstance(cfg.kmeans_k, int) or not 1 <= cfg.kmeans_k <= n_images:
        c.fail(
            "kmeans_k",
            f"must lie between 1 and the {n_images} training images of {cfg.dataset}",
            "lower kmeans_k",
        )
    if cfg.kmeans_warmup_epochs >= cfg.epochs:
        c.fail(
            "kmeans_warmup_epochs",
            f"is not below epochs={cfg.epochs}, so k-means never runs and {cfg.method} trains as its base method",
            "lower it or raise epochs",
        )


_KMEANS = (
    "k-means methods (LA, IRCave, CMCCave, IRing/CMCRing +C_i), LA's settings (Zhuang et al. 2019 and their code): 10 "
    "clusterings with different seeds, recomputed on the memory bank at the start of every epoch, 20 Lloyd iterations "
    "each (faiss's default there); LA's background neighbours are the bank_negatives (4096) closest entries.  "
    "kmeans_k: LA uses 30000 clusters for ImageNet's 1.28M images (~43 per cluster); 1000 keeps CIFAR's 50k at ~50 "
    "per cluster (the paper grid sets ImageNet's and STL10's).  The first kmeans_warmup_epochs epochs are the method "
    "without its k-means part (IR for LA, as LA starts from an IR-trained network): clusters of a random bank would "
    "be noise."
)
KMEANS = KeyGroup(
    "kmeans",
    (
        Key("kmeans_k", "int", 1000, "", "1 .. the training images", _KMEANS, hashed_when_set=True),
        integer_key("kmeans_clusterings", 10, 1, _KMEANS, late=True),
        integer_key("kmeans_iters", 20, 1, _KMEANS, late=True),
        integer_key("kmeans_warmup_epochs", 10, 0, _KMEANS, allowed=">= 0, < epochs", late=True),
    ),
    _kmeans,
)


# -- the Ring window and its annealing (ring.engine.objectives.ring, ring.engine.anneal: Ring methods only) --------


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and abs(x) != float("inf")


def _ring_w_l(c) -> None:
    w = c.cfg.ring_w_l
    if not isinstance(w, (list, tuple)) or len(w) != 2 or not all(_finite(x) for x in w):
        c.fail("ring_w_l", "must be a [start, final] pair of percentiles", "write e.g. ring_w_l: [0.0, 90.0]")
    if not 0 <= w[0] <= w[1] < 100:
        c.fail(
            "ring_w_l",
            "must satisfy 0 <= start <= final < 100 (w_l only rises: the window gets harder)",
            "order the pair [start, final] and keep final below 100",
        )


def _ring_w_u(c) -> None:
    w_u = c.cfg.ring_w_u
    if w_u is not None and (not _finite(w_u) or not 0 < w_u <= 100):
        c.fail("ring_w_u", "must lie in (0, 100]", "choose a percentile, 100 for a ball")


def _ring(c, n_images: int, m) -> None:
    cfg = c.cfg
    if (cfg.ring_inner is None) == (cfg.ring_w_u is None):
        c.fail(
            "ring_w_u",
            f"and ring_inner={cfg.ring_inner!r} must have exactly one set "
            "(ring_inner: a fraction of the eligible slice excluded; ring_w_u: a fixed upper percentile)",
            "set the other one to null",
        )
    if cfg.ring_w_u is not None and cfg.ring_w_l[1] >= cfg.ring_w_u:
        c.fail(
            "ring_w_l",
            f"ends at w_l={cfg.ring_w_l[1]} >= w_u={cfg.ring_w_u} (ring_w_u), a window that selects nothing",
            "keep ring_w_l below ring_w_u",
        )
    policies = c.options.VALIDATION_POLICIES
    if cfg.ring_val_before_training and cfg.ring_anneal not in policies:
        c.fail(
            "ring_val_before_training",
            f"is read only by the validation-adaptive annealing policies ({', '.join(policies)}), not "
            f"ring_anneal={cfg.ring_anneal!r}",
            "set it to false or use one of them",
        )


def _val_fraction(c) -> None:
    v = c.cfg.ring_val_fraction
    if not _finite(v) or not 0 < v < 1:
        c.fail("ring_val_fraction", "must lie strictly between 0 and 1", "choose e.g. 0.1")


def _boolean(c) -> None:
    if not isinstance(c.cfg.ring_val_before_training, bool):
        c.fail("ring_val_before_training", "must be true or false", "write true or false")


_WINDOW = (
    'Ring window (see ring.engine.objectives.ring and ring.engine.anneal).  w_l goes 0 -> 90 ("threshold 100% -> 10% '
    "in 100 epochs\"), the closest 10% of the eligible slice is excluded (authors' code)."
)
_POLICIES = (
    "Annealing policies of the appendix's study (ring.engine.anneal): the step policy's number of equal jumps (4: one "
    "every 25 epochs of the paper's 100); the loss-adaptive policy's moving-average momentum (0.99: about 100 steps, "
    "a fraction of a CIFAR10 epoch's 195, so a single noisy batch cannot flip its direction); the share of the "
    "training split held out as the validation set of the validation-adaptive policy (10%: 5,000 CIFAR10 images, a "
    "kNN pass of seconds)."
)
RING = KeyGroup(
    "ring",
    (
        Key(
            "ring_w_l",
            "list[float]",
            [0.0, 90.0],
            "[start, final] lower percentile w_l.",
            "[start, final] with 0 <= start <= final < 100 (and final < ring_w_u)",
            _WINDOW,
            _ring_w_l,
        ),
        word_key(
            "ring_anneal",
            "linear",
            "How w_l moves from start to final (ring.engine.anneal policy).",
            lambda o: o.ANNEAL_POLICIES,
            _WINDOW,
        ),
        integer_key("ring_anneal_epochs", 100, 1, _WINDOW, "Epochs over which w_l reaches its final value."),
        Key(
            "ring_inner",
            "float | None",
            0.1,
            "Upper bound as the excluded fraction of the eligible slice (null: use ring_w_u).",
            "[0, 1), or null with ring_w_u set",
            _WINDOW,
            lambda c: c.cfg.ring_inner is None or c.in_range("ring_inner", 0.0, 1.0),
        ),
        Key(
            "ring_w_u",
            "float | None",
            None,
            "Fixed upper percentile w_u (null: use ring_inner).",
            "(0, 100], or null with ring_inner set",
            _WINDOW,
            _ring_w_u,
        ),
        integer_key("ring_anneal_stages", 4, 1, _POLICIES),
        Key("ring_loss_ema", "float", 0.99, "", "[0, 1)", _POLICIES, lambda c: c.in_range("ring_loss_ema", 0.0, 1.0)),
        Key("ring_val_fraction", "float", 0.1, "", "(0, 1)", _POLICIES, _val_fraction),
        Key(
            "ring_val_before_training",
            "bool",
            False,
            "The validation-adaptive policies' first signal: the validation accuracy of the network before the "
            "cell's first step, as the authors' trainer measured it (PyTorch Lightning 1.1.8's sanity check: 2 "
            "validation batches before training, then validation_epoch_end, so one untrained accuracy enters the "
            "policy's history). The adaptive_val_authors policy turns it on unless a grid or config file sets it "
            "(ring.core.methods); the field's default is what cells trained with before the switch, so their configs "
            "keep their hash.  Ours measures the whole held-out split (ring_val_fraction), as after every epoch, not "
            "2 batches of it (see ring.engine.anneal).",
            lambda o: "true, false (true only with ring_anneal " + " or ".join(o.VALIDATION_POLICIES) + ")",
            check=_boolean,
            hashed_when_set=True,
        ),
    ),
    _ring,
)

# Every group, in the order the configuration reference lists their keys.
GROUPS = (BANK, QUEUE, CMC, KMEANS, LA, RING)
KEYS = {k.name: k for group in GROUPS for k in group.keys}
GROUP_OF = {k.name: group for group in GROUPS for k in group.keys}  # a key -> the one group that declares it
RingKeys = RING.config  # the Ring window's frozen config: all ring.engine.anneal reads
