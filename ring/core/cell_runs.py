"""What an edited cell config does to the cell's finished files: continue, start over, or nothing.

    ring rerun CELL --stage pretrain      # by hand (ring.plan.rerun), after the workflow wrote CELL/config.yaml anew

A cell folder records in ``run.json`` the config (hash and values) its checkpoint and outputs were
made with; each stage writes it when it starts.  When the cell's config changes, :func:`prepare`
decides, torch-free (the workflow runs it on the login node, before any job is submitted, and every
stage runs it again when it starts, for configs written by hand):

* **nothing**: the config hash is unchanged (only runtime knobs such as ``num_workers`` moved);
* **continue**: a pretraining cell whose only change is a longer ``epochs``, when it has a checkpoint to continue
  (a finished cell under ``keep_checkpoint: none`` has none: it starts over).  Training before the
  last epoch does not depend on ``epochs`` (the lr milestones, the Ring annealing and the k-means
  warm-up are counted in epochs of their own), so the cell continues from its checkpoint and ends
  exactly where a cell trained with the new ``epochs`` from the start ends.  The shorter run's
  exported encoders move to ``runs/<old hash>/``;
* **start over**: every other change (a shorter ``epochs`` included: a checkpoint cannot be made
  younger).  The previous run's checkpoints, log, snapshots, outputs and records move together to
  ``runs/<old hash>/`` in the cell's folder, and the cell trains from scratch;
* **restore**: a start over to a config whose run is kept under ``runs/<its hash>/`` (an edit
  undone) moves that run back instead, and the stage resumes it; a finished one without its checkpoint
  comes back as finished (its exports verified against its checksum record) and trains nothing.

An evaluation cell (linear, transfer) is one run per config *and* encoder: its
``run.json`` also records the SHA-256 fingerprint of the encoder it evaluated, and its runs are kept
under ``runs/<config hash>-<encoder sha256[:12]>/`` (:func:`run_key`).  When its pretraining cell is
retrained, the evaluation of the old encoder (metrics, log, provenance, checkpoint) moves there; when
the pretraining edit is undone, the restored encoder's evaluation comes back from there, finished,
and nothing is evaluated again.  An evaluation keeps its outputs (``metrics.json``, a transfer
cell's split manifest) under ``exported/`` with a checksum record (``export.json``) naming its
config hash and encoder, as pretraining keeps its encoders, so that outputs Snakemake deleted (a
rerun job's outputs, a job that finished while no client watched) come back torch-free on the login
node (:func:`collect`), verified by checksum (the files its stage declares, ring.core.stages.Stage.exported).
A detection cell is an evaluation of its converted backbone (``backbone.pkl``, its SHA-256 in place of the encoder's
fingerprint): its ``metrics.json`` is kept and collected the same way, and an edit of its config (a Detectron2 key
such as ``SOLVER.MAX_ITER``) or a backbone converted again keeps its run (Detectron2's checkpoints, log and outputs)
under ``runs/`` as well.

No result is ever deleted: a finished encoder or metrics file of another config is kept under
``runs/``, named by that config's hash, and the cell's own files always belong to its
``config.yaml``.  Only checkpoints go: a superseded run drops them unless the config's ``keep_superseded``
is ``all`` (:func:`drop_checkpoints`); ``python -m ring.cluster.batch prune`` removes whole superseded runs
on request (:mod:`ring.plan.disk`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from ring.core import config
from ring.core.files import (
    CHECKSUMS,
    KEPT,
    RUN_RECORD,
    FileError,
    copy_into_place,
    keep_exports,
    read_record,
    record_checksums,
    sha256_file,
    write_failure,
    write_json,
)
from ring.core.methods import method as method_spec
from ring.core.stages import STAGES

# run.json's note that the cell continues to this config hash (its checkpoint still holds the old config until the
# stage saves it): the decision is made and said once.
CONTINUING = "continuing_to"
RUNS = "runs"

# A continued pretraining cell keeps its checkpoint, log and records; only the shorter run's outputs move.
OUTPUT_FILES = ("encoder*.pt", "export.json", KEPT)
# What a superseded run drops under keep_superseded: results (the config's default): its checkpoints (the latest, the
# previous, a corrupt or stale one; Detectron2's, with the pointer naming its last) and study snapshots, 5x its encoder
# on digits and the whole memory bank on ImageNet.  Its encoders, checksum record, log, provenance, metrics and
# run.json stay: what a table or an undo of a finished run reads, and what cannot be recomputed cheaply.
CHECKPOINT_FILES = ("checkpoint*.pt", "snapshot_epoch*.pt", "model_*.pth", "last_checkpoint")
# A run kept with one of these (its stage's own checkpoint, or Detectron2's pointer to its last) resumes there.
RESUMABLE = ("checkpoint.pt", "last_checkpoint")
KEEP_SUPERSEDED = ("results", "all")


def evaluates(stage: str) -> bool:
    """Whether ``stage`` is an evaluation: its runs are kept per config and encoder, and its outputs (the declared
    ones, ring.core.stages.Stage.exported) under exported/, recorded in export.json with both."""
    return bool(STAGES[stage].encoder_flag)


def changed_keys(old: dict, new: dict) -> list[str]:
    return sorted(k for k in {*old, *new} if old.get(k) != new.get(k))


def continues(stage: str, old: dict | None, new: dict) -> bool:
    """Whether a cell trained with config values ``old`` continues, rather than restarts, under ``new``:
    a pretraining cell whose only change is a longer ``epochs`` (see the module docstring)."""
    if stage != "pretrain" or not old:
        return False
    return changed_keys(old, new) == ["epochs"] and int(new["epochs"]) > int(old["epochs"])


def read_run_record(cell: Path) -> dict | None:
    """``run.json`` of a cell, or None when there is none (a cell from before it was kept) or it is unreadable."""
    doc = read_record(Path(cell) / RUN_RECORD)
    return doc if isinstance(doc.get("config_hash"), str) else None


def write_record(cell: Path, cfg, encoder: str | None = None) -> None:
    """Record that the cell's checkpoint and outputs are (being) made with ``cfg`` (and, for an evaluation,
    from the encoder of fingerprint ``encoder``)."""
    extra = {"encoder_sha256": encoder} if encoder else {}
    write_json(
        Path(cell) / RUN_RECORD, {"config_hash": config.config_hash(cfg), "config": config.hashed_values(cfg), **extra}
    )


def run_key(config_hash: str, encoder: str | None = None) -> str:
    """The name of a run under ``runs/``: its config hash, and for an evaluation the encoder it evaluated (the first
    12 hex digits of its fingerprint: one cell never sees enough encoders for them to collide)."""
    return f"{config_hash}-{encoder[:12]}" if encoder else config_hash


def encoder_fingerprint(hashes: dict[str, str]) -> str:
    """One SHA-256 for an encoder's files (file name -> SHA-256, ``encoder.pt`` first): the file's own for one
    trunk, the hash of the joined hashes for CMC's two (what an evaluation's checkpoint and run.json record)."""
    values = list(hashes.values())
    return values[0] if len(values) == 1 else hashlib.sha256(" ".join(values).encode()).hexdigest()


def recorded_encoder(encoder_path: str | Path, method: str) -> str | None:
    """Torch-free, on the login node: the fingerprint of the encoder at ``encoder_path`` (with CMC's ab trunk
    beside it; or of a converted backbone) as its checksum record states it, or None when a file or the record
    is missing, or a file's bytes are not those the record holds (damaged since: no evaluation of it is complete,
    and the stage then refuses it in its own sentence)."""
    encoder_path = Path(encoder_path)
    files = read_record(encoder_path.with_name(CHECKSUMS)).get("files")
    trunks = method_spec(method).encoder_files
    # CMC's ab trunk beside its encoder.pt; a converted backbone (detection) is one file.
    names = [encoder_path.name, *trunks[1:]] if encoder_path.name == trunks[0] else [encoder_path.name]
    if not isinstance(files, dict) or not all(isinstance(files.get(n), str) for n in names):
        return None
    if not all((encoder_path.with_name(n)).is_file() for n in names):
        return None
    if any(sha256_file(encoder_path.with_name(n)) != files[n] for n in names):
        return None
    return encoder_fingerprint({n: files[n] for n in names})


def _present(cell: Path, patterns) -> list[Path]:
    return sorted({p for pattern in patterns for p in cell.glob(pattern)})


def set_aside(cell: Path, old_hash: str, patterns) -> Path | None:
    """Move the files of ``patterns`` to ``cell/runs/<old_hash>/`` (renames: same file system, nothing copied).

    Returns the folder, or None when there was nothing to move.  A file already kept there under the
    same name (the same run set aside twice) is replaced: both are that run's.
    """
    cell = Path(cell)
    files = _present(cell, patterns)
    if not files:
        return None
    aside = cell / RUNS / old_hash
    try:
        aside.mkdir(parents=True, exist_ok=True)
        for path in files:
            target = aside / path.name
            if target.is_dir() and path.is_dir():
                shutil.rmtree(target)  # a kept folder of the same run (its step curves) gives way to the newer one
            os.replace(path, target)
    except OSError as err:
        raise FileError(
            f"Cannot keep the previous run of {cell} aside in {aside} ({err.strerror or err}); "
            "free the folder or fix its permissions and rerun."
        ) from None
    return aside


def drop_checkpoints(aside: Path | None, cfg, log=print) -> int:
    """Under ``keep_superseded: results``, delete the checkpoints and snapshots (:data:`CHECKPOINT_FILES`) of the
    superseded run kept in ``aside`` (as :func:`set_aside` returned it); the bytes freed.  ``all`` keeps them."""
    if aside is None or getattr(cfg, "keep_superseded", "results") == "all":
        return 0
    files = _present(Path(aside), CHECKPOINT_FILES)
    freed = sum(path.stat().st_size for path in files)
    try:
        for path in files:
            path.unlink()
    except OSError as err:
        raise FileError(
            f"Cannot drop the checkpoints of the superseded run in {aside} ({err.strerror or err}); fix "
            "the folder's permissions, or set keep_superseded: all to keep them, and rerun."
        ) from None
    if files:
        log(
            f"ring: {Path(aside).parent.parent}: dropped the superseded run's {len(files)} checkpoint file(s) "
            f"({freed / 1e6:.1f} MB) from {aside}, keeping its encoder, log and records (keep_superseded: all keeps "
            "them)"
        )
    return freed


def checksums(folder: str | Path) -> dict | None:
    """``folder``'s checksum record when it lists files, else None: a missing, corrupt or empty record names no
    verifiable export, so its run is not finished and its stage writes the record again."""
    record = read_record(Path(folder) / CHECKSUMS)
    files = record.get("files")
    return record if isinstance(files, dict) and files else None


def finished_exports(folder: Path, config_hash: str) -> bool:
    """Whether ``folder`` holds a finished pretraining run's exports made with ``config_hash``: its checksum record
    names that config and every file it lists verifies, in place or as the copy kept under ``exported/``."""
    record = checksums(folder)
    if record is None or record.get("config_hash") != config_hash:
        return False

    def places(name):
        return (Path(folder) / name, Path(folder) / KEPT / name)

    return all(
        any(path.is_file() and sha256_file(path) == sha for path in places(name))
        for name, sha in record["files"].items()
    )


def prepare(cell: str | Path, stage: str, cfg, log=print, encoder: str | None = None) -> str:
    """Bring ``cell`` in line with ``cfg`` before its stage runs: "nothing", "continue", "start over" or "restore".

    The previous config is the one the cell's ``run.json`` records (a cell without one is left to its
    stage, which reads the config hash of its checkpoint, unless it holds no run and one of this config is kept:
    :func:`restore_into_empty`).  ``log`` gets the one line saying what
    happened and where the previous run's files are.  The record itself is rewritten by the stage
    when it starts training (a continued checkpoint still holds the old config until its next save).
    ``encoder``: an evaluation's, the fingerprint of the encoder it is to evaluate (a retrained encoder is an
    edit of the evaluation too: its run is set aside, and a kept run of that very encoder restored); None: the
    encoder the cell's record names.
    """
    cell = Path(cell)
    record = read_run_record(cell)
    if record is None:
        return restore_into_empty(cell, stage, cfg, encoder, log)
    old_hash, old_values = record["config_hash"], record.get("config")
    # No encoder given (the config rule, on the login node, edits only the evaluation's config): the same one.
    encoder = encoder or record.get("encoder_sha256")
    old_key, new_key = run_key(old_hash, record.get("encoder_sha256")), run_key(config.config_hash(cfg), encoder)
    if old_key == new_key:
        return "nothing"
    if record.get(CONTINUING) == config.config_hash(cfg):
        return "continue"  # decided and said already (by the config rule): the job's log does not say it twice
    new_values = config.hashed_values(cfg)
    what = edit(old_values, new_values, same_config=old_hash == config.config_hash(cfg))
    longer = continues(stage, old_values, new_values)
    if longer and not any((cell / name).is_file() for name in ("checkpoint.pt", "checkpoint.prev.pt")):
        # A finished run whose checkpoint went (keep_checkpoint: none, or dropped by hand): nothing to continue.
        what += ", and no checkpoint is left to continue (keep_checkpoint: none)"
        longer = False
    # A redo: the longer run, finished, is kept under runs/ (an undo set it aside); it comes back, nothing trains.
    longer = longer and not restorable(cell / RUNS / new_key, new_key, evaluates(stage))
    if longer:
        return continue_longer(cell, record, cfg, what, log)
    aside = set_aside(cell, old_key, STAGES[stage].run_files)
    if aside is not None:
        restore_exports(aside, None, last=STAGES[stage].output)  # what Snakemake deleted
    kept = f"the previous run is kept in {aside}" if aside is not None else "nothing of the previous run was left"
    if restore(cell, new_key, finished_counts=evaluates(stage)):
        how = (
            "it resumes there"
            if resumable(cell)
            else "finished: its encoder verifies against its checksum record, so nothing retrains"
            if not evaluates(stage)
            else "finished: its outputs verify against their checksum record, so nothing runs again"
        )
        log(
            f"ring: {cell}: {what}: {kept}, and the run of this config kept in {cell / RUNS / new_key} is "
            f"back in place ({how})"
        )
        drop_checkpoints(aside, cfg, log)
        return "restore"
    log(f"ring: {cell}: {what}: {kept} and this cell starts over")
    drop_checkpoints(aside, cfg, log)
    return "start over"


def restore_into_empty(cell: Path, stage: str, cfg, encoder: str | None, log) -> str:
    """A cell with no run in place (an edit set its run aside and nothing ran since, e.g. an evaluation whose encoder
    was retrained and then restored before it ran again): a kept run of this config (and encoder) comes back as
    :func:`prepare` would bring it, "restore"; else "nothing", and the cell is left to its stage."""
    if (evaluates(stage) and not encoder) or _present(cell, STAGES[stage].run_files):
        return "nothing"
    key = run_key(config.config_hash(cfg), encoder)
    if not restore(cell, key, finished_counts=evaluates(stage)):
        return "nothing"
    log(f"ring: {cell}: the run of this config kept in {cell / RUNS / key} is back in place")
    return "restore"


def edit(old_values: dict | None, new_values: dict, same_config: bool) -> str:
    """What changed, as the cell's line says it: the config's keys, or (``same_config``) the encoder evaluated."""
    if same_config:
        return "the encoder it evaluates changed (its pretraining cell was retrained or restored)"
    keys = changed_keys(old_values, new_values) if old_values else []
    return f"its config changed ({', '.join(keys)})" if keys else "its config changed"


def continue_longer(cell: Path, record: dict, cfg, what: str, log) -> str:
    """A longer schedule of the same run: its checkpoint continues, the shorter run's encoder set aside with the
    record of its config (an undo restores it as finished); the cell's record notes the run it continues into."""
    old_hash, old_values = record["config_hash"], record.get("config")
    aside = set_aside(cell, old_hash, OUTPUT_FILES)
    if aside is not None:  # the shorter run's record beside its encoder: an undo restores it as finished
        write_json(aside / RUN_RECORD, {"config_hash": old_hash, "config": old_values})
    kept = f"; the {old_values['epochs']}-epoch encoder is kept in {aside}" if aside else ""
    log(f"ring: {cell}: {what}: continuing from its checkpoint to epochs={config.hashed_values(cfg)['epochs']}{kept}")
    drop_checkpoints(aside, cfg, log)
    write_json(cell / RUN_RECORD, {**record, CONTINUING: config.config_hash(cfg)})
    return "continue"


