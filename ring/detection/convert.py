"""torchvision ResNet-18 encoder -> Detectron2 backbone weights (``.pkl``), with proofs.

    python -m ring.detection.convert --encoder PRETRAIN_CELL/encoder.pt --out CELL/backbone.pkl

The paper converts its encoders with Detectron2's ``tools/convert-torchvision-to-d2.py``.  That
script renames keys with string replacements and silently passes through anything it does not
recognise; here every torchvision key has an explicit Detectron2 name (:func:`d2_key`) and a key
outside the map fails the conversion.  Two checks run before the file is written:

* completeness: the converted keys are exactly the state-dict keys of Detectron2's own ResNet-18
  (stem and res2-res5, FrozenBN), no key left over and none missing;
* numerics: Detectron2's stem and first res2 block, holding the converted weights, reproduce
  torchvision's ``maxpool(relu(bn1(conv1(x))))`` and ``layer1[0]`` on the same input.

The ``.pkl`` holds only a dict of strings and numpy arrays (Detectron2's own converted-weights
format) and is read back by :func:`read_converted` with a restricted unpickler that admits nothing
else: a planted payload cannot run, whatever the file holds.

Whether a given Detectron2 *model* (R18-FPN, R18-C4 with its res5 in the ROI head) then loads every
backbone tensor is checked by :func:`check_loaded` when the cell builds its model.
"""

from __future__ import annotations

import argparse
import json
import pickle
import re
import sys
from pathlib import Path

import torch

from ring.core.files import CHECKSUMS, FileError, atomic_write, record_checksums, verify_checksum
from ring.engine.checkpoint import safe_load
from ring.engine.encoder import load_trunk
from ring.plan.detection_tasks import missing_detectron2

AUTHOR = "ring-bench (torchvision resnet18 encoder)"
PICKLE_PROTOCOL = 4  # numpy arrays as numpy._core.multiarray._reconstruct + ndarray + dtype: all SafeUnpickler admits

# The only globals a converted file may name: how numpy pickles an array (protocols 2-5, numpy 1 and
# 2 module names) and the latin-1 bytes helper of protocol-2 files.  Nothing here runs code of the file's choosing.
_SAFE_GLOBALS = {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy.core.numeric", "_frombuffer"),
    ("_codecs", "encode"),
}


class SafeUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists, strings, numbers and numpy arrays; any other global is refused."""

    def find_class(self, module: str, name: str):
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"it names {module}.{name}, which a converted-weights file never holds")


_STEM = {
    "conv1.weight": "stem.conv1.weight",
    "bn1.weight": "stem.conv1.norm.weight",
    "bn1.bias": "stem.conv1.norm.bias",
    "bn1.running_mean": "stem.conv1.norm.running_mean",
    "bn1.running_var": "stem.conv1.norm.running_var",
}
_BLOCK_PART = {
    "conv1": "conv1",
    "bn1": "conv1.norm",
    "conv2": "conv2",
    "bn2": "conv2.norm",
    "downsample.0": "shortcut",
    "downsample.1": "shortcut.norm",
}
_BLOCK_KEY = re.compile(
    r"layer([1-4])\.(\d+)\.(conv[12]|bn[12]|downsample\.[01])\.(weight|bias|running_mean|running_var)"
)


class ConversionError(ValueError):
    """An encoder that cannot be converted, or a converted file a model does not load completely."""


def d2_key(key: str) -> str | None:
    """Detectron2's name for a torchvision resnet18 key; None for BatchNorm's step counter.

    torchvision ``layerN`` is Detectron2's ``res{N+1}``; BatchNorm ``bnK`` becomes the ``norm`` of
    ``convK``; ``downsample.0/1`` is the ``shortcut`` convolution and its norm.
    """
    if key.endswith("num_batches_tracked"):
        return None  # Detectron2's FrozenBatchNorm2d keeps no step counter
    if key in _STEM:
        return _STEM[key]
    match = _BLOCK_KEY.fullmatch(key)
    if match is None:
        raise ConversionError(
            f"Encoder key {key!r} has no Detectron2 name; only a torchvision resnet18 trunk converts."
        )
    layer, block, part, tensor = match.groups()
    return f"res{int(layer) + 1}.{block}.{_BLOCK_PART[part]}.{tensor}"


def convert_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    converted = {}
    for key, value in state.items():
        name = d2_key(key)
        if name is not None:
            converted[name] = value.detach().cpu()
    return converted


def r18_cfg():
    """A Detectron2 config for a bare ResNet-18 with the paper's backbone settings."""
    from detectron2.config import get_cfg

    cfg = get_cfg()
    cfg.MODEL.RESNETS.DEPTH = 18
    cfg.MODEL.RESNETS.RES2_OUT_CHANNELS = 64
    cfg.MODEL.RESNETS.STRIDE_IN_1X1 = False
    cfg.MODEL.RESNETS.OUT_FEATURES = ["res2", "res3", "res4", "res5"]
    cfg.MODEL.BACKBONE.FREEZE_AT = 0
    return cfg


