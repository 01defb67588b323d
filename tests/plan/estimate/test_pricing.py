"""ring.plan.estimate.pricing: each pass's calls and images as the stage makes them, priced from the
end-to-end figure of the cell's method where its record matches the cell, else by the component model, saying why."""

import json
from pathlib import Path

from ring.core.config import LinclsConfig, PretrainConfig, to_dict
from ring.plan.estimate import load_figures, pricing
from tests.plan.estimate.test_figures import _write_figures

RECORD = {
    "device": "cpu",
    "workers": 0,
    "prefetch_factor": 2,
    "compile": False,
    "store": "none",
    "threads": 1,
    "batch": 64,
    "bank": 256,
    "crop": 16,
    "dataset": "digits",
}


def _fig(name: str, method: str, spi: float, per_call: float, bank: int = 256) -> dict:
    return {
        "pass": name,
        "method": method,
        "record": {**RECORD, "bank": bank},
        "warmup_batches": 2,
        "excluded_batches": 2,
        "timed_batches": 38,
        "timed_images": 2432,
        "seconds_per_image": spi,
        "seconds_per_call": per_call,
        "calls": 2,
        "images": 2688,
    }


def write_price(folder: Path, **changes) -> None:
    """price-cpu.json: IR's pretraining 10 ms per image and 1 s per epoch, its kNN monitor 2 ms and 0.1 s per run,
    its linear evaluation 3 ms and 1.5 s; 15 s of fixed costs per job, 0.5 s (pretraining) and 0.1 s per checkpoint."""
    fixed = {"start and imports": 12.0, "data check": 0.5, "setup": 2.5, "compile warm-up": 0.0}
    doc = {
        "machine": {"device": "cpu", "date": "2026-12-02T01:00:00Z"},
        "passes": [
            _fig("pretraining", "IR", 0.010, 1.0),
            _fig("kNN monitor", "IR", 0.002, 0.1),
            _fig("linear evaluation", "IR", 0.003, 1.5, bank=0),
        ],
        "fixed": {
            "pretrain": {"record": RECORD, "per_job_s": fixed, "checkpoint_write_s": 0.5},
            "lincls": {"record": {**RECORD, "bank": 0}, "per_job_s": fixed, "checkpoint_write_s": 0.1},
        },
        "kmeans": {},
        **changes,
    }
    (folder / "price-cpu.json").write_text(json.dumps(doc))


def _pretrain(**kw) -> PretrainConfig:
    values = dict(
        method="IR", dataset="digits", epochs=3, batch_size=64, resize=16, crop=16, bank_negatives=256, num_workers=0
    )
    return PretrainConfig(**{**values, "knn_every": 2, **kw})


def test_the_calls_and_images_of_each_pass_are_the_stages():
    sizes = (1347, 1347, 450)
    # 21 steps of 64 a epoch; the monitor at epoch 2 and at the last (3): the training and test splits each time.
    assert pricing.counts("pretrain", _pretrain(), sizes) == {
        "pretraining": (3, 3 * 21 * 64),
        "kNN monitor": (2, 2 * (1347 + 450)),
    }
    # A validation-adaptive Ring policy embeds the training split every epoch, and once before training.
    ring = _pretrain(method="IRing", ring_anneal="adaptive_val_authors", ring_val_before_training=True, knn_every=0)
    assert pricing.counts("pretrain", ring, sizes)["kNN monitor"] == (4, 4 * 1347)
    la = _pretrain(method="LA", kmeans_warmup_epochs=1)
    assert pricing.counts("pretrain", la, sizes)["k-means"] == (2, 0)
    lin = LinclsConfig(method="IR", dataset="digits", epochs=5, augmentation="none")
    assert pricing.counts("lincls", lin, sizes) == {"linear evaluation": (1, 1347 + 450)}  # features cached once
    assert pricing.counts("lincls", LinclsConfig(**{**to_dict(lin), "augmentation": "crop_flip"}), sizes) == {
        "linear evaluation": (1, 5 * 1347 + 450)
    }


def test_a_figure_file_timed_inside_the_prefetch_is_not_read(tmp_path):
    _write_figures(tmp_path, "cpu", "2026-11-26T10:00:00Z", 10.0, image_size=16)
    bad = _fig("pretraining", "IR", 0.010, 1.0)
    bad["record"]["workers"] = 4  # 4 workers x 2 prefetched batches, yet only 2 batches left out
    write_price(tmp_path, passes=[bad])
    try:
        load_figures("cpu", results=tmp_path)
    except ValueError as err:
        assert "timed inside the prefetch" in str(err)
    else:
        raise AssertionError("a figure timed inside the prefetch was read")


def test_the_counts_are_what_the_stages_record(tmp_path, encoder_file):
    """pricing.counts against a real run: the calls and images ring.pretrain and ring.lincls record per pass
    (ring.engine.clock, in provenance.json) are the ones the price multiplies."""
    from ring import lincls, pretrain
    from ring.core import catalog
    from tests.helpers import lincls_config, pretrain_config

    cfg = pretrain_config("IR", epochs=2, lr_milestones=[], resize=16, crop=16, knn_every=1)
    pretrain.run(cfg, tmp_path / "pre")
    spec = catalog.spec("digits")
    sizes = (spec.bank_images(), spec.train_images, spec.test_images)
    segment = json.loads((tmp_path / "pre" / "provenance.json").read_text())["segments"][-1]
    recorded = {name: (segment["pass_calls"][name], segment["pass_images"][name]) for name in segment["pass_images"]}
    assert recorded == pricing.counts("pretrain", cfg, sizes)
    assert segment["pass_calls"]["checkpoint writes"] == cfg.epochs  # the price's checkpoint write per epoch
    lin = lincls_config(resize=16, crop=16)
    lincls.run(lin, encoder_file, tmp_path / "lin")
    segment = json.loads((tmp_path / "lin" / "provenance.json").read_text())["segments"][-1]
    recorded = (segment["pass_calls"]["linear evaluation"], segment["pass_images"]["linear evaluation"])
    assert recorded == pricing.counts("lincls", lin, sizes)["linear evaluation"]
    assert segment["pass_calls"]["checkpoint writes"] == lin.epochs
