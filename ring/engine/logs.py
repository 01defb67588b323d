"""The stages' logs: ``log.jsonl`` (one JSON line per epoch), its TensorBoard event files and, when the user asks
for it, a W&B run (README "TensorBoard and W&B")."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import time
from pathlib import Path

from ring.core.files import FileError, append_text, atomic_write, write_failure
from ring.core.stages import STAGES, stages_with
from ring.core.stop import Preempted


class JsonLog:
    """One JSON object per line, one line per epoch; a resumed run rewrites the epochs it redoes.

    Every record's numbers also go to TensorBoard event files beside the log (:class:`TensorBoardLog`),
    and to a W&B run when ``RING_WANDB_PROJECT`` is set (:class:`WandbLog`); so do the per-step
    scalars of :meth:`step`.  Use it as a context manager around the stage, so that both are closed
    (and the W&B run finished) however the stage ends.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.tensorboard = TensorBoardLog(self.path.parent)
        self.wandb = WandbLog.from_env(self.path.parent, self.tensorboard.stage)

    def truncate_from(self, epoch: int) -> None:
        self.tensorboard.purge_from(epoch)
        if self.wandb is not None:
            self.wandb.resume_from(epoch=epoch)
        if not self.path.exists():
            return
        kept = [
            line for line in self.path.read_text().splitlines() if line.strip() and json.loads(line)["epoch"] < epoch
        ]
        text = "".join(line + "\n" for line in kept)
        atomic_write(self.path, lambda fh: fh.write(text.encode()))

    def purge_steps_from(self, step: int) -> None:
        """The first optimizer step a resumed run logs with :meth:`step`."""
        self.tensorboard.purge_steps_from(step)
        if self.wandb is not None:
            self.wandb.resume_from(step=step)

    def append(self, record: dict) -> None:
        append_text(self.path, json.dumps(record) + "\n")
        self.tensorboard.write(record)
        if self.wandb is not None:
            self.wandb.write(record)

    def step(self, global_step: int, values: dict) -> None:
        """Per-step scalars (loss, lr, images/s), not in ``log.jsonl``: TensorBoard's ``<cell>/steps`` run, W&B."""
        self.tensorboard.step(global_step, values)
        if self.wandb is not None:
            self.wandb.step(global_step, values)

    def records(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def close(self, error: BaseException | None = None) -> None:
        try:
            self.tensorboard.close()
        except FileError:
            if error is None:
                raise
            # The stage is failing already, most often for the same reason (a full disk): its sentence stands.
        finally:
            if self.wandb is not None:
                self.wandb.close(error)

    def __enter__(self) -> JsonLog:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(exc)


def scalars(record: dict) -> dict[str, float]:
    """The numbers of a record that become curves: not its epoch, not text or flags."""
    return {k: v for k, v in record.items() if k != "epoch" and isinstance(v, (int, float)) and not isinstance(v, bool)}


def _stage_index(parts: tuple[str, ...]) -> int | None:
    """Where the stage folder sits in a cell folder's path (None: not below a grid's results): a stage whose cells
    log under a TensorBoard name (results/<grid>/<stage>/<dataset>/<method>/seed<k>, README "TensorBoard and W&B";
    ring.core.stages.Stage.log: a study's cells are pretraining runs)."""
    logged = stages_with("log")
    return next((i for i in range(max(len(parts) - 7, 0), len(parts) - 1) if parts[i] in logged), None)


def cell_name(folder: Path) -> str:
    """``<grid>/<stage>/<dataset>/<method>/seed<k>`` (a study cell has its study and policy too); the
    absolute path of a folder outside a grid's results."""
    parts = Path(folder).resolve().parts
    i = _stage_index(parts)
    return "/".join(parts[i - 1 :]) if i else str(Path(folder).resolve())


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
        i = _stage_index(parts)
        self.stage = STAGES[parts[i]].log if i is not None else "train"
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
        stamps = [
            int(p.name.split(".")[3]) for p in folder.glob("events.out.tfevents.*") if p.name.split(".")[3].isdigit()
        ]
        while stamps and int(time.time()) <= max(stamps):
            time.sleep(0.05)
        return SummaryWriter(log_dir=str(folder), purge_step=purge_step, flush_secs=30)

    def write(self, record: dict) -> None:
        if self._writer is None:
            self._writer = self._open(self.folder, self.purge_step)
        step = int(record["epoch"])
        for key, value in scalars(record).items():
            self._writer.add_scalar(f"{self.stage}/{key}", value, step)
        _flushed(self._writer)  # one record per epoch: live curves cost nothing
        if self._step_writer is not None:
            _flushed(self._step_writer)

    def step(self, global_step: int, values: dict) -> None:
        """Per-step scalars ``<stage>_step/<key>`` in the run ``<cell>/steps`` (steps and epochs are
        different axes, and a purge applies to every tag of a run)."""
        if self._step_writer is None:
            self._step_writer = self._open(self.folder / "steps", self.step_purge_step)
        for key, value in values.items():
            self._step_writer.add_scalar(f"{self.stage}_step/{key}", value, global_step)

    def close(self) -> None:
        writers, self._writer, self._step_writer = (self._writer, self._step_writer), None, None
        for writer in writers:
            if writer is not None:
                _flushed(writer, close=True)


def _flushed(writer, close: bool = False) -> None:
    """Flush (or close) a SummaryWriter; the OSError its writing thread met (a full disk, a file-size limit) is one
    sentence naming its event file."""
    try:
        writer.close() if close else writer.flush()
    except OSError as err:
        events = getattr(getattr(getattr(writer, "file_writer", None), "event_writer", None), "_file_name", None)
        raise FileError(write_failure(Path(events or Path(writer.log_dir, "events.out.tfevents")), err)) from None


WANDB_PROJECT_ENV = "RING_WANDB_PROJECT"


class WandbMissing(ValueError):
    """W&B logging was asked for and wandb is not installed."""


class WandbLog:
    """The cell's W&B run, when ``RING_WANDB_PROJECT`` names a project (README "TensorBoard and W&B").

    One run per cell: named after the cell (:func:`cell_name`), grouped with its other seeds, with a
    run id fixed by the cell folder, so that a resumed cell continues its run (``resume="allow"``).
    Epoch records are logged against ``epoch`` (tags ``<stage>/<key>``, as in TensorBoard), per-step
    scalars against ``global_step`` (``<stage>_step/<key>``).  wandb's own variables apply
    (``WANDB_MODE=offline``, ``WANDB_ENTITY``, ``WANDB_DIR``; without ``WANDB_DIR`` the run's files go
    to ``<cell>/wandb``).  wandb is imported at the first value sent, never when the variable is unset.

    A W&B history cannot drop points the way TensorBoard's purge does, so ``wandb-run.json`` in the
    cell folder records the last epoch and step sent: a resumed run does not send again what it
    redoes (a bit-identical resume redoes the same numbers).  A cell that starts over from epoch 0
    after values were sent (its checkpoint was set aside, or deleted) is a new training run: it gets
    a new run id, the same name.
    """

    MARKER = "wandb-run.json"

    def __init__(self, folder: Path, stage: str, project: str):
        self.folder = Path(folder)
        self.stage = stage
        self.project = project
        self.name = cell_name(self.folder)
        self.epoch_from: int | None = None
        self.step_from: int | None = None
        self.run = None
        self.sent: dict = {}

    @classmethod
    def from_env(cls, folder: Path, stage: str) -> WandbLog | None:
        project = os.environ.get(WANDB_PROJECT_ENV, "").strip()
        if not project:
            return None
        if importlib.util.find_spec("wandb") is None:  # found without importing it
            raise WandbMissing(
                f"{WANDB_PROJECT_ENV}={project} asks for W&B logging but wandb is not installed; "
                f"install it (pip install wandb, pinned in envs/requirements-cpu.txt) or unset {WANDB_PROJECT_ENV}."
            )
        return cls(folder, stage, project)

    def resume_from(self, epoch: int | None = None, step: int | None = None) -> None:
        if epoch is not None:
            self.epoch_from = epoch
        if step is not None:
            self.step_from = step

    def _read_marker(self) -> dict:
        try:  # JSON only; a torn or foreign marker counts as none (the run then starts at generation 0)
            marker = json.loads((self.folder / self.MARKER).read_text())
        except (OSError, ValueError):
            return {}
        return marker if isinstance(marker, dict) and isinstance(marker.get("generation"), int) else {}

    def _save_marker(self) -> None:
        # One small rename per value sent: negligible next to a training step, and only with W&B on.
        tmp = self.folder / f".{self.MARKER}.tmp"
        tmp.write_text(json.dumps(self.sent) + "\n")
        os.replace(tmp, self.folder / self.MARKER)

    def _start(self) -> None:
        marker = self._read_marker()
        sent_before = marker.get("epoch", -1) >= 0 or marker.get("step", 0) > 0
        fresh = self.epoch_from == 0 and (self.step_from is None or self.step_from <= 1)
        generation = marker.get("generation", 0) + (1 if fresh and sent_before else 0)
        run_id = "ring-" + hashlib.sha256(f"{self.folder.resolve()}#{generation}".encode()).hexdigest()[:20]
        if marker.get("id") == run_id:
            self.sent = marker
        else:
            self.sent = {"id": run_id, "generation": generation, "name": self.name, "epoch": -1, "step": 0}
        import wandb  # only here: W&B is optional

        parts = self.name.split("/")
        self.run = wandb.init(
            project=self.project,
            id=run_id,
            name=self.name,
            resume="allow",
            job_type=self.stage,
            group="/".join(parts[:-1]) if len(parts) > 1 else None,
            config={"cell": self.name, "stage": self.stage},
            dir=None if os.environ.get("WANDB_DIR") else str(self.folder),
            # The stages' stderr is their log (one-sentence errors, tqdm): W&B does not capture it.
            settings=wandb.Settings(console="off"),
        )
        self.run.define_metric("epoch")
        self.run.define_metric(f"{self.stage}/*", step_metric="epoch")
        self.run.define_metric("global_step")
        self.run.define_metric(f"{self.stage}_step/*", step_metric="global_step")
        self._save_marker()

    def write(self, record: dict) -> None:
        if self.run is None:
            self._start()
        epoch = int(record["epoch"])
        if epoch <= self.sent["epoch"]:  # sent before the resume that redid it
            return
        self.run.log({"epoch": epoch, **{f"{self.stage}/{k}": v for k, v in scalars(record).items()}})
        self.sent["epoch"] = epoch
        self._save_marker()

    def step(self, global_step: int, values: dict) -> None:
        if self.run is None:
            self._start()
        if global_step <= self.sent["step"]:
            return
        self.run.log({"global_step": global_step, **{f"{self.stage}_step/{k}": v for k, v in values.items()}})
        self.sent["step"] = global_step
        self._save_marker()

    def close(self, error: BaseException | None = None) -> None:
        if self.run is None:
            return
        if isinstance(error, Preempted):  # shown as preempted, not failed: the requeued job resumes it
            self.run.mark_preempting()
        self.run.finish(exit_code=0 if error is None or isinstance(error, Preempted) else 1)
        self.run = None
