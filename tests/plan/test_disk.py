"""ring.plan.disk: which folders under results/<grid>/ hold nothing the grid's tables read (superseded runs, cells the
grid no longer names), their sizes with hard links counted once, and their removal."""

import os

import pytest

from ring.core.cell_runs import RUNS
from ring.plan import disk, grid
from tests.conftest import ROOT

TINY = {
    "datasets": ["digits"],
    "methods": ["IR"],
    "seeds": [0, 1],
    "pretrain": {"all": {"bank_negatives": 256}},  # digits' bank holds 1347 images
    "toy_cnce": {"seeds": [0]},
    "transfer": {"source": "digits", "datasets": ["shapes"], "methods": ["IR"]},
}


@pytest.fixture(scope="module")
def tiny():
    return grid.from_dict("tiny", TINY)


def _file(path, size: int):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return path


def test_the_named_cells_are_every_stages_cells_and_the_pretraining_cells_they_read(tiny, tmp_path):
    base = tmp_path / "tiny"
    assert disk.named_cells(tiny, tmp_path) == {
        *(base / stage / "digits" / "IR" / f"seed{s}" for stage in ("pretrain", "lincls") for s in (0, 1)),
        *(base / "transfer" / "shapes" / "IR" / f"seed{s}" for s in (0, 1)),
        base / "toy_cnce" / "seed0",
    }


def test_a_detection_and_a_study_cell_are_named_with_the_folders_they_read():
    smoke = grid.load(ROOT / "ring" / "resources" / "grids" / "smoke.yaml")
    named = disk.named_cells(smoke, ROOT / "results")
    base = ROOT / "results" / "smoke"
    source, method, task, seed = smoke.detection_cells()[0]
    assert {
        base / "detection" / source / method / task / f"seed{seed}",
        base / "detection" / source / method / f"seed{seed}",  # the converted backbone the tasks share
        base / "pretrain" / source / method / f"seed{seed}",
    } <= named
    name, study = next(iter(smoke.studies.items()))
    m, variant, s = study.cells()[0]
    assert base / "study" / name / study.dataset / m / variant / f"seed{s}" in named


def test_cell_folders_are_the_seed_folders_at_the_workflows_depths(tiny, tmp_path):
    base = tmp_path / "tiny"
    cells = [
        base / "pretrain" / "digits" / "IR" / "seed0",
        base / "detection" / "digits" / "IR" / "voc_det" / "seed3",
        base / "study" / "negatives_k" / "digits" / "IRing" / "k64" / "seed0",
        base / "toy_cnce" / "seed2",
    ]
    for cell in cells:
        cell.mkdir(parents=True)
    (base / "pretrain" / "digits" / "IR" / "seedless").mkdir()  # not seed<N>
    (base / "pretrain" / "digits" / "seed0").mkdir()  # a seed folder at the wrong depth
    _file(base / "lincls" / "digits" / "IR" / "seed5", 1)  # a file, not a folder
    assert disk.cell_folders(tiny, tmp_path) == sorted(cells)


def test_a_file_linked_from_two_folders_is_counted_once_and_symbolic_links_are_not_followed(tmp_path):
    encoder = _file(tmp_path / "a" / "encoder.pt", 1000)
    _file(tmp_path / "a" / "log.jsonl", 30)
    (tmp_path / "b").mkdir()
    os.link(encoder, tmp_path / "b" / "export.pt")  # a kept export is a hard link of its encoder
    _file(tmp_path / "elsewhere" / "big", 10_000)
    os.symlink(tmp_path / "elsewhere", tmp_path / "a" / "link")
    assert disk.size(tmp_path / "a") == 1030 and disk.size(tmp_path / "b") == 1000
    seen = set()
    assert disk.size(tmp_path / "a", seen) + disk.size(tmp_path / "b", seen) == 1030


def test_sizes_read_in_megabytes_below_a_gigabyte_and_gigabytes_above():
    assert disk.human(0) == "0.0 MB" and disk.human(123_456_789) == "123.5 MB"
    assert disk.human(999_999_999) == "1000.0 MB" and disk.human(1_000_000_000) == "1.00 GB"
    assert disk.human(2_345_000_000) == "2.35 GB"


def _results(tmp_path):
    """A named cell with a superseded run, an unnamed seed's cells (one busy) and their files."""
    base = tmp_path / "tiny"
    named = base / "pretrain" / "digits" / "IR" / "seed0"
    _file(named / "encoder.pt", 500)
    _file(named / RUNS / "0123abcd" / "encoder.pt", 400)
    _file(named / RUNS / "stray.txt", 3)  # a file in runs/ is not a run
    dropped = base / "pretrain" / "digits" / "IR" / "seed7"
    _file(dropped / "encoder.pt", 2_000_000)
    busy = base / "lincls" / "digits" / "IR" / "seed7"
    _file(busy / "log.jsonl", 10)
    return base, named, dropped, busy


def test_prunable_lists_superseded_runs_and_unnamed_cells_but_a_busy_one(tiny, tmp_path):
    base, named, dropped, busy = _results(tmp_path)
    assert disk.unnamed_cells(tiny, tmp_path) == [busy, dropped]
    items = disk.prunable(tiny, tmp_path, busy={busy})
    assert [(i.path, i.kind, i.bytes) for i in items] == [
        (named / RUNS / "0123abcd", "run", 400),
        (dropped, "cell", 2_000_000),
    ]
    assert disk.summary(items) == ("1 superseded run (0.0 MB) and 1 cell folder the grid no longer names (2.0 MB)")
    assert disk.summary([]) == "0 superseded runs (0.0 MB) and 0 cell folders the grid no longer names (0.0 MB)"


def test_removal_takes_the_items_and_the_folders_they_leave_empty_but_never_the_grids_folder(tiny, tmp_path):
    base, named, dropped, busy = _results(tmp_path)
    busy.parent.joinpath("seed0").mkdir()  # keeps lincls/digits/IR
    disk.remove(disk.prunable(tiny, tmp_path), base)
    assert not dropped.exists() and not busy.exists()
    assert (named / "encoder.pt").exists() and not (named / RUNS / "0123abcd").exists()
    assert (named / RUNS / "stray.txt").exists()  # runs/ is not empty: it stays
    assert (base / "lincls" / "digits" / "IR" / "seed0").is_dir()
    assert base.is_dir()


def test_an_emptied_tree_goes_up_to_the_grids_folder(tiny, tmp_path):
    base = tmp_path / "tiny"
    cell = _file(base / "transfer" / "dtd" / "IR" / "seed0" / "metrics.json", 5).parent
    disk.remove([disk.Prunable(cell, "cell", 5)], base)
    assert not (base / "transfer").exists() and base.is_dir()


def test_a_folder_that_cannot_be_removed_is_one_sentence(tmp_path, monkeypatch):
    def refuse(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(disk.shutil, "rmtree", refuse)
    cell = tmp_path / "tiny" / "toy_cnce" / "seed4"
    with pytest.raises(ValueError) as err:
        disk.remove([disk.Prunable(cell, "cell", 0)], tmp_path / "tiny")
    assert str(err.value) == (
        f"Cannot remove {cell} (Permission denied); fix its permissions and rerun prune (what it removed before stays "
        "removed)."
    )
