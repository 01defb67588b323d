"""The res5 ROI head an R18-C4 model needs, registered in Detectron2's ROI_HEADS_REGISTRY.

In a C4 model the backbone stops at res4 and res5 runs per region inside the ROI head.
Detectron2's ``Res5ROIHeads._build_res5_block`` always builds three Bottleneck blocks, whatever
``RESNETS.DEPTH`` says, so with a ResNet-18 checkpoint its res5 loads a few shape-compatible
tensors into the wrong places and leaves the rest at random (``tests/detection`` shows it with
:func:`ring.detection.convert.check_loaded`).  ``BasicRes5ROIHeads`` builds res5 as ResNet-18/34
do: BasicBlocks (2 for R18, 3 for R34), stride 2 in the first, 256 -> 512 channels.
"""

from __future__ import annotations

from detectron2.modeling import ROI_HEADS_REGISTRY
from detectron2.modeling.backbone.resnet import BasicBlock, ResNet
from detectron2.modeling.roi_heads import Res5ROIHeads
from torch import nn

RES5_BLOCKS = {18: 2, 34: 3}


@ROI_HEADS_REGISTRY.register()
class BasicRes5ROIHeads(Res5ROIHeads):
    @classmethod
    def _build_res5_block(cls, cfg):
        depth = cfg.MODEL.RESNETS.DEPTH
        if depth not in RES5_BLOCKS:
            raise ValueError(
                f"BasicRes5ROIHeads is for ResNet-18/34 (RESNETS.DEPTH {depth}); use Res5ROIHeads for deeper ResNets."
            )
        out_channels = cfg.MODEL.RESNETS.RES2_OUT_CHANNELS * 8  # res5 is 8x res2
        blocks = ResNet.make_stage(
            BasicBlock,
            RES5_BLOCKS[depth],
            stride_per_block=[2] + [1] * (RES5_BLOCKS[depth] - 1),
            in_channels=out_channels // 2,
            out_channels=out_channels,
            norm=cfg.MODEL.RESNETS.NORM,
        )
        return nn.Sequential(*blocks), out_channels
