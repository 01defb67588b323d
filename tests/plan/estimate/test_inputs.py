"""ring.plan.estimate.inputs: which store and JPEG figures price a pass, and which are not read."""

import json

from ring.plan.estimate import load_figures, pretrain_hours
from ring.plan.estimate.inputs import gpu_decode_rate, loader_rate
from tests.plan.estimate.test_passes import _store, figures  # noqa: F401  (the fixture)


def test_a_store_rate_timed_within_the_loaders_prefetch_is_not_read(figures):
    """The first H200 run timed 10 batches of 8 workers that decode 2 batches each ahead: its loader rates (7,547
    images/s) were batches decoded before the clock started, twice the 3,674 of the same loader timed over 48.  Such
    loader and view rates are left out; a compiled throughput file's jpeg95 feed timed past the prefetch and below its
    own step is the loader's rate end to end."""
    _store(figures)
    doc = json.loads((figures / "store_loader-GPU_X.json").read_text())
    (figures / "store_loader-GPU_X.json").write_text(json.dumps({**doc, "timed_batches": 10}))
    f = load_figures(results=figures)
    assert f.store.loader == {} and f.store.views == {} and f.store.end_to_end is None
    assert "store_jpeg95_decode per core" in loader_rate(f, "jpeg95").source
    ir = json.loads((figures / "throughput_IR-GPU_X.json").read_text())
    rates = {"synthetic": 16e3, "device": 10e3, "store": 3.6e3}
    compiled = {**ir, "compile": True, "workers": 8, "images_per_s": rates}
    for steps, expected in ((10, None), (48, (3_600.0, 8, "throughput_IR_compile-GPU_X.json"))):
        (figures / "throughput_IR_compile-GPU_X.json").write_text(json.dumps({**compiled, "store_timed_steps": steps}))
        assert load_figures(results=figures).store.end_to_end == expected
    rate = loader_rate(load_figures(results=figures), "jpeg95")
    assert (rate.per_s, rate.workers) == (3_600.0, 8)


def test_the_gpu_decoder_prices_a_cell_only_where_the_run_would_choose_it(figures):
    """``store_decode: auto`` decodes on the GPU where the device's compiled IR figure measured the GPU decoder's feed
    faster than the workers' decode (ring.data.decode_place), and the price reads that feed end to end."""
    import dataclasses

    import pytest

    from tests.plan.estimate.test_passes import _cell

    _store(figures)
    ir = json.loads((figures / "throughput_IR-GPU_X.json").read_text())
    compiled = {**ir, "compile": True, "workers": 8, "store_timed_steps": 48}
    cell = _cell("IR", compile="on")

    def price(gpu_rate, decode="auto") -> float:
        rates = {"synthetic": 16e3, "device": 10e3, "store": 3.6e3, **({"store_gpu": gpu_rate} if gpu_rate else {})}
        (figures / "throughput_IR_compile-GPU_X.json").write_text(json.dumps({**compiled, "images_per_s": rates}))
        return pretrain_hours(dataclasses.replace(cell, store_decode=decode), load_figures(results=figures))

    workers = price(None)  # no GPU decoder figure: the workers' decode, as before the option existed
    # The feed end to end, or the step and its views where they are slower (this fixture's step: 5,000 images/s).
    assert price(9e3) < workers and price(9e3) >= 10 * 1_281_167 / 9e3 / 3600
    assert price(3e3) == workers  # measured slower than the workers' decode: auto keeps the workers
    assert price(9e3, "cpu") == workers  # chosen: priced as chosen
    assert price(1e3, "gpu") == pytest.approx(10 * 1_281_167 / 1e3 / 3600)
    f = load_figures(results=figures)
    assert gpu_decode_rate(dataclasses.replace(cell, store_decode="auto"), f, "IR") is None
    (figures / "throughput_IR_compile-GPU_X.json").write_text(json.dumps({**compiled, "images_per_s": {"store": 1.0}}))
    with pytest.raises(ValueError, match=r"^The GPU X figures have no store_gpu rate for IR \(store_decode: gpu\); "):
        price(None, "gpu")
