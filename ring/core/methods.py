"""The methods of the paper, by the names its tables use (torch-free, read by the workflow too).

A method is a base objective (an :class:`Objective`: IR's memory bank, CMC's two L/ab memory banks,
MoCo's queue) plus how it draws negatives and which positives it adds:

* ``negatives``: ``"uniform"`` (the base method), ``"ring"`` (the Ring window, Sec. 4),
  ``"cave"`` (uniform within the instance's k-means clusters, appendix "Variants of Ring") or
  ``"background"`` (LA's k closest bank entries);
* ``close_positives``: LA's close neighbours (background entries sharing a k-means cluster with
  the instance) count as positives too (LA, and the "+C_i" variants).

The objective carries everything a stage asks of a method: how many views of an image it takes, its
config checks, which measured throughput prices it, how its encoder and loss module are built and
which config key is its number of negatives k.  The config keys only some methods read are declared in groups, with
their defaults, docs and checks, by what reads them (:mod:`ring.core.method_keys`); an objective names the groups it
reads (:attr:`Objective.key_groups`) and is built from their frozen configs.  Nothing else branches on a method's
or objective's name: a new method is an :class:`Objective` (or an existing one) and a :func:`register` call, in a
module of its own that may live outside ``ring/`` (see :data:`ring.core.plugins.ENTRY_POINT_GROUP`).

Names are wildcard- and path-safe; ``display`` is the row label the paper prints (and the key of
``ring/data/published-results.yaml``).  A lesion is a method whose definition fixes config values
(``fixed``): grids and configs apply them, so a method's identity never depends on a grid file.

:func:`apply_fixed` is the one place a config's values are completed from its method (``fixed``, then
``defaults`` for the keys left unset): every grid cell (:mod:`ring.plan.grid`) and every config file an entry
point reads (:func:`ring.core.config.load`) goes through it, so a hand-written CMC config trains CMC's shared
negatives at batch 128 as a grid's CMC cell does, and a key the file sets keeps its value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ring.core import plugins, sources
from ring.core.key_declaration import KeyGroup
from ring.core.method_keys import BANK, GROUP_OF, GROUPS, KMEANS, QUEUE, RING
from ring.core.method_keys import CMC as CMC_GROUP
from ring.core.method_keys import LA as LA_GROUP
from ring.core.refs import resolve


def _in_order(groups: tuple[KeyGroup, ...]) -> tuple[KeyGroup, ...]:
    return tuple(g for g in GROUPS if g in groups)


class Objective:
    """A base objective as the stages see it, torch-free: the login node plans, checks and prices with it,
    and the pretraining stage builds its torch module from :attr:`implementation`.

    Subclasses override what differs; the instances below are the paper's three.  ``implementation`` is
    ``"module:Class"``: the class builds the encoder (``build_encoder(settings)``) and the loss module
    (``from_settings(settings, model, n_train, max_chunk_elements)``) from the shared values and its key groups'
    frozen configs (:class:`ring.core.objective_settings.ObjectiveSettings`), never from the config.  It is imported
    when a stage trains only; the plan checks read a plug-in's from its source (:func:`implementation_problem`), so
    planning never loads torch.
    """

    n_views = 1  # views of each image a step takes
    trunks: tuple[str, ...] = ("encoder.pt",)  # the torchvision trunks a pretraining cell exports
    k_key = "bank_negatives"  # the config key that is its number of negatives k (the negatives-k study)
    grey_blind = False  # True where a grey image gives one of its views a constant input (CMC's ab view)
    # The groups of ring.core.method_keys its implementation reads (the Ring window's come with Method.ring: the
    # trainer reads those); () for an objective whose keys are all the common ones.
    key_groups: tuple[KeyGroup, ...] = ()

    def groups(self, m: Method) -> tuple[KeyGroup, ...]:
        """The key groups method ``m`` reads, in :data:`ring.core.method_keys.GROUPS` order."""
        return _in_order((*self.key_groups, *((RING,) if m.ring else ())))

    def __init__(self, label: str, implementation: str, cost_family: str):
        self.label = label  # for messages and provenance only
        self.implementation = implementation
        self.cost_family = cost_family  # the benchmarks/throughput.py figures that price its steps

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label!r})"

    def family(self, m: Method) -> str:
        """The throughput family that prices method ``m`` (ring.plan.estimate refuses one it has no figures for)."""
        return self.cost_family

    def ring_selection(self, cfg, n_images: int) -> tuple[str, int]:
        """(the Ring step-time ratio's kind, the size of the set the window selects from), for ring.plan.estimate."""
        raise NotImplementedError(f"{self!r} has no Ring variant to price")

    def check(self, c, n_images: int, m: Method) -> None:
        """Its own config checks through ``c`` (:class:`ring.plan.checks.checker.Checker`), for ``n_images`` training
        images, beyond those of the key groups it reads (:attr:`Method.key_groups`, which the plan runs)."""

    def load(self):
        """The torch class (imports it: stages only)."""
        return resolve(self.implementation)

    def implementation_problem(self) -> str | None:
        """Why the pretraining stage could not build from :attr:`implementation` (a clause), or None: the module
        is installed, defines the class, and the class takes the calls the stage makes (:data:`IMPLEMENTATION_CALLS`).
        Read from the module's source, never imported (:mod:`ring.core.sources`): the plan checks stay torch-free."""
        module, _, name = self.implementation.partition(":")
        if not module or not name:
            return f"names {self.implementation!r}, not 'module:Class'"
        return sources.class_problem(module, name, IMPLEMENTATION_CALLS, FORMER_CALLS)


class BankObjective(Objective):
    """A memory bank of every training image, negatives drawn from it (IR and its k-means variants)."""

    key_groups = (BANK,)

    def groups(self, m: Method) -> tuple[KeyGroup, ...]:
        # The k-means keys build its clusterings and la_own_entry steers LA's background sampler: only those methods'.
        extra = (*((KMEANS,) if m.uses_kmeans else ()), *((LA_GROUP,) if m.sampler == "background" else ()))
        return _in_order((*super().groups(m), *extra))

    def family(self, m: Method) -> str:
        return "LA" if m.uses_kmeans else self.cost_family  # a reclustering per epoch: LA's measured figures

    def ring_selection(self, cfg, n_images: int) -> tuple[str, int]:
        return "IRing", n_images  # the window ranks the whole bank


class TwoViewBankObjective(BankObjective):
    """CMC: an L and an ab encoder, each with its bank; a grey image gives the ab view a constant input."""

    trunks = ("encoder.pt", "encoder_ab.pt")
    grey_blind = True
    key_groups = (BANK, CMC_GROUP)

    def family(self, m: Method) -> str:
        # No CMC figures with k-means: its variants take CMC's step rate, and ring.plan.estimate adds their
        # reclustering.
        return self.cost_family


class QueueObjective(Objective):
    """MoCo: a momentum key encoder and a queue of its keys; two views of each image."""

    n_views = 2
    k_key = "queue_size"
    key_groups = (QUEUE,)  # its negatives are the queue: no bank, so no bank_negatives, negatives_count, k-means

    def ring_selection(self, cfg, n_images: int) -> tuple[str, int]:
        return "MoCoRing", cfg.queue_size  # the window ranks the queue


IR = BankObjective("ir", "ring.engine.objectives.ir:InstanceDiscrimination", cost_family="IR")
CMC = TwoViewBankObjective("cmc", "ring.engine.objectives.cmc:MultiviewContrast", cost_family="CMC")
MOCO = QueueObjective("moco", "ring.engine.objectives.moco:MomentumContrast", cost_family="MoCo")

NEGATIVES = ("uniform", "ring", "cave", "background")


@dataclass(frozen=True)
class Method:
    objective: Objective
    ring: bool
    base: str  # the method a Ring variant is compared with in the tables
    implemented: bool = True
    note: str = ""
    display: str = ""  # the paper's row label; the name itself when empty
    negatives: str = ""  # one of NEGATIVES; empty: "ring" for Ring methods, else "uniform"
    close_positives: bool = False
    fixed: tuple[tuple[str, object], ...] = ()  # PretrainConfig values that define the method
    # PretrainConfig values the method takes unless a grid or config file sets them (a reference's rule, with ours a
    # switch).
    defaults: tuple[tuple[str, object], ...] = ()

    @property
    def sampler(self) -> str:
        return self.negatives or ("ring" if self.ring else "uniform")

    @property
    def uses_kmeans(self) -> bool:
        return self.sampler in ("cave", "background") or self.close_positives

    @property
    def key_groups(self) -> tuple[KeyGroup, ...]:
        """The groups of :mod:`ring.core.method_keys` it reads, as its objective declares them: its objective is built
        from their frozen configs, and its cells run their checks."""
        return self.objective.groups(self)

    def reads(self, key: str) -> bool:
        """Whether its cells read config key ``key``: every key but those of the groups it does not read.  One it never
        reads keeps its default in its cells (a grid's shared blocks skip it, ``by_method`` refuses it) and is hashed
        at its default (ring.core.config.hashed_values), so setting it never restarts a cell."""
        group = GROUP_OF.get(key)
        return group is None or group in self.key_groups

    @property
    def encoder_files(self) -> tuple[str, ...]:
        """Files a pretraining cell exports: one torchvision trunk, two for CMC's L and ab encoders."""
        return self.objective.trunks


# The values the paper (or the method's own paper) fixes per method, which a grid or a hand-written config
# gets without copying them and can still override:
# * CMC's code draws one negative index set for both views (ring.engine.objectives.cmc; per_view is ours), and
#   the paper trains CMC at "batch size 256 (128 for CMC)" (Sec. 5);
# * MoCo's shuffled BatchNorm needs several groups: MoCo's 8 GPUs' worth (ring.core.config bn_groups).
CMC_DEFAULTS = (("cmc_negatives", "shared"), ("batch_size", 128))
MOCO_DEFAULTS = (("bn_groups", 8),)
# The values a Ring method's config takes from its annealing policy (ring_anneal) unless it sets them: the
# authors' trainer gave its validation-adaptive policy the untrained network's accuracy first (ring.engine.anneal).
POLICY_DEFAULTS = {"adaptive_val_authors": (("ring_val_before_training", True),)}


METHODS = plugins.Registry(
    {
        "IR": Method(IR, ring=False, base="IR"),
        "IRing": Method(IR, ring=True, base="IR"),
        "CMC": Method(CMC, ring=False, base="CMC", defaults=CMC_DEFAULTS),
        "CMCRing": Method(CMC, ring=True, base="CMC", defaults=CMC_DEFAULTS),
        "MoCo": Method(MOCO, ring=False, base="MoCo", defaults=MOCO_DEFAULTS),
        "MoCoRing": Method(MOCO, ring=True, base="MoCo", defaults=MOCO_DEFAULTS),
        # LA's own-entry rule (ring.engine.objectives.la): LA's code's by default, ours as a variant row.
        "LA": Method(
            IR, ring=False, base="LA", negatives="background", close_positives=True, fixed=(("la_own_entry", "topk"),)
        ),
        "LAOwnPositive": Method(
            IR,
            ring=False,
            base="LA",
            negatives="background",
            close_positives=True,
            display="LA (own entry always positive)",
            fixed=(("la_own_entry", "positive"),),
        ),
        # Table 2, the lesions: the window stays at its final value from the first step, and a ball
        # (w_u = 100: no close entry excluded) instead of a ring.
        "IRingNoAnneal": Method(
            IR, ring=True, base="IR", display="IRing (No Anneal)", fixed=(("ring_anneal", "none"),)
        ),
        "IRingBall": Method(
            IR, ring=True, base="IR", display="IRing (w_u = 100)", fixed=(("ring_inner", None), ("ring_w_u", 100.0))
        ),
        # The appendix's "Variants of Ring" (LA-variants table).
        "IRCave": Method(IR, ring=False, base="IR", negatives="cave"),
        "CMCCave": Method(CMC, ring=False, base="CMC", negatives="cave", defaults=CMC_DEFAULTS),
        # LA and IRing (+C_i) "differ only by the lower threshold w_l" (appendix): LA is the base.
        "IRingCi": Method(IR, ring=True, base="LA", display="IRing (+C_i)", close_positives=True),
        "CMCRingCi": Method(
            CMC, ring=True, base="CMC", display="CMCRing (+C_i)", close_positives=True, defaults=CMC_DEFAULTS
        ),
    }
)


# Method names become wildcards, folder names and table keys: one path-safe word.
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def register(name: str, m: Method) -> Method:
    """Add method ``name`` to :data:`METHODS`; one sentence when the name is taken or not path-safe."""
    if not NAME.match(name):
        raise ValueError(
            f"Method name {name!r} must be one word of letters, digits and _ (it names folders and "
            "wildcards); rename it."
        )
    if name in METHODS and METHODS[name] != m:
        raise ValueError(f"Method {name} is already registered; choose another name.")
    if m.base != name and m.base not in METHODS:
        raise ValueError(f"Method {name}'s base {m.base!r} is not registered; register the base method first.")
    METHODS[name] = m
    return m


def missing(name: str) -> str | None:
    """When ``name`` is not registered and a plug-in failed to load (it may be the one meant to register it), the
    sentence to give instead of "unknown method": what failed and the fix.  None otherwise."""
    if name in METHODS or not METHODS.broken:
        return None
    return (
        f"method {name!r} is not registered and may be a broken plug-in's: {'; '.join(METHODS.broken.values())}; "
        "fix or uninstall that package."
    )


def implementation_problem(name: str) -> str | None:
    """Why method ``name``'s torch class cannot be built (one clause), checked for methods an entry point registered;
    None for ring's own, which tests/project/test_plugin_guide.py resolves."""
    if name not in METHODS.plugins:
        return None
    return METHODS[name].objective.implementation_problem()


# What the pretraining stage calls on a method's implementation (ring.engine.objectives): name -> the arguments.
IMPLEMENTATION_CALLS = {
    "build_encoder": ("settings",),
    "from_settings": ("settings", "model", "n_train", "max_chunk_elements"),
}
# The calls the stage made before objectives took their settings instead of the config: a class that defines one in
# place of today's is refused with the way over (ring.core.sources.class_problem).
FORMER_CALLS = {"from_settings": "from_config"}


# Methods that are no row of the paper: the other side of a fidelity switch (README, "Fidelity").
VARIANT_ROWS = ("LAOwnPositive",)


def display_name(name: str) -> str:
    return METHODS[name].display or name


def method(name: str, *, require_implemented: bool = True) -> Method:
    if name not in METHODS:
        broken = missing(name)  # a clause: capitalised to start the sentence
        raise ValueError(
            f"M{broken[1:]}" if broken else f"Unknown method {name!r}; choose one of {', '.join(METHODS)}."
        )
    m = METHODS[name]
    if require_implemented and not m.implemented:
        raise NotImplementedError(
            f"Method {name} is not implemented yet ({m.note}); remove it from the grid to run the other cells."
        )
    return m


def apply_fixed(name: str, values: dict, source: str = "the grid") -> dict:
    """``values`` (the keys a grid or a config file sets) with the method's defining config values set and
    its defaults filled in where ``values`` leaves a key unset (then, for a Ring method, its annealing
    policy's, :data:`POLICY_DEFAULTS`); a conflicting override is an error naming ``source``.  Grids and
    config files both go through here: the one source of method defaults."""
    out = dict(values)
    for key, value in method(name, require_implemented=False).fixed:
        if key in out and out[key] != value:
            raise ValueError(
                f"Method {name} is defined by {key}={value!r} but {source} sets {key}={out[key]!r}; "
                f"remove that override (or use another method)."
            )
        out[key] = value
    m = method(name, require_implemented=False)
    for key, value in m.defaults:
        out.setdefault(key, value)
    for key, value in POLICY_DEFAULTS.get(out.get("ring_anneal"), ()) if m.ring else ():
        out.setdefault(key, value)
    return out


def check_fixed(name: str, m: Method, values: dict) -> None:
    """Fail with one sentence when a config contradicts method ``m``'s definition (hand-written configs); ``name``:
    what the config calls it, which its stage's entry point looked up."""
    for key, value in m.fixed:
        if values.get(key) != value:
            raise ValueError(
                f"Method {name} needs {key}={value!r} but the config has {values.get(key)!r}; fix the config."
            )
