"""SLURM's plumbing for the launcher, ``ring cancel``/``status`` and the detach step, torch-free on a login node.

A stage's resources (:class:`Resources`, validated against the workflow's config schema) and their check before a
submission (``sbatch --test-only``: :func:`preflight`, :func:`check_resource_sets`); SLURM's clients called with an
unreachable controller told from a refusal (:func:`slurm_call`) and retried (:func:`retrying`); the state of jobs
(:func:`job_states`: sacct, then squeue); a cell's launcher record ``CELL/slurm/job.json`` (:func:`read_record`,
:func:`write_record`, :func:`retire_record`); cancelling a job and waiting until it is gone (:func:`cancel_and_wait`)
and the runs of an ended job added to the cell's provenance (:func:`account_ended`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path

import jsonschema
import submitit

from ring import resources
from ring.core import accounting
from ring.core import config as C
from ring.core.files import write_json
from ring.engine.groups import world_problem

RECORD = "job.json"


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


# Ended states that say nothing about the stage: a node was lost (NODE_FAIL), the job was preempted without a
# requeue (PREEMPTED, PreemptMode=CANCEL) or its node never booted (BOOT_FAIL).  The launcher submits such a job
# again, within max_requeues, and the stage resumes from its checkpoint.
LOST = ("NODE_FAIL", "PREEMPTED", "BOOT_FAIL")


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


# ``--verbose``: SLURM's own error lines beside the launcher's retry lines (set once, by ring.cluster.launch.main).
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
    nodes: int = 1
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

    @property
    def tasks(self) -> int:
        """The job's tasks: one per GPU on every node (one on a CPU-only node), the cell's processes."""
        return self.nodes * max(self.gpus_per_node, 1)


def executor_parameters(res: Resources, name: str) -> dict:
    """submitit's SlurmExecutor parameters: one task per GPU, as DDP from submitit's environment needs."""
    params = {
        "nodes": res.nodes,
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
        # Slurm 22.05-23.02's srun does not inherit --cpus-per-task from the allocation (data loaders got one CPU);
        # a rank that exits non-zero must not kill the others before rank 0 has checkpointed and requeued (sites
        # with KillOnBadExit=1 ended a USR2 requeue as FAILED).
        "srun_args": [f"--cpus-per-task={res.cpus_per_task}", "--kill-on-bad-exit=0"],
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
        f"--nodes={res.nodes}",
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


# Stages whose entry point runs one process (one linear classifier, one transfer evaluation): more tasks would run
# copies of it that write the same files.  Pretraining runs one task per GPU on every node; detection one per GPU.
ONE_TASK = ("lincls", "transfer")


def stage_problems(stage: str, res: Resources, config: dict | None = None) -> list[str]:
    """What stops ``stage``'s job on these resources before SLURM is asked (one sentence each): more than one task
    for a stage that runs one, or a pretraining ``config`` (its values) whose batch and BatchNorm groups the job's
    processes cannot split as one process does (ring.engine.groups.world_problem)."""
    problems = []
    if stage in ONE_TASK and res.tasks > 1:
        problems.append(
            f"{stage} runs one task (one process on one GPU), but nodes={res.nodes} x gpus_per_node="
            f"{res.gpus_per_node} asks for {res.tasks}; set nodes: 1 and gpus_per_node: 1 under slurm: {stage}: in "
            "profiles/slurm/site.yaml."
        )
    if stage == "pretrain" and config is not None:
        problem = world_problem(config.get("batch_size", 0), config.get("bn_groups", 1), res.tasks)
        if problem:
            problems.append(
                f"{problem}; set in the cell's config or under slurm: pretrain: in profiles/slurm/site.yaml."
            )
    return problems


def responding_nodes() -> bool:
    """Whether any node answers the controller (sinfo's "*" suffix and "unk" mark nodes that do not)."""
    out = slurm_call(["sinfo", "-h", "-o", "%t"], timeout=30)
    states = out.stdout.split()
    return out.returncode == 0 and any(not (s.endswith("*") or s.startswith("unk")) for s in states)


# sinfo's short node states (%t, a suffix such as * or ~ stripped) of a node that takes no new job for now: an admin
# drained it, it is down or failing, in maintenance or powered off.  A partition of such nodes only is unavailable,
# not a refusal of the resources: a plain sbatch is accepted and waits, while `sbatch --test-only` refuses.
UNAVAILABLE = ("drain", "drng", "down", "fail", "maint", "pow", "inval", "futr")


def fits(res: Resources, cpus: str, memory_mb: str, gres: str) -> bool:
    """Whether one job of ``res`` fits a node of sinfo's CPUs (%c), memory (%m, MB) and generic resources (%G)."""
    try:
        gpus = sum(int(part.split("(")[0].split(":")[-1]) for part in gres.split(",") if part.startswith("gpu:"))
        return (
            res.cpus_per_task * max(res.gpus_per_node, 1) <= int(cpus.rstrip("+"))
            and res.mem_gb * 1024 <= int(memory_mb.rstrip("+"))
            and res.gpus_per_node <= gpus
        )
    except ValueError:
        return False


def unavailable_partition(res: Resources) -> str | None:
    """When no node of the stage's partition (the default one when it names none) takes a job now although one of
    them would fit these resources, the clause saying which and why (one sinfo call); None when a node takes jobs,
    none fits (a real refusal), or sinfo cannot say."""
    args = ["sinfo", "-h", "-o", "%P %t %N %c %m %G", *(["-p", res.partition] if res.partition else [])]
    try:
        out = slurm_call(args, timeout=30)
    except RuntimeError:  # ControllerUnreachable included: then the refusal stands as SLURM gave it
        return None
    rows = [line.split() for line in out.stdout.splitlines() if len(line.split()) == 6] if out.returncode == 0 else []
    rows = rows if res.partition else [row for row in rows if row[0].endswith("*")]
    states = sorted({row[1].rstrip("*~#!%$@^-+") for row in rows})
    if not rows or not all(state.startswith(UNAVAILABLE) for state in states):
        return None
    if not any(fits(res, *row[3:]) for row in rows):
        return None
    nodes = ",".join(row[2] for row in rows)
    return f"partition {rows[0][0].rstrip('*')} has no node that takes a job now ({nodes}: {', '.join(states)})"


def pending_reason(job_id: str) -> str:
    """squeue's reason a pending job waits (Resources, Priority, ReqNodeNotAvail, ...), or '' when it cannot say."""
    try:
        out = slurm_call(["squeue", "-h", "-j", job_id, "-o", "%r"], timeout=30)
    except RuntimeError:  # a status line without its reason, never a failed wait
        return ""
    words = out.stdout.strip().splitlines() if out.returncode == 0 else []
    return words[-1].strip() if words and "|" not in words[-1] else ""


def sbatch_refusal(res: Resources) -> str | None:
    """SLURM's reason for refusing these resources (``sbatch --test-only``), or None if it accepts them.  A
    partition whose nodes are all drained or down is not a refusal: the jobs would wait; a warning says so."""
    out = slurm_call(sbatch_test_args(res))
    if out.returncode == 0:
        return None
    if "node configuration is not available" in out.stderr and not responding_nodes():
        # A controller that has just restarted refuses everything until its nodes re-register.
        raise ControllerUnreachable("the controller answers but none of its nodes has registered yet")
    if why := unavailable_partition(res):
        print(
            f"ring: warning: {why}; these resources are not refused, so the jobs are submitted and wait PENDING "
            "until a node returns (scontrol show node says why it is out)",
            file=sys.stderr,
            flush=True,
        )
        return None
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
        stage = next((s for s in ONE_TASK if label == s or label.startswith(f"{s}_")), None)
        problems += [f"{label}: {problem}" for problem in stage_problems(stage, res)] if stage else []
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


# An edit while a job runs (ring.cluster.detach: the config rule's first step, and the launcher).
# How often a cancelled job is looked for until SLURM lets it go (KillWait after its SIGTERM, 30 s by default).
CANCEL_POLL_S = 1.0


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
