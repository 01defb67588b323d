"""``ring prune``: remove a grid's superseded runs and unnamed cell folders, only what is proven unwanted.

    python -m ring.cluster.batch prune --grid paper [--dry-run] [--yes]

What may go and its sizes are ring.plan.disk's; here, the command's refusals: nothing is removed while anything
holds the grid's folder (:func:`holder`: a Snakemake run, a local launcher, a live or just submitted SLURM job),
without ``--yes`` or a y at a terminal, or where no grid file is recorded as the folder's maker.  ``ring status``
ends with :func:`disk_line`.
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

from ring.cluster import progress
from ring.cluster.slurm import ALIVE, Resources, job_states, read_record, stage_resources
from ring.plan import disk, ownership
from ring.plan.grid import Grid


def holder(grid: Grid, results: Path, config: dict) -> str | None:
    """What holds ``results/<grid>`` now, so that nothing there may be removed (one sentence), or None: a Snakemake
    run's lock on a file there, a live local launcher in one of its cell folders, or a SLURM job recorded in one
    that is alive or too recently submitted for accounting to know (one sacct call; SLURM unasked is no proof)."""
    folder = results / grid.name
    if lock := disk.snakemake_lock(results, grid.name):
        return (
            f"A Snakemake run holds {folder} (its lock {lock}); prune once it has ended (a lock a killed run left "
            "behind goes with `snakemake --unlock` and the run's own target and config)."
        )
    cells = disk.cell_folders(grid, results)
    records = {cell: record for cell in cells if (record := read_record(cell)) is not None}
    for cell in cells:
        state, detail = progress.local_state(cell) if cell not in records else ("", "")
        if state == "running":
            return f"A local launcher runs {cell} ({detail}); prune once it has ended."
    if not records:
        return None
    try:
        states = job_states(list(dict.fromkeys(r["job_id"] for r in records.values())))
    except (RuntimeError, OSError) as err:
        return (
            f"SLURM cannot say whether the jobs recorded in {folder} still run ({err}); prune when sacct answers, "
            "as a job may still write there."
        )
    grace_s = Resources.from_dict(stage_resources(config.get("slurm", {}), "pretrain")).unknown_grace_s
    for cell, record in records.items():
        state = states.get(record["job_id"])
        age = (datetime.now(timezone.utc) - datetime.fromisoformat(record["submitted"])).total_seconds()
        if state in ALIVE or (state is None and age < grace_s):
            return (
                f"SLURM job {record['job_id']} of grid {grid.name} is {(state or 'just submitted').lower()} in "
                f"{cell}; prune once it has ended (ring cancel --grid {grid.file} ends the grid's jobs)."
            )
    return None


def prune_lines(items: list[disk.Prunable], dry_run: bool) -> list[str]:
    """Each superseded run and unnamed cell folder with its size, and the total."""
    lines = [f"{disk.human(item.bytes):>10}  {disk.KINDS[item.kind][0]:38} {item.path}" for item in items]
    total = disk.human(sum(item.bytes for item in items))
    verb = "would free" if dry_run else "frees"
    lines.append(f"total: {disk.summary(items)}; {verb} {total}" + (" (--dry-run: nothing removed)" if dry_run else ""))
    return lines


def confirmed(items: list[disk.Prunable], yes: bool) -> bool:
    """--yes, or a y typed at a terminal; never a default."""
    if yes:
        return True
    if not sys.stdin.isatty():
        return False
    answer = input(f"ring: remove these {len(items)} folders ({disk.human(sum(i.bytes for i in items))})? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def prune(grid: Grid, results: Path, config: dict, dry_run: bool, yes: bool = False) -> list[str]:
    """``prune``: list the superseded runs and unnamed cell folders with their sizes and, unless ``dry_run``, remove
    exactly those, only with ``yes`` or a confirmation at a terminal, only when this grid file is recorded as the
    maker of the folder (the gate refused another's already) and nothing holds it (:func:`holder`).  Each refusal
    is one sentence (ValueError) and removes nothing; the lines already printed say what would have gone."""
    folder = results / grid.name
    held = holder(grid, results, config)
    if held and not dry_run:
        raise ValueError(held)
    items = disk.prunable(grid, results)
    lines = prune_lines(items, dry_run)
    if dry_run:
        return lines + ([f"(prune would remove nothing now: {held})"] if held else [])
    print("\n".join(lines))
    if not items:
        return ["ring: nothing to remove"]
    if ownership.recorded_owner(folder) is None:
        raise ValueError(
            f"No grid file is recorded as the maker of {folder} ({ownership.MARKER}, or a job's provenance.json), so "
            "prune cannot tell what is unwanted there; nothing removed (a run of the workflow or ring submit with "
            "this grid records it)."
        )
    if not confirmed(items, yes):
        raise ValueError(
            f"Nothing removed: prune removes the {len(items)} folders above only with --yes (or a y at a terminal)."
        )
    if not yes and ((held := holder(grid, results, config)) or disk.prunable(grid, results) != items):
        raise ValueError(held or f"What {folder} holds changed while you answered; nothing removed: run prune again.")
    disk.remove(items, folder)
    return [f"ring: removed {disk.summary(items)}; freed {disk.human(sum(item.bytes for item in items))}"]


def disk_line(grid: Grid, results: Path, config: dict, grid_arg: str) -> str | None:
    """status's line on superseded runs and unnamed cell folders, with the command that removes them; None if none."""
    items = disk.prunable(grid, results)
    if not items:
        return None
    return (
        f"disk: {disk.summary(items)}, {disk.human(sum(item.bytes for item in items))} in all; list them with "
        f"ring prune --grid {grid_arg} --dry-run, remove them with --yes instead"
    )
