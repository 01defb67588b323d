"""PIL's uint8 HSV written for tensors: the conversions are PIL's own at every level tried, and the hue tables
rotate a colour as converting, shifting the hue and converting back does."""

import numpy as np
import torch
from PIL import Image

from ring.data import hsv


def _colours(n: int = 4096) -> np.ndarray:
    """Random colours, the greys and the primaries among them (PIL's special cases: no saturation, hue 0)."""
    rng = np.random.default_rng(0)
    greys = np.repeat(np.arange(256, dtype=np.uint8)[:, None], 3, 1)
    corners = np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0], [0, 255, 255], [255, 0, 255]])
    return np.concatenate([rng.integers(0, 256, (n, 3)), greys, corners]).astype(np.uint8)


def _pil_hsv(rgb: np.ndarray) -> np.ndarray:
    return np.asarray(Image.fromarray(rgb[None]).convert("HSV"))[0].astype(np.int64)


def test_rgb_to_hsv_and_back_are_pils_conversions():
    """S, V and the way back exact; H in PIL's C arithmetic floors a value that lands on a level boundary, rarely,
    one level the other way from this float rendering (ring.data.augment's docstring): at most one level, on
    under 1% of the colours (0.4% here)."""
    rgb = _colours()
    pil_hsv = _pil_hsv(rgb)
    r, g, b = torch.from_numpy(rgb.astype(np.float32)).unbind(1)
    ours = torch.stack(hsv.rgb_to_hsv(r, g, b), 1).numpy().astype(np.int64)
    assert np.array_equal(ours[:, 1:], pil_hsv[:, 1:])
    hue_off = np.minimum((ours[:, 0] - pil_hsv[:, 0]) % 256, (pil_hsv[:, 0] - ours[:, 0]) % 256)
    assert hue_off.max() <= 1 and (hue_off > 0).mean() < 0.01
    pil_rgb = np.asarray(Image.fromarray(pil_hsv.astype(np.uint8)[None], "HSV").convert("RGB"))[0]
    h, s, v = torch.from_numpy(pil_hsv.astype(np.float32)).unbind(1)
    assert np.array_equal(hsv.hsv_to_rgb(h, s, v).T.numpy().astype(np.uint8), pil_rgb)


def test_the_hue_tables_rotate_as_converting_shifting_and_converting_back_does():
    """``rgb_to_hsv[colour] + 3 * shift + channel`` indexes ``hsv_to_rgb`` at the hue shifted (wrapping): the RGB
    PIL converts back to from this module's HSV with the hue shifted, at every shift a jitter can draw."""
    to_hsv, to_rgb = hsv.hue_tables(torch.device("cpu"))
    rgb = _colours(512)
    r, g, b = torch.from_numpy(rgb.astype(np.float32)).unbind(1)
    ours = torch.stack(hsv.rgb_to_hsv(r, g, b), 1).numpy().astype(np.int64)
    colour = torch.from_numpy(rgb.astype(np.int64) @ np.array([65536, 256, 1]))
    for shift in (-127, -40, -1, 0, 1, 90, 127):
        rotated = ours.copy()
        rotated[:, 0] = (rotated[:, 0] + shift) % 256
        pil = np.asarray(Image.fromarray(rotated.astype(np.uint8)[None], "HSV").convert("RGB"))[0]
        index = to_hsv[colour].long()[:, None] + 3 * shift + torch.arange(3)
        assert np.array_equal(to_rgb[index].numpy(), pil), shift
