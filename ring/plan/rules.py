"""What the workflow's rules decide without a Snakemake object (workflow/rules/*.smk import it): the wildcard
constraint of a set of names, the shell commands of the light rules and their logs, the config and hash rules of a
stage's cells (:class:`CellConfig`), the rule of each table (:class:`TableRule`), when a table is stale because a
cell it averages is gone (:func:`stale_table`), and which provenance records the GPU-hours table reads."""

import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ring.core.cell_runs import RUNS
from ring.core.files import RUN_RECORD
from ring.core.stages import stages_with

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

    def __post_init__(self):
        """A stage ``ring rerun`` takes (a declared one with run files): refused where the workflow is parsed, not in
        the config job of the first cell."""
        if self.rerun is not None and self.rerun not in stages_with("run_files"):
            choices = ", ".join(stages_with("run_files"))
            raise ValueError(f"CellConfig {self.config}: ring rerun takes no stage {self.rerun!r}; it takes {choices}.")

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


# STALE_MARKS: below the folder Snakemake runs in, the plan's mark on each file it found stale (a stale evaluation
# or encoder, a table a gone cell still counts, a changed store), at the file's own path.  The rule that makes the
# file takes its mark as an input (stale_input): newer than the file, it reruns the job, as `-R <file>` would; once the
# job has written the file again the mark is older and reruns nothing.  A mark stays: Snakemake records a job's input
# files and reruns a job whose set of inputs changed, so a mark removed (by hand too) would rerun its job once more.  A
# plan that finds the file no longer stale dates its mark back to 1970 (a file restored with its old time, as a kept
# copy is, stays newer than it).
STALE_MARKS = Path(".ring-stale")
_MARKED: set[Path] = set()  # the marks this plan set, which no later input of the same plan dates back


def stale_mark(target: str | Path) -> Path:
    """Where the plan marks ``target`` stale."""
    path = Path(os.path.normpath(target))
    return STALE_MARKS / (path.relative_to(path.anchor) if path.is_absolute() else path)


def stale_input(target: str | Path | None, outputs: Iterable[str]) -> list[str]:
    """A rule's ``stale`` input: marks ``target`` (a file to rerun, or None), then the marks on the job's ``outputs``:
    newer than the file where this plan set them, else dated back (older than any file, they rerun nothing)."""
    if target:
        mark = stale_mark(target)
        mark.parent.mkdir(parents=True, exist_ok=True)
        # Its time in it too: Snakemake takes a small input whose checksum it recorded as unchanged, however new.
        mark.write_text(f"{target} marked stale at {time.time_ns()}\n")
        _MARKED.add(mark)
    found = [mark for mark in map(stale_mark, outputs) if mark.is_file()]
    for mark in found:
        if mark not in _MARKED:
            os.utime(mark, (0, 0))
    return [str(mark) for mark in found]


def with_kept_runs(provenance: Iterable[str]) -> list[str]:
    """The cells' ``provenance`` records that exist, then those of every run an edit set aside beside them
    (runs/<key>/provenance.json: its jobs were spent too, and a run moves whole, so each job is counted once)."""
    paths = list(provenance)
    kept = [str(k) for p in paths for k in sorted(Path(p).parent.glob(f"{RUNS}/*/provenance.json"))]
    return [p for p in paths if Path(p).exists()] + kept


@dataclass
class Planned:
    """The jobs a run is to start, as the rules' ``planned`` inputs record them while Snakemake plans: a job whose
    output files are not all there (the run's own handlers, onstart's checks, read it, where Snakemake's public
    interface names no list of the jobs it will run).  A finished job that an edit reruns is not listed: its own
    checks run when it starts."""

    jobs: dict = field(default_factory=dict)  # (rule, wildcard items) -> (rule, launch options, wildcards)

    def input(self, rule: str, outputs: Iterable[str], launch: str | None = None) -> Callable:
        """A rule's ``planned`` input: no file; records the job when an output of ``outputs`` (patterns formatted
        with its wildcards) is missing.  ``launch``: the ring.cluster.launch options its shell passes."""
        patterns = [outputs] if isinstance(outputs, str) else list(outputs)

        def record(wildcards) -> list:
            values = dict(wildcards.items())
            if not all(os.path.exists(p.format(**values)) for p in patterns):
                self.jobs[(rule, tuple(sorted(values.items())))] = (rule, launch, wildcards)
            return []

        return record

    def rules(self) -> list[str]:
        return sorted({rule for rule, _, _ in self.jobs.values()})

    def of(self, rule: str) -> list:
        """The wildcards of each planned job of ``rule``."""
        return [wildcards for name, _, wildcards in self.jobs.values() if name == rule]
