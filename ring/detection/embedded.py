"""The embedded default of Table 4: a small generated dataset in real COCO and Pascal VOC layout.

    python -m ring.detection.embedded --out results/<grid>/detection/datasets

Writes, below ``--out`` (a ``$DETECTRON2_DATASETS`` folder), exactly the files Detectron2's builtin
datasets read: ``coco/{train2017,val2017}/*.jpg``, ``coco/annotations/instances_{train,val}2017.json``
(boxes and polygon masks, the 80 COCO categories), ``coco/annotations/person_keypoints_{train,val}2017.json``
(persons with the 17 COCO keypoints) and ``VOC2007`` / ``VOC2012`` with ``Annotations/*.xml``,
``JPEGImages/*.jpg`` and ``ImageSets/Main/{trainval,test}.txt``.  Every image holds one to three
objects of three classes that look different: persons (a filled body polygon with its 17 keypoints
drawn as dots), cars (wide boxes) and dogs (triangles), on a noisy background.  The keypoint files
name images of their own (numbered from ``KEYPOINT_IDS`` on, in the same folders), each holding a
person first and no object drawn over another.  Deterministic given the seed.  Nothing here is used
for the paper grid, which reads the real datasets.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np
from PIL import Image, ImageDraw

# (COCO category id, COCO name, VOC name, RGB fill)
CLASSES = [(1, "person", "person", (220, 60, 60)), (3, "car", "car", (60, 90, 220)), (18, "dog", "dog", (60, 180, 80))]

KEYPOINT_NAMES = (
    "nose",
    "left_eye",
    "right_eye",
    "left_ear",
    "right_ear",
    "left_shoulder",
    "right_shoulder",
    "left_elbow",
    "right_elbow",
    "left_wrist",
    "right_wrist",
    "left_hip",
    "right_hip",
    "left_knee",
    "right_knee",
    "left_ankle",
    "right_ankle",
)
# Keypoint positions in a person's box (x, y in [0, 1]), the image's left being the person's right.
KEYPOINT_LAYOUT = [
    (0.5, 0.08),
    (0.56, 0.05),
    (0.44, 0.05),
    (0.62, 0.08),
    (0.38, 0.08),
    (0.7, 0.25),
    (0.3, 0.25),
    (0.85, 0.42),
    (0.15, 0.42),
    (0.92, 0.58),
    (0.08, 0.58),
    (0.62, 0.58),
    (0.38, 0.58),
    (0.64, 0.78),
    (0.36, 0.78),
    (0.66, 0.97),
    (0.34, 0.97),
]
# The keypoint task's images are numbered from here on, beside the other tasks' in coco/{train,val}2017.
KEYPOINT_IDS = 1000
SKELETON = [
    [16, 14],
    [14, 12],
    [17, 15],
    [15, 13],
    [12, 13],
    [6, 12],
    [7, 13],
    [6, 7],
    [6, 8],
    [7, 9],
    [8, 10],
    [9, 11],
    [2, 3],
    [1, 2],
    [1, 3],
    [2, 4],
    [3, 5],
    [4, 6],
    [5, 7],
]  # COCO's, 1-based


def _coco_categories() -> list[dict]:
    from detectron2.data.datasets.builtin_meta import COCO_CATEGORIES

    # All 80 thing categories with their real ids: Detectron2 checks them against its COCO metadata.
    return [{"id": c["id"], "name": c["name"], "supercategory": "thing"} for c in COCO_CATEGORIES if c["isthing"]]


def _shape(kind: str, x0: float, y0: float, w: float, h: float) -> list[tuple[float, float]]:
    if kind == "person":  # a body outline: head, shoulders, arms out, legs
        rel = [
            (0.4, 0.0),
            (0.6, 0.0),
            (0.62, 0.18),
            (1.0, 0.55),
            (0.95, 0.62),
            (0.66, 0.45),
            (0.7, 1.0),
            (0.56, 1.0),
            (0.5, 0.62),
            (0.44, 1.0),
            (0.3, 1.0),
            (0.34, 0.45),
            (0.05, 0.62),
            (0.0, 0.55),
            (0.38, 0.18),
        ]
    elif kind == "car":
        rel = [(0.0, 0.3), (0.25, 0.3), (0.35, 0.0), (0.7, 0.0), (0.8, 0.3), (1.0, 0.3), (1.0, 1.0), (0.0, 1.0)]
    else:  # dog
        rel = [(0.0, 1.0), (0.5, 0.0), (1.0, 1.0)]
    return [(x0 + u * w, y0 + v * h) for u, v in rel]


def _place(rng: np.random.Generator, size: int, w: float, h: float, apart_from: list, tries: int) -> tuple | None:
    """A top-left corner for a w x h box that overlaps none of the boxes ``apart_from``, or None after ``tries``."""
    for _ in range(tries):
        x0, y0 = float(rng.uniform(0, size - w - 1)), float(rng.uniform(0, size - h - 1))
        if all(x0 + w <= bx or bx + bw <= x0 or y0 + h <= by or by + bh <= y0 for bx, by, bw, bh in apart_from):
            return x0, y0
    return None


def _image(rng: np.random.Generator, size: int, persons: bool = False) -> tuple[Image.Image, list[dict]]:
    """One image and its objects; ``persons``: the keypoint set's kind (a person first, no object over another)."""
    pixels = rng.normal(128, 25, (size, size, 3)).clip(0, 255).astype(np.uint8)
    image = Image.fromarray(pixels)
    draw = ImageDraw.Draw(image)
    objects: list[dict] = []
    for i in range(int(rng.integers(1, 4))):
        cat_id, coco_name, voc_name, colour = CLASSES[0 if persons and i == 0 else int(rng.integers(len(CLASSES)))]
        aspect = {"person": 2.0, "car": 0.5, "dog": 0.8}[coco_name]
        h = float(rng.uniform(0.3, 0.6) * size)
        w = min(h / aspect, 0.8 * size)
        placed = _place(rng, size, w, h, [o["bbox"] for o in objects] if persons else [], 20 if persons else 1)
        if placed is None:
            continue
        x0, y0 = placed
        polygon = _shape(coco_name, x0, y0, w, h)
        draw.polygon(polygon, fill=colour)
        obj = {
            "category_id": cat_id,
            "voc_name": voc_name,
            "bbox": [x0, y0, w, h],
            "segmentation": [[round(c, 2) for xy in polygon for c in xy]],
        }
        if coco_name == "person":
            keypoints = []
            for u, v in KEYPOINT_LAYOUT:
                kx, ky = x0 + u * w, y0 + v * h
                draw.ellipse([kx - 1, ky - 1, kx + 1, ky + 1], fill=(255, 255, 0))
                keypoints += [round(kx, 2), round(ky, 2), 2]  # 2: labelled and visible
            obj["keypoints"] = keypoints
        objects.append(obj)
    return image, objects


