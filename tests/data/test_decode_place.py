"""ring.data.decode_place: where a cell's store records are decoded, from this device's committed figures."""

import json
from pathlib import Path

import pytest

from ring.data import decode_place


def _figure(folder: Path, family: str, store_rate, gpu_rate, timed: int = 48, workers: int = 8) -> None:
    rates = {"synthetic": 16000.0, "device": 9950.0, "store": store_rate, "store_gpu": gpu_rate}
    doc = {"images_per_s": {k: v for k, v in rates.items() if v}, "workers": workers, "store_timed_steps": timed}
    (folder / f"throughput_{family}_compile-NVIDIA_H200.json").write_text(json.dumps(doc))


def test_auto_decodes_on_the_gpu_only_where_this_device_measured_it_faster(tmp_path):
    assert decode_place.resolve("auto", "NVIDIA H200", "IR", tmp_path) == "cpu"  # nothing measured
    _figure(tmp_path, "IR", 3674.0, 9000.0)
    _figure(tmp_path, "MoCo", 6000.0, 5000.0)
    _figure(tmp_path, "LA", 3000.0, 9000.0, timed=10)  # timed within the loader's prefetch: not read
    _figure(tmp_path, "CMC", 3000.0, None)  # the GPU feed was not measured
    assert decode_place.resolve("auto", "NVIDIA H200", "IR", tmp_path) == "gpu"
    assert [decode_place.resolve("auto", "NVIDIA H200", f, tmp_path) for f in ("MoCo", "LA", "CMC")] == ["cpu"] * 3
    assert decode_place.resolve("auto", "NVIDIA H100 80GB HBM3", "IR", tmp_path) == "cpu"  # another device
    assert decode_place.resolve("auto", None, "IR", tmp_path) == "cpu"  # a CPU
    assert decode_place.resolve("gpu", None, "IR", tmp_path) == "gpu"  # chosen: the run refuses it on a CPU
    with pytest.raises(ValueError, match=r"^Unknown store_decode 'device'; choose auto, cpu, gpu\.$"):
        decode_place.resolve("device", None, "IR", tmp_path)
