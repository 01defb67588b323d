"""augment through NVIDIA DALI (ring.data.dali): DALI's CPU pipeline on small generated JPEGs.

The laws are checked on the pixels, not only on the parameters: test images are a colourful
horizontal luma ramp, so a view's flip is the sign of its luma slope (brightness and contrast keep
the luma's order, hue and saturation keep the luma in DALI's YIQ colour twist) and its grayscale is
three equal channels.
"""

import sys

import numpy as np
import pytest
import torch
from PIL import Image

from ring.core.catalog import spec
from ring.data import dali
from ring.engine.runtime import epoch_batches

N_IMAGES, BATCH, CROP, SCALE_MIN, SEED = 96, 32, 24, 0.2, 7
STATS = spec("imagenet")
needs_dali = pytest.mark.skipif(not dali.available(), reason="nvidia.dali is not installed (the dali extra)")


@pytest.fixture(scope="module")
def jpegs(module_tmp):
    """(paths, (H, W) sizes) of N_IMAGES JPEGs 40-80 px a side: R a 0->255 ramp, G half of it + 60, B its mirror."""
    root = module_tmp("jpegs")
    rng = np.random.default_rng(0)
    paths, sizes = [], []
    for i in range(N_IMAGES):
        w, h = (int(v) for v in rng.integers(40, 81, 2))
        ramp = np.linspace(0, 255, w)[None].repeat(h, 0)
        image = np.stack([ramp, 0.5 * ramp + 60, 255 - ramp], -1).astype(np.uint8)
        paths.append(root / f"{i:03d}.jpg")
        Image.fromarray(image).save(paths[-1], quality=95)
        sizes.append((h, w))
    return paths, np.array(sizes)


def _views(paths, n_views=2, crop_sizes=False, seed=SEED):
    return dali.DaliViews(
        paths,
        torch.device("cpu"),
        CROP,
        SCALE_MIN,
        STATS.mean,
        STATS.std,
        n_views=n_views,
        seed=seed,
        batch_size=BATCH,
        crop_sizes=crop_sizes,
    )


def _levels(views: torch.Tensor) -> torch.Tensor:
    """Normalised views back to 0..255 levels."""
    return views * torch.tensor(STATS.std).view(1, 3, 1, 1) * 255 + torch.tensor(STATS.mean).view(1, 3, 1, 1) * 255


def test_draws_are_a_pure_function_of_seed_epoch_index_and_view():
    a = dali.draws(SEED, 3, [5, 9, 11], 0)
    assert np.array_equal(a[[1, 0]], dali.draws(SEED, 3, [9, 5], 0)), "an image's draws depend on its batch"
    for other in (
        dali.draws(SEED, 4, [5, 9, 11], 0),
        dali.draws(SEED, 3, [5, 9, 11], 1),
        dali.draws(SEED + 1, 3, [5, 9, 11], 0),
    ):
        assert not np.any(np.all(a[:, :4] == other[:, :4], axis=1))


def test_draws_follow_the_papers_laws():
    """ColorJitter(0.4, 0.4, 0.4, 0.4), flip p = 0.5, grayscale p = 0.2 over 20,000 draws.

    Tolerances are 4 standard deviations of each estimate (two-sided 6e-5 for a correct law at any
    seed); the draws are fixed by the seed, so the test cannot flake."""
    n = 20_000
    d = dali.draws(SEED, 0, np.arange(n), 0)
    for col, (lo, hi) in (
        (dali.BRIGHT, (0.6, 1.4)),
        (dali.CONTRAST, (0.6, 1.4)),
        (dali.SAT, (0.6, 1.4)),
        (dali.HUE, (-0.4, 0.4)),
    ):
        x = (d[:, col] - lo) / (hi - lo)  # uniform on [0, 1): mean 1/2, variance 1/12, quartiles 1/4 and 3/4
        assert x.min() >= 0 and x.max() < 1
        assert abs(x.mean() - 0.5) < 4 * (1 / 12 / n) ** 0.5
        for q in (0.25, 0.75):
            assert abs((x < q).mean() - q) < 4 * (q * (1 - q) / n) ** 0.5
    for col, p in ((dali.FLIP, dali.FLIP_P), (dali.GRAY, dali.GRAY_P)):
        assert set(np.unique(d[:, col])) == {0.0, 1.0}
        assert abs(d[:, col].mean() - p) < 4 * (p * (1 - p) / n) ** 0.5
    assert abs(np.corrcoef(d[:, dali.FLIP], d[:, dali.GRAY])[0, 1]) < 4 / n**0.5


