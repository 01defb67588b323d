"""Shared pieces of the detection tests: an encoder, its converted backbone, the generated dataset."""

import pytest
import torch

from ring.detection import convert, embedded
from ring.engine.encoder import Encoder, save_trunks, torchvision_state_dict


@pytest.fixture(scope="session")
def encoder_file(tmp_path_factory):
    """A freshly initialised encoder with non-trivial BatchNorm statistics, in ring.pretrain's format."""
    torch.manual_seed(0)
    encoder = Encoder()
    for module in encoder.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.normal_(0, 0.1)
            module.running_var.uniform_(0.5, 2.0)
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.normal_(0, 0.1)
    path = tmp_path_factory.mktemp("encoder") / "encoder.pt"
    save_trunks({"encoder.pt": torchvision_state_dict(encoder)}, path.parent)
    return path


@pytest.fixture(scope="session")
def backbone_pkl(encoder_file):
    path = encoder_file.parent / "backbone.pkl"
    convert.convert(encoder_file, path)
    return path


@pytest.fixture(scope="session")
def datasets_root(tmp_path_factory):
    return embedded.generate(tmp_path_factory.mktemp("detectron2_datasets"))
