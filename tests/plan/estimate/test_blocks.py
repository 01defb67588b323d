"""ring.plan.estimate.blocks: a cell priced pass by pass from the end-to-end figures whose record matches it, plus its
fixed costs; a figure measured otherwise is refused and the component model prices the pass, saying why."""

import math

from ring.core.config import TransferConfig
from ring.plan.estimate import blocks, load_figures, pretrain_passes
from tests.plan.estimate.test_figures import _write_figures
from tests.plan.estimate.test_pricing import _pretrain, write_price


def test_a_cell_is_priced_pass_by_pass_from_the_matching_figures_and_its_fixed_costs(tmp_path):
    _write_figures(tmp_path, "cpu", "2026-11-26T10:00:00Z", 10.0, image_size=16)
    write_price(tmp_path)
    figures = load_figures("cpu", results=tmp_path)
    price = blocks.price_cell("pretrain", _pretrain(), figures, restarts=1)
    assert math.isclose(price.seconds["pretraining"], 3 * 1.0 + 3 * 21 * 64 * 0.010)
    assert math.isclose(price.seconds["kNN monitor"], 2 * 0.1 + 2 * 1797 * 0.002)
    # Two processes (one restart), each paying 15 s, and a checkpoint each epoch.
    assert math.isclose(price.seconds["fixed costs"], 2 * 15.0 + 3 * 0.5)
    assert price.sources["pretraining"] == "end-to-end (price-cpu.json)" and not price.unpriced
    # Transfer runs linear evaluation's code: its figure prices it, per image of the transfer set (DTD: 3760 + 1880).
    values = dict(epochs=2, batch_size=64, resize=16, crop=16, augmentation="none", num_workers=0)
    transfer = TransferConfig(method="IR", dataset="dtd", source="digits", **values)
    t = blocks.price_cell("transfer", transfer, figures)
    assert math.isclose(t.seconds["transfer"], 1.5 + (3760 + 1880) * 0.003)
    assert math.isclose(t.seconds["fixed costs"], 15.0 + 2 * 0.1)  # linear evaluation's, a checkpoint an epoch


def test_a_figure_measured_otherwise_is_refused_and_the_component_model_prices_the_pass_saying_why(tmp_path):
    _write_figures(tmp_path, "cpu", "2026-11-26T10:00:00Z", 10.0, image_size=16)
    write_price(tmp_path)
    figures = load_figures("cpu", results=tmp_path)
    price = blocks.price_cell("pretrain", _pretrain(num_workers=4), figures)
    assert price.sources["pretraining"].startswith("component model (the pretraining figure of IR in price-cpu.json ")
    assert "workers 0 (the cell's 4)" in price.sources["pretraining"]
    component = pretrain_passes(_pretrain(num_workers=4), figures)["pretraining"] * 3600
    assert math.isclose(price.seconds["pretraining"], component)
    # A job of two threads against figures of one: on a shared host the two are not the same price.
    threads = blocks.price_cell("pretrain", _pretrain(), figures, threads=2)
    assert "threads 1 (the cell's 2)" in threads.sources["pretraining"]
    moco = blocks.price_cell("pretrain", _pretrain(method="MoCo", queue_size=256), figures)
    assert "no end-to-end pretraining figure of MoCo" in moco.sources["pretraining"]
    detection = blocks.price_cell("detection", None, figures)
    assert not detection.seconds and "no Detectron2 figure" in detection.unpriced["detection"]


def test_mscoco_transfer_is_counted_at_its_crops_caps():
    """MS-COCO ships no classification split: Table 3 classifies its object crops, at most 500 / 100 per class of 80
    (ring.data.listings); the price counts the caps, so that its cells are priced rather than left out."""
    assert blocks.sizes("transfer", "mscoco") == (0, 80 * 500, 80 * 100)
