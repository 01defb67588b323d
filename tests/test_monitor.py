"""ring.monitor: the kNN monitor of a cell reading a prepared store measures today's accuracies from the device's
views (ring.data.eval_views)."""

import pytest
import torch
from torch import nn

from ring import prepare
from ring.core.catalog import spec
from ring.data import datasets, eval_views
from ring.data.digits import generate_folder
from ring.monitor import KnnMonitor
from tests.data.test_eval_views import CROP
from tests.data.test_store import SIZE
from tests.helpers import pretrain_config

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """digits_folder and its raw store (tests/data/test_store.py's, without the jpeg95 one this test does not read)."""
    data = tmp_path_factory.mktemp("data")
    generate_folder(data / "digits_folder")
    prepare.build(prepare.Target("digits_folder", data, "raw", shard_images=500), workers=1)
    return data


def _monitor(root, monkeypatch, device_input: bool) -> dict:
    with monkeypatch.context() as patch:
        if device_input:  # no PIL view may be made: the store's images are cropped on the device
            patch.setattr(datasets, "eval_view", lambda *args: pytest.fail("the monitor made today's PIL views"))
        else:
            patch.setattr(eval_views, "reader_of", lambda base: None)  # today's path: PIL views in the workers
        return _measure(root)


def _measure(root) -> dict:
    cfg = pretrain_config(
        "IR", dataset="digits_folder", store="raw", data_root=str(root), resize=SIZE, crop=CROP, batch_size=128
    )
    data = datasets.source(spec("digits_folder"), root, "raw", SIZE)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 16, 5, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten())
    return KnnMonitor(cfg, data, net, CPU, 2**20)(test=True, validation=True)


def test_the_knn_monitor_on_the_device_input_measures_todays_accuracies(root, monkeypatch):
    """The centre views agree to float rounding (tests/data/test_eval_views.py), so the embeddings' neighbours and
    votes are today's: each accuracy within one image of the 450 test images (a near tie broken the other way at
    most), the 135 held-out images' equal (one image is 0.74 points); measured: all three equal."""
    got = _monitor(root, monkeypatch, device_input=True)
    expected = _monitor(root, monkeypatch, device_input=False)
    assert got.keys() == expected.keys() == {"knn_top1", "nn1_top1", "val_knn_top1"}
    for key in expected:
        assert abs(got[key] - expected[key]) <= 100.0 / 450 + 1e-9, (key, got, expected)
    assert 25.0 < got["knn_top1"] < 100.0  # above chance (10%): the features measure something
