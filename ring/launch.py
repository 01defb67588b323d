"""Launchers: run one cell's stage here, or on SLURM through submitit and wait for it.

    python -m ring.launch pretrain --cell CELL [--launcher slurm --resources JSON] -- --config ... --out CELL

The workflow's rules call this for every GPU stage.  ``local`` runs the stage in this process.
``slurm`` is the light client of a login node (torch is never imported here):

* it submits the stage as a submitit job with the stage's resources, after ``sbatch --test-only``
  has accepted them, and records the job id in ``CELL/slurm/job.json``;
* a restarted client (Ctrl-C, lost session, crashed Snakemake) finds that record and re-attaches
  to the queued or running job, or collects one that finished while nobody watched, instead of
  submitting a second job; jobs that ended badly are resubmitted and resume from the checkpoint;
* it prints one status line per job state change and returns the job's outcome; a failed job
  fails the rule with the tail of its SLURM log and the log's path.

Stopping the client never cancels the cluster job; ``python -m ring.batch cancel`` does.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path

import jsonschema
import submitit
import yaml

from ring.jobs import StageJob

RECORD = "job.json"
ALIVE = {"PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "SUSPENDED", "RESIZING", "REQUEUE_HOLD",
         "REQUEUE_FED", "SIGNALING", "STAGE_OUT"}
LOG_TAIL_LINES = 30
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


# The one definition of a stage's resource keys and types: the workflow's config schema.  Resources
# validates against it, and tests/test_launch.py checks that its fields are the schema's properties.
SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"


def config_schema() -> dict:
    with open(SCHEMA) as fh:
        return yaml.safe_load(fh)


def stage_resources(slurm: dict, stage: str) -> dict:
    """A stage's resources in the config's ``slurm`` block: its own block over ``defaults``."""
    return {**(slurm.get("defaults") or {}), **(slurm.get(stage) or {})}


@dataclass
class Resources:
    """One stage's SLURM resources (profiles/slurm/cluster.yaml documents every field)."""

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

    @classmethod
    def from_dict(cls, values: dict) -> "Resources":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"Unknown SLURM resource {unknown[0]!r}; known: {', '.join(sorted(known))}.")
        schema = config_schema()
        try:
            jsonschema.validate(values, {**schema["$defs"]["resources"], "$defs": schema["$defs"]})
        except jsonschema.ValidationError as err:
            where = ".".join(map(str, err.absolute_path)) or "resources"
            raise ValueError(f"SLURM resource {where}: {err.message}; fix it in profiles/slurm/cluster.yaml.") from None
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
    args = ["sbatch", "--test-only", f"--time={res.time_min}", f"--gpus-per-node={res.gpus_per_node}",
            f"--ntasks-per-node={max(res.gpus_per_node, 1)}", f"--cpus-per-task={res.cpus_per_task}",
            f"--mem={int(math.ceil(res.mem_gb * 1024))}M"]
    for key in ("partition", "account", "qos", "constraint"):
        if getattr(res, key):
            args.append(f"--{key}={getattr(res, key)}")
    for key, value in res.additional.items():
        args.append(f"--{key}={value}")
    return [*args, "--wrap", "true"]


