"""PIL's uint8 HSV, and its hue rotation as two lookup tables (ColorJitter's hue on the device).

torchvision's PIL path rotates a hue by converting the image to PIL's uint8 HSV, shifting H and converting back,
in PIL's own arithmetic (libImaging/Convert.c): :func:`rgb_to_hsv` and :func:`hsv_to_rgb` write that arithmetic
for tensors, and :func:`hue_tables` holds it at every uint8 level, so that ring.data.augment rotates a batch's
hues with two lookups.
"""

from __future__ import annotations

import torch


def rgb_to_hsv(r: torch.Tensor, g: torch.Tensor, b: torch.Tensor):
    """RGB levels -> PIL's uint8 HSV levels (h, s, v), in PIL's arithmetic (libImaging/Convert.c) as torchvision's
    PIL path runs it."""
    maxc, minc = torch.maximum(torch.maximum(r, g), b), torch.minimum(torch.minimum(r, g), b)
    cr = (maxc - minc).clamp_min(1.0)
    rc, gc, bc = (maxc - r) / cr, (maxc - g) / cr, (maxc - b) / cr
    h = torch.where(r == maxc, bc - gc, torch.where(g == maxc, 2.0 + rc - bc, 4.0 + gc - rc))
    h = torch.remainder(h / 6.0 + 1.0, 1.0)
    grey = maxc == minc
    zero = torch.zeros_like(h)
    uh = torch.where(grey, zero, torch.floor(h * 255.0).clamp(0, 255))
    us = torch.where(grey, zero, torch.floor((maxc - minc) / maxc.clamp_min(1.0) * 255.0).clamp(0, 255))
    return uh, us, maxc


# PIL's (r, g, b) of each hue sextant, as indices into (v, p, q, t).
SEXTANTS = ((0, 3, 1), (2, 0, 1), (1, 0, 3), (1, 2, 0), (3, 1, 0), (0, 1, 2))


def hsv_to_rgb(uh: torch.Tensor, us: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """PIL's uint8 HSV levels -> RGB levels (3 x ...), in PIL's arithmetic."""
    uh, us, v = torch.broadcast_tensors(uh, us, v)
    i = torch.floor(uh * 6.0 / 255.0)
    frac = uh * 6.0 / 255.0 - i
    fs = us / 255.0
    p = torch.floor(v * (1.0 - fs) + 0.5).clamp(0, 255)
    q = torch.floor(v * (1.0 - fs * frac) + 0.5).clamp(0, 255)
    t = torch.floor(v * (1.0 - fs * (1.0 - frac)) + 0.5).clamp(0, 255)
    sextants = torch.tensor(SEXTANTS, device=v.device)
    rgb = torch.stack((v, p, q, t)).gather(0, sextants[i.long() % 6].movedim(-1, 0))
    return torch.where(us == 0, v, rgb)


def hue_tables(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """PIL's hue rotation as two lookup tables, exact by construction: the rotation only ever sees uint8
    levels, and the tables hold PIL's arithmetic at every level.

    ``rgb_to_hsv[r * 65536 + g * 256 + b] = 3 * ((s * 256 + v) * 512 + h + 128)`` (int32), and
    ``hsv_to_rgb[3 * ((s * 256 + v) * 512 + j) + channel]`` is the RGB (uint8) of hue ``(j - 128) % 256``:
    adding ``3 * rotation + channel`` (|rotation| = |int(factor * 255)| < 128) to the first indexes the second,
    the hue's wrap-around included, a pixel's channels side by side.  64 MiB and 96 MiB per device, made once
    (about a second on a CPU).
    """
    levels = torch.arange(256, device=device, dtype=torch.float32)
    to_hsv = torch.empty(1 << 24, dtype=torch.int32, device=device)
    to_rgb = torch.empty(3, 1 << 24, dtype=torch.uint8, device=device)
    for first in range(0, 256, 16):  # entries 1M at a time: 16 values of the first of three base-256 digits
        chunk = slice(first << 16, (first + 16) << 16)
        digits = levels[first : first + 16].view(-1, 1, 1), levels.view(-1, 1), levels
        h, s, v = rgb_to_hsv(*digits)  # r, g, b
        to_hsv[chunk] = (((s.int() * 256 + v.int()) * 512 + h.int() + 128) * 3).flatten()
        s, v, h = digits
        to_rgb[:, chunk] = hsv_to_rgb(h, s, v).to(torch.uint8).flatten(1)
    hue = (torch.arange(512, device=device) - 128) % 256
    return to_hsv, to_rgb.view(3, 1 << 16, 256)[:, :, hue].permute(1, 2, 0).flatten()
