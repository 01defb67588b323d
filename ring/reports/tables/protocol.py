"""Whether a cell ran the paper's protocol: its config (and its encoder's) against the paper grid's same cell.

A cell that differs in a key the paper fixes shows no difference to the paper's number, a footnote naming the keys
instead (:func:`ring.reports.tables.layout.paper_text`).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ring import resources
from ring.core.cell_paths import CellPath, cell_values
from ring.core.config import to_dict
from ring.core.yaml_reading import read_yaml

# The paper's protocol: its grid's config of the same cell, compared in the keys the paper fixes
# (Sec. 5 and the appendix); runtime knobs and our own additions (monitoring, k-means sizes) are not.
PAPER_GRID = resources.GRIDS / "paper.yaml"
PAPER_KEYS = {
    "pretrain": (
        "epochs",
        "batch_size",
        "lr",
        "momentum",
        "weight_decay",
        "lr_milestones",
        "lr_gamma",
        "resize",
        "crop",
        "crop_scale_min",
        "head",
        "out_dim",
        "temperature",
        "bank_negatives",
        "bank_momentum",
        "queue_size",
        "key_momentum",
        "ring_w_l",
        "ring_anneal",
        "ring_anneal_epochs",
        "ring_inner",
        "ring_w_u",
    ),
    "lincls": ("epochs", "batch_size", "lr", "momentum", "weight_decay", "resize", "crop", "augmentation"),
}


@cache
def paper_grid():
    from ring.plan import grid  # torch-free

    return grid.load(PAPER_GRID)


def paper_methods() -> set[str]:
    """Every method a table of the paper grid runs: Table 1's rows, the lesions and the LA variants."""
    paper = paper_grid()
    return {*paper.methods, *(m for table in paper.tables.values() for m in table.get("methods", ()))}


def _read_yaml(path: Path) -> dict | None:
    if not path.is_file():
        return None
    return read_yaml(path, "Cell config") or {}


def protocol_differences(metrics_path: str | Path) -> list[str]:
    """``stage.key`` of every paper-fixed key in which this evaluation cell (and the pretraining cell
    whose encoder it evaluates) differs from the paper grid's cell; empty when unknown (no configs)."""
    path = Path(metrics_path)
    evaluation = _read_yaml(path.parent / "config.yaml")
    found = cell_values(path)
    if evaluation is None or found is None or not found.file:
        return []
    if "task" in evaluation:  # a Table 4 cell: .../detection/<source>/<method>/<task>/seed<k>/metrics.json
        return detection_differences(found, evaluation)
    source = evaluation.get("source", evaluation["dataset"])  # a transfer cell's encoder is the source's
    pretrain = _read_yaml(found.related("pretrain", dataset=source) / "config.yaml")
    paper = paper_grid()
    if evaluation.get("method") not in paper_methods():  # a method the paper never ran has no protocol to differ from
        return []
    try:
        ours_paper = [
            (pretrain, to_dict(paper.pretrain_config(source, evaluation["method"], 0, "data")), "pretrain"),
            (evaluation, to_dict(paper.lincls_config(source, evaluation["method"], 0, "data")), "lincls"),
        ]
    except ValueError:
        return []
    return [
        f"{stage}.{key}"
        for ours, theirs, stage in ours_paper
        if ours is not None
        for key in PAPER_KEYS[stage]
        if key in ours and ours[key] != theirs[key]
    ]


def detection_differences(found: CellPath, cell: dict) -> list[str]:
    """A detection cell (its path read back, ``found``; ``cell`` its config) against the paper grid's: its datasets,
    every Detectron2 override either sets (the appendix's schedule and solver live there), and the ImageNet pretraining
    cell it starts from."""
    paper = paper_grid()
    if found.stage != "detection" or not paper.detection or cell.get("method") not in paper.detection["methods"]:
        return []
    try:
        theirs = to_dict(paper.detection_config(cell["method"], cell["task"], int(cell.get("seed", 0)), "datasets"))
        paper_pretrain = to_dict(paper.pretrain_config(paper.detection["source"], cell["method"], 0, "data"))
    except ValueError:
        return []
    ours_overrides, paper_overrides = cell.get("overrides") or {}, theirs["overrides"]
    keys = ["detection.datasets"] if cell.get("datasets", theirs["datasets"]) != theirs["datasets"] else []
    keys += [
        f"detection.{key}"
        for key in sorted({*ours_overrides, *paper_overrides})
        if ours_overrides.get(key) != paper_overrides.get(key)
    ]
    if cell.get("source", theirs["source"]) != theirs["source"]:
        keys.append("detection.source")
    pretrain = _read_yaml(found.related("pretrain") / "config.yaml")
    keys += [
        f"pretrain.{key}"
        for key in PAPER_KEYS["pretrain"]
        if pretrain is not None and key in pretrain and pretrain[key] != paper_pretrain[key]
    ]
    return keys
