"""Launchers: run one cell's stage here, or on SLURM through submitit and wait for it.

    python -m ring.cluster.launch pretrain --cell CELL [--launcher slurm --resources JSON] -- --config ... --out CELL

The workflow's rules call this for every GPU stage.  ``local`` runs the stage in this process.
``slurm`` is the light client of a login node (torch is never imported here):

* it submits the stage as a submitit job with the stage's resources, after ``sbatch --test-only``
  has accepted them, and records the job id in ``CELL/slurm/job.json``;
* a restarted client (Ctrl-C, lost session, crashed Snakemake) finds that record and re-attaches
  to the queued or running job instead of submitting a second one; a job that COMPLETED (before the
  client started, or after it re-attached) is collected when the stage's output (``ring.cluster.jobs.OUTPUT``)
  is present or its stage's collector (``COLLECTORS``) puts back the copies the job kept (Snakemake deletes
  the outputs of a rule it reruns as incomplete, even while their job still runs), and resubmitted
  otherwise: the stage then resumes from its checkpoint, which is never a declared output.  Jobs that
  ended badly are resubmitted
  and resume too.  Runs of an ended job that wrote no segment (hard-killed) are added to the
  cell's provenance from sacct first (ring.cluster.accounting);
* it asks SLURM itself every ``poll_s`` seconds (sacct, then squeue for jobs accounting has not
  recorded yet or still calls PENDING) and prints one status line per state change;
* a job that neither sacct nor squeue knows for ``unknown_grace_s`` seconds is gone (e.g. a
  cancelled pending array task): it is resubmitted and resumes;
* an unreachable controller (sbatch/sacct/squeue "Unable to contact slurm controller") is retried
  with doubling delays for ``controller_wait_s`` seconds (one line per retry naming the cell; SLURM's
  own words only with ``--verbose``); only a real refusal is reported as bad resources;
* a failed job fails the rule with the tail of its SLURM log and the log's path.

Stopping the client never cancels the cluster job; ``ring cancel`` does.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import math
import os
import shlex
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path

import jsonschema
import submitit

from ring import resources
from ring.cluster import accounting
from ring.cluster.jobs import IGNORED_STOP, OUTPUT, StageJob
from ring.core import config as C
from ring.core.files import CHECKSUMS, write_json
from ring.core.files import read_record as read_json_record
from ring.plan import checks, rerun

RECORD = "job.json"
LOCK = "launch.lock"  # held by the one client attached to a cell (cell_lock)
ALIVE = {
    "PENDING",
    "RUNNING",
    "REQUEUED",
    "CONFIGURING",
    "COMPLETING",
    "SUSPENDED",
    "RESIZING",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "SIGNALING",
    "STAGE_OUT",
}
# States after which a job never runs again (sacct's; REQUEUED and the like are alive).
ENDED = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "REVOKED",
    "SPECIAL_EXIT",
}
# What SLURM's clients print when slurmctld / slurmdbd cannot be reached (not a refusal).
UNREACHABLE = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Connection refused",
    "Zero Bytes were transmitted",
    "Connection timed out",
    "Slurm backup controller in standby mode",
    "Unable to establish connection",
    "slurmdbd: Getting response",
)
LOG_TAIL_LINES = 30
# ``--verbose``: SLURM's own error lines beside the launcher's retry lines (set once, by main()).
VERBOSE = {"on": False}
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


# The one definition of a stage's resource keys and types: the workflow's config schema.  Resources
# validates against it, and tests/cluster/test_launch.py checks that its fields are the schema's properties.
SCHEMA = resources.SCHEMAS / "config.schema.yaml"


def config_schema() -> dict:
    return C.read_yaml(SCHEMA, "Schema")


def stage_resources(slurm: dict, stage: str) -> dict:
    """A stage's resources in the config's ``slurm`` block: its own block over ``defaults``."""
    return {**(slurm.get("defaults") or {}), **(slurm.get(stage) or {})}


@dataclass
class Resources:
    """One stage's SLURM resources (ring/resources/cluster.yaml documents every field)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    gpus_per_node: int = 1
    cpus_per_task: int = 8
    mem_gb: float = 32
    time_min: int = 24 * 60
    max_requeues: int = 20
    signal_delay_s: int = 120
    setup: list[str] = field(default_factory=list)
    additional: dict = field(default_factory=dict)
    array_parallelism: int = 64
    poll_s: float = 15.0
    unknown_grace_s: float = 300.0
    controller_wait_s: float = 900.0

    @classmethod
    def from_dict(cls, values: dict) -> Resources:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"Unknown SLURM resource {unknown[0]!r}; known: {', '.join(sorted(known))}.")
        schema = config_schema()
        try:
            jsonschema.validate(values, {**schema["$defs"]["resources"], "$defs": schema["$defs"]})
        except jsonschema.ValidationError as err:
            where = ".".join(map(str, err.absolute_path)) or "resources"
            raise ValueError(f"SLURM resource {where}: {err.message}; fix it in ring/resources/cluster.yaml.") from None
        return cls(**values)


