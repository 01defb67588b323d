import pytest

from ring.core.config import DetectionConfig
from ring.detection import configs
from ring.plan.detection_tasks import TASKS


def _cfg(task, **kw):
    return DetectionConfig(task=task, method="IRing", source="imagenet", num_gpus=0, **kw)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_paper_overrides_on_detectron2s_own_base_config(task, tmp_path):
    d2 = configs.build(_cfg(task, seed=3), TASKS[task], tmp_path / "backbone.pkl", tmp_path)
    assert d2.INPUT.FORMAT == "RGB"
    assert d2.MODEL.BACKBONE.FREEZE_AT == 5
    assert list(d2.MODEL.PIXEL_MEAN) == [123.675, 116.28, 103.53]  # R, G, B
    assert list(d2.MODEL.PIXEL_STD) == [58.395, 57.12, 57.375]
    assert (d2.MODEL.RESNETS.DEPTH, d2.MODEL.RESNETS.RES2_OUT_CHANNELS, d2.MODEL.RESNETS.STRIDE_IN_1X1) == (
        18,
        64,
        False,
    )
    assert d2.MODEL.RESNETS.NORM == "FrozenBN"
    assert d2.MODEL.WEIGHTS == str(tmp_path / "backbone.pkl") and d2.SEED == 3
    assert d2.SOLVER.IMS_PER_BATCH == 16 and d2.SOLVER.BASE_LR == 0.02
    if task == "voc_det":  # MoCo's VOC schedule on Detectron2's C4 config
        assert (d2.SOLVER.MAX_ITER, tuple(d2.SOLVER.STEPS)) == (24000, (18000, 22000))
        assert d2.MODEL.ROI_HEADS.NAME == "BasicRes5ROIHeads"
        assert d2.DATASETS.TRAIN == ("voc_2007_trainval", "voc_2012_trainval") and d2.DATASETS.TEST == (
            "voc_2007_test",
        )
    else:  # COCO 1x
        assert (d2.SOLVER.MAX_ITER, tuple(d2.SOLVER.STEPS)) == (90000, (60000, 80000))
        assert d2.MODEL.MASK_ON == (task == "coco_det_seg") and d2.MODEL.KEYPOINT_ON == (task == "coco_kp")
        assert d2.MODEL.BACKBONE.NAME == "build_resnet_fpn_backbone"


def test_unknown_or_mistyped_detectron2_keys_fail_in_one_sentence(tmp_path):
    with pytest.raises(
        ValueError, match=r"Unknown Detectron2 config key 'SOLVER.MAX_ITERS'.*Did you mean 'SOLVER.MAX_ITER'\?"
    ):
        configs.build(_cfg("coco_kp", overrides={"SOLVER.MAX_ITERS": 5}), TASKS["coco_kp"], "w.pkl", tmp_path)
    with pytest.raises(ValueError, match="'SOLVER.MAX_ITER' in the overrides of cell IRing/coco_kp cannot take 'five'"):
        configs.build(_cfg("coco_kp", overrides={"SOLVER.MAX_ITER": "five"}), TASKS["coco_kp"], "w.pkl", tmp_path)
