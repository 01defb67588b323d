"""The methods of the paper, by the names its tables use (torch-free, read by the workflow too).

A method is a base objective (``"ir"`` memory bank, ``"cmc"`` two L/ab memory banks, ``"moco"``
queue) plus how it draws negatives and which positives it adds:

* ``negatives``: ``"uniform"`` (the base method), ``"ring"`` (the Ring window, Sec. 4),
  ``"cave"`` (uniform within the instance's k-means clusters, appendix "Variants of Ring") or
  ``"background"`` (LA's k closest bank entries);
* ``close_positives``: LA's close neighbours (background entries sharing a k-means cluster with
  the instance) count as positives too (LA, and the "+C_i" variants).

Names are wildcard- and path-safe; ``display`` is the row label the paper prints (and the key of
``ring/data/published-results.yaml``).  A lesion is a method whose definition fixes config values
(``fixed``): grids and configs apply them, so a method's identity never depends on a grid file.

:func:`apply_fixed` is the one place a config's values are completed from its method (``fixed``, then
``defaults`` for the keys left unset): every grid cell (:mod:`ring.grid`) and every config file an entry
point reads (:func:`ring.config.load`) goes through it, so a hand-written CMC config trains CMC's shared
negatives at batch 128 as a grid's CMC cell does, and a key the file sets keeps its value.
"""

from __future__ import annotations

from dataclasses import dataclass

NEGATIVES = ("uniform", "ring", "cave", "background")


@dataclass(frozen=True)
class Method:
    objective: str
    ring: bool
    base: str  # the method a Ring variant is compared with in the tables
    implemented: bool = True
    note: str = ""
    display: str = ""  # the paper's row label; the name itself when empty
    negatives: str = ""  # one of NEGATIVES; empty: "ring" for Ring methods, else "uniform"
    close_positives: bool = False
    fixed: tuple[tuple[str, object], ...] = ()  # PretrainConfig values that define the method
    # PretrainConfig values the method takes unless a grid or config file sets them (a reference's rule, with ours a switch).
    defaults: tuple[tuple[str, object], ...] = ()

    @property
    def sampler(self) -> str:
        return self.negatives or ("ring" if self.ring else "uniform")

    @property
    def uses_kmeans(self) -> bool:
        return self.sampler in ("cave", "background") or self.close_positives

    @property
    def encoder_files(self) -> tuple[str, ...]:
        """Files a pretraining cell exports: one torchvision trunk, two for CMC's L and ab encoders."""
        return ("encoder.pt", "encoder_ab.pt") if self.objective == "cmc" else ("encoder.pt",)


# The values the paper (or the method's own paper) fixes per method, which a grid or a hand-written config
# gets without copying them and can still override:
# * CMC's code draws one negative index set for both views (ring.objectives.cmc; per_view is ours), and
#   the paper trains CMC at "batch size 256 (128 for CMC)" (Sec. 5);
# * MoCo's shuffled BatchNorm needs several groups: MoCo's 8 GPUs' worth (ring.config bn_groups).
CMC_DEFAULTS = (("cmc_negatives", "shared"), ("batch_size", 128))
MOCO_DEFAULTS = (("bn_groups", 8),)
# The values a Ring method's config takes from its annealing policy (ring_anneal) unless it sets them: the
# authors' trainer gave its validation-adaptive policy the untrained network's accuracy first (ring.anneal).
POLICY_DEFAULTS = {"adaptive_val_authors": (("ring_val_before_training", True),)}

METHODS: dict[str, Method] = {
    "IR": Method("ir", ring=False, base="IR"),
    "IRing": Method("ir", ring=True, base="IR"),
    "CMC": Method("cmc", ring=False, base="CMC", defaults=CMC_DEFAULTS),
    "CMCRing": Method("cmc", ring=True, base="CMC", defaults=CMC_DEFAULTS),
    "MoCo": Method("moco", ring=False, base="MoCo", defaults=MOCO_DEFAULTS),
    "MoCoRing": Method("moco", ring=True, base="MoCo", defaults=MOCO_DEFAULTS),
    # LA's own-entry rule (ring.objectives.la): LA's code's by default, ours as a variant row.
    "LA": Method("ir", ring=False, base="LA", negatives="background", close_positives=True,
                 fixed=(("la_own_entry", "topk"),)),
    "LAOwnPositive": Method("ir", ring=False, base="LA", negatives="background", close_positives=True,
                            display="LA (own entry always positive)", fixed=(("la_own_entry", "positive"),)),
    # Table 2, the lesions: the window stays at its final value from the first step, and a ball
    # (w_u = 100: no close entry excluded) instead of a ring.
    "IRingNoAnneal": Method("ir", ring=True, base="IR", display="IRing (No Anneal)", fixed=(("ring_anneal", "none"),)),
    "IRingBall": Method("ir", ring=True, base="IR", display="IRing (w_u = 100)",
                        fixed=(("ring_inner", None), ("ring_w_u", 100.0))),
    # The appendix's "Variants of Ring" (LA-variants table).
    "IRCave": Method("ir", ring=False, base="IR", negatives="cave"),
    "CMCCave": Method("cmc", ring=False, base="CMC", negatives="cave", defaults=CMC_DEFAULTS),
    # LA and IRing (+C_i) "differ only by the lower threshold w_l" (appendix): LA is the base.
    "IRingCi": Method("ir", ring=True, base="LA", display="IRing (+C_i)", close_positives=True),
    "CMCRingCi": Method("cmc", ring=True, base="CMC", display="CMCRing (+C_i)", close_positives=True,
                        defaults=CMC_DEFAULTS),
}


# Methods that are no row of the paper: the other side of a fidelity switch (README, "Fidelity").
VARIANT_ROWS = ("LAOwnPositive",)


def display_name(name: str) -> str:
    return METHODS[name].display or name


def method(name: str, *, require_implemented: bool = True) -> Method:
    if name not in METHODS:
        raise ValueError(f"Unknown method {name!r}; choose one of {', '.join(METHODS)}.")
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


def check_fixed(name: str, values: dict) -> None:
    """Fail with one sentence when a config contradicts its method's definition (hand-written configs)."""
    for key, value in method(name, require_implemented=False).fixed:
        if values.get(key) != value:
            raise ValueError(f"Method {name} needs {key}={value!r} but the config has {values.get(key)!r}; fix the config.")