def executor_parameters(res: Resources, name: str) -> dict:
    """submitit's SlurmExecutor parameters: one task per GPU, as DDP from submitit's environment needs."""
    params = {
        "gpus_per_node": res.gpus_per_node,
        "ntasks_per_node": max(res.gpus_per_node, 1),
        "cpus_per_task": res.cpus_per_task,
        "mem": f"{int(math.ceil(res.mem_gb * 1024))}M",
        "time": res.time_min,
        "job_name": name,
        "signal_delay_s": res.signal_delay_s,
        # CPU threads follow the allocation, not the client's environment (Snakemake sets these
        # to the waiting client's single thread, and sbatch would pass them on).
        "setup": [f"export {var}={res.cpus_per_task}" for var in THREAD_VARIABLES] + list(res.setup),
        "additional_parameters": dict(res.additional),
        "array_parallelism": res.array_parallelism,
    }
    for key in ("partition", "account", "qos", "constraint"):
        if getattr(res, key):
            params[key] = getattr(res, key)
    return params


def make_executor(folder: Path, res: Resources, name: str) -> submitit.SlurmExecutor:
    executor = submitit.SlurmExecutor(folder=folder, max_num_timeout=res.max_requeues)
    executor.update_parameters(**executor_parameters(res, name))
    return executor


def sbatch_test_args(res: Resources) -> list[str]:
    args = [
        "sbatch",
        "--test-only",
        f"--time={res.time_min}",
        f"--gpus-per-node={res.gpus_per_node}",
        f"--ntasks-per-node={max(res.gpus_per_node, 1)}",
        f"--cpus-per-task={res.cpus_per_task}",
        f"--mem={int(math.ceil(res.mem_gb * 1024))}M",
    ]
    for key in ("partition", "account", "qos", "constraint"):
        if getattr(res, key):
            args.append(f"--{key}={getattr(res, key)}")
    for key, value in res.additional.items():
        args.append(f"--{key}={value}")
    return [*args, "--wrap", "true"]


class ControllerUnreachable(RuntimeError):
    """SLURM's controller or accounting daemon did not answer (a retry may succeed)."""


def unreachable(text: str) -> bool:
    return any(marker in text for marker in UNREACHABLE)


