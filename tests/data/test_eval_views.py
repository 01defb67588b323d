"""ring.data.eval_views: evaluation's input made on the device from a store is today's PIL input, and so are the kNN
monitor's accuracies and linear evaluation's metrics made from it."""

import pytest
import torch

from ring.core.catalog import spec
from ring.data import augment, datasets, eval_views, store
from ring.engine.runtime import epoch_batches, make_loader
from ring.lincls import LinearEval, eval_input
from tests.data.test_augment import _smooth_images
from tests.data.test_store import SIZE, root, stored  # noqa: F401  (the fixture: digits_folder and its two stores)
from tests.helpers import lincls_config

CPU = torch.device("cpu")
CROP = 28  # below the store's 32 px: the centre crop starts off the corner
NORM = datasets.normalize(spec("digits_folder"))
# Back to levels of the 0..255 image, where the tolerances below are stated.
LEVELS = torch.tensor(NORM.std).view(1, 3, 1, 1) * 255


def _inputs(root, split: str, augmentation: str, fmt: str = "raw", epoch: int = 1, place: str = "cpu"):
    """Today's views of the store's ``split`` and the device input's, in one order (every third image, for speed)."""
    base = store.StoreImages(stored(root, fmt), split)
    today = datasets.Views(base, datasets.linear_view(SIZE, CROP, augmentation, NORM), seed=5)
    device_input = eval_views.for_store(base, augmentation, SIZE, CROP, NORM, 5, CPU, 64, place=lambda _: place)
    today.set_epoch(epoch)
    device_input.set_epoch(epoch)
    order = [b[::3] for b in epoch_batches(len(base), 96, 5, epoch)[:4]]
    expected = torch.cat([x for x, _, _ in make_loader(today, order, 0, CPU)])
    loader = make_loader(device_input.dataset, order, 0, CPU, device_input.collate)
    got = list(device_input.batches(loader))
    labels = torch.cat([y for _, y, _ in got])
    assert torch.equal(labels, torch.tensor([base.targets[i] for b in order for i in b]))
    return expected, torch.cat([x for x, _, _ in got])


def test_the_centre_view_from_the_store_is_todays_pixel_for_pixel(root):
    """The centre crop copies the store's levels (one weight of 1 a row); the normalisation, a multiply-add here and
    a subtraction and division there, moves a value by float32 rounding alone (measured: below 1e-4 levels)."""
    expected, got = _inputs(root, "test", "none")
    assert got.shape == expected.shape == (len(got), 3, CROP, CROP)
    assert ((got - expected) * LEVELS).abs().max() <= 1e-3


def test_the_centre_box_is_sliced_as_the_general_crop_copies_it():
    """The centre views skip the crop's matmuls: a slice is what the one-hot weights of an integer box of ``crop``
    pixels make, value for value."""
    images = torch.from_numpy(_smooth_images(6, SIZE, seed=2)).permute(0, 3, 1, 2)
    params = eval_views.EvalParams(SIZE, CROP, "none")(None).expand(len(images), -1)
    t = eval_views._tables(CPU, (SIZE, SIZE), SIZE, CROP, tuple(NORM.mean), tuple(NORM.std))
    sliced = eval_views.centre_views(images, eval_views.centre_start(SIZE, CROP), CROP, t)
    assert torch.equal(sliced, eval_views.device_views(images, params, t))


def test_random_crops_and_flips_from_the_store_are_todays_within_a_level(root):
    """The same boxes and flips (the same draws from the same per-sample generator); PIL's bilinear filter in float
    instead of fixed point, each of its two passes rounded (PIL rounds a half up, torch to even; an enlarged crop
    lands on halves often), so some values differ by a level, a few by two.  Measured on these images (epochs 1 and
    3): 2.6% of values by one level, 0.003% by two, mean 0.026 levels.  Bounds: two levels, 5% of values, mean 0.1.
    Another epoch's views differ by tens of levels (the last assertion): the bounds prove the draws are the same."""
    expected, got = _inputs(root, "train", "crop_flip")
    levels = ((got - expected) * LEVELS).abs()
    assert levels.max() <= 2.0 + 1e-3 and (levels > 0.5).float().mean() <= 0.05 and levels.mean() <= 0.1
    _, other_epoch = _inputs(root, "train", "crop_flip", epoch=2)
    assert ((other_epoch - expected) * LEVELS).abs().mean() > 10.0


