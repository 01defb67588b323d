"""Whether SLURM would admit a stage's resources, asked before anything is submitted (torch-free, on a login node).

What is wrong with the resources themselves (:func:`resource_problems`), for the stage (:func:`stage_problems`) or
on one node (:func:`node_problems`), all that the plan checks with no cluster (:func:`plan_problems`); and SLURM's own
answer, ``sbatch --test-only`` (:func:`sbatch_refusal`), a partition with too few of its nodes up for the job told
apart from a refusal (:func:`unavailable_partition`): :func:`preflight` before one submission, and
:func:`run_preflight` before a workflow run's first (each resource set it will submit, once:
:func:`resource_sets`, :func:`check_resource_sets`).  SLURM's clients are called through ring.cluster.slurm.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
from dataclasses import asdict
from pathlib import Path

from ring.cluster import slurm
from ring.cluster.slurm import Resources
from ring.engine.groups import world_problem


def sbatch_test_args(res: Resources) -> list[str]:
    args = [
        "sbatch",
        "--test-only",
        f"--time={res.time_min}",
        f"--nodes={res.nodes}",
        f"--gpus-per-node={res.gpus_per_node}",
        f"--ntasks-per-node={res.tasks_per_node}",
        f"--cpus-per-task={res.cpus_per_task}",
        f"--mem={res.mem_mb_per_node}M",
    ]
    for key in ("partition", "account", "qos", "constraint"):
        if getattr(res, key):
            args.append(f"--{key}={getattr(res, key)}")
    for key, value in res.additional.items():
        args.append(f"--{key}={value}")
    return [*args, "--wrap", "true"]


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


def gres_gpus(gres: str) -> int | None:
    """The GPUs per node a ``--gres`` value asks for (``gpu:a100:2,nvme:1`` -> 2; ``gpu`` or ``gpu:a100`` -> 1, as
    SLURM reads a gres without a count), or None when it names no GPU."""
    counts = [part.split(":") for part in str(gres).split(",") if part.split(":")[0] == "gpu"]
    if not counts:
        return None
    return sum(int(fields[-1]) if len(fields) > 1 and fields[-1].isdigit() else 1 for fields in counts)


def node_problems(stage: str, res: Resources, node: dict | None) -> list[str]:
    """What of ``stage``'s job does not fit one node (one sentence each): a ``gres`` under ``additional`` whose GPUs
    are not ``gpus_per_node`` (submitit asks ``--gpus-per-node`` too), and, where the site names its largest node
    (``slurm: largest_node: {gpus, cpus, mem_gb}``; a value it leaves out is not checked), the GPUs, the CPUs
    (``cpus_per_task`` per task) and the memory (``mem_gb`` per task) of the stage's tasks on one node."""
    problems = []
    where = f"under slurm: {stage}: in profiles/slurm/site.yaml"
    asked = gres_gpus(res.additional["gres"]) if "gres" in res.additional else None
    if asked is not None and asked != res.gpus_per_node:
        problems.append(
            f"{stage}'s gres {res.additional['gres']} asks for {asked} GPUs per node but gpus_per_node="
            f"{res.gpus_per_node}; give each GPU stage a gres with its own gpus_per_node {where}, or name the GPU "
            "type as a constraint."
        )
    node = node or {}
    wanted = {
        "gpus": (res.gpus_per_node, f"gpus_per_node={res.gpus_per_node}"),
        "cpus": (
            res.cpus_per_task * res.tasks_per_node,
            f"{res.tasks_per_node} tasks x cpus_per_task={res.cpus_per_task}",
        ),
        "mem_gb": (res.mem_gb * res.tasks_per_node, f"{res.tasks_per_node} tasks x mem_gb={res.mem_gb:g}, per task"),
    }
    unit = {"gpus": "GPUs", "cpus": "CPUs", "mem_gb": "GB of memory"}
    for key, (need, why) in wanted.items():
        if node.get(key) is not None and need > node[key]:
            problems.append(
                f"{stage} asks for {need:g} {unit[key]} per node ({why}) but the site's largest node has "
                f"{node[key]:g} (slurm: largest_node: {key}); lower it {where}."
            )
    return problems


def plan_problems(stage: str, slurm_config: dict, config: dict | None = None) -> list[str]:
    """Every rule a ``stage`` job's resources break that needs no running cluster (one sentence each), for the
    workflow's plan (``snakemake -n`` included): the resources' schema and own rules (:func:`resource_problems`,
    against the cell ``config``'s checkpoint interval), the stage's tasks (:func:`stage_problems`: the batch and
    BatchNorm groups over the ranks, one-task stages) and one node (:func:`node_problems`)."""
    try:
        res = Resources.from_dict(slurm.stage_resources(slurm_config, stage))
    except ValueError as err:
        return [str(err)]
    interval = (config or {}).get("checkpoint_interval_min")
    return [
        *resource_problems(res, interval),
        *stage_problems(stage, res, config),
        *node_problems(stage, res, slurm_config.get("largest_node")),
    ]


