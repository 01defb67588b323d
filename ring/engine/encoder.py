"""ResNet-18 encoder with a 128-d L2-normalised head, and its torchvision-format export.

CMC's encoder (:class:`LabEncoder`) is two of them, one on the L and one on the ab channels of Lab
colour.  A CMC pretraining cell exports ``encoder.pt`` (the L trunk, conv1 with 1 input channel)
and ``encoder_ab.pt`` (the ab trunk, conv1 with 2), both torchvision resnet18 ``state_dict``s
without ``fc``; :func:`load_feature_extractor` builds the frozen features of any cell from them.
Exported files are written by :func:`save_trunks` with a checksum record (``export.json``) that
every reader verifies first (:func:`ring.core.files.verify_checksum`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models import resnet18

from ring.core.files import KEPT, FileError, place_exports, record_checksums, verify_checksum, write_failure
from ring.engine import HEADS, PRETRAIN_PRECISIONS  # the lists plan-time checks read too
from ring.engine.checkpoint import atomic_save, safe_load

# The exact contract of an exported encoder: torchvision's resnet18 state_dict without the
# classifier.  ``resnet18().load_state_dict(sd, strict=False)`` must report these and nothing else.
TORCHVISION_MISSING_KEYS = ("fc.weight", "fc.bias")


def _resnet18(in_channels: int = 3) -> nn.Module:
    """torchvision's resnet18; conv1 takes ``in_channels`` channels (1 for CMC's L, 2 for its ab)."""
    model = resnet18(weights=None)
    if in_channels != 3:
        model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    return model


class Encoder(nn.Module):
    """torchvision ``resnet18`` trunk (``fc`` removed) plus a projection head."""

    def __init__(self, head: str = "linear", out_dim: int = 128, in_channels: int = 3):
        super().__init__()
        if head not in HEADS:
            raise ValueError(f"Unknown head {head!r}; choose one of {', '.join(HEADS)}.")
        self.trunk = _resnet18(in_channels)
        feat_dim = self.trunk.fc.in_features
        self.trunk.fc = nn.Identity()
        if head == "linear":
            self.head = nn.Linear(feat_dim, out_dim)
        else:
            self.head = nn.Sequential(
                nn.Linear(feat_dim, feat_dim), nn.ReLU(inplace=True), nn.Linear(feat_dim, out_dim)
            )

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        """Pre-pool output of the last convolutional stage: B x 512 x h x w (7 x 7 at 224 input)."""
        return trunk_feature_map(self.trunk, x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = torch.flatten(self.trunk.avgpool(self.feature_map(x)), 1)
        return F.normalize(self.head(pooled), dim=1)


def torchvision_state_dict(encoder: Encoder) -> dict[str, torch.Tensor]:
    """The trunk's weights under torchvision's resnet18 key names (no ``fc``), on the CPU."""
    return {k: v.detach().cpu().clone() for k, v in encoder.trunk.state_dict().items()}


def load_trunk(state: dict[str, torch.Tensor], in_channels: int = 3) -> nn.Module:
    """A torchvision resnet18 holding an exported trunk; fails unless exactly ``fc`` is missing."""
    model = _resnet18(in_channels)
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
        raise ValueError(
            f"Encoder file does not fit resnet18 ({detail}); point to an encoder.pt written by ring.pretrain."
        ) from None
    model.fc = nn.Identity()
    return model


def trunk_feature_map(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Pre-pool feature map of a torchvision resnet18."""
    x = model.maxpool(model.relu(model.bn1(model.conv1(x))))
    return model.layer4(model.layer3(model.layer2(model.layer1(x))))


