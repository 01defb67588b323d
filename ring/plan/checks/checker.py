"""The one sentence every failed check raises, and the checks of one value that every stage's checks are made of."""

from __future__ import annotations

import math

from ring.plan.checks import options


class ConfigError(ValueError):
    """A config value no job can use; the message is one sentence with the fix."""


def fail(where: str, key: str, value, allowed: str, fix: str) -> None:
    raise ConfigError(f"{where}: {key}={value!r} {allowed}; {fix}.")


class Checker:
    """One config's checks at ``where``, handed to the declared checks of a method's own keys
    (:mod:`ring.core.method_keys`) and to an objective's own (:meth:`ring.core.methods.Objective.check`), so that every
    failure reads the same."""

    options = options  # the option lists a declared key's check takes its choices from (c.options.HEADS)

    def __init__(self, where: str, cfg):
        self.where, self.cfg = where, cfg

    def fail(self, key: str, allowed: str, fix: str) -> None:
        fail(self.where, key, getattr(self.cfg, key), allowed, fix)

    def int_at_least(self, key: str, low: int, fix: str = "") -> None:
        int_at_least(self.where, self.cfg, key, low, fix)

    def positive(self, key: str, fix: str = "") -> None:
        positive(self.where, self.cfg, key, fix)

    def in_range(self, key: str, low: float, high: float, high_open: bool = True) -> None:
        in_range(self.where, self.cfg, key, low, high, high_open)

    def one_of(self, key: str, names) -> None:
        one_of(self.where, self.cfg, key, names)


def number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def int_at_least(where: str, cfg, key: str, low: int, fix: str = "") -> None:
    v = getattr(cfg, key)
    if not isinstance(v, int) or isinstance(v, bool) or v < low:
        fail(where, key, v, f"must be an integer of at least {low}", fix or f"set {key} to {low} or more")


def positive(where: str, cfg, key: str, fix: str = "") -> None:
    v = getattr(cfg, key)
    if not number(v) or v <= 0:
        fail(where, key, v, "must be a finite number above 0", fix or f"set a positive {key}")


def in_range(where: str, cfg, key: str, low: float, high: float, high_open: bool = True) -> None:
    v = getattr(cfg, key)
    ok = number(v) and low <= v and (v < high if high_open else v <= high)
    if not ok:
        fail(where, key, v, f"must lie in [{low}, {high}{')' if high_open else ']'}", f"choose {key} in that range")


# The words YAML 1.1 (PyYAML) reads as booleans when unquoted, by the boolean they become.
YAML_BOOLEAN_WORDS = {True: ("on", "yes", "true"), False: ("off", "no", "false")}


def one_of(where: str, cfg, key: str, names) -> None:
    v = getattr(cfg, key)
    if isinstance(v, bool):  # `compile: on` unquoted: YAML hands over True, not the word the user wrote
        words = [w for w in YAML_BOOLEAN_WORDS[v] if w in names]
        fix = f"write {key}: '{words[0]}' (quoted)" if words else f"write one of {', '.join(names)}"
        fail(
            where,
            key,
            v,
            f"is a YAML boolean: YAML reads an unquoted {'/'.join(YAML_BOOLEAN_WORDS[v])} as {v}, "
            "and this key takes a word",
            fix,
        )
    if v not in names:
        fail(where, key, v, f"is not one of {', '.join(names)}", "choose one of them")