def restorable(kept: Path, key: str, finished_counts: bool = False) -> bool:
    """Whether the run kept in ``kept`` (``runs/<key>/``) can come back in place of training (:func:`restore`)."""
    finished = (read_run_record(kept) or {}).get("config_hash") == key and finished_exports(kept, key)
    return resumable(kept) or finished or bool(finished_counts and verified_copies(kept))


def resumable(folder: Path) -> bool:
    """Whether ``folder`` holds a checkpoint its stage resumes from (:data:`RESUMABLE`)."""
    return any((Path(folder) / name).is_file() for name in RESUMABLE)


def restore(cell: Path, key: str, finished_counts: bool = False) -> bool:
    """Move a run kept under ``runs/<key>/`` back into the cell (an edit undone); False if there is none with a
    checkpoint to resume or finished: a pretraining run whose run.json and verified exports are this config's
    (keep_superseded dropped its checkpoints, and the stage then trains nothing), or, with ``finished_counts``, an
    evaluation whose kept outputs verify.  The encoder a longer schedule left behind carries the shorter run's
    run.json, so an undone ``epochs`` edit restores it; an unfinished run without its checkpoint is no run to come
    back to: the cell starts over."""
    kept = cell / RUNS / key
    if not restorable(kept, key, finished_counts):
        return False
    try:
        for path in sorted(kept.iterdir()):
            os.replace(path, cell / path.name)
        kept.rmdir()
        # A file altered in place since it was set aside comes back as its verified kept copy (a real copy: the
        # alteration did not reach it).
        for name, sha in verified_copies(cell).items():
            if not (cell / name).is_file() or sha256_file(cell / name) != sha:
                copy_into_place(cell / KEPT / name, cell / name)
    except OSError as err:
        raise FileError(
            f"Cannot bring the run kept in {kept} back into {cell} ({err.strerror or err}); "
            "free the folder or fix its permissions and rerun."
        ) from None
    return True


