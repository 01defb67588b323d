"""What the workflow's rules decide without a Snakemake object (workflow/rules/*.smk import it): the wildcard
constraint of a set of names, the shell commands of the light rules and their logs, the config and hash rules of a
stage's cells (:class:`CellConfig`), the rule of each table (:class:`TableRule`), when a table is stale because a
cell it averages is gone (:func:`stale_table`), and which provenance records the GPU-hours table reads."""

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ring.core.runs import RUN_RECORD, RUNS

# ring.cluster.slurm.RECORD, the SLURM launcher's record (not imported: submitit would enter every plan).
SLURM_RECORD = "job.json"
TABLE_EXTS = ("csv", "md", "tex")


def one_of(names: Iterable[str]) -> str:
    """A wildcard constraint that matches any one of ``names``: each escaped, the longest first (a regex alternation
    takes the first branch that matches, so a name that begins another must come after it)."""
    return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))


def logged(command: str) -> str:
    """``command`` with its stderr (every ``ring:`` sentence) also written to the rule's log, for the
    failed-run summary; its stdout, its stderr on the terminal and its exit status (pipefail) are
    unchanged.  fd 3 carries stdout past the pipe into tee, which must end before the job does."""
    return "{{ {{ COMMAND; }} 2>&1 1>&3 3>&- | tee {log:q} >&2 3>&-; }} 3>&1".replace("COMMAND", command)


# The shell command of a hash rule (params results).
WRITE_HASH = logged("printf '%s\\n' {params.results:q} > {output:q}")


def write_config(rerun: str | None) -> str:
    """The shell command of a cell's config rule (params python, text and cell).  It writes config.yaml; with
    ``rerun`` (a stage), a cell that already ran (it has a run.json) is then brought in line by ring.plan.rerun
    before any job is submitted (a longer schedule continues, any other edit keeps the previous run under
    runs/<hash>/ and starts over), through ring.cluster.detach when a SLURM job of it is recorded (that module says
    why).  A cell that never ran costs no interpreter.  A shell job, not `run:`: Snakemake runs `run:` jobs in a
    fresh interpreter (~1.5 s each)."""
    if rerun is None:
        return logged("printf '%s' {params.text:q} > {output:q}")
    return logged(
        "printf '%s' {params.text:q} > {output:q}"
        f" && if [ -e {{params.cell:q}}/slurm/{SLURM_RECORD} ]; then {{params.python:q}} -m ring.cluster.detach"
        f" {{params.cell:q}} --stage {rerun}; elif [ -e {{params.cell:q}}/{RUN_RECORD} ]; then"
        f" {{params.python:q}} -m ring.plan.rerun {{params.cell:q}} --stage {rerun}; fi"
    )


@dataclass(frozen=True)
class CellConfig:
    """How a stage's cells get their config.yaml and, where the stage has one, their config.hash: the rules
    <stage>_config and <stage>_hash of workflow/rules/cells.smk, which each stage's rule file registers."""

    config: str  # the config.yaml pattern, its log config.log beside it
    build: Callable  # the cell's config from a rule's wildcards
    hash: str | None = None  # the config.hash pattern, its log config.hash.log beside it; None: no hash rule
    rerun: str | None = None  # the stage ring.plan.rerun brings a finished cell in line with; None: written only

    @property
    def config_log(self) -> str:
        return str(Path(self.config).with_suffix(".log"))

    @property
    def hash_log(self) -> str:
        return str(Path(self.hash).with_suffix(".hash.log"))

    @property
    def command(self) -> str:
        return write_config(self.rerun)


@dataclass(frozen=True)
class TableRule:
    """One table of ring.reports.tables and its rule make_<table> (workflow/rules/tables.smk)."""

    cells: Callable[[str], list]  # the files of a grid's cells the table reads, from the grid's name
    options: str  # the command's options after --out <prefix>, in Snakemake's shell formatting
    params: dict = field(default_factory=dict)  # the params the options and the table's report caption name
    exts: tuple[str, ...] = TABLE_EXTS
    feed: str = ""  # a command whose output the table reads on its standard input (``-`` among the options)

    def command(self, table: str) -> str:
        build = f"{{params.python:q}} -m ring.reports.tables {table} --out {{params.prefix:q}} {self.options}"
        return logged(f"{self.feed} | {build}" if self.feed else build)


def stale_table(target: str, files: Iterable[str]) -> str | None:
    """``target`` (a table's file) where it exists while a file of a cell it averages is gone, else None."""
    return target if Path(target).exists() and not all(map(os.path.exists, files)) else None


def with_kept_runs(provenance: Iterable[str]) -> list[str]:
    """The cells' ``provenance`` records that exist, then those of every run an edit set aside beside them
    (runs/<key>/provenance.json: its jobs were spent too, and a run moves whole, so each job is counted once)."""
    paths = list(provenance)
    kept = [str(k) for p in paths for k in sorted(Path(p).parent.glob(f"{RUNS}/*/provenance.json"))]
    return [p for p in paths if Path(p).exists()] + kept
