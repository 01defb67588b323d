"""The configuration reference, generated from the stage dataclasses of :mod:`ring.core.config`.

One source of truth: each field's type and default come from the dataclass, its description from
the comments written beside it in ``ring/core/config.py`` (the comment block above a group of fields,
up to the next blank line, plus the field's own trailing comment) or, for a key only some methods read, from its
declaration in :mod:`ring.core.method_keys`, its allowed values from
:data:`ring.plan.checks.ALLOWED` (what the plan-time checks enforce), and where its default comes from
is read off that comment (the paper, the authors' code, or our choice).  ``docs/configuration.md``
is this module's output, committed; a test fails when it is stale.

    ring describe [STAGE] [KEY]
    ring reference --write docs/configuration.md
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import sys
from pathlib import Path

from ring.core.config import PretrainConfig, check_key
from ring.core.method_keys import KEYS
from ring.core.methods import METHODS
from ring.core.stages import STAGES
from ring.plan import checks

DOC = Path("docs") / "configuration.md"
_FIELD = re.compile(r"^    (\w+): [^=]+?(?:=.*?)?(?:\s+#\s*(.*))?$")


def sections() -> dict[str, type]:
    """Section -> config class, in the stages' declaration order (ring.core.stages); a study's keys are
    PretrainConfig's."""
    return {stage.reference: stage.config for stage in STAGES.values() if stage.reference}


