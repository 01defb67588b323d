"""ResNet-18 encoder with a 128-d L2-normalised head, and its torchvision-format export."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models import resnet18

HEADS = ("linear", "mlp")

# The exact contract of an exported encoder: torchvision's resnet18 state_dict without the
# classifier.  ``resnet18().load_state_dict(sd, strict=False)`` must report these and nothing else.
TORCHVISION_MISSING_KEYS = ("fc.weight", "fc.bias")


class Encoder(nn.Module):
    """torchvision ``resnet18`` trunk (``fc`` removed) plus a projection head."""

    def __init__(self, head: str = "linear", out_dim: int = 128):
        super().__init__()
        if head not in HEADS:
            raise ValueError(f"Unknown head {head!r}; choose one of {', '.join(HEADS)}.")
        self.trunk = resnet18(weights=None)
        feat_dim = self.trunk.fc.in_features
        self.trunk.fc = nn.Identity()
        if head == "linear":
            self.head = nn.Linear(feat_dim, out_dim)
        else:
            self.head = nn.Sequential(nn.Linear(feat_dim, feat_dim), nn.ReLU(inplace=True), nn.Linear(feat_dim, out_dim))

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        """Pre-pool output of the last convolutional stage: B x 512 x h x w (7 x 7 at 224 input)."""
        return trunk_feature_map(self.trunk, x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = torch.flatten(self.trunk.avgpool(self.feature_map(x)), 1)
        return F.normalize(self.head(pooled), dim=1)


def torchvision_state_dict(encoder: Encoder) -> dict[str, torch.Tensor]:
    """The trunk's weights under torchvision's resnet18 key names (no ``fc``), on the CPU."""
    return {k: v.detach().cpu().clone() for k, v in encoder.trunk.state_dict().items()}


def load_trunk(state: dict[str, torch.Tensor]) -> nn.Module:
    """A torchvision resnet18 holding an exported trunk; fails unless exactly ``fc`` is missing."""
    model = resnet18(weights=None)
    expected = set(model.state_dict())
    missing = sorted(expected - set(state))
    unexpected = sorted(set(state) - expected)
    if missing != sorted(TORCHVISION_MISSING_KEYS) or unexpected:
        raise ValueError(
            "Encoder file is not a torchvision resnet18 trunk: expected only fc.weight/fc.bias missing, got "
            f"missing={missing} unexpected={unexpected}; point to an encoder.pt written by ring.pretrain."
        )
    try:
        model.load_state_dict(state, strict=False)
    except RuntimeError as err:
        detail = str(err).splitlines()[-1].strip()
        raise ValueError(f"Encoder file does not fit resnet18 ({detail}); point to an encoder.pt written by ring.pretrain.") from None
    model.fc = nn.Identity()
    return model


def trunk_feature_map(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Pre-pool feature map of a torchvision resnet18."""
    x = model.maxpool(model.relu(model.bn1(model.conv1(x))))
    return model.layer4(model.layer3(model.layer2(model.layer1(x))))


class Precision(nn.Module):
    """Runs a module in bf16 autocast and/or channels-last memory format, returning fp32 outputs.

    Only the network runs in reduced precision: everything downstream (bank and queue similarities,
    Ring's percentile selection, the loss) sees fp32 embeddings, so selection ties do not appear.
    """

    def __init__(self, module: nn.Module, bf16: bool, channels_last: bool):
        super().__init__()
        self.module = module.to(memory_format=torch.channels_last) if channels_last else module
        self.bf16 = bf16
        self.channels_last = channels_last

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast(device_type=x.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            out = self.module(x)
        return out.float()


def resolve_precision(precision: str, channels_last: str, device: torch.device) -> tuple[bool, bool]:
    """("auto" means on for CUDA devices, off elsewhere) -> (bf16, channels_last)."""
    if precision not in ("auto", "bf16", "fp32"):
        raise ValueError(f"Unknown precision {precision!r}; choose auto, bf16 or fp32.")
    if channels_last not in ("auto", "on", "off"):
        raise ValueError(f"Unknown channels_last {channels_last!r}; choose auto, on or off.")
    gpu = device.type == "cuda"
    return (precision == "bf16" or (precision == "auto" and gpu),
            channels_last == "on" or (channels_last == "auto" and gpu))


class Grouped(nn.Module):
    """BatchNorm statistics per group of the batch: ``groups`` consecutive chunks run separately.

    This is what ``groups`` GPUs compute (each normalises its own share of the batch); MoCo's
    shuffled BN relies on it (``ring.objectives.moco``), and data-parallel runs are equivalent to a
    single process with as many groups.
    """

    def __init__(self, module: nn.Module, groups: int):
        super().__init__()
        if groups < 1:
            raise ValueError(f"bn_groups={groups} must be at least 1.")
        self.module = module
        self.groups = groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.groups == 1:
            return self.module(x)
        if len(x) % self.groups:
            raise ValueError(f"A batch of {len(x)} does not split into bn_groups={self.groups} equal groups.")
        return torch.cat([self.module(chunk) for chunk in x.chunk(self.groups)], dim=0)
