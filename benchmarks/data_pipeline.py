"""Is the GPU (or CPU) fed?  Pretraining images/s with the real augmentation vs random tensors on the device.

    python benchmarks/data_pipeline.py [--workers N] [--tiny]

Both loops run the same IR training step on a ResNet-18; the first draws batches through
``ring.data.datasets.Views`` with the paper's augmentation from a decoded-once uint8 array (the CIFAR
layout: 50,000 RGB images of 32x32), the second reuses a batch of random tensors already on the
device.  The ratio of their throughputs is the target (>= 0.9).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import items_per_second, machine, write  # noqa: E402
from ring.core import catalog  # noqa: E402
from ring.data import datasets  # noqa: E402
from ring.engine.encoder import Encoder  # noqa: E402
from ring.engine.objectives.ir import InstanceDiscrimination  # noqa: E402
from ring.engine.runtime import epoch_batches, make_loader  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=None, help="loader processes (default: 0 on CPU, 8 on GPU)")
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    workers = args.workers if args.workers is not None else (8 if device.type == "cuda" else 0)
    n, batch, steps, size = (512, 32, 4, 32) if args.tiny else (50_000, 256, 12, 32)
    if device.type == "cuda" and not args.tiny:
        size, steps = 224, 30

    rng = np.random.default_rng(0)
    base = datasets.ArrayImages(rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8), np.zeros(n, dtype=np.int64))
    views = datasets.Views(
        base, datasets.pretrain_view(size if size > 32 else 32, size, 0.2, datasets.normalize(catalog.spec("cifar10")))
    )
    encoder = Encoder().to(device)
    objective = InstanceDiscrimination(n, 128, 4096 if n > 4096 else n // 2, 0.07, 0.5, False, 2**25).to(device)
    optimizer = torch.optim.SGD(encoder.parameters(), lr=0.03, momentum=0.9)

    def step(x, index):
        loss = objective(encoder, [x], index)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    x = torch.randn(batch, 3, size, size, device=device)
    index = torch.arange(batch, device=device)

    def synthetic_run() -> float:
        return items_per_second(
            ((x, index) for _ in range(steps + 2)), lambda b: step(*b), device, 2, count=lambda b: len(b[1])
        )

    def real_run() -> float:
        loader = make_loader(views, epoch_batches(n, batch, 0, 0)[: steps + 2], workers, device)
        return items_per_second(
            ((x.to(device, non_blocking=True), i.to(device)) for x, _, i in loader),
            lambda b: step(*b),
            device,
            2,
            count=lambda b: len(b[1]),
        )

    # Interleaved (synthetic, real, synthetic) so that drift of the machine does not favour either.
    first = synthetic_run()
    real = real_run()
    synthetic = (first + synthetic_run()) / 2
    write(
        "data_pipeline",
        {
            "machine": machine(),
            "image_size": size,
            "batch": batch,
            "workers": workers,
            "augmented_images_per_s": real,
            "device_tensor_images_per_s": synthetic,
            "ratio": real / synthetic,
        },
        tiny=args.tiny,
    )


if __name__ == "__main__":
    main()
