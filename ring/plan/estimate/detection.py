"""Table 4's Detectron2 cells priced from the end-to-end detection figures (``price_detection-<device>.json``,
``benchmarks/price_detection.py``: each task's model timed per iteration through ring/detection's entry point).

A cell's ``detection`` pass costs its iterations at the figure's seconds per iteration, scaled by the images per
batch and the pixels per image from the figure's to the cell's, plus the evaluation of its test images at the same
seconds per image (training's: forward and backward, an upper bound of the evaluation's forward) and the figure's cost
per job (the trainer's build); its fixed costs are the detection stage's per job.  Where the device has no detection
figure (no GPU suite ran Detectron2), the nearest measured host's (the CPU's) prices it, divided by the ratio of the
two devices' measured ResNet-18 training steps per pixel (``throughput_IR-<device>.json``'s device-tensor step),
which the price states; never left out of the total.  The GPUs' step figures are bf16 (benchmarks/throughput.py) and
Detectron2 trains in fp32: on a GPU the ratio flatters the device, and the price is nearer a lower bound.  Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass

# The paper's schedule where a cell's overrides do not set it: Detectron2's model-zoo base configs (COCO 1x: 90k
# iterations; 16 images per batch; short side drawn from 640-800, the long side capped at 1333) with
# ring.plan.detection_tasks's VOC schedule (24k iterations, short side 480-800); the test sets: COCO val2017, VOC2007
# test.
ITERATIONS = {"coco_det_seg": 90000, "coco_kp": 90000, "voc_det": 24000}
SHORT_SIDES = {"coco_det_seg": (640, 800), "coco_kp": (640, 800), "voc_det": (480, 800)}
IMS_PER_BATCH, MAX_SIDE = 16, 1333
TEST_IMAGES = {"coco_det_seg": 5000, "coco_kp": 5000, "voc_det": 4952}
# COCO's and VOC's images are mostly 640 x 480: the long side is 4/3 of the short one, up to its cap.  The embedded
# dataset's (ring.detection.embedded) are square.
ASPECT = {"detectron2": 4 / 3, "embedded": 1.0}
ROW = "detection"
# Detectron2 keys that shrink its model below the paper's (narrower FPN and heads, fewer proposals and sampled ROIs):
# a cell setting them costs less per pixel than the paper's model, which the figures time.
NARROWING = (
    "MODEL.FPN.",
    "MODEL.RPN.",
    "MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE",
    "MODEL.ROI_BOX_HEAD.",
    "MODEL.ROI_MASK_HEAD.",
    "MODEL.ROI_KEYPOINT_HEAD.",
)


@dataclass(frozen=True)
class Shape:
    """What one iteration of a cell (or of a figure's run) trains on."""

    iterations: int
    ims_per_batch: int
    pixels: float  # per image, at the mean short side
    test_images: int


def _short_side(value, task: str) -> float:
    """The mean short side of Detectron2's INPUT.MIN_SIZE_TRAIN (one side or a list drawn from)."""
    if value is None:
        low, high = SHORT_SIDES[task]
        return (low + high) / 2
    sides = list(value) if isinstance(value, (list, tuple)) else [value]
    return sum(sides) / len(sides)


def shape(cfg, test_images: int | None = None) -> Shape:
    """The cell's schedule and input, its overrides applied over the paper's."""
    o = cfg.overrides or {}
    short = _short_side(o.get("INPUT.MIN_SIZE_TRAIN"), cfg.task)
    long = min(short * ASPECT.get(cfg.datasets, ASPECT["detectron2"]), o.get("INPUT.MAX_SIZE_TRAIN", MAX_SIDE))
    return Shape(
        iterations=int(o.get("SOLVER.MAX_ITER", ITERATIONS[cfg.task])),
        ims_per_batch=int(o.get("SOLVER.IMS_PER_BATCH", IMS_PER_BATCH)),
        pixels=short * long,
        test_images=TEST_IMAGES[cfg.task] if test_images is None else test_images,
    )


def seconds(cfg, fig: dict, ratio: float = 1.0, embedded_test: int | None = None) -> float:
    """The ``detection`` pass of one cell from the task's figure (``ratio``: the figure's device's seconds per the
    cell's device's)."""
    cell = shape(cfg, embedded_test if cfg.datasets == "embedded" else None)
    measured = fig["shape"]
    per_image = fig["seconds_per_iteration"] / measured["ims_per_batch"] * cell.pixels / measured["pixels"]
    work = (cell.iterations * cell.ims_per_batch + cell.test_images) * per_image
    return (work + fig["seconds_per_job"]) / ratio


def device_ratio(figures) -> tuple[float, str]:
    """(host seconds per device second, how it was measured) of a ResNet-18 training step per pixel; 1 on the host."""
    if not figures.gpu:
        return 1.0, ""
    host = figures.host_step_px_per_s
    device = figures.step_images_per_s["IR"] * figures.image_size**2
    return device / host[0], (
        f"at {figures.device} / {figures.host.device} = {device / host[0]:,.0f}, the ratio of their ResNet-18 training "
        f"steps per pixel ({figures.eager_files.get('IR', 'throughput_IR')} against {host[1]})"
    )


def price(cfg, figures, restarts: int = 0) -> tuple[dict, dict, dict]:
    """({row: seconds}, {row: source}, {row: why not}) of one detection cell: the detection pass and its fixed costs
    (per process: ``restarts`` after the first pay them again) from the device's own detection figures, else the
    host's at the stated ratio."""
    own = figures.measured if figures.measured is not None and figures.measured.detection else None
    measured = own or (figures.host if figures.host is not None and figures.host.detection else None)
    if measured is None:
        why = "no Detectron2 figure on any device: run python -m benchmarks.price --device cpu --detection"
        return {}, {}, {ROW: why, "fixed costs": why}
    fig = measured.detection["tasks"].get(cfg.task)
    if fig is None:
        return {}, {}, {ROW: f"no {cfg.task} figure in {measured.detection_file}"}
    ratio, how = device_ratio(figures) if measured is not own else (1.0, "")
    value = seconds(cfg, fig, ratio, fig["test_images"])
    source = f"end-to-end ({measured.detection_file}, {measured.device}'s{' ' + how if how else ''})"
    if any(key.startswith(NARROWING) for key in cfg.overrides or {}):
        source += "; the figure's model is the paper's: the cell's narrowed model makes it an upper bound"
    per_job = sum(measured.detection["fixed"]["per_job_s"].values())  # a host-side cost: at ratio 1 on any device
    return (
        {ROW: value, "fixed costs": per_job * (1 + restarts)},
        {ROW: source, "fixed costs": f"{measured.device}'s ({measured.detection_file}) at ratio 1: host-side costs"},
        {},
    )
