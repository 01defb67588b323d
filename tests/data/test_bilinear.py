"""PIL's bilinear resampling as weight matrices: PIL's own pixels, a batch of sizes as each image alone."""

import numpy as np
import pytest
import torch
from PIL import Image

from ring.data import bilinear


@pytest.mark.parametrize(("size", "out"), [(37, 16), (16, 37), (24, 24)])
def test_a_whole_image_resized_is_pils_bilinear_resize(size, out):
    """Shrinking (the filter widened: PIL's antialiasing), enlarging and the identity; PIL's fixed-point weights
    against these float ones can send a rounding tie one level the other way, nothing more."""
    rng = np.random.default_rng(size * out)
    image = rng.integers(0, 256, (size, size + 5, 3), dtype=np.uint8)
    pil = np.asarray(Image.fromarray(image).resize((out, out), Image.BILINEAR)).astype(np.float32)
    ours = bilinear.resize(torch.from_numpy(image).permute(2, 0, 1)[None].float(), out)[0].permute(1, 2, 0)
    difference = np.abs(ours.numpy() - pil)
    assert difference.max() <= 1 and (difference > 0).mean() <= 0.05
    rows = bilinear.resize_weights(size, out, torch.device("cpu"))
    assert rows.shape == (out, size) and torch.allclose(rows.sum(1), torch.ones(out))


def test_a_batch_of_sizes_is_resized_as_each_image_alone():
    """The batch's padded weights against each image's own (the former path): the same triangle filter; only the
    normalising sum runs over a padded row, which can change its last bit and so, rarely, a rounding tie."""
    g = torch.Generator().manual_seed(0)
    shapes = [(int(h), int(w)) for h, w in torch.randint(12, 90, (40, 2), generator=g)] + [(32, 32), (9, 300)]
    images = [torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g) for h, w in shapes]
    together = bilinear.resize_each(images, 32)
    alone = torch.stack([bilinear.resize(img[None].float(), 32)[0] for img in images])
    difference = (together - alone).abs()
    assert difference.max() <= 1 and (difference > 0).float().mean() <= 1e-3
