"""A cell's SLURM runs from accounting (``sacct -D``), for the segments its own processes never wrote.

A process writes its segment of ``provenance.json`` when it ends (ring.engine.provenance.Segment), so a
run that was hard-killed (an external ``scontrol requeue``'s SIGKILL, ``scancel --signal=KILL``,
a node failure) leaves none; only SLURM's accounting knows how long it ran.  Two places add them:

* the job's next run (a requeue keeps the job id) adds its earlier runs (:func:`missing_runs`);
* the launcher, before it resubmits or collects a cell whose recorded job ended, adds every run of
  that job (:func:`add_ended_job`), so a job killed for good is counted by the cell's next job.

Torch-free: the waiting client on a login node imports it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ring.core.files import write_json

FILE = "provenance.json"
# sacct's Start of a run that never started (e.g. a requeued job cancelled while pending again).
NOT_STARTED = {"", "None", "Unknown"}
# sacct's NodeList of a run that never got a node.  Its Start alone does not tell: a pending job
# cancelled pending has no node, whatever Start accounting shows for it.
NO_NODE = {"", "None assigned"}


def started(run: dict) -> bool:
    return run["started"] not in NOT_STARTED and run["node"] not in NO_NODE


def allocated_gpus(tres: str) -> int:
    """GPUs in sacct's AllocTRES: "cpu=1,gres/gpu=2,gres/gpu:a100=2,node=1" -> 2 (the plain count,
    else the typed ones summed; SLURM lists both when the request named a type)."""
    plain, typed = None, 0
    for item in tres.split(","):
        key, _, value = item.partition("=")
        if key == "gres/gpu" and value.isdigit():
            plain = int(value)
        elif key.startswith("gres/gpu:") and value.isdigit():
            typed += int(value)
    return typed if plain is None else plain


def parse_runs(sacct_output: str, job_id: str) -> list[dict]:
    """The runs of one job in ``sacct -D -X -P -o JobID,State,Start,End,ElapsedRaw,NodeList,AllocTRES``
    output, oldest first: the run at index i is the job's restart i (one that never started, e.g. the
    pending record of a job cancelled after a requeue, sorts last: its Start is not a time)."""
    runs = []
    for line in sacct_output.splitlines():
        jid, state, start, end, elapsed, node, tres = (line.split("|") + [""] * 7)[:7]
        if jid == job_id and elapsed.isdigit():
            runs.append(
                {
                    "state": state.split()[0] if state else "",
                    "started": start,
                    "ended": end,
                    "wall_s": float(elapsed),
                    "node": node,
                    "gpus": allocated_gpus(tres),
                }
            )
    return sorted(runs, key=lambda run: (not started(run), run["started"]))


def accounted_runs(job_id: str) -> list[dict]:
    """Every run of a SLURM job, requeued ones included, from SLURM's accounting, oldest first; []
    where sacct cannot be asked (provenance then lacks them, as it would without SLURM)."""
    try:
        out = subprocess.run(
            [
                "sacct",
                "-j",
                job_id,
                "-D",
                "-X",
                "-n",
                "-P",
                "-o",
                "JobID,State,Start,End,ElapsedRaw,NodeList,AllocTRES",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_runs(out.stdout, job_id)


def killed_segment(run: dict, job_id: str, restart: int, gpus: int, gpu_model: str | None) -> dict:
    return {
        **run,
        "outcome": f"killed ({run['state']})",
        "gpus": gpus,
        "gpu_model": gpu_model,
        "job_id": job_id,
        "restart_count": restart,
        "source": "sacct",
    }


def unrecorded(segments: list[dict], job_id: str, runs: list[dict]) -> list[tuple[int, dict]]:
    """(restart count, run) of the job's runs that started and that no segment records."""
    seen = {s.get("restart_count") or 0 for s in segments if s.get("job_id") == job_id}
    return [(restart, run) for restart, run in enumerate(runs) if restart not in seen and started(run)]


def missing_runs(segments: list[dict], record: dict) -> list[dict]:
    """Segments for the earlier runs of this record's job that wrote none (killed before they could)."""
    job_id, current = record.get("job_id"), record.get("restart_count") or 0
    if not job_id or not current:
        return []
    return [
        killed_segment(run, job_id, restart, record["gpus"], record["gpu_model"])
        for restart, run in unrecorded(segments, job_id, accounted_runs(job_id)[:current])
    ]


def totals(segments: list[dict]) -> dict:
    """provenance.json's sums over its segments."""
    return {
        "wall_s": round(sum(s["wall_s"] for s in segments), 3),
        "gpu_hours": round(sum(s["wall_s"] * s["gpus"] for s in segments) / 3600.0, 6),
        "requeues": max([s.get("restart_count") or 0 for s in segments], default=0),
    }


def add_ended_job(cell: Path, job_id: str) -> int:
    """Add to ``cell/provenance.json`` every run of an ENDED job that wrote no segment, with the GPUs
    SLURM allocated it; the number added.  Call it only when no job of the cell runs (the file has
    one writer at a time).  The cell's next segment keeps them (it extends what it finds)."""
    path = Path(cell) / FILE
    doc = json.loads(path.read_text()) if path.exists() else {}
    segments = doc.get("segments", [])
    added = [
        killed_segment(run, job_id, restart, run["gpus"], None)
        for restart, run in unrecorded(segments, job_id, accounted_runs(job_id))
    ]
    if added:
        segments = [*segments, *added]
        write_json(path, {**doc, "segments": segments, **totals(segments)})
    return len(added)


def holder(cell: Path, runs: str, job_id: str) -> Path | None:
    """The folder whose ``provenance.json`` holds a segment of ``job_id``: the cell itself (a run continued to a
    longer schedule keeps its earlier jobs there), else a run kept under ``cell/<runs>/`` (an edit set it aside with
    its provenance); None when none does."""
    for path in [Path(cell) / FILE, *sorted((Path(cell) / runs).glob(f"*/{FILE}"))]:
        try:
            segments = json.loads(path.read_text()).get("segments", [])
        except (OSError, ValueError, AttributeError):
            continue  # a damaged record names no job: the job is looked for elsewhere
        if any(isinstance(s, dict) and s.get("job_id") == job_id for s in segments):
            return path.parent
    return None


def note_ignored_stops(cell: Path, job_id: str, count: int) -> bool:
    """Record in the job's segments of ``cell/provenance.json`` that it got ``count`` stop signals (USR2) after its
    outputs were complete, which it ignored and ended COMPLETED; False when the file has no segment of that job.
    Call it once the job ended (the file has one writer)."""
    path = Path(cell) / FILE
    doc = json.loads(path.read_text()) if path.exists() else {}
    segments = doc.get("segments", [])
    if not count or not any(s.get("job_id") == job_id for s in segments):
        return False
    ended = [s.get("job_id") == job_id and s.get("outcome") == "completed" for s in segments]
    segments = [
        {**s, "stop_signals_after_outputs": count} if last else s for s, last in zip(segments, ended, strict=True)
    ]
    write_json(path, {**doc, "segments": segments})
    return True
