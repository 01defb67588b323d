from pathlib import Path

import pytest

from ring.core.cell_paths import BACKBONE, cell_file, cell_folder, cell_glob
from ring.core.stages import stages_with

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
