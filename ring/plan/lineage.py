"""Whether a finished evaluation still describes its cell: metrics <- this encoder <- this cell's config.

A number may reach a table only if the chain that made it still holds in the results folder:

1. the evaluation cell's ``config.yaml`` (the grid's config of that cell, as the workflow last wrote
   it) has the config hash that ``metrics.json`` records;
2. the encoder files it evaluated are the pretraining cell's current ones: the SHA-256s in
   ``metrics.json`` equal those of the cell's checksum record (``export.json``, which every reader
   verifies against the files);
3. that encoder was made with the pretraining cell's current ``config.yaml``.

A Table 4 cell adds one link: the converted backbone it trained on is the one beside it now, its bytes those
its checksum record holds, and that record names the encoder it was converted from (links 2 and 3 follow).

Before the links, every file the chain reads is verified against its checksum record (:func:`damaged`): a
``metrics.json`` edited in place, or an encoder damaged after its evaluation, is stale, never a number, whatever
its kept copy under ``exported/`` says.

Each broken link is one sentence (:func:`stale_reason`) that names the cell and the command that
reruns it; :mod:`ring.reports.tables` shows such a cell as stale, never as a number, and ``ring
status`` lists it as stale.  Torch-free: the login-node client and the table rules read it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import NamedTuple

from ring.core import config
from ring.core.cell_paths import BACKBONE, CellPath, cell_values
from ring.core.files import CHECKSUMS, read_record, sha256_file
from ring.core.stages import STAGES


def evaluated_config(folder: str) -> type | None:
    """The config class of the stage whose folder this is (results/<grid>/<stage>/...) when it evaluates a pretraining
    cell's encoder itself (ring.core.stages.Stage.evaluates_encoder), else None.  A detection cell evaluates the
    encoder converted to a backbone, a folder deeper (:func:`detection_stale`)."""
    declared = STAGES.get(folder)
    return declared.config if declared is not None and declared.evaluates_encoder else None


def _config(path: Path, cls):
    """A cell's config.yaml, read as its stage reads it, or None when it is missing or unreadable."""
    try:
        return config.load(cls, path)
    except (OSError, ValueError, TypeError):
        return None


def _config_hash(path: Path, cls) -> str | None:
    cfg = _config(path, cls)
    return None if cfg is None else config.config_hash(cfg)


def _evaluation(metrics_path: str | Path) -> CellPath | None:
    """The cell of an evaluation's output file (a stage that evaluates the pretraining cell's encoder itself, or
    detection), or None for a file elsewhere: no cell to compare with."""
    found = cell_values(metrics_path)
    if found is None or not found.file:
        return None
    return found if evaluated_config(found.stage) is not None or found.stage == "detection" else None


def pretrain_cell(metrics_path: str | Path, evaluation) -> Path:
    """The pretraining cell whose encoder an evaluation cell (its config, or None) evaluates: a transfer
    cell's is its source's."""
    found = cell_values(metrics_path)
    if found is None:
        raise ValueError(f"{metrics_path} is no file of an evaluation cell (results/<grid>/<stage>/.../seed<N>/).")
    source = getattr(evaluation, "source", None) or getattr(evaluation, "dataset", None) or found.dataset
    return found.related("pretrain", dataset=source)


def rerun_command(target: Path) -> str:
    return f"snakemake --profile profiles/local all_tables -R {target} (profiles/slurm on a cluster)"


class Stale(NamedTuple):
    """Why a finished evaluation is stale (one sentence), and the file whose rerun mends it: the file its
    sentence's command names, which the workflow's all_tables forces (common.smk, STALE) and batch submits."""

    reason: str
    target: Path


@functools.lru_cache(maxsize=4096)
def _sha(path: str, stat: tuple) -> str:
    return sha256_file(path)


def file_sha(path: Path) -> str | None:
    """A file's SHA-256, hashed once per process for each (inode, size, mtime): a plan asks for an encoder once for
    each evaluation of it, and a 45 MB encoder takes a tenth of a second."""
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return _sha(str(path), (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))