def _coco_json(images: list[dict], objects: list[list[dict]], categories: list[dict], persons_only: bool) -> dict:
    annotations = []
    for image, objs in zip(images, objects, strict=True):
        for obj in objs:
            if persons_only and "keypoints" not in obj:
                continue
            ann = {
                "id": len(annotations) + 1,
                "image_id": image["id"],
                "category_id": obj["category_id"],
                "bbox": [round(v, 2) for v in obj["bbox"]],
                "area": round(obj["bbox"][2] * obj["bbox"][3], 2),
                "iscrowd": 0,
                "segmentation": obj["segmentation"],
            }
            if persons_only:
                ann.update(keypoints=obj["keypoints"], num_keypoints=len(KEYPOINT_NAMES))
            annotations.append(ann)
    return {
        "info": {"description": "ring-bench embedded detection default (generated)"},
        "licenses": [],
        "images": images,
        "annotations": annotations,
        "categories": categories,
    }


def _voc_xml(name: str, size: int, objects: list[dict]) -> ET.ElementTree:
    root = ET.Element("annotation")
    ET.SubElement(root, "filename").text = f"{name}.jpg"
    dims = ET.SubElement(root, "size")
    for tag, value in (("width", size), ("height", size), ("depth", 3)):
        ET.SubElement(dims, tag).text = str(value)
    for obj in objects:
        node = ET.SubElement(root, "object")
        ET.SubElement(node, "name").text = obj["voc_name"]
        ET.SubElement(node, "pose").text = "Unspecified"
        ET.SubElement(node, "truncated").text = "0"
        ET.SubElement(node, "difficult").text = "0"
        box = ET.SubElement(node, "bndbox")
        x, y, w, h = obj["bbox"]
        # VOC boxes are 1-based inclusive pixel indices; Detectron2 subtracts 1 from xmin/ymin.
        for tag, value in (("xmin", x + 1), ("ymin", y + 1), ("xmax", x + w), ("ymax", y + h)):
            ET.SubElement(box, tag).text = str(int(round(value)))
    return ET.ElementTree(root)