def verified_copies(cell: Path, record: dict | None = None) -> dict[str, str]:
    """The files (name -> SHA-256) of ``cell``'s checksum record (``record``: as read already by the caller) when
    every copy kept under ``exported/`` verifies, else {}."""
    record = checksums(cell) if record is None else record
    if record is None:
        return {}
    files, kept = record["files"], Path(cell) / KEPT
    if not all((kept / name).is_file() and sha256_file(kept / name) == sha for name, sha in files.items()):
        return {}
    return files


def restore_exports(
    cell: str | Path, cfg, encoder: str | None = None, last: str = "encoder.pt", record: dict | None = None
) -> list[str]:
    """Put back the exported files Snakemake deleted (a finished job collected after its client was gone), from
    the copies kept under ``exported/``, when the checksum record is this config's (and, for an evaluation, this
    encoder's) and every copy verifies; the names restored, or an empty list (then the stage must run to export
    them again).  ``cfg`` None: whatever the record's config (a run set aside keeps its own outputs whole).
    ``record``: the checksum record as read already by the caller."""
    cell = Path(cell)
    record = checksums(cell) if record is None else record
    if record is None:
        return []
    if cfg is not None and (
        record.get("config_hash") != config.config_hash(cfg) or record.get("encoder_sha256") != encoder
    ):
        return []
    files = verified_copies(cell, record)
    missing = [name for name in files if not (cell / name).exists()]
    try:
        for name in sorted(missing, key=lambda n: n == last):  # the stage's last output last, as it writes them
            copy_into_place(cell / KEPT / name, cell / name)
    except OSError as err:
        raise FileError(write_failure(cell / last, err)) from None
    return missing


