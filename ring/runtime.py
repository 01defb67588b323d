"""What every long stage shares: device, threads, deterministic batches, loaders, the JSON-lines log."""

from __future__ import annotations

import json
import time
from pathlib import Path

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


def epoch_batches(n: int, batch_size: int, seed: int, epoch: int, shuffle: bool = True,
                  drop_last: bool = True) -> list[list[int]]:
    """The batches of one epoch, a pure function of (seed, epoch): a resumed epoch sees the same order."""
    if shuffle:
        g = torch.Generator().manual_seed(seed * 100_003 + epoch)
        order = torch.randperm(n, generator=g).tolist()
    else:
        order = list(range(n))
    stop = (n // batch_size) * batch_size if drop_last else n
    return [order[i:i + batch_size] for i in range(0, stop, batch_size)]


def make_loader(dataset: Dataset, batches: list[list[int]], num_workers: int, device: torch.device,
                collate_fn=None) -> DataLoader:
    """``collate_fn``: the DataLoader's default unless given (``ring.augment.collate_jpegs`` keeps JPEG bytes a list)."""
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


class JsonLog:
    """One JSON object per line, one line per epoch; a resumed run rewrites the epochs it redoes.

    Every record's numbers also go to TensorBoard event files beside the log (:class:`TensorBoardLog`).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.tensorboard = TensorBoardLog(self.path.parent)

    def truncate_from(self, epoch: int) -> None:
        self.tensorboard.purge_from(epoch)
        if not self.path.exists():
            return
        kept = [line for line in self.path.read_text().splitlines() if line.strip() and json.loads(line)["epoch"] < epoch]
        self.path.write_text("".join(line + "\n" for line in kept))

    def append(self, record: dict) -> None:
        with open(self.path, "a") as fh:
            fh.write(json.dumps(record) + "\n")
        self.tensorboard.write(record)

    def records(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]


# A cell folder's stage (results/<grid>/<stage>/<dataset>/<method>/seed<k>, README "TensorBoard") and
# its tag prefix: a study's cells (results/<grid>/study/...) are pretraining runs.
TB_STAGES = {"pretrain": "pretrain", "study": "pretrain", "lincls": "lincls", "transfer": "transfer"}


class TensorBoardLog:
    """Scalars ``<stage>/<key>`` at step = epoch, in the cell folder, so that
    ``tensorboard --logdir results/<grid>`` shows one run per cell (its path names stage, dataset,
    method and seed) and one chart per tag across methods and seeds.

    A resumed run's writer starts with a purge at the epoch it resumes from: TensorBoard then drops
    the earlier files' events from that epoch on, so redone epochs appear once and in order.
    """

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        parts = self.folder.parts
        self.stage = next((TB_STAGES[p] for p in parts[-7:-1] if p in TB_STAGES), "train")
        self.purge_step: int | None = None
        self.step_purge_step: int | None = None
        self._writer = None
        self._step_writer = None

    def purge_from(self, epoch: int) -> None:
        self.purge_step = epoch

    def purge_steps_from(self, step: int) -> None:
        """The first optimizer step a resumed run writes to the per-step run (:meth:`step`)."""
        self.step_purge_step = step

    @staticmethod
    def _open(folder: Path, purge_step: int | None):
        from torch.utils.tensorboard import SummaryWriter

        # Event files are read in name order, whose first key is the creation second: a writer
        # opened in the second of an earlier file (a quick resume) waits for the next one.
        stamps = [int(p.name.split(".")[3]) for p in folder.glob("events.out.tfevents.*") if p.name.split(".")[3].isdigit()]
        while stamps and int(time.time()) <= max(stamps):
            time.sleep(0.05)
        return SummaryWriter(log_dir=str(folder), purge_step=purge_step, flush_secs=30)

    def write(self, record: dict) -> None:
        if self._writer is None:
            self._writer = self._open(self.folder, self.purge_step)
        step = int(record["epoch"])
        for key, value in record.items():
            if key != "epoch" and isinstance(value, (int, float)) and not isinstance(value, bool):
                self._writer.add_scalar(f"{self.stage}/{key}", value, step)
        self._writer.flush()  # one record per epoch: live curves cost nothing
        if self._step_writer is not None:
            self._step_writer.flush()

    def step(self, global_step: int, values: dict) -> None:
        """Per-step scalars ``<stage>_step/<key>`` in the run ``<cell>/steps`` (steps and epochs are
        different axes, and a purge applies to every tag of a run)."""
        if self._step_writer is None:
            self._step_writer = self._open(self.folder / "steps", self.step_purge_step)
        for key, value in values.items():
            self._step_writer.add_scalar(f"{self.stage}_step/{key}", value, global_step)

    def close(self) -> None:
        for writer in (self._writer, self._step_writer):
            if writer is not None:
                writer.close()
        self._writer = self._step_writer = None


class Timer:
    def __init__(self):
        self.start = time.monotonic()

    def minutes(self) -> float:
        return (time.monotonic() - self.start) / 60.0

    def reset(self) -> None:
        self.start = time.monotonic()


class Preempted(Exception):
    """Raised at a step boundary after a stop was requested and a checkpoint was written."""


_stop_requested = False


def request_stop() -> None:
    """Ask the running stage to checkpoint and stop at its next step boundary (signal-safe)."""
    global _stop_requested
    _stop_requested = True


def stop_requested() -> bool:
    return _stop_requested
