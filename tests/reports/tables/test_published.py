"""The paper's published numbers (ring.reports.tables.published): read from ring's copy of them, per (method,
column), NaN where the paper has none."""

import importlib
import math

import pytest
import yaml

from ring.core.methods import display_name
from ring.reports import tables

# The module, not the package's re-export of its published() function, which bears the same name.
published_module = importlib.import_module("ring.reports.tables.published")


def test_published_numbers_are_the_papers(root):
    ours = yaml.safe_load(tables.PUBLISHED.read_text())
    assert ours["table1_linear_eval"]["rows"]["MoCoRing"] == [86.1, 61.5, 65.2, 54.6]
    shared = root.parent / "shared" / "paper" / "published-results.yaml"
    if shared.exists():  # the project's copy must not drift from the checked transcription
        assert ours == yaml.safe_load(shared.read_text())


def test_the_copy_read_is_ring_s_own_file():
    assert (
        published_module.PUBLISHED
        == published_module.Path(published_module.__file__).parents[2] / "data" / "published-results.yaml"
    )
    assert published_module.PUBLISHED.is_file() and published_module.published() == yaml.safe_load(
        published_module.PUBLISHED.read_text()
    )


@pytest.mark.parametrize(
    "key, method, column, single, value",
    [
        ("table1_linear_eval", "MoCoRing", "CIFAR10", None, 86.1),
        ("table1_linear_eval", "IR", "ImageNet", None, 43.2),
        ("table2_lesions", "IRingNoAnneal", "ImageNet", None, 41.3),  # its row is the paper's label
        ("table2_lesions", "IRingBall", "CIFAR10", None, 82.1),
        ("table3_meta_dataset_transfer", "CMCRing", "DTD", None, 40.6),
        ("table4_detection", "MoCo", "coco_kp_AP75", None, 36.9),
        ("table_la_variants", "IRingCi", "CIFAR10", "CIFAR10", 84.3),  # one column, named by the caller
        ("table_la_variants", "LA", "STL10", "STL10", 83.9),  # whichever the caller names: the file names none
    ],
)
def test_a_published_number_by_method_and_column(key, method, column, single, value):
    assert published_module.published_value(key, method, column, single) == value


@pytest.mark.parametrize(
    "key, method, column, single",
    [
        ("table1_linear_eval", "MoCoRing", "Digits", None),  # a column the paper has not
        ("table1_linear_eval", "IRingBall", "CIFAR10", None),  # a row the paper has not (Table 2's)
        ("table_la_variants", "LA", "STL10", "CIFAR10"),  # not the single column
    ],
)
def test_no_published_number_is_nan(key, method, column, single):
    assert math.isnan(published_module.published_value(key, method, column, single))


def test_every_published_cell_is_read_back_and_finite():
    """Each number of each row-by-column table, through published_value, is the file's and finite: the paper's
    column of a table never shows a non-finite number."""
    by_label = {}
    for key, table in published_module.published().items():
        if "rows" not in table:
            continue  # the toy table (ring.reports.tables.toy reads its own layout)
        for label, row in table["rows"].items():
            columns = table.get("columns") or ["CIFAR10"]
            values = row if isinstance(row, list) else [row]
            assert len(values) == len(columns), (key, label)
            for column, value in zip(columns, values, strict=True):
                assert math.isfinite(value), (key, label, column)
                by_label[key, label, column] = value
    for (key, label, column), value in by_label.items():
        single = None if "columns" in published_module.published()[key] else "CIFAR10"
        assert published_module.published_value(key, label, column, single) == value
    assert len(by_label) == 7 * 4 + 4 * 2 + 7 * 9 + 5 * 12 + 5


def test_the_numbers_come_from_the_file_not_the_code(tmp_path, monkeypatch):
    """Another copy of the file, another number: published_value holds no number of its own."""
    doc = yaml.safe_load(published_module.PUBLISHED.read_text())
    doc["table1_linear_eval"]["rows"]["IR"][0] = 12.5
    copy = tmp_path / "published-results.yaml"
    copy.write_text(yaml.safe_dump(doc))
    monkeypatch.setattr(published_module, "PUBLISHED", copy)
    published_module.published.cache_clear()
    try:
        assert published_module.published_value("table1_linear_eval", "IR", "CIFAR10") == 12.5
    finally:
        monkeypatch.undo()
        published_module.published.cache_clear()  # the next test reads ring's copy again
    assert published_module.published_value("table1_linear_eval", "IR", "CIFAR10") == 81.2


def test_a_dataset_s_column_name_is_the_catalog_s():
    assert (
        published_module.dataset_display("cifar10") == "CIFAR10"
        and published_module.dataset_display("fashion_mnist") == "FashionMNIST"
    )
    assert display_name("IRingCi") == "IRing (+C_i)"
    with pytest.raises(KeyError):
        published_module.dataset_display("no_such_dataset")