def check_against_detectron2(trunk: torch.nn.Module, converted: dict[str, torch.Tensor]) -> float:
    """Completeness against Detectron2's ResNet-18 and numerical equality of stem and first block.

    Returns the largest absolute difference seen (tolerance 1e-5 on unit-scale activations).
    """
    from detectron2.layers import ShapeSpec
    from detectron2.modeling.backbone.resnet import build_resnet_backbone

    backbone = build_resnet_backbone(r18_cfg(), ShapeSpec(channels=3)).eval()
    expected = set(backbone.state_dict())
    missing, unused = sorted(expected - set(converted)), sorted(set(converted) - expected)
    if missing or unused:
        raise ConversionError(
            f"The converted encoder does not match Detectron2's ResNet-18: {len(missing)} of its tensors missing "
            f"(e.g. {missing[:3]}) and {len(unused)} converted tensors unused (e.g. {unused[:3]})."
        )
    for name, value in backbone.state_dict().items():
        if tuple(value.shape) != tuple(converted[name].shape):
            raise ConversionError(
                f"Converted tensor {name} has shape {tuple(converted[name].shape)}, "
                f"Detectron2's ResNet-18 expects {tuple(value.shape)}."
            )
    backbone.load_state_dict(converted, strict=True)
    trunk = trunk.eval()
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        tv_stem = trunk.maxpool(trunk.relu(trunk.bn1(trunk.conv1(x))))
        d2_stem = backbone.stem(x)
        tv_block = trunk.layer1[0](tv_stem)
        d2_block = backbone.res2[0](d2_stem)
    diff = max((tv_stem - d2_stem).abs().max().item(), (tv_block - d2_block).abs().max().item())
    if not diff <= 1e-5:
        raise ConversionError(
            f"Detectron2's stem and first block with the converted weights differ from "
            f"torchvision's by up to {diff:.3g} on the same input; the key map is wrong."
        )
    return diff


def write_pkl(converted: dict[str, torch.Tensor], path: str | Path) -> None:
    """Detectron2's checkpoint format for converted weights, written atomically.

    ``matching_heuristics`` lets Detectron2's checkpointer place the prefix-free names under the
    model's ``backbone.bottom_up.`` (FPN), ``backbone.`` or ``roi_heads.`` (C4 res5).
    """
    doc = {"model": {k: v.numpy() for k, v in converted.items()}, "__author__": AUTHOR, "matching_heuristics": True}
    atomic_write(path, lambda fh: pickle.dump(doc, fh, protocol=PICKLE_PROTOCOL))


def read_converted(path: str | Path) -> dict:
    """The ``model`` dict (name -> numpy array) of a converted ``.pkl``, read without running any code.

    Every failure is one sentence naming the file: missing, unreadable, holding something other
    than arrays (a planted object is refused before it is built), or not a complete ResNet-18.
    """
    import numpy as np

    path = Path(path)
    redo = "rerun ring.detection.convert on its encoder"
    if not path.is_file():
        raise ConversionError(
            f"The converted backbone {path} does not exist; run the conversion rule (ring.detection.convert) first."
        )
    try:
        with open(path, "rb") as fh:
            doc = SafeUnpickler(fh, encoding="latin1").load()
    except Exception as err:  # truncated, not a pickle, or a global outside the allowed list
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConversionError(f"The converted backbone {path} is unreadable ({reason}); {redo}.") from None
    model = doc.get("model") if isinstance(doc, dict) else None
    if (
        not isinstance(model, dict)
        or not doc.get("matching_heuristics")
        or not all(isinstance(k, str) and isinstance(v, np.ndarray) for k, v in model.items())
    ):
        raise ConversionError(
            f"The converted backbone {path} is not a Detectron2 .pkl written by ring.detection.convert; {redo}."
        )
    check_complete(model, path)
    return model


