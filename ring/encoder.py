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
