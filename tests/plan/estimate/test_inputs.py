"""ring.plan.estimate.inputs: which store and JPEG figures price a pass, and which are not read."""

import json

from ring.plan import estimate as E
from ring.plan.estimate import inputs as I
from tests.plan.estimate.test_passes import _store, figures  # noqa: F401  (the fixture)


def test_a_store_rate_timed_within_the_loaders_prefetch_is_not_read(figures):
    """The first H200 run timed 10 batches of 8 workers that decode 2 batches each ahead: its loader rates (7,547
    images/s) were batches decoded before the clock started, twice the 3,674 of the same loader timed over 48.  Such
    loader and view rates are left out; a compiled throughput file's jpeg95 feed timed past the prefetch and below its
    own step is the loader's rate end to end."""
    _store(figures)
    doc = json.loads((figures / "store_loader-GPU_X.json").read_text())
    (figures / "store_loader-GPU_X.json").write_text(json.dumps({**doc, "timed_batches": 10}))
    f = E.load_figures(results=figures)
    assert f.store.loader == {} and f.store.views == {} and f.store.end_to_end is None
    assert "store_jpeg95_decode per core" in I.loader_rate(f, "jpeg95").source
    ir = json.loads((figures / "throughput_IR-GPU_X.json").read_text())
    rates = {"synthetic": 16e3, "device": 10e3, "store": 3.6e3}
    compiled = {**ir, "compile": True, "workers": 8, "images_per_s": rates}
    for steps, expected in ((10, None), (48, (3_600.0, 8, "throughput_IR_compile-GPU_X.json"))):
        (figures / "throughput_IR_compile-GPU_X.json").write_text(json.dumps({**compiled, "store_timed_steps": steps}))
        assert E.load_figures(results=figures).store.end_to_end == expected
    rate = I.loader_rate(E.load_figures(results=figures), "jpeg95")
    assert (rate.per_s, rate.workers) == (3_600.0, 8)
