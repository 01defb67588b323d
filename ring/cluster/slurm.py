"""SLURM's plumbing for the launcher, ``ring cancel``/``status`` and the detach step, torch-free on a login node.

A stage's resources (:class:`Resources`, validated against the workflow's config schema; whether SLURM admits them
is ring.cluster.admission's) and the submitit executor they make; SLURM's clients called with an unreachable
controller told from a refusal (:func:`slurm_call`) and retried (:func:`retrying`); the state of jobs
(:func:`job_states`: sacct, then squeue); a cell's launcher record ``CELL/slurm/job.json`` (:func:`read_record`,
:func:`write_record`, :func:`retire_record`); cancelling a job and waiting until it is gone (:func:`cancel_and_wait`)
and the runs of an ended job added to the cell's provenance (:func:`account_ended`).
"""

from __future__ import annotations

import functools
import json
import math
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path

import jsonschema
import submitit

from ring import resources
from ring.core import accounting
from ring.core.files import write_json
from ring.core.yaml_reading import read_yaml

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
    return read_yaml(SCHEMA, "Schema")


@functools.cache
def resources_validator() -> jsonschema.protocols.Validator:
    """The validator of one stage's resources, made once a process: `ring status` of the paper grid checks 219
    stages' resources, and reading and checking the schema each time was 140 of its 146 s on a busy 2-core CPU."""
    schema = config_schema()
    resources_schema = {**schema["$defs"]["resources"], "$defs": schema["$defs"]}
    validator = jsonschema.validators.validator_for(resources_schema)
    validator.check_schema(resources_schema)
    return validator(resources_schema)


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
        err = jsonschema.exceptions.best_match(resources_validator().iter_errors(values))  # as jsonschema.validate
        if err is not None:
            where = ".".join(map(str, err.absolute_path)) or "resources"
            raise ValueError(f"SLURM resource {where}: {err.message}; fix it in ring/resources/cluster.yaml.") from None
        return cls(**values)

    @property
    def tasks_per_node(self) -> int:
        """One task per GPU (one on a CPU-only node): the processes, each with its loader workers, of one node."""
        return max(self.gpus_per_node, 1)

    @property
    def tasks(self) -> int:
        """The job's tasks: one per GPU on every node (one on a CPU-only node), the cell's processes."""
        return self.nodes * self.tasks_per_node

    @property
    def mem_mb_per_node(self) -> int:
        """The memory asked of each node: ``mem_gb`` is per task (a rank and its loader workers), and a node runs
        ``tasks_per_node`` of them."""
        return int(math.ceil(self.mem_gb * 1024)) * self.tasks_per_node


def executor_parameters(res: Resources, name: str) -> dict:
    """submitit's SlurmExecutor parameters: one task per GPU, as DDP from submitit's environment needs."""
    params = {
        "nodes": res.nodes,
        "gpus_per_node": res.gpus_per_node,
        "ntasks_per_node": res.tasks_per_node,
        "cpus_per_task": res.cpus_per_task,
        "mem": f"{res.mem_mb_per_node}M",
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


def pending_reason(job_id: str) -> str:
    """squeue's reason a pending job waits (Resources, Priority, ReqNodeNotAvail, ...), or '' when it cannot say."""
    try:
        out = slurm_call(["squeue", "-h", "-j", job_id, "-o", "%r"], timeout=30)
    except RuntimeError:  # a status line without its reason, never a failed wait
        return ""
    words = out.stdout.strip().splitlines() if out.returncode == 0 else []
    reason = words[-1].strip() if words and "|" not in words[-1] else ""
    return "" if reason == "None" else reason  # a job the scheduler has not looked at yet: no reason to show


def slurm_options(slurm: dict, stage: str, verbose: bool = False) -> str:
    """The launcher options of a stage's jobs on SLURM: its resources (:func:`stage_resources`, the same merge as
    ring.cluster.batch's) and ``--verbose``, which also shows SLURM's own error lines beside the retry lines."""
    resources = json.dumps(stage_resources(slurm, stage))
    return f"--launcher slurm --resources {shlex.quote(resources)}{' --verbose' if verbose else ''}"


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
    # which it no longer holds, keeps sacct's word).  So it does for a lost one: under JobRequeue=1 SLURM requeues
    # a job whose node failed under the same id, and sacct shows NODE_FAIL until the new run's record arrives;
    # taken at its word, the launcher submitted the cell again beside the requeued job (two jobs on one cell).
    unsure = [jid for jid, state in states.items() if state in (None, "PENDING", *LOST)]
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
