"""How a method key is declared: a :class:`Key` (its type, default, doc, allowed values, check), a :class:`KeyGroup`
(the keys one part of a method reads together, their cell checks and the frozen config that part receives) and the
flat view :func:`with_method_keys` gives ``PretrainConfig`` (torch-free).  The declarations themselves, by what reads
them, are :mod:`ring.core.method_keys`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Key:
    name: str
    type: str  # its annotation, as PretrainConfig's own fields write theirs (`ring describe` prints it)
    default: object  # a list is copied for each config
    doc: str  # what it does, one line ("" where the group's paragraph says it all)
    allowed: str | Callable[[object], str]  # what the checks allow (the reference); a callable gets the option lists
    about: str = ""  # the paragraph it shares with the keys beside it (the reference prints it after ``doc``)
    check: Callable[[object], None] | None = None  # its value alone, on every cell: check(c)
    # Added after cells were first trained: hashed only when off its default, so those cells keep their hash
    # (ring.core.config.config_hash).
    hashed_when_set: bool = False

    def field(self) -> dataclasses.Field:
        if isinstance(self.default, list):
            value = self.default
            return dataclasses.field(default_factory=lambda: list(value))
        return dataclasses.field(default=self.default)

    def description(self) -> str:
        return " ".join(part for part in (self.doc, self.about) if part)

    def allowed_text(self, options) -> str:
        return self.allowed(options) if callable(self.allowed) else self.allowed


@dataclass(frozen=True, eq=False)  # compared by identity: a group is one declaration
class KeyGroup:
    """Keys one part of a method reads together; ``check(c, n_images, m)`` relates them to the cell of method ``m``
    training on ``n_images`` images.  The part receives them as one frozen config, :meth:`read` from the cell's
    values (``settings.keys.<name>``: :func:`ring.core.objective_settings.own_config`)."""

    name: str  # the attribute the method's own config holds it under ("bank": settings.keys.bank.bank_negatives)
    keys: tuple[Key, ...]
    check: Callable[[object, int, object], None] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.keys)

    @cached_property
    def config(self) -> type:
        """Its frozen config class: one field per key, under the key's name (as grids and config files write it)."""
        fields = [(k.name, k.type, k.field()) for k in self.keys]
        return dataclasses.make_dataclass(f"{self.name.capitalize()}Keys", fields, frozen=True)

    def read(self, values: Mapping[str, object]):
        """Its frozen config holding ``values``' keys of this group (a cell's flat config values); a list value is held
        as a tuple, so that no part can change what another part reads."""
        return self.config(**{k: tuple(values[k]) if isinstance(values[k], list) else values[k] for k in self.names})

    def defaults(self) -> dict[str, object]:
        """Its keys at their defaults: what a method that does not read the group hashes (ring.core.config)."""
        return {k.name: list(k.default) if isinstance(k.default, list) else k.default for k in self.keys}


def word_key(name: str, default: str, doc: str, words, about: str = "", note: str = "", late: bool = False) -> Key:
    """A key that takes one word of a plan option list, ``words(options)``: its check and its allowed values."""
    return Key(
        name,
        "str",
        default,
        doc,
        lambda o: ", ".join(words(o)) + note,
        about,
        lambda c: c.one_of(name, words(c.options)),
        hashed_when_set=late,
    )


def integer_key(name: str, default: int, low: int, about: str, doc: str = "", allowed: str = "", late=False) -> Key:
    """A key that counts something, ``low`` or more (its allowed values say more where the cell bounds it too)."""
    return Key(name, "int", default, doc, allowed or f">= {low}", about, lambda c: c.int_at_least(name, low), late)


def with_method_keys(after: dict[str, tuple[KeyGroup, ...]]):
    """A class decorator (under ``@dataclass``): the keys of each group ``after`` names (those of
    :mod:`ring.core.method_keys`, declared there by what reads them) become fields right after the field ``after`` names
    for their group. This flat view is what grid and config files write and what a cell's config.yaml and hash are made
    of, key for key as before the groups (the workflow's rules take that text as a parameter: another text would rerun
    every cell); the objectives never read it, they receive their groups' frozen configs (:meth:`KeyGroup.read`)."""

    def insert(cls):
        annotations = {}
        for name, annotation in cls.__dict__["__annotations__"].items():
            annotations[name] = annotation
            for key in (k for group in after.get(name, ()) for k in group.keys):
                annotations[key.name] = key.type
                setattr(cls, key.name, key.field())
        cls.__annotations__ = annotations
        return cls

    return insert
