import copy
from pathlib import Path

import pytest

from ring.core.cell_paths import BACKBONE, cell_file, cell_folder, cell_glob, cell_values
from ring.core.stages import stage, stages_with

VALUES = {"dataset": "cifar10", "method": "IR", "seed": 3, "task": "voc_det", "study": "k", "variant": "k64"}
LAYOUTS = [(name, None) for name in stages_with("cell")] + [("detection", BACKBONE)]


@pytest.mark.parametrize("name, cell", LAYOUTS)
def test_a_cells_pattern_folder_and_glob_spell_one_layout(tmp_path, name, cell):
    pattern = cell_file(name, "metrics.json", cell)
    folder = cell_folder(tmp_path / "results" / "g", name, cell, **VALUES)
    # The workflow's pattern, filled in, is the library's folder (relative to the results' parent).
    assert Path(tmp_path, pattern.format(grid="g", **VALUES)) == folder / "metrics.json"
    assert folder.name == "seed3" and folder.relative_to(tmp_path / "results" / "g").parts[0] == name
    folder.mkdir(parents=True)
    assert list((tmp_path / "results" / "g").glob(cell_glob(name, cell))) == [folder]


def test_the_backbone_is_the_detection_folder_above_its_task_cells(tmp_path):
    task = cell_folder(tmp_path, "detection", **VALUES)
    assert cell_folder(tmp_path, "detection", BACKBONE, **VALUES) == task.parents[1] / task.name


def test_a_stage_without_cell_folders_has_no_pattern():
    with pytest.raises(ValueError, match="prepare"):
        cell_file("prepare", "shard.json")


@pytest.mark.parametrize("name, cell", LAYOUTS)
@pytest.mark.parametrize("root", ["results", "/srv/ring/results", ""])
def test_a_cells_folder_and_files_read_back_as_its_values(root, name, cell):
    folder = cell_folder(Path(root, "g"), name, cell, **VALUES)
    wildcards = cell or stage(name).cell
    for path, file in ((folder, ""), (folder / "metrics.json", "metrics.json")):
        found = cell_values(path, cell)
        assert (found.root, found.grid, found.stage, found.file) == (Path(root), "g", name, file)
        assert dict(found.values) == {w: VALUES[w] for w in wildcards} and found.seed == 3
        assert found.folder == folder and found.grid_dir == Path(root, "g")
    # The workflow's pattern, filled in, reads back the same.
    assert cell_values(cell_file(name, "metrics.json", cell).format(grid="g", **VALUES), cell).folder == Path(
        "results", "g"
    ) / folder.relative_to(Path(root, "g"))


def test_a_cell_read_back_names_the_cells_it_reads(tmp_path):
    grid = tmp_path / "results" / "g"
    found = cell_values(cell_folder(grid, "detection", **VALUES) / "metrics.json")
    assert (found.dataset, found.method, found.task, found.seed) == ("cifar10", "IR", "voc_det", 3)
    assert found.related("detection", BACKBONE) == cell_folder(grid, "detection", BACKBONE, **VALUES)
    assert found.related("pretrain") == cell_folder(grid, "pretrain", **VALUES)
    transfer = cell_values(cell_folder(grid, "transfer", **{**VALUES, "dataset": "stl10"}))
    assert transfer.related("pretrain", dataset="cifar10") == cell_folder(grid, "pretrain", **VALUES)
    with pytest.raises(AttributeError, match="task"):
        transfer.task  # noqa: B018
    assert copy.deepcopy(transfer) == transfer


@pytest.mark.parametrize(
    "path",
    [
        "results/g/pretrain/cifar10/IR/seed0/runs/0123abcd/provenance.json",  # deeper than a cell's own files
        "results/g/pretrain/cifar10/IR/0/encoder.pt",  # no seed<N> folder
        "results/g/pretrain/cifar10/seed0/encoder.pt",  # a level short
        "results/g/detection/cifar10/IR/seed0/backbone.pkl",  # a backbone, read with the task cells' layout
        "results/g/tables/table1.md",
        "results/g/prepare/digits/shard0",  # a stage without cell folders
        "pretrain/cifar10/IR/seed0",  # no grid above the stage
        "/pretrain/cifar10/IR/seed0",
        "results/g/nostage/cifar10/IR/seed0/encoder.pt",
    ],
)
def test_a_path_that_is_no_cell_folder_or_file_reads_back_as_none(path):
    assert cell_values(path) is None
