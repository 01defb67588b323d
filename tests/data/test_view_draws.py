"""ring.data.view_draws: a batch's view parameters from Philox, against today's per-sample draws (ring.data.augment)."""

import numpy as np
import pytest
import torch
from scipy import stats
from torch.utils.data import DataLoader

from ring.core.catalog import spec
from ring.data import augment, datasets, view_draws
from ring.engine.runtime import epoch_batches

# Random123's known answers for Philox4x32-10 (its kat_vectors): counter, key, output.
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


def test_philox_gives_random123s_known_answers():
    for counter, key, expected in KNOWN_ANSWERS:
        assert view_draws.philox(np.array(counter).reshape(4, 1), key)[:, 0].tolist() == list(expected)


N = 3000  # draws of each sampler per test: today's takes about a second for them on this machine


def _todays(n: int, resize: int = 256, scale_min: float = 0.2, seed: int = 0) -> torch.Tensor:
    draw = datasets.Views(augment.Labels(np.zeros(n)), augment.ViewParams(resize, scale_min), seed=seed)
    return torch.stack([draw[i][0] for i in range(n)])


def _batched(n: int, resize: int = 256, scale_min: float = 0.2, seed: int = 0) -> torch.Tensor:
    return view_draws.draw(seed, 0, np.arange(n), 1, resize, scale_min)[0]


def _laws(p: torch.Tensor) -> dict[str, np.ndarray]:
    """Each parameter as a sample of its law; the crop as RandomResizedCrop draws it (area scale, aspect ratio) and
    where it lies (top and left as a fraction of the places it fits)."""
    h, w = p[:, augment.HEIGHT], p[:, augment.WIDTH]
    columns = {
        "scale": h * w / 256**2,
        "ratio": w / h,
        "height": h,
        "top": p[:, augment.TOP] / (257 - h),
        "left": p[:, augment.LEFT] / (257 - w),
        **{name: p[:, col] for name, col in (("bright", 6), ("contrast", 7), ("saturation", 8), ("hue", 9))},
    }
    return {k: v.numpy() for k, v in columns.items()}


def _categories(p: torch.Tensor) -> dict[str, np.ndarray]:
    order = p[:, augment.ORDER] @ torch.tensor([64.0, 16.0, 4.0, 1.0], dtype=torch.float64)
    return {"order": order.numpy(), "flip": p[:, augment.FLIP].numpy(), "gray": p[:, augment.GRAY].numpy()}


def _chi2_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two samples of a categorical law: the p-value of their contingency table's chi-square test."""
    values = np.union1d(a, b)
    table = np.array([[np.sum(x == v) for v in values] for x in (a, b)])
    return stats.chi2_contingency(table).pvalue


# Each parameter's two samples (3,000 each, fixed seeds: the p-values are fixed numbers, the test deterministic) are
# tested for one law at alpha = 0.001 per parameter (12 tests: 1.2% chance that some test would reject two equal laws
# with other seeds).  Continuous and integer parameters: two-sample Kolmogorov-Smirnov (conservative on the integer
# ones' ties); categorical ones (the jitter's 24 orders, flip, grayscale): chi-square on the contingency table.
ALPHA = 1e-3


def test_each_parameter_follows_todays_law():
    today, batch = _todays(N), _batched(N)
    for name, sample in _laws(batch).items():
        assert stats.ks_2samp(sample, _laws(today)[name]).pvalue > ALPHA, name
    for name, sample in _categories(batch).items():
        assert _chi2_p(sample, _categories(today)[name]) > ALPHA, name
    assert (batch[:, augment.ORDER].sort(1).values == torch.arange(4.0)).all()  # every order a permutation
    inside = (batch[:, augment.TOP] + batch[:, augment.HEIGHT] <= 256) & (batch[:, augment.LEFT] + batch[:, 3] <= 256)
    assert inside.all()


