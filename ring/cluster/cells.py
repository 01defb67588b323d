"""A grid's cells as SLURM and the workflow see them: where each lives, its recorded job's state, whether its output
is done, damaged, stale or diverged.  Read by ``ring submit`` and ``ring status`` (ring.cluster.batch); it writes
nothing."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from ring.cluster import progress
from ring.cluster.launch import recorded_job
from ring.cluster.slurm import ALIVE, Resources, job_states, read_record
from ring.cluster.watch import failure_sentence
from ring.core.cell_paths import BACKBONE, cell_folder, cell_values
from ring.core.config import config_hash
from ring.core.files import CHECKSUMS
from ring.core.files import read_record as read_json_record
from ring.core.stages import STAGES
from ring.plan import lineage
from ring.plan.grid import Grid

OUTPUT = {stage: STAGES[stage].output for stage in ("pretrain", "lincls")}  # the stages batch submits


def cell_dir(results: Path, grid: str, stage: str, dataset: str, method: str, seed: int) -> Path:
    return cell_folder(results / grid, stage, dataset=dataset, method=method, seed=seed)


def recorded_states(cells: list[tuple[Path, str]]) -> dict[str, str | None]:
    """The SLURM state of the recorded job of every (cell, stage) whose output is missing: ONE sacct
    call (and at most one squeue call) for all of them, not one per cell."""
    ids = [
        record["job_id"]
        for cell, stage in cells
        if not (cell / STAGES[stage].output).exists() and (record := read_record(cell)) is not None
    ]
    return job_states(list(dict.fromkeys(ids))) if ids else {}


def cell_status(cell: Path, stage: str, res: Resources, states: dict[str, str | None]) -> tuple[str, str]:
    """done / a live SLURM state / gone / failed / missing, and the job id or the failure's most specific sentence
    (ring.cluster.watch.failure_sentence, with the stage's resources ``res``); ``states`` holds the recorded jobs'
    states (:func:`recorded_states`)."""
    if (cell / STAGES[stage].output).exists():
        return "done", ""
    record = read_record(cell)
    if record is None:  # not on SLURM: the local launcher's marker, the log, the config
        state, detail = progress.local_state(cell)
        if state != "running" and STAGES[stage].output in (read_json_record(cell / CHECKSUMS).get("files") or {}):
            return "missing", (
                f"its {STAGES[stage].output} is gone, though {CHECKSUMS} records it: the cell had finished; the next "
                f"all_tables brings it back from its kept copy, or reruns the cell"
            )
        return state, detail
    state = states.get(record["job_id"])
    if state is None:
        age = (datetime.now(timezone.utc) - datetime.fromisoformat(record["submitted"])).total_seconds()
        if age < res.unknown_grace_s:
            return "submitted", record["job_id"]  # accounting has not recorded it yet
        return "gone", f"{record['job_id']} unknown to sacct and squeue; the next run resubmits it"
    if state in ALIVE:
        return state.lower(), record["job_id"]
    if state == "COMPLETED":  # the output is missing (checked above): the next run resubmits, resuming
        return "gone", f"{record['job_id']} COMPLETED but {STAGES[stage].output} is missing; the next run resubmits it"
    return "failed", f"{record['job_id']} {state}: {failure_sentence(recorded_job(record), cell, state, res)}"


def grid_cells(grid: Grid, stage: str, results: Path) -> list[tuple[Path, str, str, int]]:
    """(cell folder, dataset, method, seed) of every cell of the grid's stage."""
    return [(cell_dir(results, grid.name, stage, d, m, s), d, m, s) for d, m, s in grid.cells()]


def pretrained(grid: Grid, results: Path, dataset: str, method: str, seed: int, data_root: str) -> bool:
    """Whether a linear evaluation's encoder is there and its cell's (made with the grid's config of the cell)."""
    cell = cell_dir(results, grid.name, "pretrain", dataset, method, seed)
    return (cell / OUTPUT["pretrain"]).exists() and not stale_detail(
        grid, "pretrain", cell, dataset, method, seed, data_root
    )


def study_cells(grid: Grid, results: Path) -> list[tuple[Path, str, str, int]]:
    """(cell folder, dataset, method/variant, seed) of every study cell: the workflow's STUDY_CELL folders."""
    return [
        (
            cell_folder(
                results / grid.name,
                "study",
                study=name,
                dataset=study.dataset,
                method=method,
                variant=variant,
                seed=seed,
            ),
            study.dataset,
            f"{method}/{variant}",
            seed,
        )
        for name, study in grid.studies.items()
        for method, variant, seed in study.cells()
    ]


def detection_cells(grid: Grid, results: Path) -> list[tuple[Path, str, str, int]]:
    """(cell folder, source dataset, method/task, seed) of every Table 4 cell: the workflow's DETECTION_METRICS
    folders (the backbone each trains on is beside them: :func:`backbone_of`)."""
    return [
        (
            cell_folder(results / grid.name, "detection", dataset=source, method=method, task=task, seed=seed),
            source,
            f"{method}/{task}",
            seed,
        )
        for source, method, task, seed in grid.detection_cells()
    ]


def backbone_of(cell: Path) -> Path:
    """The converted backbone a Table 4 cell (.../detection/<source>/<method>/<task>/seed<k>/) trains on."""
    return cell_values(cell).related("detection", BACKBONE) / "backbone.pkl"


def detection_state(grid: Grid, cell: Path, method_task: str, seed: int, state: str, detail: str) -> tuple[str, str]:
    """A Table 4 cell's line: a finished one whose metrics.json or backbone is not what its checksum record holds is
    damaged, one made with another config than the grid's, or from a backbone or encoder its chain no longer holds,
    stale (ring.plan.lineage); an unfinished one whose backbone is damaged says so (the next run converts it again)."""
    hurt = lineage.backbone_damage(backbone_of(cell))
    if state != "done":
        return state, "; ".join(filter(None, [detail, hurt.reason if hurt else ""]))
    if found := damage(cell, "detection") or (hurt.reason if hurt else ""):
        return "damaged", found
    method, task = method_task.split("/")
    metrics = cell / STAGES["detection"].output
    made = read_json_record(metrics)
    if made.get("config_hash") != config_hash(grid.detection_config(method, task, seed, "")):
        return "stale", another_config(metrics)
    reason = lineage.stale_reason(metrics, made)
    return ("stale", reason) if reason else ("done", "")


def another_config(output: Path) -> str:
    """Why a finished cell whose ``output`` records another config hash than the grid's config of it is stale."""
    return f"made with another config than the grid's; the next all_tables reruns it ({lineage.rerun_command(output)})"


def damage(cell: Path, stage: str) -> str:
    """Why a finished cell's outputs are not what its checksum record holds (empty when they are): an encoder or a
    metrics.json edited or damaged after the cell finished (ring.plan.lineage.damaged)."""
    names = (
        list(read_json_record(cell / CHECKSUMS).get("files") or {}) if stage == "pretrain" else [STAGES[stage].output]
    )
    hurt = lineage.damaged(cell, [name for name in names if name != "exported"])
    return hurt.reason if hurt else ""


def stale_detail(grid: Grid, stage: str, cell: Path, dataset: str, method: str, seed: int, data_root: str) -> str:
    """Why a finished Table 1 cell no longer is what the grid asks for (empty when it is): its output was
    made with another config than the grid's, or evaluated an encoder that is not its cell's now, or is not what
    its checksum record holds."""
    if hurt := damage(cell, stage):
        return hurt
    build = grid.pretrain_config if stage == "pretrain" else grid.lincls_config
    wanted = config_hash(build(dataset, method, seed, data_root))
    output = cell / OUTPUT[stage]
    made = read_json_record(cell / "export.json" if stage == "pretrain" else output).get("config_hash")
    if made != wanted:
        return another_config(output)
    if stage == "lincls":
        # The encoder it evaluated may hold while the grid now asks another config of its pretraining cell (whose
        # config.yaml only the workflow rewrites): the plan forces that encoder, and with it this evaluation.
        pretrain = cell_values(cell).related("pretrain")
        wanted = config_hash(grid.pretrain_config(dataset, method, seed, data_root))
        if found := lineage.superseded(pretrain, wanted):
            return (
                f"evaluated the encoder of {pretrain}, which another config than the grid's made; the next "
                f"all_tables reruns both ({lineage.rerun_command(found.target)})"
            )
        return lineage.stale_reason(output, read_json_record(output)) or ""
    return ""


def data_check_failure(results: Path, grid: Grid, dataset: str) -> str:
    """The data check's sentence when it ran and failed for ``dataset`` (its .ok marker missing), else ''."""
    folder = results / grid.name / "data"
    log = folder / f"{dataset}.log"
    if (folder / f"{dataset}.ok").exists() or not log.is_file():
        return ""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("ring: ")]
    return lines[-1].removeprefix("ring: ") if lines else ""


def verdict(cell: Path, stage: str) -> tuple[str, str]:
    """("done", "") for a finished cell, ("diverged", its sentence) for an evaluation that finished without an
    accuracy (ring.engine.health.divergence): the tables print "diverged" for it, so status does not call it done."""
    reason = read_json_record(cell / STAGES[stage].output).get("diverged") if stage == "lincls" else None
    return ("diverged", str(reason)) if reason else ("done", "")
