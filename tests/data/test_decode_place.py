"""ring.data.decode_place: where a cell's store records are decoded, from this device's committed figures."""

import json
from pathlib import Path

import pytest

from ring.data import decode_place


def _figure(folder: Path, family: str, store_rate, gpu_rate, timed: int = 48, workers: int = 8) -> None:
    rates = {"synthetic": 16000.0, "device": 9950.0, "store": store_rate, "store_gpu": gpu_rate}
    doc = {"images_per_s": {k: v for k, v in rates.items() if v}, "workers": workers, "store_timed_steps": timed}
    (folder / f"throughput_{family}_compile-NVIDIA_H200.json").write_text(json.dumps(doc))


def test_auto_is_planned_as_the_gpu_only_where_a_gpu_measured_it_faster(tmp_path):
    assert decode_place.planned("auto", True, "IR", folder=tmp_path) == "cpu"  # nothing measured
    _figure(tmp_path, "IR", 3674.0, 9000.0)
    _figure(tmp_path, "MoCo", 6000.0, 5000.0)
    _figure(tmp_path, "LA", 3000.0, 9000.0, timed=10)  # timed within the loader's prefetch: not read
    _figure(tmp_path, "CMC", 3000.0, None)  # the GPU feed was not measured
    assert decode_place.planned("auto", True, "IR", folder=tmp_path) == "gpu"
    assert [decode_place.planned("auto", True, f, folder=tmp_path) for f in ("MoCo", "LA", "CMC")] == ["cpu"] * 3
    assert decode_place.planned("auto", False, "IR", folder=tmp_path) == "cpu"  # no jpeg95 store into device views
    assert decode_place.planned("gpu", False, "MoCo", folder=tmp_path) == "gpu"  # chosen: the checks refuse it there
    assert decode_place.planned("cpu", True, "IR", folder=tmp_path) == "cpu"
    with pytest.raises(ValueError, match=r"^Unknown store_decode 'device'; choose auto, cpu, gpu\.$"):
        decode_place.planned("device", True, "IR", folder=tmp_path)


def test_a_cell_keeps_the_decoder_it_was_first_planned_with(tmp_path):
    """Issue 48: a figure committed after a cell was planned does not change its decoder at the next plan, nor does a
    job ever read the figures (before, every job of an auto cell resolved the decoder from the figures it found)."""
    _figure(tmp_path, "IR", 3674.0, 9000.0)  # committed after the cell was planned with the workers' decode
    assert decode_place.planned("auto", True, "IR", recorded="cpu", folder=tmp_path) == "cpu"
    assert decode_place.planned("auto", True, "IR", recorded="gpu", folder=tmp_path) == "gpu"
    assert decode_place.planned("cpu", True, "IR", recorded="gpu", folder=tmp_path) == "cpu"  # the choice was edited
    assert decode_place.run_place("auto", "cpu") == decode_place.run_place("auto", "") == "cpu"
    assert decode_place.run_place("auto", "gpu") == decode_place.run_place("gpu", "") == "gpu"