def convert(encoder_path: str | Path, out_path: str | Path) -> float:
    """Convert, check, write; returns the stem/first-block difference to torchvision.

    The backbone's checksum record (``export.json`` beside it) names its SHA-256 and the encoder it was
    converted from (the encoder's own record: files and pretraining config hash), which the detection
    stage verifies before reading it and the tables follow back to the pretraining cell (ring.plan.lineage).
    """
    verify_checksum(encoder_path)  # a trunk altered on disk never becomes a backbone
    encoder = json.loads(Path(encoder_path).with_name(CHECKSUMS).read_text())
    trunk = load_trunk(safe_load(encoder_path, "encoder", "rerun the pretraining cell that writes it"))
    converted = convert_state(trunk.state_dict())
    diff = check_against_detectron2(trunk, converted)
    write_pkl(converted, out_path)
    record_checksums(
        Path(out_path).parent,
        [Path(out_path).name],
        encoder_files=encoder.get("files"),
        encoder_config_hash=encoder.get("config_hash"),
    )
    return diff


def expected_keys() -> set[str]:
    """Detectron2's names of every tensor a torchvision resnet18 trunk converts to (its ``fc`` aside)."""
    from torchvision.models import resnet18

    with torch.device("meta"):  # the names alone: no memory, no draw from the global RNG
        state = resnet18().state_dict()
    return {name for name in map(d2_key, (k for k in state if not k.startswith("fc."))) if name is not None}


def check_complete(converted: dict, path: str | Path) -> None:
    """The converted file holds Detectron2's ResNet-18 exactly, before any model is built: a file
    with a key missing or unknown was altered or written by something else, not a model mismatch."""
    expected = expected_keys()
    missing, unknown = sorted(expected - set(converted)), sorted(set(converted) - expected)
    if missing or unknown:
        raise ConversionError(
            f"The converted backbone {path} does not hold a ResNet-18 as ring.detection.convert writes it: "
            f"{len(missing)} tensors missing (e.g. {missing[:2]}) and {len(unknown)} unknown (e.g. {unknown[:2]}); "
            f"rerun the conversion (ring convert --encoder <pretraining cell>/encoder.pt --out {path})."
        )


def backbone_short_key(model_key: str) -> str | None:
    """The converted name a model tensor should hold: its ``stem...`` / ``resN...`` tail, if any."""
    match = re.search(r"(?:^|\.)((?:stem|res[2-5])\..*)$", model_key)
    return match.group(1) if match else None


def check_loaded(model_state: dict[str, torch.Tensor], converted: dict, where: str) -> int:
    """Prove a Detectron2 model holds every converted backbone tensor, unchanged, and nothing is left.

    ``model_state``: the model's state dict after Detectron2 loaded the converted file;
    ``converted``: the file's ``model`` dict.  Every model tensor under a ``stem``/``res2-5`` module
    (the FPN's bottom-up ResNet, or the C4 backbone plus the ROI head's res5) must equal the
    converted tensor of the same short name, and every converted tensor must be used.  Returns the
    number of tensors checked.
    """
    missing, differ, used = [], [], set()
    for key, value in model_state.items():
        short = backbone_short_key(key)
        if short is None:
            continue
        if short not in converted:
            missing.append(key)
            continue
        used.add(short)
        expected = torch.as_tensor(converted[short])
        if tuple(value.shape) != tuple(expected.shape) or not torch.equal(value.detach().cpu(), expected):
            differ.append(key)
    unused = sorted(set(converted) - used)
    if missing or differ or unused:
        raise ConversionError(
            f"The converted backbone does not load completely into {where}: {len(missing)} backbone tensors "
            f"missing from it (e.g. {missing[:2]}), {len(differ)} not holding the converted values (e.g. "
            f"{differ[:2]}), "
            f"{len(unused)} converted tensors unused (e.g. {unused[:2]}); the model's ResNet depth or res5 head does "
            "not match a ResNet-18 (R18-C4 needs ROI_HEADS.NAME BasicRes5ROIHeads)."
        )
    return len(used)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--encoder", required=True, help="encoder.pt written by ring.pretrain (torchvision resnet18 trunk)"
    )
    parser.add_argument("--out", required=True, help="Detectron2 .pkl to write")
    args = parser.parse_args(argv)
    try:
        diff = convert(args.encoder, args.out)
    except (ConversionError, FileError, ValueError) as err:
        print(f"ring: {err}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as err:
        if missing_detectron2(err) is None:
            raise
        print(f"ring: {missing_detectron2(err)}", file=sys.stderr)
        return 1
    print(
        f"ring: {args.out}: converted; stem and first block match torchvision (max |diff| {diff:.2e})", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
