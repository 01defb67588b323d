from xml.etree import ElementTree as ET

from detectron2.data.datasets.pascal_voc import load_voc_instances
from pycocotools.coco import COCO

from ring.detection import configs
from ring.detection.embedded import KEYPOINT_NAMES


def test_generated_dataset_is_real_coco_and_voc(datasets_root):
    instances = COCO(str(datasets_root / "coco" / "annotations" / "instances_train2017.json"))
    assert len(instances.getCatIds()) == 80 and len(instances.getImgIds()) == 8
    ann = instances.loadAnns(instances.getAnnIds())[0]
    assert instances.annToMask(ann).sum() > 0  # polygon masks decode
    keypoints = COCO(str(datasets_root / "coco" / "annotations" / "person_keypoints_val2017.json"))
    assert keypoints.loadCats(1)[0]["keypoints"] == list(KEYPOINT_NAMES)
    for person in keypoints.loadAnns(keypoints.getAnnIds()):
        assert len(person["keypoints"]) == 3 * 17 and person["num_keypoints"] == 17
    # The keypoint task's own images: a person in each, no person over another (its keypoints are all visible).
    assert not set(keypoints.getImgIds()) & set(instances.getImgIds()) and len(keypoints.getImgIds()) == 4
    for image_id in keypoints.getImgIds():
        boxes = [a["bbox"] for a in keypoints.loadAnns(keypoints.getAnnIds(imgIds=image_id))]
        assert boxes and all(_apart(a, b) for i, a in enumerate(boxes) for b in boxes[:i])
        assert (datasets_root / "coco" / "val2017" / keypoints.loadImgs(image_id)[0]["file_name"]).is_file()
    voc = load_voc_instances(str(datasets_root / "VOC2007"), "test", ("person", "car", "dog"))
    assert len(voc) == 4 and all(r["annotations"] for r in voc)
    xml = ET.parse(next((datasets_root / "VOC2012" / "Annotations").glob("*.xml")))
    assert xml.find("object/difficult").text == "0"
    # Every file Detectron2's builtin datasets read for the three tasks is there.
    configs.check_datasets(
        [
            "coco_2017_train",
            "coco_2017_val",
            "keypoints_coco_2017_train",
            "keypoints_coco_2017_val",
            "voc_2007_trainval",
            "voc_2012_trainval",
            "voc_2007_test",
        ],
        datasets_root,
    )


def _apart(a, b) -> bool:
    return a[0] + a[2] <= b[0] or b[0] + b[2] <= a[0] or a[1] + a[3] <= b[1] or b[1] + b[3] <= a[1]