class Precision(nn.Module):
    """Runs a module in bf16 autocast and/or channels-last memory format, returning outputs in ``dtype`` (fp32, or
    fp64 where the whole computation is: :func:`compute_dtype`).

    Only the network runs in reduced precision: everything downstream (bank and queue similarities,
    Ring's percentile selection, the loss) sees fp32 embeddings, so selection ties do not appear.
    """

    def __init__(
        self,
        module: nn.Module,
        bf16: bool,
        channels_last: bool,
        compile_: bool = False,
        dtype: torch.dtype = torch.float32,
    ):
        super().__init__()
        self.module = module.to(memory_format=torch.channels_last) if channels_last else module
        self.bf16 = bf16
        self.channels_last = channels_last
        self.dtype = dtype
        # torch.compile's wrapper of ``module`` (its parameters), deliberately not a submodule: registered, it would
        # prefix every state_dict key with "_orig_mod.", and a checkpoint (MoCo's key encoder) would then load only
        # under the same compile setting.  A deep copy copies it with ``module``, onto the copy's parameters.
        self.__dict__["_run"] = torch.compile(self.module) if compile_ else self.module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.dtype)  # views made in fp32 (on the device) reach an fp64 network in its dtype; else a no-op
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast(device_type=x.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            out = self._run(x)
        return out.to(self.dtype)


def resolve_precision(
    precision: str, channels_last: str, device: torch.device, bn_groups: int = 1
) -> tuple[bool, bool]:
    """("auto" means on for CUDA devices, off elsewhere) -> (bf16, channels_last); "fp64" is fp32's (bf16 off).

    Channels-last "auto" stays off where BatchNorm runs in groups (``bn_groups`` per process > 1): the grouped
    layer then viewed its input as N/G x (G C) x H x W, free in NCHW and a copy each way in channels-last.
    Measured on an H200 (ring/resources/figures/throughput_MoCo*-NVIDIA_H200.json, bf16, 8 groups): MoCo
    trained 6,514 images/s in NCHW against 5,027 in channels-last.  Channels-last groups copy nothing
    (:class:`_ChannelsLastGroups`), at about twice the calls per layer: whether "auto" turns them on
    awaits the GPU figure (``benchmarks/gpu_suite.sh``'s throughput_MoCo_channels_last against throughput_MoCo).
    """
    if precision not in PRETRAIN_PRECISIONS:
        raise ValueError(f"Unknown precision {precision!r}; choose {', '.join(PRETRAIN_PRECISIONS)}.")
    if channels_last not in ("auto", "on", "off"):
        raise ValueError(f"Unknown channels_last {channels_last!r}; choose auto, on or off.")
    gpu = device.type == "cuda"
    return (
        precision == "bf16" or (precision == "auto" and gpu),
        channels_last == "on" or (channels_last == "auto" and gpu and bn_groups == 1),
    )


def compute_dtype(precision: str) -> torch.dtype:
    """The dtype a pretraining cell computes in: float64 for ``precision: fp64`` (network, views, bank or queue, the
    objective's draws), else float32 (bf16 being autocast inside the network)."""
    return torch.float64 if precision == "fp64" else torch.float32


@contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """torch's default dtype set to ``dtype`` while a cell runs: every tensor the cell creates without naming a dtype
    (its parameters, the bank, the samplers' uniform draws, torchvision's views in the loader's forked workers) is
    made in it.  Restored after, for a caller that runs more than one cell in its process."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def resolve_compile(setting: str, device: torch.device) -> bool:
    """Whether :class:`Precision` compiles the network: ``setting`` "on", or "auto" on CUDA devices (see
    ``PretrainConfig.compile``).

    Under "auto" a graph that fails to compile runs eagerly, with dynamo's warning (its ``suppress_errors``):
    a default must not stop a cell that runs without it.  "on" is asked for explicitly, so a failure stops it.
    """
    if setting not in ("auto", "on", "off"):
        raise ValueError(f"Unknown compile {setting!r}; choose auto, on or off.")
    if setting == "off" or (setting == "auto" and device.type != "cuda"):
        return False
    import torch._dynamo

    torch._dynamo.config.suppress_errors = setting == "auto"
    return True


# Lab channels scaled from their range over the sRGB gamut (L in [0, 100], a in [-86.183, 98.233],
# b in [-107.857, 94.478]) to [-1, 1], as CMC normalises its L and ab views.
LAB_LOW = (0.0, -86.183, -107.857)
LAB_HIGH = (100.0, 98.233, 94.478)


def _rgb_to_lab(rgb: torch.Tensor) -> torch.Tensor:
    # Imported here: kornia costs every stage process 0.3 CPU-seconds at start-up, and only CMC's encoders use it.
    import kornia.color

    return kornia.color.rgb_to_lab(rgb)


def lab_views(x: torch.Tensor, mean, std) -> tuple[torch.Tensor, torch.Tensor]:
    """CMC's two views of a batch normalised with the dataset's RGB ``mean``/``std``: (L, ab), in fp32."""
    shape = (1, 3, 1, 1)
    with torch.autocast(device_type=x.device.type, enabled=False):
        rgb = (x.float() * x.new_tensor(std).view(shape) + x.new_tensor(mean).view(shape)).clamp(0.0, 1.0)
        lab = _rgb_to_lab(rgb)
        low, high = x.new_tensor(LAB_LOW).view(shape), x.new_tensor(LAB_HIGH).view(shape)
        lab = (2.0 * lab - (low + high)) / (high - low)
    return lab[:, :1], lab[:, 1:]


class LabEncoder(nn.Module):
    """CMC's encoder: an L and an ab ResNet-18 (twice the parameters); output ``[z_L, z_ab]``."""

    def __init__(self, head: str, out_dim: int, mean, std):
        super().__init__()
        self.l = Encoder(head, out_dim, in_channels=1)
        self.ab = Encoder(head, out_dim, in_channels=2)
        self.mean, self.std = tuple(mean), tuple(std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lum, ab = lab_views(x, self.mean, self.std)
        return torch.cat([self.l(lum.to(x.dtype)), self.ab(ab.to(x.dtype))], dim=1)


def export_trunks(encoder: nn.Module) -> dict[str, dict[str, torch.Tensor]]:
    """File name -> torchvision trunk ``state_dict`` of everything a pretraining cell exports."""
    if isinstance(encoder, LabEncoder):
        return {"encoder.pt": torchvision_state_dict(encoder.l), "encoder_ab.pt": torchvision_state_dict(encoder.ab)}
    return {"encoder.pt": torchvision_state_dict(encoder)}


def save_trunks(trunks: dict[str, dict[str, torch.Tensor]], folder: str | Path, **record) -> dict:
    """Write each trunk (file name -> state dict) atomically into the kept copies' folder (``exported/``), the
    checksum record naming their SHA-256 and ``record`` (the config hash), then link each into ``folder``,
    ``encoder.pt`` last: a reader trusts nothing until it is there.  Nothing is read from ``folder`` once
    encoder.pt is in place: a Snakemake rerun started meanwhile (its client was killed) deletes it as incomplete
    while this job still runs, and the launcher that re-attaches puts it back from the kept copy."""
    folder = Path(folder)
    names = sorted(trunks, key=lambda name: name == "encoder.pt")
    try:
        (folder / KEPT).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise FileError(write_failure(folder / KEPT, err)) from None
    for name in names:
        atomic_save(trunks[name], folder / KEPT / name)
    doc = record_checksums(folder, names, read_from=KEPT, **record)
    place_exports(folder, names)
    return doc


class TrunkFeatures(nn.Module):
    """Frozen pre-pool feature map of one exported trunk (RGB input)."""

    description = "resnet18.layer4 (pre-pool), flattened"

    def __init__(self, trunk: nn.Module):
        super().__init__()
        self.trunk = trunk

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return trunk_feature_map(self.trunk, x)


class LabFeatures(nn.Module):
    """CMC's frozen features: the L and ab trunks' pre-pool maps, concatenated along channels (as CMC evaluates)."""

    description = "resnet18.layer4 (pre-pool) of the L and ab encoders, concatenated (CMC's protocol), flattened"

    def __init__(self, trunk_l: nn.Module, trunk_ab: nn.Module, mean, std):
        super().__init__()
        self.trunk_l, self.trunk_ab = trunk_l, trunk_ab
        self.mean, self.std = tuple(mean), tuple(std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lum, ab = lab_views(x, self.mean, self.std)
        return torch.cat(
            [trunk_feature_map(self.trunk_l, lum.to(x.dtype)), trunk_feature_map(self.trunk_ab, ab.to(x.dtype))], dim=1
        )


def encoder_files(encoder_path: str | Path, names: tuple[str, ...]) -> list[Path]:
    """Every file of a pretraining cell's encoder: ``encoder_path`` and the other trunks of ``names`` (its method's
    :attr:`~ring.core.methods.Method.encoder_files`: CMC's ab trunk) beside it."""
    encoder_path = Path(encoder_path)
    return [encoder_path, *(encoder_path.with_name(n) for n in names[1:])]


def load_feature_extractor(encoder_path: str | Path, names: tuple[str, ...], mean, std) -> nn.Module:
    """The frozen feature extractor of a pretraining cell (eval mode, no gradients).

    ``names`` are the files its method exports (:attr:`ring.core.methods.Method.encoder_files`: one 3-channel trunk,
    or CMC's L and ab trunks), which the stage's entry point looked up; ``mean``/``std`` are the dataset's RGB
    normalisation, undone before CMC's Lab conversion.  Output: B x C x h x w.
    """
    files = encoder_files(encoder_path, names)
    sha256 = {f.name: verify_checksum(f) for f in files}  # every trunk verified before any is used
    states = [safe_load(f, "encoder", "rerun the pretraining cell that writes it") for f in files]
    if len(states) == 1:
        extractor = TrunkFeatures(load_trunk(states[0]))
    else:
        extractor = LabFeatures(load_trunk(states[0], in_channels=1), load_trunk(states[1], in_channels=2), mean, std)
    extractor.files, extractor.sha256 = files, sha256
    for p in extractor.parameters():
        p.requires_grad_(False)
    return extractor.eval()
