"""Whether a finished evaluation still describes its cell: metrics <- this encoder <- this cell's config.

A number may reach a table only if the chain that made it still holds in the results folder:

1. the evaluation cell's ``config.yaml`` (the grid's config of that cell, as the workflow last wrote
   it) has the config hash that ``metrics.json`` records;
2. the encoder files it evaluated are the pretraining cell's current ones: the SHA-256s in
   ``metrics.json`` equal those of the cell's checksum record (``export.json``, which every reader
   verifies against the files);
3. that encoder was made with the pretraining cell's current ``config.yaml``.

Each broken link is one sentence (:func:`stale_reason`) that names the cell and the command that
reruns it; :mod:`ring.tables` shows such a cell as stale, never as a number, and ``ring.batch
status`` lists it as stale.  Torch-free: the login-node client and the table rules read it.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ring import config as C
from ring.files import CHECKSUMS

# Stage folder -> its config class, for the cells whose lineage is checked (results/<grid>/<stage>/...).
EVALUATIONS = {"lincls": C.LinclsConfig, "transfer": C.TransferConfig}


def _config_hash(path: Path, cls) -> str | None:
    """The config hash of a cell's config.yaml, or None when it is missing or unreadable."""
    try:
        values = yaml.safe_load(path.read_text()) or {}
        return C.config_hash(C.from_dict(cls, values))
    except (OSError, ValueError, TypeError, yaml.YAMLError):
        return None


def pretrain_cell(metrics_path: str | Path, evaluation: dict) -> Path:
    """The pretraining cell whose encoder an evaluation cell evaluates (a transfer cell's is its source's)."""
    path = Path(metrics_path)
    results, seed_dir, method_dir = Path(*path.parts[:-5]), path.parts[-2], path.parts[-3]
    source = evaluation.get("source") or evaluation.get("dataset") or path.parts[-4]
    return results / "pretrain" / source / method_dir / seed_dir


def rerun_command(target: Path) -> str:
    return f"snakemake --profile profiles/local all_tables -R {target} (profiles/slurm on a cluster)"


def stale_reason(metrics_path: str | Path, metrics: dict) -> str | None:
    """Why this evaluation no longer describes its cell (one sentence), or None when its chain holds.

    Only cells in the workflow's layout are checked (results/<grid>/{lincls,transfer}/<dataset>/<method>/
    seed<k>/ with a config.yaml beside the metrics); a metrics file elsewhere has no cell to compare with.
    """
    path = Path(metrics_path)
    cell = path.parent
    if len(path.parts) < 6 or path.parts[-5] not in EVALUATIONS or not (cell / "config.yaml").is_file():
        return None
    cls = EVALUATIONS[path.parts[-5]]
    try:
        evaluation = yaml.safe_load((cell / "config.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        evaluation = {}
    pretrain = pretrain_cell(path, evaluation if isinstance(evaluation, dict) else {})
    current = _config_hash(cell / "config.yaml", cls)
    if metrics.get("config_hash") is None:
        return (f"{cell} was evaluated before ring-bench recorded what each number was made from; "
                f"rerun it: {rerun_command(path)}.")
    if metrics["config_hash"] != current:
        return f"{cell} was evaluated with another config than its config.yaml; rerun it: {rerun_command(path)}."
    try:
        export = json.loads((pretrain / CHECKSUMS).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        export = None
    encoder = pretrain / "encoder.pt"
    if not isinstance(export, dict) or not (pretrain / "encoder.pt").is_file():
        return (f"{cell} evaluated an encoder that {pretrain} no longer holds (retraining or failed); "
                f"rerun it: {rerun_command(encoder)}.")
    if export.get("files") != metrics.get("protocol", {}).get("encoder_files"):
        return (f"{cell} evaluated another encoder than the one {pretrain} holds now (it was retrained); "
                f"rerun it: {rerun_command(path)}.")
    if export.get("config_hash") != _config_hash(pretrain / "config.yaml", C.PretrainConfig):
        return (f"{pretrain} holds an encoder made with another config than its config.yaml, and {cell} evaluated it; "
                f"rerun them: {rerun_command(encoder)}.")
    return None
