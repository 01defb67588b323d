"""Batch submission, status and cancellation of a grid's cells on SLURM.

    python -m ring.cluster.batch submit --grid paper --stage pretrain     # every missing cell: ONE job array
    python -m ring.cluster.batch status --grid paper                      # done / stale / running / pending / failed
    / missing
    python -m ring.cluster.batch cancel --grid paper [--stage pretrain]   # scancel the grid's recorded jobs
    python -m ring.cluster.batch estimate --grid paper [--device H100] [--by pass] [--store none]  # GPU-hours
    python -m ring.cluster.batch prune --grid paper [--dry-run]           # remove superseded runs, unnamed cells

``submit`` returns at once with the array's id.  Each cell records its array task in
``CELL/slurm/job.json``, so ``snakemake --profile profiles/slurm all_tables`` afterwards
re-attaches to running tasks and counts finished cells as done instead of resubmitting them.
Configs come from the slurm profile's files, layered key by key: ``ring/resources/config.yaml``,
``ring/resources/cluster.yaml`` and ``profiles/slurm/site.yaml`` (``--configfile``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import jsonschema

from ring import resources
from ring.cluster import progress, prune
from ring.cluster.admission import plan_problems, preflight
from ring.cluster.cells import (
    OUTPUT,
    cell_dir,
    cell_status,
    damage,
    data_check_failure,
    detection_cells,
    detection_state,
    grid_cells,
    pretrained,
    recorded_states,
    stale_detail,
    study_cells,
    verdict,
)
from ring.cluster.detach import supersede
from ring.cluster.jobs import StageJob
from ring.cluster.launch import accounting_folder, job_config_hash
from ring.cluster.slurm import (
    ALIVE,
    ENDED,
    Resources,
    config_schema,
    make_executor,
    read_record,
    write_record,
)
from ring.cluster.slurm import stage_resources as merged_resources
from ring.cluster.workflow import last_grid
from ring.core import accounting, cell_runs
from ring.core.config import save, to_dict
from ring.core.files import read_record as read_json_record
from ring.core.yaml_reading import read_yaml
from ring.plan import estimate, eta, gate, ownership
from ring.plan.grid import Grid

# The slurm profile's config files, in its order (profiles/slurm/config.yaml): the package's defaults, then the
# site's values, relative to the folder the command runs in, as --results is (a checkout's root, where Snakemake runs).
SITE = Path("profiles") / "slurm" / "site.yaml"
DEFAULT_CONFIGS = [resources.CONFIG, resources.CLUSTER, SITE]


def default_configs() -> list[Path]:
    """:data:`DEFAULT_CONFIGS` with the site file that is here: a checkout's, else ``./site.yaml`` (a folder where
    ``ring run`` runs the workflow, which reads the same file), else none (the package's defaults, or --configfile)."""
    site = next((path for path in (SITE, Path(SITE.name)) if path.is_file()), None)
    return [path for path in DEFAULT_CONFIGS if path != SITE] + ([site] if site else [])


def merge(base: dict, over: dict) -> dict:
    """``over`` layered onto ``base`` key by key at every depth, as Snakemake layers config files."""
    merged = dict(base)
    for key, value in over.items():
        merged[key] = merge(merged.get(key) or {}, value) if isinstance(value, dict) else value
    return merged


def load_config(files: list[Path]) -> dict:
    config: dict = {}
    for path in files:
        config = merge(config, read_yaml(path, "Config file") or {})
    jsonschema.validate(config, config_schema())
    return config


def stage_resources(config: dict, stage: str) -> Resources:
    return Resources.from_dict(merged_resources(config.get("slurm", {}), stage))


def cell_job(stage: str, cell: Path, cfg, grid: Grid, dataset: str, method: str, seed: int, results: Path) -> StageJob:
    """Write the cell's config as the workflow would, and the job that runs the cell (once every check passed)."""
    cell.mkdir(parents=True, exist_ok=True)
    save(cfg, cell / "config.yaml")
    cell_runs.prepare(
        cell, stage, cfg, log=lambda line: print(line, file=sys.stderr)
    )  # as the workflow's config rule does
    argv = ["--config", str(cell / "config.yaml"), "--out", str(cell)]
    if stage == "lincls":
        argv += ["--encoder", str(cell_dir(results, grid.name, "pretrain", dataset, method, seed) / OUTPUT["pretrain"])]
    return StageJob(stage, argv)


@dataclass
class Submission:
    """A cell ``submit`` queues: its config is written only once every check passed."""

    cell: Path
    dataset: str
    method: str
    seed: int
    cfg: object
    stale: str  # why its output is stale ("": it is missing)
    ended_job: str | None  # the recorded job that ended, whose hard-killed runs are accounted before it is replaced
    ended_in: Path  # where that job is accounted: the cell, or the set-aside run that holds a segment of it


def to_submit(grid: Grid, stage: str, config: dict, results: Path, res: Resources) -> list[Submission]:
    """The grid's cells of ``stage`` that ``submit`` queues: missing, failed, gone or stale; nothing is written."""
    todo = []
    cells = grid_cells(grid, stage, results)
    states = recorded_states([(cell, stage) for cell, *_ in cells])
    for cell, dataset, method, seed in cells:
        status, _ = cell_status(cell, stage, res, states)
        # A stale cell (status's "stale": its output is another config's, or evaluated another encoder) is submitted
        # like a missing one, as all_tables reruns it: no command calls it done while a table shows it stale.
        stale = stale_detail(grid, stage, cell, dataset, method, seed, config["data_root"]) if status == "done" else ""
        if status not in ("missing", "failed", "gone") and not stale:
            continue
        if stage == "lincls" and not pretrained(grid, results, dataset, method, seed, config["data_root"]):
            print(f"ring: {cell} waits for its pretraining; not submitted", file=sys.stderr)
            continue
        record = read_record(cell)
        ended = record["job_id"] if record is not None and states.get(record["job_id"]) in ENDED else None
        # an ended job is accounted where a segment of it already is (a run an edit set aside keeps its jobs)
        ended_in = accounting_folder(cell, record, None) if ended else cell  # never None without a config hash
        build = grid.pretrain_config if stage == "pretrain" else grid.lincls_config
        todo.append(
            Submission(
                cell, dataset, method, seed, build(dataset, method, seed, config["data_root"]), stale, ended, ended_in
            )
        )
    return todo


def submit(grid: Grid, stage: str, config: dict, results: Path) -> str | None:
    """Queue the grid's missing cells of ``stage`` as one job array.  Every check (ownership, each cell's processes,
    SLURM's view of the resources, the data) runs before anything is written, so a refusal leaves results/ as it
    was and the corrected command submits every cell."""
    # Another grid file of this name made results/<name> (a grid built in code has no file: nothing to compare).
    if grid.source and (problem := ownership.conflict(grid.source, results / grid.name)):
        raise ValueError(problem)
    res = stage_resources(config, stage)
    todo = to_submit(grid, stage, config, results, res)
    if not todo:
        print(f"ring: every {stage} cell of grid {grid.name} is done or already submitted", file=sys.stderr)
        return None
    for item in todo:  # every cell against the plan's rules (its batch over the ranks, the site's largest node)
        if problems := plan_problems(stage, config.get("slurm", {}), to_dict(item.cfg)):
            raise ValueError(f"{item.cell}: {problems[0]}")
    preflight(res, getattr(todo[0].cfg, "checkpoint_interval_min", None))
    check_data(results / grid.name / "data", sorted({item.dataset for item in todo}), config["data_root"])
    if grid.source:
        ownership.claim(grid.source, results / grid.name)
    jobs = []
    for item in todo:
        if item.ended_job:
            accounting.add_ended_job(
                item.ended_in, item.ended_job
            )  # its hard-killed runs, before the record is replaced
        jobs.append(cell_job(stage, item.cell, item.cfg, grid, item.dataset, item.method, item.seed, results))
        if (
            item.stale and (item.cell / OUTPUT[stage]).exists()
        ):  # still there after ring.core.cell_runs: set aside, kept
            supersede(item.cell, stage, log=lambda line: print(line, file=sys.stderr))
    return queue(grid, stage, res, results, [(item.cell, job) for item, job in zip(todo, jobs, strict=True)])


def queue(grid: Grid, stage: str, res: Resources, results: Path, todo: list[tuple[Path, StageJob]]) -> str:
    """Submit ``todo`` (cell, job) as one job array and record each cell's task; the array's id."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    folder = results / grid.name / "slurm" / f"{stage}-{stamp}"
    executor = make_executor(folder, res, f"ring-{stage}-{grid.name}")
    with executor.batch():
        jobs = [executor.submit(job) for _, job in todo]
    for (cell, stage_job), job in zip(todo, jobs, strict=True):
        write_record(cell, job.job_id, folder, stage, tasks=res.tasks, config_hash=job_config_hash(stage_job))
    array_id = jobs[0].job_id.split("_")[0]
    print(f"ring: submitted {len(jobs)} {stage} cells of grid {grid.name} as job array {array_id} (logs in {folder})")
    return array_id


def check_data(markers: Path, datasets: list[str], data_root: str) -> None:
    """The workflow's data check of each dataset, and its marker: a missing dataset fails here in seconds, and a later
    `all_tables` finds the marker older than the array's outputs, so it collects them instead of rerunning the cells
    (a newer marker would make Snakemake retrain them)."""
    for dataset in datasets:
        marker = markers / f"{dataset}.ok"
        if marker.exists():
            continue
        # The check writes the marker (its folder too) only when it passes: a refusal leaves nothing behind.
        args = ["ring.data.verify", "check", dataset, "--data-root", str(data_root), "--touch", str(marker)]
        check = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True)
        if check.returncode != 0:
            raise ValueError(check.stderr.strip().removeprefix("ring: ") or f"the data check of {dataset} failed")


def status(grid: Grid, results: Path, config: dict) -> list[tuple]:
    """One row per stage run: Table 1's pretraining and linear evaluation, then every study cell
    (its stage column ``study``: a study cell is a pretraining run whose output is its encoder), then every Table 4
    cell (its method column ``method/task``)."""
    rows = []
    cells = {stage: grid_cells(grid, stage, results) for stage in OUTPUT}
    cells["study"] = study_cells(grid, results)
    cells["detection"] = detection_cells(grid, results)
    states = recorded_states(
        [(cell, "pretrain" if stage == "study" else stage) for stage in cells for cell, *_ in cells[stage]]
    )
    for stage, stage_cells in cells.items():
        res = stage_resources(config, stage)
        for cell, dataset, method, seed in stage_cells:
            state, detail = cell_status(cell, "pretrain" if stage == "study" else stage, res, states)
            if state == "running" and read_record(cell) is not None:  # a SLURM task: add its epoch and kNN
                detail = ", ".join(filter(None, [progress.progress(cell), detail]))
            if stage == "detection":
                state, detail = detection_state(grid, cell, method, seed, state, detail)
            elif state == "done" and (hurt := damage(cell, "pretrain" if stage == "study" else stage)):
                state, detail = "damaged", hurt
            elif state == "done" and stage != "study":
                reason = stale_detail(grid, stage, cell, dataset, method, seed, config.get("data_root", "data"))
                state, detail = ("stale", reason) if reason else verdict(cell, stage)
            if state in ("pending", "missing") and (failure := data_check_failure(results, grid, dataset)):
                state, detail = "failed", f"data check: {failure}"
            rows.append((stage, dataset, method, seed, state, detail))
    return rows


def spent_hours(cell: Path) -> float:
    """GPU-hours of the cell's recorded segments (provenance.json), 0 when it has none."""
    try:
        return float(read_json_record(cell / "provenance.json").get("gpu_hours", 0.0))
    except (OSError, ValueError, AttributeError):
        return 0.0


def outlook(grid: Grid, results: Path, config: dict, rows: list[tuple], figures) -> eta.Outlook:
    """When the grid's pretraining and linear evaluation will end (ring.plan.eta), from ``status``'s rows."""
    cells = []
    for stage, dataset, method, seed, state, _ in rows:
        if stage not in ("pretrain", "lincls"):
            continue
        cell = cell_dir(results, grid.name, stage, dataset, method, seed)
        spent, wall_left = spent_hours(cell), None
        if state == "running":
            segment, wall_left = progress.running_segment(cell)
            spent += segment
        build = grid.pretrain_config if stage == "pretrain" else grid.lincls_config
        try:
            price = estimate.predict_cell(stage, build(dataset, method, seed, config.get("data_root", "data")), figures)
        except (ValueError, AttributeError):  # no figures, or a dataset the model has no sizes for
            price = None
        gpus = stage_resources(config, stage).tasks
        finished = eta.DONE if state == "diverged" else state  # a finished verdict: nothing of it runs again
        cells.append(eta.Cell(stage, dataset, (dataset, method, seed), finished, spent, price, gpus, wall_left))
    return eta.outlook(cells)


def load_figures_or_none():
    try:
        return estimate.load_figures()
    except ValueError:
        return None


# The states every total line counts; the others (damaged, gone, SLURM's own) follow when there are any.
STATES = ("done", "stale", "running", "pending", "failed", "missing")


def store_lines(grid: Grid, data_root: str) -> list[str]:
    """One line per prepared store the grid's cells read (ring.data.store_layout.cell_store), with its state."""
    from ring.core import catalog  # here: only `ring status` reads the catalog's stores
    from ring.data import store_layout  # (a plan of the other commands needs none)

    stores = {}
    for dataset, method, seed in grid.cells():
        for cfg in (
            grid.pretrain_config(dataset, method, seed, data_root),
            grid.lincls_config(dataset, method, seed, data_root),
        ):
            spec = catalog.DATASETS.get(dataset)
            where = store_layout.cell_store(
                catalog.folder(dataset, data_root), spec.store_size if spec else 0, cfg.store, cfg.resize
            )
            if where is not None:
                stores[where] = sum(store_layout.n_shards(n) for n in spec.publisher_counts)
    return [f"store {where}: {store_layout.state(where, shards)}" for where, shards in sorted(stores.items())]


def total_line(rows: list[tuple]) -> str:
    """One line over every stage and cell; SLURM's other live states (e.g. requeued) count as they are named."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row[4]] = counts.get(row[4], 0) + 1
    parts = [f"{counts.pop(s, 0)} {s}" for s in STATES] + [f"{n} {s}" for s, n in sorted(counts.items())]
    return f"total {len(rows)} stage runs: " + ", ".join(parts)


def cancel(grid: Grid, stages: list[str], results: Path) -> list[str]:
    cells = [(cell, stage) for stage in stages for cell, *_ in grid_cells(grid, stage, results)]
    states = recorded_states(cells)  # one sacct call for the grid
    ids = list(
        dict.fromkeys(
            record["job_id"]
            for cell, _ in cells
            if (record := read_record(cell)) and states.get(record["job_id"]) in ALIVE
        )
    )
    if ids:
        subprocess.run(["scancel", *ids], check=True, timeout=60)
    return ids


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Batch submission, status, cancellation and pruning of a grid.")
    parser.add_argument("command", choices=["submit", "status", "cancel", "estimate", "prune"])
    parser.add_argument(
        "--grid",
        help="a grid's name (ring/resources/grids/NAME.yaml) or the path of a grid file; status: default the grid "
        "`ring run` last used with these results, else smoke",
    )
    parser.add_argument("--stage", choices=list(OUTPUT), help="submit: required; cancel: default all stages")
    parser.add_argument("--configfile", nargs="+", type=Path, help="default: the package's, then ./" + str(SITE))
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--grids-dir", type=Path, default=resources.GRIDS)
    parser.add_argument(
        "--device", help="estimate: figures of the device whose name contains this (default: newest GPU)"
    )
    parser.add_argument(
        "--figures",
        nargs="+",
        type=Path,
        default=[],
        metavar="DIR",
        help="estimate: more throughput figures (a plug-in's, your device's), read after the package's and plug-ins'",
    )
    parser.add_argument(
        "--by", choices=["stage", "pass"], default="stage", help="estimate: one row per stage and dataset, or per pass"
    )
    parser.add_argument(
        "--store",
        choices=["none", "jpeg95", "raw"],
        help="estimate: price every image-folder cell as reading this store (none: today's code, the original JPEGs); "
        "default: each cell's own store key",
    )
    parser.add_argument("--check", action="store_true", help="estimate: finished cells' price against their spent")
    parser.add_argument("--dry-run", action="store_true", help="prune: list what would be removed, remove nothing")
    parser.add_argument("--yes", action="store_true", help="prune: remove what it lists without asking")
    return parser


def status_lines(grid: Grid, config: dict, args: argparse.Namespace) -> list[str]:
    """``status``: a line per stage run, when the grid will end, the totals, the prepared stores, the disk."""
    rows = status(grid, args.results, config)
    width = max([10, *(len(row[2]) for row in rows)])  # study cells name method/variant
    lines = [
        f"{stage:9} {dataset:10} {method:{width}} seed{seed:<3} {state:10} {detail}"
        for stage, dataset, method, seed, state, detail in rows
    ]
    lines += outlook(grid, args.results, config, rows, load_figures_or_none()).lines(grid.name)
    lines += [total_line(rows), *store_lines(grid, config.get("data_root", "data"))]
    lines += estimate.check.status_lines(grid, args.results, estimate.load_figures)
    return lines + [line] if (line := prune.disk_line(grid, args.results, config, args.grid)) else lines


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        # estimate needs the grid and the throughput figures only, not the cluster's config.
        config = load_config(args.configfile or default_configs()) if args.command != "estimate" else {}
        if not args.grid and args.command != "status":
            raise ValueError(f"{args.command} needs --grid: a grid's name (paper, smoke) or a grid file.")
        # the workflow's checks, ownership included
        grid = gate.open_grid(args.grid or last_grid(args.results), args.grids_dir, args.results)
        if args.command == "estimate" and args.check:
            print(
                "\n".join(estimate.check.command(grid, args.results, estimate.load_figures, args.device, args.figures))
            )
        elif args.command == "estimate":
            print(estimate.report(grid, estimate.load_figures(args.device, extra=args.figures), args.by, args.store))
        elif args.command == "submit":
            if not args.stage:
                raise ValueError("submit needs --stage pretrain or --stage lincls.")
            submit(grid, args.stage, config, args.results)
        elif args.command == "status":
            print("\n".join(status_lines(grid, config, args)))
        elif args.command == "prune":
            print("\n".join(prune.prune(grid, args.results, config, args.dry_run, args.yes)))
        else:
            ids = cancel(grid, [args.stage] if args.stage else list(OUTPUT), args.results)
            print(f"ring: cancelled {len(ids)} jobs: {' '.join(ids)}" if ids else "ring: no live job to cancel")
    except (ValueError, RuntimeError, jsonschema.ValidationError) as err:
        print(f"ring: {getattr(err, 'message', err)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