def damaged(cell: Path, names, target: Path | None = None) -> Stale | None:
    """The first of ``names`` in ``cell`` whose bytes are not those its checksum record (``export.json``) holds, or
    that the record lacks: a number or an encoder edited or damaged after its cell finished, never to reach a table
    as it is.  A file that is gone is not damaged (the stage puts it back from its kept copy, or reruns), nor one of
    a cell with no record at all (made before evaluations recorded their outputs; its links are checked below)."""
    record = read_record(Path(cell) / CHECKSUMS)
    files = record.get("files") if isinstance(record.get("files"), dict) else {}
    for name in names if record else ():
        path = Path(cell) / name
        if name not in files:
            return Stale(
                f"{path} has no SHA-256 in its checksum record {Path(cell) / CHECKSUMS}, so it cannot be verified; "
                f"rerun its cell: {rerun_command(path)}.",
                target or path,
            )
        if path.is_file() and file_sha(path) != files[name]:
            return Stale(
                f"{path} differs from the SHA-256 its checksum record {Path(cell) / CHECKSUMS} holds (it was changed "
                f"or damaged after its cell finished); rerun its cell: {rerun_command(path)}.",
                target or path,
            )
    return None


def _encoder_reason(cell: Path, pretrain: Path, evaluated: dict | None, target: Path) -> Stale | None:
    """Links 2 and 3: ``evaluated`` (file -> SHA-256) is the pretraining cell's current encoder, its files as its
    checksum record holds them, made with its config."""
    export = read_record(pretrain / CHECKSUMS)
    encoder = pretrain / "encoder.pt"
    if not export or not encoder.is_file():
        return Stale(
            f"{cell} evaluated an encoder that {pretrain} no longer holds (retraining or failed); "
            f"rerun it: {rerun_command(encoder)}.",
            encoder,
        )
    if hurt := damaged(pretrain, list(evaluated or {"encoder.pt": None}), encoder):
        return hurt
    files = export.get("files") if isinstance(export.get("files"), dict) else {}
    if not evaluated or any(files.get(name) != sha for name, sha in evaluated.items()):
        return Stale(
            f"{cell} evaluated another encoder than the one {pretrain} holds now (it was retrained); "
            f"rerun it: {rerun_command(target)}.",
            target,
        )
    if export.get("config_hash") != _config_hash(pretrain / "config.yaml", config.PretrainConfig):
        return Stale(
            f"{pretrain} holds an encoder made with another config than its config.yaml, and {cell} "
            f"evaluated it; rerun them: {rerun_command(encoder)}.",
            encoder,
        )
    return None


def superseded(pretrain: Path, wanted: str) -> Stale | None:
    """A pretraining cell whose encoder another config made than ``wanted`` (the hash of the grid's config of the
    cell): the encoder of an earlier config, or one that a job of it wrote after the cell was edited."""
    encoder = Path(pretrain) / "encoder.pt"
    made = read_record(Path(pretrain) / CHECKSUMS).get("config_hash")
    if not encoder.is_file() or made in (None, wanted):
        return None
    return Stale(
        f"{pretrain} holds an encoder made with another config than the grid's; the next all_tables reruns "
        f"it ({rerun_command(encoder)}).",
        encoder,
    )


def backbone_damage(backbone: Path) -> Stale | None:
    """A converted backbone (``backbone.pkl``) whose bytes are not those its checksum record holds, or without a
    record (its conversion writes one: the detection stage refuses a backbone it cannot verify); None for one that
    verifies or is gone (the conversion rule writes it again)."""
    backbone = Path(backbone)
    if backbone.is_file() and not read_record(backbone.with_name(CHECKSUMS)):
        return Stale(
            f"{backbone} has no checksum record ({CHECKSUMS} beside it), so it cannot be verified; convert it "
            f"again: {rerun_command(backbone)}.",
            backbone,
        )
    return damaged(backbone.parent, [backbone.name], backbone)