def slurm_call(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    """Run a SLURM client; ControllerUnreachable when it could not reach the daemons."""
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise RuntimeError(f"{args[0]} is not on PATH; run the slurm launcher on a SLURM login node.") from None
    except subprocess.TimeoutExpired:
        raise ControllerUnreachable(f"{args[0]} did not answer in {timeout:.0f} s") from None
    if out.returncode != 0 and unreachable(out.stderr):
        raise ControllerUnreachable(" ".join(out.stderr.split()))
    return out


def retrying(
    action, res: Resources, what: str, first_delay_s: float = 5.0, max_delay_s: float = 60.0, cell: Path | None = None
):
    """``action()``, retried with doubling delays while the controller is unreachable, for at most
    ``res.controller_wait_s`` seconds; then one sentence saying so.  Each retry line names the ``cell`` (many
    clients wait side by side); SLURM's own words (``sbatch: error: ...``) are added only under ``--verbose``."""
    deadline, delay = time.monotonic() + res.controller_wait_s, first_delay_s
    where = f"{cell}: " if cell is not None else ""
    while True:
        try:
            return action()
        except ControllerUnreachable as err:
            if time.monotonic() + delay > deadline:
                raise RuntimeError(
                    f"{where}the SLURM controller was unreachable for {res.controller_wait_s:.0f} s while {what} "
                    f"({err}); check `scontrol ping` and rerun: recorded jobs are re-attached, nothing is submitted "
                    "twice."
                ) from None
            said = f" ({err})" if VERBOSE["on"] else ""
            print(
                f"ring: {where}the SLURM controller is unreachable while {what}{said}; retrying in {delay:.0f} s",
                file=sys.stderr,
                flush=True,
            )
            time.sleep(delay)
            delay = min(2 * delay, max_delay_s)


def resource_problems(res: Resources, checkpoint_interval_min: float | None) -> list[str]:
    """What is wrong with these resources before SLURM is asked (one sentence each)."""
    problems = []
    if checkpoint_interval_min is not None and res.time_min < checkpoint_interval_min:
        problems.append(
            f"time_min={res.time_min} is shorter than one checkpoint interval ({checkpoint_interval_min} min); "
            "raise time_min or lower checkpoint_interval_min, or every requeue would restart from scratch."
        )
    if res.signal_delay_s >= res.time_min * 60:
        problems.append(
            f"signal_delay_s={res.signal_delay_s} is not shorter than time_min={res.time_min} min; lower "
            "signal_delay_s, or every job is signalled to stop as it starts and requeues until max_requeues."
        )
    return problems


def responding_nodes() -> bool:
    """Whether any node answers the controller (sinfo's "*" suffix and "unk" mark nodes that do not)."""
    out = slurm_call(["sinfo", "-h", "-o", "%t"], timeout=30)
    states = out.stdout.split()
    return out.returncode == 0 and any(not (s.endswith("*") or s.startswith("unk")) for s in states)


def sbatch_refusal(res: Resources) -> str | None:
    """SLURM's reason for refusing these resources (``sbatch --test-only``), or None if it accepts them."""
    out = slurm_call(sbatch_test_args(res))
    if out.returncode == 0:
        return None
    if "node configuration is not available" in out.stderr and not responding_nodes():
        # A controller that has just restarted refuses everything until its nodes re-register.
        raise ControllerUnreachable("the controller answers but none of its nodes has registered yet")
    return " ".join(line.removeprefix("sbatch: error: ") for line in out.stderr.strip().splitlines()) or "no reason"


def preflight(res: Resources, checkpoint_interval_min: float | None, cell: Path | None = None) -> None:
    """Refuse resources SLURM would refuse, before anything is submitted (one sentence each)."""
    problems = resource_problems(res, checkpoint_interval_min)
    if problems:
        raise ValueError(problems[0])
    if resources_digest(res) in os.environ.get(CHECKED_ENV, "").split(","):
        return  # the workflow checked this resource set before its first submission
    reason = retrying(lambda: sbatch_refusal(res), res, "checking resources", cell=cell)
    if reason is not None:
        raise ValueError(f"SLURM refuses this stage's resources ({reason}); fix them in profiles/slurm/site.yaml.")


# Set by run_preflight (the workflow's onstart check, common.smk) for the jobs it starts: the digests of the
# resource sets already accepted by `sbatch --test-only`, so each cell does not ask again.
CHECKED_ENV = "RING_SLURM_CHECKED"


def resources_digest(res: Resources) -> str:
    return hashlib.sha256(json.dumps(asdict(res), sort_keys=True).encode()).hexdigest()[:16]


def run_preflight(launches, intervals: dict) -> list[str]:
    """Before a run's first submission: every problem of the resource sets of the jobs it will submit
    (:func:`resource_sets`), each once, one ``sbatch --test-only`` per distinct set.  With none, the accepted sets'
    digests go to :data:`CHECKED_ENV`, so the launchers this run starts skip their own ``sbatch --test-only``."""
    problems, digests = check_resource_sets(resource_sets(launches, intervals))
    if not problems:
        os.environ[CHECKED_ENV] = ",".join(digests)
    return problems


def slurm_options(slurm: dict, stage: str, verbose: bool = False) -> str:
    """The launcher options of a stage's jobs on SLURM: its resources (:func:`stage_resources`, the same merge as
    ring.cluster.batch's) and ``--verbose``, which also shows SLURM's own error lines beside the retry lines."""
    resources = json.dumps(stage_resources(slurm, stage))
    return f"--launcher slurm --resources {shlex.quote(resources)}{' --verbose' if verbose else ''}"


def resource_sets(launches, intervals: dict) -> dict[str, tuple[dict, float | None]]:
    """The resource sets of the jobs a run will submit, by rule, for :func:`check_resource_sets`: ``launches``
    yields each job's (rule, launch options, wildcards), ``intervals`` maps a rule to the checkpoint interval of a
    cell (a function of its wildcards; a rule without one has none).  A job launched locally (no ``--resources``)
    is left out; a rule's interval is the largest of its cells'."""
    sets: dict[str, tuple[dict, float | None]] = {}
    for rule, launch, wildcards in launches:
        if not launch or "--resources" not in launch:
            continue
        words = shlex.split(launch)
        values = json.loads(words[words.index("--resources") + 1])
        interval = intervals[rule](wildcards) if rule in intervals else None
        known = sets.get(rule, (values, None))[1]
        sets[rule] = (values, interval if known is None else max(known, interval or known))
    return sets


def check_resource_sets(sets: dict[str, tuple[dict, float | None]]) -> tuple[list[str], list[str]]:
    """Every problem of the labelled resource sets (label: (resources, checkpoint interval)), each
    once, and the digests of the accepted sets; one ``sbatch --test-only`` per distinct set."""
    problems: list[str] = []
    refusals: dict[str, str | None] = {}
    for label, (values, checkpoint_interval_min) in sets.items():
        try:
            res = Resources.from_dict(values)
        except ValueError as err:
            problems.append(f"{label}: {err}")
            continue
        problems += [f"{label}: {problem}" for problem in resource_problems(res, checkpoint_interval_min)]
        key = resources_digest(res)
        if key not in refusals:
            refusals[key] = retrying(lambda res=res: sbatch_refusal(res), res, f"checking the {label} resources")
        if refusals[key] is not None:
            problems.append(
                f"{label}: SLURM refuses these resources ({refusals[key]}); fix them in profiles/slurm/site.yaml."
            )
    return list(dict.fromkeys(problems)), [key for key, reason in refusals.items() if reason is None]


def _array_members(jid: str) -> list[str]:
    """sacct/squeue ids, pending array ranges expanded: 12_[0-2,5%4] -> 12_0 12_1 12_2 12_5."""
    if "_[" not in jid:
        return [jid]
    base, _, spec = jid.partition("_[")
    members = []
    for part in spec.rstrip("]").split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        members += [f"{base}_{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return members


def parse_states(output: str, job_ids) -> dict[str, str]:
    """``JobID|State`` lines (sacct's or squeue's) -> the state of each of ``job_ids`` they name."""
    states = {}
    for line in output.splitlines():
        jid, _, state = line.partition("|")
        for member in _array_members(jid):
            if member in job_ids and state:
                states[member] = state.split()[0]
    return states


def job_states(job_ids: list[str]) -> dict[str, str | None]:
    """Each job's state: sacct's record, else squeue's (accounting can lag a submission), else None
    (neither knows it).  One sacct call and at most one squeue call for all of them; raises
    ControllerUnreachable when SLURM could not be asked, so that is never mistaken for "unknown"."""
    states: dict[str, str | None] = dict.fromkeys(job_ids)
    out = slurm_call(["sacct", "-j", ",".join(job_ids), "-X", "-n", "-P", "-o", "JobID,State"], timeout=30)
    if out.returncode != 0:
        raise ControllerUnreachable(" ".join(out.stderr.split()) or f"sacct exited {out.returncode}")
    states.update(parse_states(out.stdout, states))
    # Accounting lags the controller by a poll or two: a job that has just started is still PENDING in sacct
    # while squeue shows it RUNNING, and the client printed RUNNING, PENDING, RUNNING.  For a job sacct does
    # not know or calls PENDING, the controller's word wins while it holds the job (a cancelled pending job,
    # which it no longer holds, keeps sacct's word).
    unsure = [jid for jid, state in states.items() if state in (None, "PENDING")]
    if unsure:
        out = slurm_call(["squeue", "-r", "-h", "-o", "%i|%T"], timeout=30)
        if out.returncode != 0:
            raise ControllerUnreachable(" ".join(out.stderr.split()) or f"squeue exited {out.returncode}")
        states.update(parse_states(out.stdout, unsure))
    return states


def read_record(cell: Path) -> dict | None:
    path = cell / "slurm" / RECORD
    return json.loads(path.read_text()) if path.exists() else None


def job_config_hash(job: StageJob) -> str | None:
    """The hash of the cell config a job runs (None when its argv names none)."""
    if "--config" not in job.argv or job.stage not in checks.STAGE_CONFIGS:
        return None
    return C.config_hash(C.load(checks.STAGE_CONFIGS[job.stage], job.argv[job.argv.index("--config") + 1]))


def write_record(
    cell: Path, job_id: str, folder: Path, stage: str, tasks: int = 1, config_hash: str | None = None
) -> None:
    # config_hash: what the job ran, so that a later client tells a finished job of an edited cell from its own.
    record = {
        "job_id": job_id,
        "folder": str(folder),
        "stage": stage,
        "tasks": tasks,
        "config_hash": config_hash,
        "submitted": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_json(cell / "slurm" / RECORD, record)


def decide(state: str | None, output_present: bool) -> str:
    """What a restarted client does with a cell's recorded job in ``state`` (None: SLURM does not
    know it): "collect" its outputs, "wait" for it, or "resubmit" (the stage resumes)."""
    if state == "COMPLETED":
        return "collect" if output_present else "resubmit"
    if state is None or state in ALIVE:
        return "wait"  # an unknown job is waited on for unknown_grace_s, then resubmitted
    return "resubmit"


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    if not path.exists():
        return f"(no log at {path})"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def wait(job: submitit.SlurmJob, cell: Path, res: Resources, adopted: bool = False) -> str:
    """Poll SLURM every ``poll_s`` until the job ends: "completed", "failed" (log tail printed) or
    "gone" (unknown to sacct and squeue for ``unknown_grace_s``, or, for a job ``adopted`` from the
    cell's record, cancelled before this client saw it run: accounting can lag a cancel, so that is the
    cancelled pending job that ``decide`` resubmits, seen late)."""
    start, last, unknown_since, ran = time.monotonic(), None, None, False
    while True:
        state = retrying(lambda: job_states([job.job_id])[job.job_id], res, f"asking about job {job.job_id}", cell=cell)
        if state is None:
            unknown_since = unknown_since if unknown_since is not None else time.monotonic()
            if time.monotonic() - unknown_since >= res.unknown_grace_s:
                print(
                    f"ring: {cell}: SLURM job {job.job_id} is unknown to sacct and squeue for "
                    f"{res.unknown_grace_s:.0f} s; treating it as gone",
                    file=sys.stderr,
                    flush=True,
                )
                return "gone"
        else:
            unknown_since = None
        shown = state or "UNKNOWN"
        if shown != last:
            minutes = (time.monotonic() - start) / 60
            print(f"ring: {cell}: SLURM job {job.job_id} {shown} ({minutes:.1f} min)", file=sys.stderr, flush=True)
            last = shown
        ran = ran or (state in ALIVE and state != "PENDING")
        if state in ENDED:
            break
        time.sleep(res.poll_s)
    if state == "COMPLETED":
        try:
            job.done(force_check=True)
            job.results()  # every task's (one per GPU); raises if any failed
            return "completed"
        except Exception as err:  # noqa: BLE001 -- the job failed: its log says why
            reason = type(err).__name__
    else:
        reason = state
    account_ended(cell, job.job_id)  # first, so that the failure below stays the log's last sentence
    if state == "CANCELLED" and adopted and not ran:
        print(
            f"ring: {cell}: SLURM job {job.job_id} was cancelled before it ran; submitting again (it resumes)",
            file=sys.stderr,
            flush=True,
        )
        return "gone"
    stderr = Path(job.paths.stderr)
    print(
        f"ring: {cell}: SLURM job {job.job_id} failed ({reason}); last lines of {stderr}:\n{log_tail(stderr)}",
        file=sys.stderr,
        flush=True,
    )
    return "failed"


def checkpoint_interval(argv: list[str]) -> float | None:
    if "--config" not in argv:
        return None
    return (C.read_yaml(argv[argv.index("--config") + 1], "Config file") or {}).get("checkpoint_interval_min")


def recorded_job(record: dict) -> submitit.SlurmJob:
    return submitit.SlurmJob(folder=record["folder"], job_id=record["job_id"], tasks=range(record.get("tasks", 1)))


def submit(job: StageJob, cell: Path, res: Resources) -> submitit.SlurmJob:
    folder = cell / "slurm"
    # The job's name is the cell's path below the grid: ring-pretrain-cifar10-IRing-seed0.
    executor = make_executor(folder, res, "ring-" + "-".join(cell.parts[-4:]))

    def once() -> submitit.SlurmJob:
        try:
            return executor.submit(job)
        except submitit.core.utils.FailedJobError as err:
            if unreachable(str(err)):
                raise ControllerUnreachable(" ".join(str(err).split())) from None
            raise ValueError(f"sbatch refused the job ({' '.join(str(err).split())}).") from None

    submitted = retrying(once, res, "submitting", cell=cell)
    write_record(
        cell, submitted.job_id, folder, job.stage, tasks=max(res.gpus_per_node, 1), config_hash=job_config_hash(job)
    )
    print(
        f"ring: {cell}: submitted SLURM job {submitted.job_id} (log {submitted.paths.stderr})",
        file=sys.stderr,
        flush=True,
    )
    return submitted


def accounting_folder(cell: Path, record: dict, config_hash: str | None) -> Path | None:
    """Where the recorded job's runs are accounted: the cell when the job ran its current config (or a record that
    names none), else the run of the job's own config kept under ``runs/<its hash>/`` (an edit set it aside there,
    its provenance with it), or None when nothing of it was kept.  A cell's provenance holds its own config's jobs
    only: an earlier config's job added there would be counted twice, there and in its kept run."""
    recorded = record.get("config_hash")
    if recorded is None or config_hash is None or recorded == config_hash:
        return cell
    from ring.plan.rerun import RUNS  # torch-free

    kept = cell / RUNS / recorded
    return kept if kept.is_dir() else None


def note_ignored_stops(cell: Path, attached: submitit.SlurmJob) -> None:
    """A COMPLETED job that got SLURM's stop signal after its outputs were complete says so in its log; the launcher
    says it too and records it in the job's provenance segment (the segment itself was written before the export)."""
    stderr = Path(attached.paths.stderr)
    count = stderr.read_text(errors="replace").count(IGNORED_STOP) if stderr.is_file() else 0
    if count and accounting.note_ignored_stops(cell, attached.job_id, count):
        print(
            f"ring: {cell}: SLURM job {attached.job_id} {IGNORED_STOP} ({count}x); it ignored it and ended "
            f"COMPLETED (noted in {accounting.FILE})",
            file=sys.stderr,
            flush=True,
        )


def account_ended(cell: Path, job_id: str) -> None:
    """Provenance of a job that ended: its runs that wrote no segment (hard-killed), from sacct."""
    added = accounting.add_ended_job(cell, job_id)
    if added:
        print(
            f"ring: {cell}: added {added} run(s) of SLURM job {job_id} that wrote no segment to "
            f"{accounting.FILE} (from sacct)",
            file=sys.stderr,
            flush=True,
        )


@contextmanager
def cell_lock(cell: Path):
    """One client per cell at a time: a second ``ring.cluster.launch`` of the same cell (two Snakemake runs, or one
    and a by-hand launch) waits here, then finds the first one's record and re-attaches instead of submitting."""
    path = cell / "slurm" / LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(
                f"ring: {cell}: another client is attached to this cell; waiting for it, then re-attaching",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


# The evaluation stages and the argument naming the encoder each evaluates: their runs are kept per config and
# encoder, and a finished one is collected (or restored, an edit undone) on the login node without a job.
EVALUATED_ENCODER = {"lincls": "--encoder", "transfer": "--encoder", "detection": "--weights"}


def _stage_config(job: StageJob):
    return C.load(checks.STAGE_CONFIGS[job.stage], job.argv[job.argv.index("--config") + 1])


def collect_exports(job: StageJob, cell: Path) -> bool:
    """A pretraining job that COMPLETED while no client watched, whose encoders Snakemake deleted since: put back
    the copies the stage kept (verified against its checksum record, torch-free) instead of submitting again.
    An evaluation is collected the same way, for the encoder it is to evaluate (:func:`collect_evaluation`)."""
    if "--config" not in job.argv or job.stage not in checks.STAGE_CONFIGS:
        return False
    if job.stage in EVALUATED_ENCODER:
        return collect_evaluation(job, cell)
    restored = rerun.restore_exports(cell, _stage_config(job))
    return bool(restored) and (cell / OUTPUT[job.stage]).exists()


def collect_evaluation(job: StageJob, cell: Path) -> bool:
    """Before an evaluation runs or is submitted (torch-free): its cell brought in line with its config and the
    encoder it is to evaluate (ring.plan.rerun.collect: the run of a previous encoder kept under runs/, a kept run
    of this one restored); True when that evaluation is complete, its outputs put back from their kept copies and
    verified: then nothing runs and nothing is submitted."""
    flag = EVALUATED_ENCODER.get(job.stage)
    if flag is None or "--config" not in job.argv or flag not in job.argv:
        return False

    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if not rerun.collect(cell, job.stage, _stage_config(job), job.argv[job.argv.index(flag) + 1], log=log):
        return False
    print(
        f"ring: {cell}: the evaluation of this encoder with this config is complete ({OUTPUT[job.stage]} put back "
        "from the copy its run kept, its checksum verified); nothing to run",
        file=sys.stderr,
        flush=True,
    )
    return True


# Each stage's collector: puts back the outputs a COMPLETED job of this config wrote and Snakemake deleted since
# (it deletes a rerun rule's outputs as incomplete, even while the job that writes them still runs), from the
# copies the stage keeps where Snakemake does not look; True when the stage's output is in place again.  A stage
# without one is submitted again (it resumes from its checkpoint).
COLLECTORS = {"pretrain": collect_exports, **dict.fromkeys(EVALUATED_ENCODER, collect_evaluation)}


def collect_kept(job: StageJob, cell: Path) -> bool:
    collector = COLLECTORS.get(job.stage)
    return collector is not None and collector(job, cell)


def completed(job: StageJob, cell: Path, attached: submitit.SlurmJob) -> int:
    """The launcher's status once the job it waited on COMPLETED: 0 when the stage's output is there, or was put
    back from the job's kept copies (a client that re-attached to a running job after Snakemake's rerun had
    deleted what the job already wrote), else 1."""
    output = cell / OUTPUT[job.stage]
    note_ignored_stops(cell, attached)
    if output.exists():
        return 0
    if collect_kept(job, cell):
        print(
            f"ring: {cell}: SLURM job {attached.job_id} COMPLETED; restored {output} (deleted by Snakemake's rerun "
            "while the job ran) from the copy the job kept, its checksum verified",
            file=sys.stderr,
            flush=True,
        )
        return 0
    print(
        f"ring: {cell}: SLURM job {attached.job_id} COMPLETED without writing {output}; see {attached.paths.stderr}",
        file=sys.stderr,
        flush=True,
    )
    return 1


def accepted(job: StageJob, cell: Path, wanted: str | None, job_id: str) -> bool:
    """Whether the finished output is of the config this client runs (ring.cluster.detach.accepts)."""
    return accepts(cell, job.stage, wanted, job_id, log=lambda line: print(line, file=sys.stderr, flush=True))


def launch_slurm(job: StageJob, cell: Path, res: Resources) -> int:
    with cell_lock(cell):
        return _launch_slurm(job, cell, res)


def _launch_slurm(job: StageJob, cell: Path, res: Resources) -> int:
    output = cell / OUTPUT[job.stage]
    wanted = job_config_hash(job)  # what this client was asked to run: only a job of it makes the cell's output
    record, checked = read_record(cell), False
    attached, adopted = None, False
    if record is not None and detach(cell, wanted, res, log=lambda line: print(line, file=sys.stderr)):
        record = None  # its job ran another config and is cancelled now: the edited cell is submitted
    if collect_evaluation(job, cell):  # a finished job's evaluation, or a kept one (an edit undone): no job
        return 0
    if record is not None:
        state = retrying(
            lambda: job_states([record["job_id"]])[record["job_id"]], res, "asking about the recorded job", cell=cell
        )
        action = decide(state, output.exists())
        if state in ENDED:  # nothing of this cell runs now: the file has one writer
            folder = accounting_folder(cell, record, wanted)
            if folder is not None:
                account_ended(folder, record["job_id"])
        if action == "collect" and accepted(job, cell, wanted, record["job_id"]):
            print(
                f"ring: {cell}: SLURM job {record['job_id']} COMPLETED meanwhile; collected {output}",
                file=sys.stderr,
                flush=True,
            )
            return 0
        if action == "collect":
            pass  # another config's output, superseded (accepted's sentence): the cell's own config is submitted
        elif action == "wait":
            attached, adopted = recorded_job(record), True
            print(f"ring: {cell}: re-attached to SLURM job {attached.job_id}", file=sys.stderr, flush=True)
        elif state == "COMPLETED" and collect_kept(job, cell):
            print(
                f"ring: {cell}: SLURM job {record['job_id']} COMPLETED meanwhile; restored {output} (deleted by "
                "Snakemake's rerun) from the copy the job kept, its checksum verified; nothing submitted",
                file=sys.stderr,
                flush=True,
            )
            return 0
        elif state == "COMPLETED" and record.get("config_hash") not in (None, job_config_hash(job)):
            print(
                f"ring: {cell}: SLURM job {record['job_id']} ran an earlier config of this cell (it was edited since); "
                "submitting the edited cell",
                file=sys.stderr,
                flush=True,
            )
        elif state == "COMPLETED":
            print(
                f"ring: {cell}: SLURM job {record['job_id']} COMPLETED but {output} is missing (Snakemake deletes "
                "the outputs of a job it reruns); submitting again: the stage resumes from its checkpoint where that "
                "is still this cell's",
                file=sys.stderr,
                flush=True,
            )
        else:
            print(
                f"ring: {cell}: previous job {record['job_id']} ended {state}; submitting again (it resumes)",
                file=sys.stderr,
                flush=True,
            )
    # A gone job is resubmitted; bounded like requeues, so a cluster that loses every job cannot loop.
    for _ in range(res.max_requeues + 1):
        if attached is None:
            if not checked:
                preflight(res, checkpoint_interval(job.argv), cell)
                checked = True
            attached = submit(job, cell, res)
        outcome = wait(attached, cell, res, adopted=adopted)
        adopted = False
        if outcome == "completed":
            if output.exists() and not accepted(job, cell, wanted, attached.job_id):
                attached = None  # another config's output, superseded: the cell's own config is submitted
                continue
            return completed(job, cell, attached)
        if outcome == "failed":
            return 1
        attached = None
    print(f"ring: {cell}: {res.max_requeues + 1} jobs were lost by SLURM; giving up", file=sys.stderr, flush=True)
    return 1


# An edit while a job runs (ring.cluster.detach, the config rule's first step, and this launcher).
# How often a cancelled job is looked for until SLURM lets it go (KillWait after its SIGTERM, 30 s by default).
CANCEL_POLL_S = 1.0


def made_with(cell: Path, stage: str) -> str | None:
    """The config hash a stage recorded in its finished output: ``export.json``'s for pretraining (the checksum
    record of the encoder files), ``metrics.json``'s for an evaluation; None when there is none."""
    value = read_json_record(Path(cell) / (CHECKSUMS if stage == "pretrain" else OUTPUT[stage])).get("config_hash")
    return value if isinstance(value, str) else None


def other_config(record: dict | None, wanted: str | None) -> bool:
    """Whether a launcher's record names a job of another config than ``wanted`` (a record or a job without a hash,
    from before hashes were recorded, is nobody's other config)."""
    return record is not None and wanted is not None and record.get("config_hash") not in (None, wanted)


def listed(job_id: str) -> bool:
    """Whether squeue still lists the job (queued, running, or completing: its processes may still write)."""
    out = slurm_call(["squeue", "-h", "-j", job_id, "-o", "%T"], timeout=30)
    if out.returncode != 0:
        if "Invalid job id" in out.stderr:
            return False  # gone from the controller's memory: ended long enough ago
        raise ControllerUnreachable(" ".join(out.stderr.split()) or f"squeue exited {out.returncode}")
    return bool(out.stdout.strip())


def cancel_and_wait(cell: Path, job_id: str, res: Resources) -> None:
    """scancel the job, then wait until SLURM lists it no more and accounting calls it ended."""

    def cancel() -> None:
        out = slurm_call(["scancel", job_id], timeout=60)
        if out.returncode != 0 and "already completing or completed" not in out.stderr:
            raise RuntimeError(f"{cell}: scancel {job_id} failed ({' '.join(out.stderr.split())})")

    retrying(cancel, res, f"cancelling job {job_id}")
    while retrying(lambda: listed(job_id), res, f"waiting for job {job_id} to end"):
        time.sleep(CANCEL_POLL_S)
    # Accounting may record the end a moment after squeue drops the job: its killed runs are read from it.
    while retrying(lambda: job_states([job_id])[job_id], res, f"asking about job {job_id}") in ALIVE:
        time.sleep(CANCEL_POLL_S)


def retire_record(cell: Path, job_id: str) -> Path:
    """``slurm/job.json`` kept as ``slurm/job-<id>.json``: the job is no client's to follow any more."""
    record = Path(cell) / "slurm" / RECORD
    kept = record.with_name(f"job-{job_id}.json")
    os.replace(record, kept)
    return kept


def detach(cell: Path, wanted: str | None, res: Resources, log=print) -> bool:
    """Cancel the cell's recorded job when it runs another config than ``wanted`` and is still queued or running
    (see the module docstring); True when it did.  Called before any of the cell's files move."""
    cell = Path(cell)
    record = read_record(cell)
    if not other_config(record, wanted):
        return False
    job_id = record["job_id"]
    state = retrying(lambda: job_states([job_id])[job_id], res, "asking about the recorded job")
    if state is not None and state not in ALIVE:
        return False  # it ended: nothing of it writes here any more (the launcher tells an earlier config's output)
    log(
        f"ring: {cell}: its config changed while SLURM job {job_id} of the previous config was {state or 'queued'}; "
        "cancelling it first, so that nothing of it writes into the edited cell"
    )
    cancel_and_wait(cell, job_id, res)
    account_ended(cell, job_id)  # into the previous run's provenance, which moves aside with it
    retire_record(cell, job_id)
    return True


def supersede(cell: Path, stage: str, log=print) -> Path | None:
    """Move a stage's output that another config made to ``runs/<its hash>/``, so that the workflow, ``batch status``
    and ``batch submit`` all see it missing and its cell's own config runs (nothing is deleted)."""
    aside = rerun.set_aside(Path(cell), made_with(cell, stage) or "unrecorded", (OUTPUT[stage],))
    if aside is not None:
        log(f"ring: {cell}: its {OUTPUT[stage]} is superseded (another config made it); kept in {aside}")
    return aside


def accepts(cell: Path, stage: str, wanted: str | None, job_id: str, log=print) -> bool:
    """Whether a finished output is the cell's: the config hash its stage recorded is ``wanted``.  Otherwise one
    sentence, the output superseded, and False (the caller submits the cell's own config)."""
    made = made_with(cell, stage)
    if wanted is None or made == wanted:
        return True
    log(
        f"ring: {cell}: SLURM job {job_id} wrote {OUTPUT[stage]} with config {made}, not this cell's {wanted} "
        "(the cell was edited while it ran); not accepted, submitting the cell's own config"
    )
    supersede(cell, stage, log=lambda line: None)
    return False


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    stage_argv = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description="Run one cell's stage locally or on SLURM.")
    parser.add_argument("stage")
    parser.add_argument("--cell", required=True, type=Path)
    parser.add_argument("--launcher", choices=["local", "slurm"], default="local")
    parser.add_argument("--resources", default="{}", help="JSON of Resources fields (slurm launcher)")
    parser.add_argument("--verbose", action="store_true", help="SLURM's own error lines beside the retry lines")
    args = parser.parse_args(own)
    VERBOSE["on"] = args.verbose
    try:
        job = StageJob(args.stage, stage_argv)
        if "--config" in stage_argv:
            # The plan's checks (ring.plan.checks) on the cell's config, before any job starts or is queued.
            checks.load_checked(args.stage, stage_argv[stage_argv.index("--config") + 1])
        if args.launcher == "local":
            from ring.cluster import progress  # CELL/running.json for `ring status`

            if collect_evaluation(job, args.cell):  # as on SLURM: a finished evaluation is not run again
                return 0

            with progress.running(args.cell) as run:
                run["status"] = job.run_here()
            return run["status"]
        return launch_slurm(job, args.cell, Resources.from_dict(json.loads(args.resources)))
    except (ValueError, RuntimeError, FileNotFoundError) as err:
        print(f"ring: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
