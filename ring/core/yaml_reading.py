"""Every YAML file ring-bench reads (a grid, a stage config, a workflow or SLURM config, a schema) goes through
:func:`read_yaml`: YAML 1.2's floats, a repeated key refused, and every error one sentence naming the file and line."""

from __future__ import annotations

import re
from pathlib import Path

import yaml


class DuplicateKey(yaml.YAMLError):
    """A mapping that names one key twice: the key and the 1-based lines of both."""

    def __init__(self, key, first: int, second: int, merge: bool = False):
        super().__init__(f"the key {key!r} appears twice, at lines {first} and {second}")
        self.key, self.first, self.second, self.merge = key, first, second, merge


class Loader(yaml.SafeLoader):
    """PyYAML's safe loader that also reads YAML 1.2 floats: ``3e-2`` and ``1e-4`` are numbers, as
    every user means them (YAML 1.1, PyYAML's default, reads them as strings and needs ``3.0e-2``).

    A key written twice in one mapping is refused (:class:`DuplicateKey`): PyYAML keeps the last one without a
    word, so a second ``pretrain:`` block appended to a grid would drop every setting of the first.  Keys a
    ``<<:`` merge brings in may be overridden, as YAML means them to be; the merge key itself written twice is
    refused too (PyYAML lets the last ``<<:`` win, while ``<<: [*a, *b]`` lets the first: the same two anchors
    would merge in opposite orders)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            lines: dict = {}
            merges = [k.start_mark.line + 1 for k, _ in node.value if k.tag == "tag:yaml.org,2002:merge"]
            if len(merges) > 1:
                raise DuplicateKey("<<", merges[0], merges[1], merge=True)
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in lines:
                        raise DuplicateKey(key, lines[key], line)
                    lines[key] = line
                except TypeError:  # an unhashable key: SafeLoader's own error names it below
                    pass
        return super().construct_mapping(node, deep)


Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*\.?[0-9_]*|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def read_yaml(path: str | Path, what: str = "YAML file"):
    """A YAML file (a grid, a stage config, a workflow or SLURM config), its floats as YAML 1.2 reads them; every YAML
    file ring-bench reads goes through here.  A syntax error is one sentence naming the file, line and column, a
    repeated key one naming the key and both lines."""
    path = Path(path)
    try:
        with open(path) as fh:
            return yaml.load(fh, Loader=Loader)
    except DuplicateKey as err:
        lines = f"lines {err.first} and {err.second}" if err.first != err.second else f"line {err.first}"
        if err.merge:
            raise ValueError(
                f"{what} {path} gives the merge key '<<' twice in one mapping, at {lines} (YAML would merge only "
                "the last); merge both in one key, the first listed winning: <<: [*first, *second]."
            ) from None
        raise ValueError(
            f"{what} {path} gives the key {err.key!r} twice, at {lines} (YAML would keep only the last); "
            "merge the two into one."
        ) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ValueError(f"{what} {path} is not valid YAML{where}: {problem}; fix the syntax there.") from None