def keep_outputs(cell: str | Path, stage: str, cfg, encoder: str) -> dict:
    """An evaluation's finished outputs kept under ``exported/`` (copies) and recorded in ``export.json`` with
    its config hash and encoder: what :func:`collect` and :func:`restore` verify (see the module docstring)."""
    names = STAGES[stage].exported
    keep_exports(cell, names)
    return record_checksums(cell, names, config_hash=config.config_hash(cfg), encoder_sha256=encoder)


def finished(cell: str | Path, stage: str, cfg, encoder: str) -> bool:
    """Whether the evaluation ``cell`` holds is complete for ``cfg`` and ``encoder``: its outputs are there (put
    back from their kept copies when Snakemake deleted them) and every copy verifies against the record."""
    cell = Path(cell)
    record = checksums(cell)
    if record is None:
        return False
    restore_exports(cell, cfg, encoder, last=STAGES[stage].exported[-1], record=record)
    files = verified_copies(cell, record) if record.get("encoder_sha256") == encoder else {}
    return (
        record.get("config_hash") == config.config_hash(cfg)
        and set(files) == set(STAGES[stage].exported)
        and all((cell / name).is_file() and sha256_file(cell / name) == sha for name, sha in files.items())
    )


def collect(cell: str | Path, stage: str, cfg, encoder_path: str | Path, log=print) -> bool:
    """Torch-free, on the login node, before an evaluation's job is run or submitted: bring ``cell`` in line with
    its config and the encoder it is to evaluate (:func:`prepare`: a run of the old encoder is kept, a kept run of
    this one restored), then whether its outputs are complete for them (:func:`finished`): then nothing runs."""
    encoder = recorded_encoder(encoder_path, getattr(cfg, "method", ""))
    if encoder is None:
        return False  # no verifiable encoder: the stage says so in its own sentence
    prepare(cell, stage, cfg, log=log, encoder=encoder)
    return finished(cell, stage, cfg, encoder)