def preflight(res: Resources, checkpoint_interval_min: float | None) -> None:
    """Refuse resources SLURM would refuse, before anything is submitted (one sentence each)."""
    if checkpoint_interval_min is not None and res.time_min < checkpoint_interval_min:
        raise ValueError(
            f"time_min={res.time_min} is shorter than one checkpoint interval ({checkpoint_interval_min} min); "
            "raise time_min or lower checkpoint_interval_min, or every requeue would restart from scratch."
        )
    try:
        out = subprocess.run(sbatch_test_args(res), capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise RuntimeError("sbatch is not on PATH; run the slurm launcher on a SLURM login node.") from None
    except subprocess.TimeoutExpired:
        raise RuntimeError("sbatch --test-only did not answer in 60 s; is slurmctld up (scontrol ping)?") from None
    if out.returncode != 0:
        reason = " ".join(line.removeprefix("sbatch: error: ") for line in out.stderr.strip().splitlines()) or "no reason"
        raise ValueError(f"SLURM refuses this stage's resources ({reason}); fix them in profiles/slurm/cluster.yaml.")


def sacct_state(job_id: str) -> str | None:
    """The job's state in SLURM's accounting (``None`` when unknown yet)."""
    try:
        out = subprocess.run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "JobID,State"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.stdout.splitlines():
        jid, _, state = line.partition("|")
        if jid == job_id and state:
            return state.split()[0]
    return None


def read_record(cell: Path) -> dict | None:
    path = cell / "slurm" / RECORD
    return json.loads(path.read_text()) if path.exists() else None


def write_record(cell: Path, job_id: str, folder: Path, stage: str, tasks: int = 1) -> None:
    path = cell / "slurm" / RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"job_id": job_id, "folder": str(folder), "stage": stage, "tasks": tasks,
              "submitted": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    tmp = path.with_name(f".{RECORD}.tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(path)


def reattach(cell: Path) -> submitit.SlurmJob | None:
    """The recorded job of this cell if it is still useful: queued, running, or completed."""
    record = read_record(cell)
    if record is None:
        return None
    state = sacct_state(record["job_id"])
    if state is None or state in ALIVE or state == "COMPLETED":
        return submitit.SlurmJob(folder=record["folder"], job_id=record["job_id"], tasks=range(record.get("tasks", 1)))
    print(f"ring: {cell}: previous job {record['job_id']} ended {state}; submitting again (it resumes)", file=sys.stderr)
    return None


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    if not path.exists():
        return f"(no log at {path})"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def wait(job: submitit.SlurmJob, cell: Path, poll_s: float) -> int:
    start, last = time.monotonic(), None
    while True:
        state = job.state
        if state != last:
            minutes = (time.monotonic() - start) / 60
            print(f"ring: {cell}: SLURM job {job.job_id} {state} ({minutes:.1f} min)", file=sys.stderr, flush=True)
            last = state
        if job.done():
            break
        time.sleep(poll_s)
    try:
        job.results()  # every task's (one per GPU); raises if any failed
    except Exception as err:  # the job failed: its log says why
        stderr = Path(job.paths.stderr)
        print(f"ring: {cell}: SLURM job {job.job_id} failed ({type(err).__name__}); last lines of {stderr}:\n"
              f"{log_tail(stderr)}", file=sys.stderr, flush=True)
        return 1
    return 0


def checkpoint_interval(argv: list[str]) -> float | None:
    if "--config" not in argv:
        return None
    with open(argv[argv.index("--config") + 1]) as fh:
        return (yaml.safe_load(fh) or {}).get("checkpoint_interval_min")


def launch_slurm(job: StageJob, cell: Path, res: Resources) -> int:
    attached = reattach(cell)
    if attached is not None:
        print(f"ring: {cell}: re-attached to SLURM job {attached.job_id}", file=sys.stderr, flush=True)
        return wait(attached, cell, res.poll_s)
    preflight(res, checkpoint_interval(job.argv))
    folder = cell / "slurm"
    # The job's name is the cell's path below the grid: ring-pretrain-cifar10-IRing-seed0.
    submitted = make_executor(folder, res, "ring-" + "-".join(cell.parts[-4:])).submit(job)
    write_record(cell, submitted.job_id, folder, job.stage, tasks=max(res.gpus_per_node, 1))
    print(f"ring: {cell}: submitted SLURM job {submitted.job_id} (log {submitted.paths.stderr})", file=sys.stderr,
          flush=True)
    return wait(submitted, cell, res.poll_s)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    stage_argv = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description="Run one cell's stage locally or on SLURM.")
    parser.add_argument("stage")
    parser.add_argument("--cell", required=True, type=Path)
    parser.add_argument("--launcher", choices=["local", "slurm"], default="local")
    parser.add_argument("--resources", default="{}", help="JSON of Resources fields (slurm launcher)")
    args = parser.parse_args(own)
    try:
        job = StageJob(args.stage, stage_argv)
        if args.launcher == "local":
            return job.run_here()
        return launch_slurm(job, args.cell, Resources.from_dict(json.loads(args.resources)))
    except (ValueError, RuntimeError) as err:
        print(f"ring: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
