"""ring.detection.heads: res5 built from BasicBlocks, as ResNet-18/34 build it, so an R18 checkpoint fills it."""

import pytest
import torch
from detectron2.config import get_cfg
from detectron2.modeling import ROI_HEADS_REGISTRY
from detectron2.modeling.backbone.resnet import BasicBlock

from ring.detection.heads import RES5_BLOCKS, BasicRes5ROIHeads


def _cfg(depth: int):
    cfg = get_cfg()
    cfg.MODEL.RESNETS.DEPTH = depth
    cfg.MODEL.RESNETS.RES2_OUT_CHANNELS = 64
    cfg.MODEL.RESNETS.NORM = "FrozenBN"
    return cfg


def test_the_head_is_registered_under_its_name():
    assert ROI_HEADS_REGISTRY.get("BasicRes5ROIHeads") is BasicRes5ROIHeads


@pytest.mark.parametrize("depth", sorted(RES5_BLOCKS))
def test_res5_is_resnet18_34s_basic_blocks_halving_the_resolution(depth):
    res5, out_channels = BasicRes5ROIHeads._build_res5_block(_cfg(depth))
    blocks = list(res5)
    assert out_channels == 512 and len(blocks) == {18: 2, 34: 3}[depth]
    assert all(isinstance(b, BasicBlock) for b in blocks)
    assert [b.stride for b in blocks] == [2] + [1] * (len(blocks) - 1)
    # torchvision's ResNet-18 layer4 has these parameter shapes: 256 -> 512 channels, 3x3 convolutions.
    assert tuple(blocks[0].conv1.weight.shape) == (512, 256, 3, 3)
    assert tuple(blocks[0].shortcut.weight.shape) == (512, 256, 1, 1)
    assert all(b.shortcut is None for b in blocks[1:])
    # A C4 ROI head pools 14x14 regions from res4 (256 channels); res5 turns them into 7x7 of 512.
    with torch.no_grad():
        assert tuple(res5(torch.randn(2, 256, 14, 14)).shape) == (2, 512, 7, 7)


def test_a_deeper_resnet_is_refused_in_one_sentence():
    with pytest.raises(
        ValueError, match=r"^BasicRes5ROIHeads is for ResNet-18/34 \(RESNETS.DEPTH 50\); use Res5ROIHeads"
    ):
        BasicRes5ROIHeads._build_res5_block(_cfg(50))
