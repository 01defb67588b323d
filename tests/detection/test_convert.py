import pickle

import pytest
import torch
from detectron2.checkpoint import DetectionCheckpointer
from detectron2.modeling import build_model
from torchvision.models import resnet18

from ring.core.config import DetectionConfig
from ring.detection import configs, convert
from ring.detection.convert import ConversionError, check_loaded, d2_key
from ring.engine.encoder import save_trunks
from ring.plan.detection_tasks import TASKS
from tests.helpers import run_module


def test_every_torchvision_key_has_an_explicit_detectron2_name():
    names = {k: d2_key(k) for k in resnet18().state_dict() if not k.startswith("fc.")}
    assert names["conv1.weight"] == "stem.conv1.weight"
    assert names["bn1.running_var"] == "stem.conv1.norm.running_var"
    assert names["layer1.0.bn2.bias"] == "res2.0.conv2.norm.bias"
    assert names["layer4.0.downsample.0.weight"] == "res5.0.shortcut.weight"
    assert names["layer4.0.downsample.1.running_mean"] == "res5.0.shortcut.norm.running_mean"
    assert names["layer2.1.bn1.num_batches_tracked"] is None  # FrozenBN has no step counter
    mapped = [v for v in names.values() if v is not None]
    assert len(mapped) == len(set(mapped)) == 100  # 20 convolutions + 20 norms x 4 tensors
    with pytest.raises(ConversionError, match="no Detectron2 name"):
        d2_key("fc.weight")
    with pytest.raises(ConversionError, match="no Detectron2 name"):
        d2_key("layer5.0.conv1.weight")


def test_converted_file_is_complete_and_reproduces_torchvision(encoder_file, backbone_pkl):
    doc = pickle.loads(backbone_pkl.read_bytes())
    assert doc["matching_heuristics"] is True and doc["__author__"] == convert.AUTHOR
    assert len(doc["model"]) == 100
    trunk = convert.load_trunk(torch.load(encoder_file, weights_only=True))
    converted = {k: torch.as_tensor(v) for k, v in doc["model"].items()}
    assert convert.check_against_detectron2(trunk, converted) <= 1e-5
    # A wrong map (two BatchNorms swapped) is caught numerically, not only by name.
    swapped = dict(converted)
    swapped["res2.0.conv1.norm.weight"], swapped["res2.0.conv2.norm.weight"] = (
        converted["res2.0.conv2.norm.weight"],
        converted["res2.0.conv1.norm.weight"],
    )
    with pytest.raises(ConversionError, match="differ from torchvision"):
        convert.check_against_detectron2(trunk, swapped)


def _model(task, backbone_pkl, tmp_path, **overrides):
    cfg = DetectionConfig(
        task=task, method="IR", source="digits", num_gpus=0, overrides={"MODEL.FPN.OUT_CHANNELS": 32, **overrides}
    )
    d2cfg = configs.build(cfg, TASKS[task], backbone_pkl, tmp_path)
    model = build_model(d2cfg)
    DetectionCheckpointer(model).load(str(backbone_pkl))
    return model


@pytest.mark.parametrize("task", ["coco_det_seg", "voc_det"])  # R18-FPN and R18-C4
def test_fpn_and_c4_models_hold_every_converted_tensor(task, backbone_pkl, tmp_path):
    converted = pickle.loads(backbone_pkl.read_bytes())["model"]
    model = _model(task, backbone_pkl, tmp_path)
    assert check_loaded(model.state_dict(), converted, task) == 100
    if task == "voc_det":  # res5 lives in the ROI head, built from BasicBlocks
        assert torch.equal(model.roi_heads.res5[1].conv2.weight, torch.as_tensor(converted["res5.1.conv2.weight"]))


def test_detectron2s_bottleneck_res5_head_is_caught_with_an_r18(backbone_pkl, tmp_path):
    """The R18-C4 caveat: Res5ROIHeads builds Bottleneck blocks and loads an R18 res5 only partly."""
    converted = pickle.loads(backbone_pkl.read_bytes())["model"]
    model = _model("voc_det", backbone_pkl, tmp_path, **{"MODEL.ROI_HEADS.NAME": "Res5ROIHeads"})
    with pytest.raises(ConversionError, match="does not load completely.*BasicRes5ROIHeads") as err:
        check_loaded(model.state_dict(), converted, "R18-C4")
    assert "res5" in str(err.value) and len(str(err.value).splitlines()) == 1


def test_an_encoder_that_is_not_a_resnet18_trunk_fails_in_one_sentence(tmp_path):
    bad = tmp_path / "encoder.pt"
    save_trunks({"encoder.pt": {"conv1.weight": torch.zeros(1)}}, tmp_path)  # recorded: the checksum holds
    result = run_module("ring.detection.convert", "--encoder", bad, "--out", tmp_path / "b.pkl", check=False)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("ring:")]
    assert len(lines) == 1 and "not a torchvision resnet18 trunk" in lines[0]
    assert not (tmp_path / "b.pkl").exists()