def test_the_gpu_decoders_pipeline_brings_the_workers_views(root):
    """The decoder thread of ``store_decode: gpu`` (on a CPU: torchvision's libjpeg-turbo decode, PIL's bit for bit)
    serves the evaluation views as it serves pretraining's: the same tensors as the workers' PIL decode."""
    _, workers = _inputs(root, "test", "crop_flip", fmt="jpeg95")
    _, decoder = _inputs(root, "test", "crop_flip", fmt="jpeg95", place="gpu")
    assert torch.equal(decoder, workers)


@pytest.mark.slow  # two linear evaluations of a ResNet-18: about a minute on a loaded 2-core machine
def test_linear_evaluation_on_the_device_input_scores_todays_metrics(root, monkeypatch, encoder_file, tmp_path):
    """The centre-view probe (features cached, so 15 epochs cost one pass) from either input: its views agree to
    float rounding (above), its features to float rounding through the trunk, so the probe's top-1 and top-5 are
    today's within one test image of 450 (0.23 points; a probability on a tie could go either way)."""
    cfg = lincls_config(dataset="digits_folder", store="raw", data_root=str(root), crop=CROP, epochs=15)
    device = LinearEval(cfg, encoder_file, tmp_path / "device")
    assert isinstance(device.train_set, eval_views.EvalInput) and isinstance(device.test_set, eval_views.EvalInput)
    got = device.run()
    monkeypatch.setattr(eval_views, "reader_of", lambda base: None)
    today = LinearEval(cfg, encoder_file, tmp_path / "today")
    assert isinstance(today.train_set, datasets.Views)
    expected = today.run()
    assert expected["top1"] > 30.0  # above chance (10%): a probe that learned something is compared
    for key in ("top1", "top5"):
        assert abs(got[key] - expected[key]) <= 100.0 / 450 + 1e-9, (key, got[key], expected[key])


@pytest.mark.slow  # one torch.compile of the views: about 15 s on a CPU
def test_compiled_views_are_the_eager_views():
    """Where the cell compiles, the views are compiled (EvalViews' ``compiled``): the same formulas, a float sum
    perhaps reordered, so a value on a rounding boundary may land one level apart (as the pretraining views':
    tests/data/test_augment.py::test_compiled_views_are_the_eager_views)."""
    images = torch.from_numpy(_smooth_images(8, SIZE, seed=6))  # B x H x W x 3, as a store batch
    draw = datasets.Views(augment.Labels([0] * 8), eval_views.EvalParams(SIZE, CROP, "crop_flip"), seed=6)
    params = [torch.stack([draw[i][0] for i in range(8)])]
    eager, compiled = (
        eval_views.EvalViews(CPU, SIZE, CROP, NORM.mean, NORM.std, compiled)(params, None, images)[0]
        for compiled in (False, True)
    )
    difference = ((compiled - eager) * LEVELS).abs()
    assert difference.max() <= 1.01 and (difference > 0.5).float().mean() <= 1e-3


def test_a_cpu_keeps_todays_random_crops_for_linear_evaluation_and_takes_the_centre_views(root):
    """On a CPU the random crop's matmuls cost more than the workers' PIL crops (benchmarks/eval_input.py); the
    centre views, a slice, cost less: linear evaluation takes each where it is faster."""
    base = store.StoreImages(stored(root, "raw"), "train")
    cfg = lincls_config(dataset="digits_folder", store="raw", data_root=str(root), crop=CROP)
    assert isinstance(eval_input(base, "crop_flip", cfg, NORM, 0, CPU, False), datasets.Views)
    assert isinstance(eval_input(base, "none", cfg, NORM, 0, CPU, False), eval_views.EvalInput)


def test_a_dataset_without_a_store_keeps_todays_views():
    base = datasets.load("digits", "unused", "test")
    assert eval_views.for_store(base, "none", 32, 32, NORM, 0, CPU, 64) is None


def test_a_crop_larger_than_the_resize_is_one_sentence():
    with pytest.raises(ValueError, match="crop=40 exceeds resize=32"):
        eval_views.EvalParams(32, 40, "none")