def responding_nodes() -> bool:
    """Whether any node answers the controller (sinfo's "*" suffix and "unk" mark nodes that do not)."""
    out = slurm.slurm_call(["sinfo", "-h", "-o", "%t"], timeout=30)
    states = out.stdout.split()
    return out.returncode == 0 and any(not (s.endswith("*") or s.startswith("unk")) for s in states)


# sinfo's short node states (%t, a suffix such as * or ~ stripped) of a node that takes no new job for now: an admin
# drained or reserved it, it is down or failing, in maintenance or powered off.  A job that only such nodes keep from
# starting is not a refusal of its resources: a plain sbatch is accepted and waits, while `sbatch --test-only`
# refuses.
UNAVAILABLE = ("drain", "drng", "down", "fail", "maint", "pow", "inval", "futr", "resv")


def fits(res: Resources, cpus: str, memory_mb: str, gres: str) -> bool:
    """Whether one node's share of ``res`` fits a node of sinfo's CPUs (%c), memory (%m, MB) and generic resources
    (%G)."""
    try:
        gpus = sum(int(part.split("(")[0].split(":")[-1]) for part in gres.split(",") if part.startswith("gpu:"))
        return (
            res.cpus_per_task * res.tasks_per_node <= int(cpus.rstrip("+"))
            and res.mem_mb_per_node <= int(memory_mb.rstrip("+"))
            and res.gpus_per_node <= gpus
        )
    except ValueError:
        return False


def waiting_for_nodes(res: Resources, rows: list[list[str]]) -> str | None:
    """Given sinfo's nodes of the job's partition (one row each: partition, state, name, CPUs, memory, gres), why the
    job would wait rather than be refused: enough configured nodes fit it (``nodes`` of them) but too few of those
    take a job now (drained, down, reserved: :data:`UNAVAILABLE`).  None when too few fit even all up (no node set
    can ever hold the job: a real refusal) or enough of the fitting ones are up (the refusal is about something
    else)."""
    fitting = [row for row in rows if fits(res, *row[3:6])]
    up = [row for row in fitting if not row[1].rstrip("*~#!%$@^-+").startswith(UNAVAILABLE)]
    if len(fitting) < res.nodes or len(up) >= res.nodes:
        return None
    out = ", ".join(f"{row[2]}: {row[1].rstrip('*~#!%$@^-+')}" for row in fitting if row not in up)
    partition = fitting[0][0].rstrip("*")
    if not up:
        return f"partition {partition} has no node that takes a job now ({out})"
    return f"partition {partition} has {len(up)} node(s) that take a job now where the job needs {res.nodes} ({out})"


def unavailable_partition(res: Resources) -> str | None:
    """When the stage's partition (the default one when it names none) has enough nodes that fit these resources
    but too few of them take a job now (:func:`waiting_for_nodes`), the clause saying which and why (one sinfo call,
    a row per node); None when it can hold the job now, never can (a real refusal), or sinfo cannot say."""
    args = ["sinfo", "-h", "-N", "-o", "%P %t %N %c %m %G", *(["-p", res.partition] if res.partition else [])]
    try:
        out = slurm.slurm_call(args, timeout=30)
    except RuntimeError:  # ControllerUnreachable included: then the refusal stands as SLURM gave it
        return None
    rows = [line.split() for line in out.stdout.splitlines() if len(line.split()) == 6] if out.returncode == 0 else []
    rows = rows if res.partition else [row for row in rows if row[0].endswith("*")]
    return waiting_for_nodes(res, rows)


def sbatch_refusal(res: Resources) -> str | None:
    """SLURM's reason for refusing these resources (``sbatch --test-only``), or None if it accepts them.  A
    partition with enough nodes for the job, too few of them taking jobs now (drained, down, reserved), is not a
    refusal: the jobs would wait PENDING with squeue's reason; a warning says so."""
    out = slurm.slurm_call(sbatch_test_args(res))
    if out.returncode == 0:
        return None
    if "node configuration is not available" in out.stderr and not responding_nodes():
        # A controller that has just restarted refuses everything until its nodes re-register.
        raise slurm.ControllerUnreachable("the controller answers but none of its nodes has registered yet")
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
    reason = slurm.retrying(lambda: sbatch_refusal(res), res, "checking resources", cell=cell)
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
            refusals[key] = slurm.retrying(lambda res=res: sbatch_refusal(res), res, f"checking the {label} resources")
        if refusals[key] is not None:
            problems.append(
                f"{label}: SLURM refuses these resources ({refusals[key]}); fix them in profiles/slurm/site.yaml."
            )
    return list(dict.fromkeys(problems)), [key for key, reason in refusals.items() if reason is None]