def test_the_laws_test_tells_another_crop_scale_and_another_flip_rate_apart():
    """The test above can fail: at its sample size and alpha, a crop scale from 0.25 instead of 0.2, or flips at 0.45
    instead of 0.5, are rejected."""
    today = _todays(N)
    other_scale = _laws(_batched(N, scale_min=0.25))["scale"]
    assert stats.ks_2samp(other_scale, _laws(today)["scale"]).pvalue < ALPHA
    flips = (view_draws._uniform(view_draws.words(0, 0, np.arange(N), 1)[:, 0, 30]) < 0.45).astype(float)
    assert _chi2_p(flips, _categories(today)["flip"]) < ALPHA


def _epoch_params(views: datasets.Views, batches: list[list[int]], workers: int) -> dict[int, torch.Tensor]:
    loader = DataLoader(views, batch_sampler=batches, num_workers=workers)
    out = {}
    for first, second, _label, index in loader:
        out.update({int(i): torch.cat((a, b)) for i, a, b in zip(index, first, second, strict=True)})
    return out


def test_a_views_parameters_are_the_same_on_any_workers_and_after_a_restart_mid_epoch():
    n, batch, seed, epoch = 48, 8, 5, 3
    views = datasets.Views(augment.Labels(np.zeros(n)), view_draws.BatchParams(32, 0.2), n_views=2, seed=seed)
    views.set_epoch(epoch)
    batches = epoch_batches(n, batch, seed, epoch)
    whole = _epoch_params(views, batches, 0)
    assert len(whole) == n and not torch.equal(whole[0], whole[1])
    for workers in (1, 2):
        assert _epoch_params(views, batches, workers).keys() == whole.keys()
        assert all(torch.equal(p, whole[i]) for i, p in _epoch_params(views, batches, workers).items())
    # A restart: a fresh dataset (a new process builds one) set to the epoch, the loader from the third batch on.
    restarted = datasets.Views(augment.Labels(np.zeros(n)), view_draws.BatchParams(32, 0.2), n_views=2, seed=seed)
    restarted.set_epoch(epoch)
    resumed = _epoch_params(restarted, batches[3:], 2)
    assert resumed and all(torch.equal(p, whole[i]) for i, p in resumed.items())
    # A view's values are its own, whatever batch it is drawn in; another epoch draws others.
    assert torch.equal(torch.cat(views[7][:2]), whole[7])
    views.set_epoch(epoch + 1)
    assert not torch.equal(torch.cat(views[7][:2]), whole[7])


@pytest.mark.parametrize("size, resize, crop", [(8, 32, 24), (40, 32, 32)], ids=["enlarge", "shrink"])
def test_pil_views_from_drawn_values_are_pretrain_views_pixels(size, resize, crop):
    """The PIL path under view_draws: batch applies the values as pretrain_view's transforms do: today's draws given
    to it make today's pixels, bit for bit."""
    images = np.random.default_rng(0).integers(0, 256, (16, size, size, 3), dtype=np.uint8)
    base = datasets.ArrayImages(images, np.zeros(16))
    norm = datasets.normalize(spec("cifar10"))
    pil = datasets.Views(base, datasets.pretrain_view(resize, crop, 0.2, norm), seed=2)
    drawn = datasets.Views(base, augment.ViewParams(resize, 0.2), seed=2)
    for i in range(16):
        assert torch.equal(view_draws.pil_view(base[i][0], drawn[i][0], resize, crop, norm), pil[i][0]), i


def test_batch_pil_views_draw_the_batch_and_make_its_pixels():
    images = np.random.default_rng(1).integers(0, 256, (6, 12, 12, 3), dtype=np.uint8)
    base = datasets.ArrayImages(images, np.arange(6))
    norm = datasets.normalize(spec("cifar10"))
    views = datasets.Views(base, view_draws.BatchPilViews(32, 24, 0.2, norm), n_views=2, seed=1)
    items = views.__getitems__([4, 2])
    params = view_draws.draw(1, 0, [4, 2], 2, 32, 0.2)
    for k, (first, second, label, index) in enumerate(items):
        assert (label, index) == ([4, 2][k],) * 2 and first.shape == (3, 24, 24) and not torch.equal(first, second)
        img = base[index][0]
        assert torch.equal(first, view_draws.pil_view(img, params[0][k], 32, 24, norm))
        assert torch.equal(second, view_draws.pil_view(img, params[1][k], 32, 24, norm))