def detection_stale(metrics_path: Path, metrics: dict) -> Stale | None:
    """The chain of a Table 4 cell (results/<grid>/detection/<source>/<method>/<task>/seed<k>/): its config,
    the converted backbone it trained on (beside: .../<source>/<method>/seed<k>/backbone.pkl), the encoder
    that backbone was converted from, that encoder's config."""
    path = Path(metrics_path)
    cell = path.parent
    found = cell_values(path)
    if found is None or found.stage != "detection":
        raise ValueError(f"{path} is no file of a detection cell (results/<grid>/detection/.../seed<N>/).")
    if metrics.get("config_hash") is None:
        return Stale(
            f"{cell} was evaluated before ring-bench recorded what each number was made from; "
            f"rerun it: {rerun_command(path)}.",
            path,
        )
    if metrics["config_hash"] != _config_hash(cell / "config.yaml", config.DetectionConfig):
        return Stale(
            f"{cell} was trained with another config than its config.yaml; rerun it: {rerun_command(path)}.", path
        )
    backbone = found.related("detection", BACKBONE) / "backbone.pkl"
    if hurt := backbone_damage(backbone):
        return hurt
    record = read_record(backbone.parent / CHECKSUMS)
    if not backbone.is_file() or record.get("files", {}).get("backbone.pkl") != metrics.get("backbone_sha256"):
        return Stale(
            f"{cell} trained on another backbone than {backbone} (it was converted again, or is gone); "
            f"rerun it: {rerun_command(path)}.",
            path,
        )
    return _encoder_reason(cell, found.related("pretrain"), record.get("encoder_files"), backbone)


def stale_reason(metrics_path: str | Path, metrics: dict) -> str | None:
    """Why this evaluation no longer describes its cell (one sentence), or None when its chain holds."""
    found = stale(metrics_path, metrics)
    return None if found is None else found.reason


def stale(metrics_path: str | Path, metrics: dict) -> Stale | None:
    """:func:`stale_reason`'s sentence and the file to rerun, or None when the evaluation's chain holds.

    Only cells in the workflow's layout are checked (results/<grid>/{lincls,transfer}/<dataset>/<method>/
    seed<k>/ with a config.yaml beside the metrics); a metrics file elsewhere has no cell to compare with.
    """
    path = Path(metrics_path)
    cell = path.parent
    found = _evaluation(path)
    if found is None or not (cell / "config.yaml").is_file():
        return None
    if hurt := damaged(cell, [path.name]):  # the number itself first: nothing else it says can be trusted
        return hurt
    if found.stage == "detection":
        return detection_stale(path, metrics)
    evaluation = _config(cell / "config.yaml", evaluated_config(found.stage))
    pretrain = pretrain_cell(path, evaluation)
    if metrics.get("config_hash") is None:
        return Stale(
            f"{cell} was evaluated before ring-bench recorded what each number was made from; "
            f"rerun it: {rerun_command(path)}.",
            path,
        )
    if evaluation is None or metrics["config_hash"] != config.config_hash(evaluation):
        return Stale(
            f"{cell} was evaluated with another config than its config.yaml; rerun it: {rerun_command(path)}.", path
        )
    return _encoder_reason(cell, pretrain, metrics.get("protocol", {}).get("encoder_files"), path)


def stale_target(metrics_path: str | Path) -> Path | None:
    """The file to rerun for a finished evaluation at ``metrics_path`` (itself, or the encoder it evaluated) when
    the tables would show it stale or it differs from its checksum record, or None: no metrics file yet, an
    unreadable one without a record, or a chain that holds."""
    path = Path(metrics_path)
    if not path.is_file():
        return None
    # Damaged (changed, truncated, corrupt) against its checksum record: rerun it, whatever it now holds.
    if (
        _evaluation(path) is not None
        and (path.parent / "config.yaml").is_file()
        and (hurt := damaged(path.parent, [path.name]))
    ):
        return hurt.target
    metrics = read_record(path)
    found = stale(path, metrics) if metrics else None
    return found.target if found else None
