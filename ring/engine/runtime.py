"""What every long stage shares: device, threads, deterministic batches, loaders, a timer (the stages' logs are
:mod:`ring.engine.logs`)."""

from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, Dataset


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device={name} was requested but no CUDA device is visible; use device=auto or cpu.")
    return torch.device(name)


def setup_threads(threads: int) -> None:
    if threads > 0:
        torch.set_num_threads(threads)


def epoch_batches(
    n: int, batch_size: int, seed: int, epoch: int, shuffle: bool = True, drop_last: bool = True
) -> list[list[int]]:
    """The batches of one epoch, a pure function of (seed, epoch): a resumed epoch sees the same order."""
    if shuffle:
        g = torch.Generator().manual_seed(seed * 100_003 + epoch)
        order = torch.randperm(n, generator=g).tolist()
    else:
        order = list(range(n))
    stop = (n // batch_size) * batch_size if drop_last else n
    return [order[i : i + batch_size] for i in range(0, stop, batch_size)]


def make_loader(
    dataset: Dataset, batches: list[list[int]], num_workers: int, device: torch.device, collate_fn=None
) -> DataLoader:
    """``collate_fn``: the DataLoader's default unless given (``ring.data.augment.collate_jpegs`` keeps JPEG bytes a
    list)."""
    return DataLoader(
        dataset,
        batch_sampler=batches,
        num_workers=num_workers,
        pin_memory=device.type == "cuda",
        # A private generator: the loader must not draw from the global RNG that the objectives
        # use, or a resumed run would drift from an uninterrupted one.
        generator=torch.Generator().manual_seed(0),
        persistent_workers=False,
        collate_fn=collate_fn,
    )


class Timer:
    def __init__(self):
        self.start = time.monotonic()

    def minutes(self) -> float:
        return (time.monotonic() - self.start) / 60.0

    def reset(self) -> None:
        self.start = time.monotonic()