def field_comments(cls) -> dict[str, str]:
    """field -> its comment text: the block above its group and its own trailing comment (base classes first)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__[:-1]):
        if not dataclasses.is_dataclass(klass):
            continue
        block: list[str] = []
        in_group = False
        for line in inspect.getsource(klass).splitlines()[1:]:
            stripped = line.strip()
            if not stripped:
                block, in_group = [], False
                continue
            if stripped.startswith("#"):
                if in_group:  # a comment between fields of one group starts a new group
                    block, in_group = [], False
                block.append(stripped.lstrip("#").strip())
                continue
            match = _FIELD.match(line)
            if match and match.group(1) in {f.name for f in dataclasses.fields(klass)}:
                in_group = True
                own = (match.group(2) or "").strip()
                own = own[:1].upper() + own[1:] + ("." if own and not own.endswith(".") else "")
                out[match.group(1)] = " ".join([own, *block]).strip()  # the field's own words first
    return out


def default_source(comment: str, required: bool = False) -> str:
    """Where a default comes from, as its comment says."""
    if required:
        return "required (the workflow sets it)"
    text = comment.lower()
    found = [
        name
        for name, pattern in (
            ("the paper", r"paper|sec\. \d|table \d|appendix"),
            ("the authors' or the method's code", r"authors|zhuang|moco|\bir\b|\bla\b|detectron2|torch's"),
        )
        if re.search(pattern, text)
    ]
    return " + ".join(found) or "our choice"


def _default(f) -> str:
    if f.default is not dataclasses.MISSING:
        return repr(f.default)
    if f.default_factory is not dataclasses.MISSING:
        return repr(f.default_factory())
    return "(required)"


def entries(stage: str) -> list[dict]:
    cls = sections()[stage]
    # A method's own keys are described by their declarations (ring.core.method_keys), the others by their comments.
    comments = field_comments(cls)
    if issubclass(cls, PretrainConfig):
        comments.update({name: key.description() for name, key in KEYS.items()})
    runtime = set(getattr(cls, "RUNTIME_FIELDS", ()))
    return [
        {
            "key": f.name,
            "type": str(f.type),
            "default": _default(f),
            "allowed": checks.ALLOWED.get(f.name, "any value of its type"),
            "what": comments.get(f.name, "")
            + (" (Runtime only: not part of the config hash.)" if f.name in runtime else ""),
            "source": default_source(comments.get(f.name, ""), _default(f) == "(required)"),
        }
        for f in dataclasses.fields(cls)
    ]


# The rule of ring.core.methods.Method.reads, as docs/configuration.md states it (tests/core/test_methods.py,
# tests/plan/checks/test_stages.py and tests/workflow/test_workflow.py show each sentence).
UNREAD_RULE = (
    "A pretraining key that only some methods read (the table below) is never read by the others: MoCo's negatives "
    "are its queue, so it never reads `negatives_count`; IR has no queue, so it never reads `queue_size`. Such a "
    "key keeps its default in the cells of a method that never reads it, so that setting it never restarts them:",
    "* under `all:` or `by_dataset` (and in a study's `pretrain` or variants) it applies only to the methods that "
    "read it: `pretrain: {all: {negatives_count: including_positive}}` retrains the IR cells and leaves every MoCo "
    "cell, its config.yaml and its hash as they were;",
    "* under `by_method` it is refused before any job, in one sentence naming the key and the method "
    "(`by_method: {MoCo: {negatives_count: ...}}`): set it for a method that reads it, or remove it;",
    "* a stage config file written by hand may set one: the config hash takes it at its default "
    "(`ring.core.config.hashed_values`), so it changes nothing and restarts nothing.",
    "Each method's objective declares the key groups it reads in the registry (`Objective.key_groups`, "
    "[adding-a-method.md](adding-a-method.md)) and is built from their frozen configs; an objective that declares "
    "none reads the common keys only. "
    "The hash takes an unread key at its default rather than leaving it out, so a cell that never set one keeps its "
    "hash. A cell whose grid set one before this rule existed (the smoke and ring_digits grids' `queue_size: 1024` "
    "under `all:` reached IR; the paper grid's ImageNet `queue_size` and `kmeans_k` reached IR) gets a new "
    "config.yaml and hash once, and restarts once; its previous run is kept under `runs/<old hash>/`.",
)


def unread_table() -> list[str]:
    """Which of ring's own methods read each key of ring.core.method_keys (plug-ins' methods left out, so
    the page is the same wherever it is generated)."""

    own = [name for name in METHODS if name not in METHODS.plugins]
    lines = ["| key | read only by |", "|---|---|"]
    for key in KEYS:
        lines.append(f"| `{key}` | {', '.join(n for n in own if METHODS[n].reads(key))} |")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Generated by `ring reference --write docs/configuration.md` from the dataclasses of "
        "`ring/core/config.py` (their comments), the declarations of the keys only some methods read "
        "(`ring/core/method_keys.py`), the plan-time checks of `ring/plan/checks/` (allowed values) and nothing else; "
        "`tests/plan/test_reference.py` fails when this file is stale. "
        "`ring describe [STAGE] [KEY]` prints the same.",
        "",
        "A grid file sets these keys per stage (`pretrain:`, `lincls:`, `transfer:` blocks with `all`, "
        "`by_dataset`, `by_method`; `detection:` with `all`, `by_task`, `by_method`; a study's `pretrain` "
        'and `variants`; `toy_cnce:`). "Default from" is read off the field\'s comment.',
        "",
        "## Keys a method never reads",
        "",
        UNREAD_RULE[0],
        "",
        *UNREAD_RULE[1:-1],
        "",
        UNREAD_RULE[-1],
        "",
        *unread_table(),
        "",
    ]
    for stage, cls in sections().items():
        lines += [
            f"## {stage} ({cls.__name__})",
            "",
            "| key | type | default | allowed | what it does | default from |",
            "|---|---|---|---|---|---|",
        ]
        for e in entries(stage):
            lines.append(
                "| "
                + " | ".join(
                    _cell(f"`{e[k]}`" if k in ("key", "default") else e[k])
                    for k in ("key", "type", "default", "allowed", "what", "source")
                )
                + " |"
            )
        lines.append("")
    return "\n".join(lines)


def describe(stage: str | None = None, key: str | None = None) -> str:
    if stage is None:
        return markdown()
    if stage not in sections():
        raise ValueError(f"Unknown stage {stage!r}; stages are {', '.join(sections())}.")
    rows = [e for e in entries(stage) if key is None or e["key"] == key]
    if not rows:
        check_key(sections()[stage], key)  # suggests the closest key
    return "\n\n".join(
        f"{stage}.{e['key']}: {e['type']} = {e['default']}\n  allowed: {e['allowed']}\n"
        f"  {e['what'] or '(no description)'}\n  default from: {e['source']}"
        for e in rows
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Write the configuration reference (docs/configuration.md).")
    parser.add_argument("--write", type=Path, help="write the Markdown here")
    args = parser.parse_args(argv)
    text = markdown()
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(text)
    else:
        print(text)
    return 0


def describe_main(argv) -> int:
    """``ring describe [STAGE] [KEY]``."""
    parser = argparse.ArgumentParser(prog="ring", description="Describe the configuration keys.")
    parser.add_argument("command", choices=["describe"])
    parser.add_argument("stage", nargs="?", choices=list(sections()))
    parser.add_argument("key", nargs="?")
    args = parser.parse_args(argv)
    try:
        print(describe(args.stage, args.key))
    except ValueError as err:
        print(f"ring: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