@needs_dali
def test_views_shape_dtype_normalisation_and_laws_on_the_pixels(jpegs):
    """384 views (96 images x 2 views x 2 epochs): each view's flip and grayscale as drawn, their
    rates within 4 standard deviations of Bin(384, p) (flip 0.5 +- 0.10, grayscale 0.2 +- 0.08), and
    every crop's area fraction in [crop_scale_min, 1] and aspect ratio in [3/4, 4/3]."""
    paths, sizes = jpegs
    make = _views(paths, crop_sizes=True)
    flips, grays, areas = [], [], []
    luma = torch.tensor((0.299, 0.587, 0.114)).view(1, 3, 1, 1)
    for epoch in (0, 1):
        for step, batch in enumerate(epoch_batches(N_IMAGES, BATCH, SEED, epoch)):
            out = make(torch.tensor(batch), epoch, step)
            assert len(out) == 4  # (crop shapes, views) per view
            for view, (shapes, views) in enumerate(zip(out[::2], out[1::2], strict=True)):
                assert views.shape == (BATCH, 3, CROP, CROP) and views.dtype == torch.float32
                assert views.device.type == "cpu" and views.is_contiguous()
                x = _levels(views)
                # uint8 levels normalised by the dataset's mean and std, nothing else
                assert x.min() > -1e-3 and x.max() < 255 + 1e-3
                assert (x - x.round()).abs().max() < 1e-3
                drawn = make.draws(batch, epoch, view)
                spread = (x.amax(1) - x.amin(1)).amax((1, 2))
                gray = spread <= 2  # DALI rounds each channel of a grey pixel on its own: 1 level apart at most
                assert gray.tolist() == (drawn[:, dali.GRAY] == 1).tolist()
                assert spread[~gray].min() > 20  # the colour images stay visibly colour
                y = (x * luma).sum(1).mean(1)  # B x crop: the luma profile, left to right
                slope = y[:, -CROP // 4 :].mean(1) - y[:, : CROP // 4].mean(1)
                assert slope.abs().min() > 5
                flip = slope < 0
                assert flip.tolist() == (drawn[:, dali.FLIP] == 1).tolist()
                flips += flip.tolist()
                grays += gray.tolist()
                h, w = shapes[:, 0].numpy(), shapes[:, 1].numpy()
                assert (shapes[:, 2] == 3).all()
                big_h, big_w = sizes[batch, 0], sizes[batch, 1]
                assert (h <= big_h).all() and (w <= big_w).all()
                # Integer crop sizes: a pixel of rounding either way.
                assert ((h + 1) * (w + 1) >= SCALE_MIN * big_h * big_w).all()
                assert ((w + 1) / np.maximum(h - 1, 1) >= 3 / 4).all() and ((w - 1) / (h + 1) <= 4 / 3).all()
                areas += (h * w / (big_h * big_w)).tolist()
    n = len(flips)
    assert n == 384
    assert abs(np.mean(flips) - 0.5) < 4 * (0.25 / n) ** 0.5
    assert abs(np.mean(grays) - 0.2) < 4 * (0.16 / n) ** 0.5
    # Crops are drawn per sample, over the range: not one box for the whole batch, not all near one end.
    assert np.std(areas) > 0.1 and min(areas) < 0.4 and max(areas) > 0.8


@needs_dali
def test_same_seed_epoch_step_same_views_and_another_epoch_other_views(jpegs):
    paths, _ = jpegs
    make = _views(paths)
    batch = torch.tensor(epoch_batches(N_IMAGES, BATCH, SEED, 0)[1])
    first = make(batch, 0, 1)
    assert not torch.equal(first[0], first[1]), "MoCo's two views of an image must be independent"
    for again in (make(batch, 0, 1), _views(paths)(batch, 0, 1)):
        assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    other = make(batch, 1, 1)
    assert not any(torch.equal(a, b) for a, b in zip(first, other, strict=True))
    assert not torch.equal(_views(paths, seed=SEED + 1)(batch, 0, 1)[0], first[0])


@needs_dali
def test_resume_mid_epoch_reproduces_the_uninterrupted_views(jpegs):
    """Pretraining's resume: the epoch's batch list sliced at step_in_epoch, a freshly built pipeline."""
    paths, _ = jpegs
    batches = epoch_batches(N_IMAGES, BATCH, SEED, 2)
    make = _views(paths)
    uninterrupted = [make(torch.tensor(b), 2, step) for step, b in enumerate(batches)]
    resumed = _views(paths)
    for step, b in enumerate(batches[1:], start=1):
        assert all(
            torch.equal(a, r) for a, r in zip(uninterrupted[step], resumed(torch.tensor(b), 2, step), strict=True)
        )


@needs_dali
def test_bad_inputs_get_one_sentence(jpegs):
    paths, _ = jpegs
    with pytest.raises(ValueError, match=r"crop_scale_min must lie in \(0, 1\]"):
        dali.DaliViews(paths, "cpu", CROP, 0.0, STATS.mean, STATS.std)
    with pytest.raises(ValueError, match="no image files"):
        dali.DaliViews([], "cpu", CROP, SCALE_MIN, STATS.mean, STATS.std)
    make = _views(paths, n_views=1)
    with pytest.raises(ValueError, match=r"Image indices must lie in \[0, 96\)"):
        make(torch.tensor([0, N_IMAGES]), 0, 0)
    with pytest.raises(ValueError, match="A batch holds 1 to 32 images"):
        make(torch.arange(BATCH + 1), 0, 0)


def test_missing_dali_is_one_clear_sentence(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "nvidia.dali", None)  # what `import nvidia.dali` meets without the extra
    assert not dali.available()
    with pytest.raises(dali.DaliMissing) as err:
        dali.DaliViews([tmp_path / "a.jpg"], "cpu", CROP, SCALE_MIN, STATS.mean, STATS.std)
    message = str(err.value)
    assert message == dali.MISSING and "\n" not in message and message.count(". ") == 0
    assert "pip install 'ring-bench[dali]'" in message


@needs_dali
def test_jitter_factors_reach_the_colour_twist_in_its_units(jpegs, monkeypatch):
    """A hue of 0.25 turns rotates the YIQ chroma by 90 degrees (DALI takes degrees), brightness 0.5
    halves the luma, saturation 0.5 halves the chroma: the same crops (same state), other factors fixed."""
    paths, _ = jpegs
    batch = torch.arange(BATCH)

    def views(**factors):
        def fixed(seed, epoch, index, view):
            d = np.zeros((len(index), dali.N_DRAWS))
            d[:, [dali.BRIGHT, dali.CONTRAST, dali.SAT]] = 1.0
            for name, value in factors.items():
                d[:, getattr(dali, name)] = value
            return d

        monkeypatch.setattr(dali, "draws", fixed)
        x = _levels(_views(paths, n_views=1)(batch, 0, 0)[0]).double()
        r, g, b = x.unbind(1)
        return 0.299 * r + 0.587 * g + 0.114 * b, torch.complex(
            0.596 * r - 0.274 * g - 0.322 * b, 0.211 * r - 0.523 * g + 0.312 * b
        )

    y, iq = views()
    _, turned = views(HUE=0.25)
    angle = torch.rad2deg(torch.angle((turned * iq.conj()).sum())).item()
    assert abs(abs(angle) - 90) < 5, angle
    dark, _ = views(BRIGHT=0.5)
    assert abs((dark.sum() / y.sum()).item() - 0.5) < 0.01
    _, pale = views(SAT=0.5)
    assert abs((pale.abs().sum() / iq.abs().sum()).item() - 0.5) < 0.03


def test_pretraining_refuses_dali_for_an_in_memory_dataset(tmp_path):
    from ring.pretrain import Pretraining
    from tests.helpers import pretrain_config

    with pytest.raises(
        ValueError, match="augment: dali reads image folders; digits is held in memory: use augment: device"
    ):
        Pretraining(pretrain_config("IR", augment="dali"), tmp_path / "cell")