def _keypoint_images(folder: Path, rng: np.random.Generator, first_id: int, count: int, size: int) -> tuple:
    """The keypoint task's own images, saved in ``folder``: each holds a person, and no object hides another.

    Keypoint R-CNN trains and scores persons only: in the other tasks' images, one object in three is a person
    (6 in the 8 training images) and later objects are drawn over earlier ones while the annotations still mark
    every keypoint visible; there, 150 iterations left the keypoint AP at 0.0.
    """
    images, objects = [], []
    for image_id in range(first_id, first_id + count):
        image, objs = _image(rng, size, persons=True)
        image.save(folder / f"{image_id:012d}.jpg", quality=95)
        images.append({"id": image_id, "file_name": f"{image_id:012d}.jpg", "width": size, "height": size})
        objects.append(objs)
    return images, objects


def generate(out: str | Path, n_train: int = 8, n_val: int = 4, size: int = 64, seed: int = 0) -> Path:
    out = Path(out)
    rng = np.random.default_rng(seed)
    kp_rng = np.random.default_rng([seed, 1])  # its own stream: the other tasks' images stay as they were
    categories = _coco_categories()
    person = {
        "id": 1,
        "name": "person",
        "supercategory": "person",
        "keypoints": list(KEYPOINT_NAMES),
        "skeleton": SKELETON,
    }
    (out / "coco" / "annotations").mkdir(parents=True, exist_ok=True)
    voc_ids: dict[str, list[str]] = {"trainval": [], "test": []}
    for split, voc_split, count in (("train2017", "trainval", n_train), ("val2017", "test", n_val)):
        (out / "coco" / split).mkdir(parents=True, exist_ok=True)
        images, objects = [], []
        for i in range(count):
            image, objs = _image(rng, size)
            image_id = len(voc_ids["trainval"]) + i + 1 if split == "val2017" else i + 1
            name = f"{image_id:012d}"
            image.save(out / "coco" / split / f"{name}.jpg", quality=95)
            images.append({"id": image_id, "file_name": f"{name}.jpg", "width": size, "height": size})
            objects.append(objs)
            for year in ("VOC2007", "VOC2012") if voc_split == "trainval" else ("VOC2007",):
                for folder in ("Annotations", "JPEGImages", "ImageSets/Main"):
                    (out / year / folder).mkdir(parents=True, exist_ok=True)
                image.save(out / year / "JPEGImages" / f"{name}.jpg", quality=95)
                _voc_xml(name, size, objs).write(out / year / "Annotations" / f"{name}.xml")
            voc_ids[voc_split].append(name)
        tag = split.replace("2017", "")
        (out / "coco" / "annotations" / f"instances_{tag}2017.json").write_text(
            json.dumps(_coco_json(images, objects, categories, persons_only=False))
        )
        first_id = images[0]["id"] if images else 1
        kp_images, kp_objects = _keypoint_images(out / "coco" / split, kp_rng, KEYPOINT_IDS + first_id, count, size)
        (out / "coco" / "annotations" / f"person_keypoints_{tag}2017.json").write_text(
            json.dumps(_coco_json(kp_images, kp_objects, [person], persons_only=True))
        )
    for year, splits in (("VOC2007", ("trainval", "test")), ("VOC2012", ("trainval",))):
        for split in splits:
            (out / year / "ImageSets" / "Main" / f"{split}.txt").write_text("\n".join(voc_ids[split]) + "\n")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder to write (used as DETECTRON2_DATASETS)")
    parser.add_argument("--train", type=int, default=8, help="training images")
    parser.add_argument("--val", type=int, default=4, help="validation / test images")
    parser.add_argument("--size", type=int, default=64, help="image side in pixels")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    generate(args.out, args.train, args.val, args.size, args.seed)
    print(f"ring: {args.out}: embedded COCO/VOC-format detection dataset written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
