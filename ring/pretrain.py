"""Contrastive pretraining of a ResNet-18 (IR, IRing, MoCo, MoCoRing, ...): the stage's entry point.

    python -m ring.pretrain --config CELL/config.yaml --out CELL

Resume is the default: if ``CELL/checkpoint.pt`` exists the run continues from it, exactly where
it stopped (mid-epoch included).  The checkpoint holds the encoder, the objective's state (bank or
queue and pointer, momentum encoder), optimizer, lr scheduler, Ring annealing state, RNG states,
epoch and step; it is written atomically at the end of every epoch and every
``checkpoint_interval_min`` minutes.  Outputs in ``CELL``:

* ``encoder.pt``: the trunk in torchvision's resnet18 ``state_dict`` format (no ``fc``); CMC
  cells also write ``encoder_ab.pt`` (``encoder.pt`` is then the L trunk, see :mod:`ring.engine.encoder`);
* ``log.jsonl``: one line per epoch with loss, kNN top-1 (k=200) and 1-NN top-1, Ring window;
* ``export.json``: the SHA-256 of every exported trunk and the config hash, checked by every reader;
* ``checkpoint.pt``: kept after the run so that a longer schedule can continue it (``keep_checkpoint: none``
  drops it); ``checkpoint.prev.pt``, the one before it (a fallback should the latest be damaged), only while the
  cell trains: it goes once the encoder is exported and verified;
* ``run.json``: the config the checkpoint and outputs are made with (:mod:`ring.core.cell_runs`);
* ``snapshot_epoch<e>.pt``: the training state at the start of each epoch of ``snapshot_epochs``,
  from which a study cell (``init_from``) continues with other settings (appendix, hard negatives).

An edited config is :mod:`ring.core.cell_runs`'s to decide: a longer ``epochs`` continues the checkpoint,
any other change keeps the previous run's files under ``runs/<old config hash>/`` and starts over.

The function :func:`run` never knows which launcher called it (this CLI, submitit, a test).
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import nullcontext
from dataclasses import astuple
from pathlib import Path
from typing import NamedTuple

import torch

from ring.core import catalog, cell_runs
from ring.core.config import PretrainConfig, config_hash, to_dict
from ring.core.files import FileError, check_writable, remove_stale_temporaries
from ring.core.methods import Method, check_fixed, method
from ring.core.objective_settings import ObjectiveSettings, own_config
from ring.core.stop import Preempted, stop_requested
from ring.data import dali, datasets
from ring.data.views import ViewSpec, train_views
from ring.engine import clock, distributed, health, provenance
from ring.engine.anneal import build_schedule
from ring.engine.encoder import (
    Precision,
    compute_dtype,
    default_dtype,
    export_trunks,
    resolve_compile,
    resolve_precision,
    save_trunks,
)
from ring.engine.grouped_bn import Grouped
from ring.engine.groups import bn_layout
from ring.engine.knn_schedule import knn_epochs
from ring.engine.logs import JsonLog
from ring.engine.objectives import build_encoder, build_objective, views_per_image
from ring.engine.objectives.ring import chunk_elements
from ring.engine.pretrain_state import CHECKPOINT, Position, PretrainCheckpoint, finish, finished_without_checkpoint
from ring.engine.runtime import Timer, epoch_batches, make_loader, pick_device, setup_threads
from ring.monitor import KnnMonitor
from ring.plan import checks

ENCODER = "encoder.pt"
LOG = "log.jsonl"


class Cell(NamedTuple):
    """A pretraining cell resolved once (:func:`resolve`) and handed down as objects: its method and dataset, looked up
    by name here, and what its objective and its views are made from, read from its config here."""

    method: Method
    data: datasets.Source
    objective: ObjectiveSettings
    views: ViewSpec


def resolve(cfg: PretrainConfig) -> Cell:
    """The cell's method (the registry) and dataset (the catalog), looked up here and nowhere below; unknown or
    not-implemented methods, unknown datasets, the plan's checks and missing files fail here, before any data."""
    m = method(cfg.method)
    check_fixed(cfg.method, m, to_dict(cfg))
    entry = catalog.spec(cfg.dataset)
    data = datasets.source(entry, cfg.data_root, cfg.store, cfg.resize)
    # The plan's checks (ring.plan.checks), again here for configs written by hand, before any data.
    checks.check(cfg, f"pretrain cell {cfg.dataset}/{cfg.method}/seed{cfg.seed}")
    data.check()
    views = ViewSpec(
        cfg.augment,
        cfg.resize,
        cfg.crop,
        cfg.crop_scale_min,
        cfg.seed,
        cfg.store_decode,
        cfg.store_decoder,
        cfg.view_draws,
    )
    return Cell(m, data, objective_settings(cfg, m, entry), views)


def objective_settings(cfg: PretrainConfig, m: Method, dataset: catalog.DatasetSpec) -> ObjectiveSettings:
    """What method ``m``'s objective is built from, read from ``cfg``: the values every objective shares and the
    frozen configs of the key groups it reads (:attr:`ring.core.methods.Method.key_groups`)."""
    values = to_dict(cfg)
    own = own_config(m.key_groups, tuple(group.read(values) for group in m.key_groups))
    return ObjectiveSettings(m, dataset, cfg.head, cfg.out_dim, cfg.temperature, cfg.batch_size, cfg.seed, own)


class Losses:
    """The training losses of the steps since the last read, kept on the device until :meth:`read`.

    Reading a loss waits for its step to finish, so the loop reads every ``loss_read_every`` steps,
    before every checkpoint and at the end of an epoch (one wait per read, not per step); also right after an
    epoch's first step, so that a run shows its first loss (and starts its per-step curves) at once.  A read
    checks every loss in order (the first non-finite one stops the run, naming its step), adds them to
    the epoch's sum, logs each step's curve and moves the progress bar.  The loss-adaptive annealing
    policies need each step's loss before the next step's window, so their cells read every step.
    """

    def __init__(self, run: Pretraining, progress):
        self.run, self.progress = run, progress
        self.pending: list[torch.Tensor] = []
        self.since = time.monotonic()
        self.read_once = False

    def __len__(self) -> int:
        return len(self.pending)

    def append(self, loss: torch.Tensor) -> None:
        self.pending.append(loss)

    def read(self) -> float:
        """The sum of the losses read (0 with none pending), which the run adds to its epoch's sum."""
        if not self.pending:
            return 0.0
        self.read_once = True
        run, cfg = self.run, self.run.cfg
        values = distributed.mean_values(torch.stack(self.pending))  # the global batch's losses
        first = run.step_in_epoch - len(values) + 1  # the 1-based step in the epoch of values[0]
        now = time.monotonic()
        rate = cfg.batch_size * len(values) / max(now - self.since, 1e-9)
        self.pending, self.since, total = [], now, 0.0
        for i, value in enumerate(values):
            health.check_loss(value, str(run.out), run.epoch + 1, first + i, cfg.lr, run.out / CHECKPOINT)
            if run.schedule and run.schedule.needs_loss:
                run.schedule.step(loss=value)
            total += value
            if distributed.is_main():  # per-step curves: TensorBoard, W&B (README "TensorBoard and W&B")
                run.log.step(
                    run.epoch * run.steps_per_epoch + first + i,
                    {"loss": value, "lr": run.optimizer.param_groups[0]["lr"], "images_per_s": rate},
                )
        self.progress.update(len(values))
        self.progress.set_postfix(loss=f"{values[-1]:.4f}")
        return total


def check_writable_on_every_rank(out: Path) -> None:
    """An unwritable cell folder fails now, on every rank, not after an epoch of training.  The ranks decide together
    (a collective), so that no rank's write probe is still in the folder when rank 0 then removes the temporary files
    of killed writes (it removed another rank's probe in flight: that rank failed "No such file or directory")."""
    problem = None
    try:
        check_writable(out)
    except FileError as err:
        problem = err
    if distributed.any_rank(problem is not None):
        raise problem or FileError(f"{out}: another rank cannot write this cell folder; its log says why.")


def validate_before_training(run: Pretraining) -> None:
    """The validation accuracy before the cell's first step, the annealing policy's first signal
    (``ring_val_before_training``: the authors' trainer's sanity check, see ring.engine.anneal)."""
    accuracy = run.monitors(test=False, validation=True)["val_knn_top1"]
    run.schedule.before_training(val_accuracy=accuracy)
    if distributed.is_main():
        print(
            f"ring: {run.out}: validation kNN top-1 before training {accuracy:.2f}% (the annealing policy's "
            "first signal)",
            file=sys.stderr,
        )


def stop_here(run: Pretraining, losses: Losses) -> None:
    """Preemption or time limit: checkpoint this step and stop; the launcher requeues the job."""
    run.loss_sum += losses.read()  # before anything is saved: a diverged step never reaches a checkpoint
    run.save_checkpoint()
    distributed.barrier()  # no rank exits (and no requeue starts) before rank 0's checkpoint is written
    raise Preempted(f"{run.out}: checkpointed at epoch {run.epoch} step {run.step_in_epoch}")


# The objects whose states a checkpoint saves and loads (ring.engine.pretrain_state.PretrainCheckpoint).
CHECKPOINT_PARTS = ("encoder", "objective", "optimizer", "scheduler", "schedule")


class Pretraining:
    """Everything one pretraining cell holds; ``run()`` trains it to the end, resuming if it can."""

    def __init__(self, cfg: PretrainConfig, out_dir: str | Path, cell: Cell | None = None):
        """``cell``: what its entry point resolved (:func:`run`, :class:`Cell`); resolved here when not given."""
        self.cfg = cfg
        self.out = Path(out_dir)
        self.spec, self.data, self.settings, views = cell or resolve(cfg)
        setup_threads(cfg.threads)
        # Data parallel when the environment says so (one process per GPU, see ring.engine.distributed).
        self.device = distributed.start(pick_device(cfg.device))
        world = distributed.world_size()
        self.local_batch = distributed.local_batch(cfg.batch_size, cfg.bn_groups)
        torch.manual_seed(cfg.seed)

        self.n_views = views_per_image(self.spec)
        compiled = resolve_compile(cfg.compile, self.device)  # the views fused as the network is (eager fallback alike)
        rank = distributed.rank()
        self.views = train_views(views, self.data, self.device, self.n_views, compiled, self.local_batch, rank)
        self.cold = compiled  # this process's first step compiles: a fixed cost, not the pass's
        self.train_set = self.views.dataset
        n_train = len(self.train_set)
        self.steps_per_epoch = n_train // cfg.batch_size
        if self.steps_per_epoch == 0:
            raise ValueError(f"batch_size={cfg.batch_size} exceeds the {n_train} training images; lower it.")
        self.schedule = build_schedule(self.settings.keys.ring, self.steps_per_epoch) if self.spec.ring else None

        if self.device.type == "cuda":  # fixed input sizes: let cuDNN pick its fastest kernels once
            torch.backends.cudnn.benchmark = True
        groups, span = bn_layout(cfg.bn_groups, world)  # per process, or processes per group (span_norm)
        bf16, channels_last = resolve_precision(cfg.precision, cfg.channels_last, self.device, groups)
        self.encoder = build_encoder(self.settings).to(self.device)
        # What trains: the encoder behind its precision/memory-format/compile policy and BatchNorm groups
        # (the same parameters), wrapped for data parallelism when there are several processes.
        self.net = Precision(self.encoder, bf16, channels_last, compiled, compute_dtype(cfg.precision))
        self.model = Grouped(self.net, groups, span)
        # Rows of a selection chunk (Ring's window, the kNN monitor's window measure): sized once, by the free memory
        # at the start, not re-measured each epoch while the training's own tensors hold memory.
        self.chunk_elements = chunk_elements(cfg.max_chunk_elements, self.device)
        self.objective = build_objective(self.settings, self.model, n_train, self.chunk_elements).to(self.device)
        self.monitor = KnnMonitor(cfg, self.data, self.net, self.device, self.chunk_elements, views, compiled)
        folders = self.data.spec.store_size > 0  # image folders: ImageNet's monitor is priced at a third of an epoch
        self.knn_epochs = set(knn_epochs(cfg.knn_schedule, cfg.knn_every, cfg.epochs, folders))
        self.train_model = self.model
        if world > 1:
            device_ids = [self.device.index] if self.device.type == "cuda" else None
            self.train_model = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=device_ids)
        # foreach: a few multi-tensor calls per step instead of three per parameter (the same arithmetic).
        self.optimizer = torch.optim.SGD(
            self.encoder.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay, foreach=True
        )
        self.scheduler = torch.optim.lr_scheduler.MultiStepLR(self.optimizer, cfg.lr_milestones, cfg.lr_gamma)
        self.epoch = 0
        self.step_in_epoch = 0
        self.loss_sum = 0.0
        self.log = JsonLog(self.out / LOG)
        self.checkpoint = PretrainCheckpoint(self.out, cfg, {name: getattr(self, name) for name in CHECKPOINT_PARTS})

    # -- checkpoints (PretrainCheckpoint) -------------------------------------------------------
    def position(self) -> Position:
        return Position(self.epoch, self.step_in_epoch, self.loss_sum)

    def save_checkpoint(self) -> None:
        with clock.timing("checkpoint writes"):
            self.checkpoint.save(self.position())

    def resume(self) -> bool:
        if (position := self.checkpoint.resume()) is not None:
            self.epoch, self.step_in_epoch, self.loss_sum = astuple(position)
        return position is not None

    # -- training ----------------------------------------------------------------------------
    def monitors(self, test: bool, validation: bool, window_classes: bool = False) -> dict[str, float]:
        """The kNN monitors (:class:`KnnMonitor`); ``window_classes``: measure the Ring window's classes too."""
        window = (self.schedule.window() if self.schedule else (0.0, 100.0)) if window_classes else None
        return self.monitor(test, validation, window)

    def _train_epoch(self, progress) -> None:
        cfg = self.cfg
        self.train_set.set_epoch(self.epoch)
        start_epoch = getattr(self.objective, "start_epoch", None)
        if start_epoch:  # k-means methods recluster the bank (kept in the checkpoint, so not twice)
            with clock.timing("k-means"):
                start_epoch(self.epoch)
        batches = epoch_batches(len(self.train_set), cfg.batch_size, cfg.seed, self.epoch)[self.step_in_epoch :]
        if distributed.world_size() > 1:  # this rank's share of every global batch
            r, n = distributed.rank(), self.local_batch
            batches = [b[r * n : (r + 1) * n] for b in batches]
        loader = make_loader(self.train_set, batches, cfg.num_workers, self.device, collate_fn=self.views.collate)
        since_checkpoint = Timer()
        losses = Losses(self, progress)
        self.encoder.train()
        flags = distributed.StepFlags(2)
        for batch in self.views.feed(loader):  # the loader, or the GPU decoder thread over it
            with clock.timing("compile warm-up") if self.cold else nullcontext():
                losses.append(self.train_step(*self.views.batch(batch, self.epoch, self.step_in_epoch)))
            self.cold = False
            clock.count("pretraining", self.local_batch)
            self.step_in_epoch += 1
            if self.schedule and not self.schedule.needs_loss:
                self.schedule.step()  # counts steps; the loss-adaptive policies step as Losses reads each loss
            if self.schedule and self.schedule.needs_loss or len(losses) >= cfg.loss_read_every or not losses.read_once:
                self.loss_sum += losses.read()
            # Both decided by every rank together (a read is a collective of all ranks, and they must all stop at the
            # same step); across processes a few steps late, so that no step waits for the device (StepFlags).
            stop, due = flags(stop_requested(), since_checkpoint.minutes() >= cfg.checkpoint_interval_min)
            if stop:
                stop_here(self, losses)
            if due and self.step_in_epoch < self.steps_per_epoch:
                self.loss_sum += losses.read()
                self.save_checkpoint()
                since_checkpoint.reset()
        if flags.close(stop_requested(), False)[0]:  # a request still in flight at the epoch's last step
            stop_here(self, losses)
        self.loss_sum += losses.read()

    def train_step(self, views: list[torch.Tensor], index: torch.Tensor) -> torch.Tensor:
        """One optimisation step.  Returns the loss on the device: nothing here waits for the device
        (no host synchronisation; ``tests/test_pretrain_step_budget.py`` counts), :class:`Losses` reads it later."""
        window = self.schedule.window() if self.schedule else None
        loss = self.objective(self.train_model, views, index, window)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def _end_epoch(self) -> None:
        cfg = self.cfg
        record = {
            "epoch": self.epoch,
            "loss": self.loss_sum / max(self.step_in_epoch, 1),
            "lr": self.optimizer.param_groups[0]["lr"],
        }
        knn_due = self.epoch in self.knn_epochs
        validation = bool(self.schedule and self.schedule.needs_validation)
        if knn_due or validation or cfg.log_window_classes:
            record.update(self.monitors(test=knn_due, validation=validation, window_classes=cfg.log_window_classes))
        if self.schedule:
            self.schedule.epoch_end(val_accuracy=record.get("val_knn_top1"))
            record["w_l"], record["w_u"] = self.schedule.window()
        health.check_parameters(
            [*self.encoder.state_dict().items(), *self.objective.state_dict().items()],
            str(self.out),
            self.epoch + 1,
            cfg.lr,
            self.out / CHECKPOINT,
        )
        self.scheduler.step()
        self.epoch += 1
        self.step_in_epoch = 0
        self.loss_sum = 0.0
        self.save_checkpoint()
        if distributed.is_main():
            self.log.append(record)
            if getattr(self, "segment", None) is not None:  # run()'s: the rate `ring status` extrapolates
                self.segment.progress(self.segment_start, self.epoch, cfg.epochs)

    def run(self) -> Path:
        check_writable_on_every_rank(self.out)
        if distributed.is_main() and (stale := remove_stale_temporaries(self.out)):
            print(f"ring: {self.out}: removed {len(stale)} temporary file(s) left by killed writes", file=sys.stderr)
        if finished_without_checkpoint(self.out, self.cfg):
            return self.out / ENCODER
        resumed = self.resume()
        if not resumed and self.cfg.init_from:
            self.epoch, self.step_in_epoch, self.loss_sum = astuple(self.checkpoint.init_from_snapshot())
        if distributed.is_main():
            cell_runs.write_record(self.out, self.cfg)  # from now on, every file here is this config's
            self.log.truncate_from(self.epoch)
            self.log.purge_steps_from(self.epoch * self.steps_per_epoch + self.step_in_epoch + 1)
        if resumed and distributed.is_main():
            print(f"ring: resuming {self.out} at epoch {self.epoch} step {self.step_in_epoch}", file=sys.stderr)
        if not resumed and self.schedule and self.schedule.validates_before_training:
            validate_before_training(self)  # once per cell: on resume the policy's state holds it
        with self.log, provenance.Segment(self.out, config_hash(self.cfg), self.cfg.seed) as self.segment:
            self.segment_start = self.epoch + self.step_in_epoch / self.steps_per_epoch
            self._train()
        if distributed.is_main():  # after the segment: its seconds are not in the cell's record
            export(self.encoder, self.out, self.cfg)
        return self.out / ENCODER

    def _train(self) -> None:
        self.checkpoint.snapshot(self.position())
        while self.epoch < self.cfg.epochs:
            with progress_bar(self) as progress, clock.timing("pretraining"):
                self._train_epoch(progress)
            self._end_epoch()
            self.checkpoint.snapshot(self.position())
            if distributed.is_main():
                print(epoch_line(self.out, self.log.records()[-1]), file=sys.stderr)


def progress_bar(run: Pretraining):
    """The epoch's progress bar on stderr (none where stderr is no terminal: ``disable=None``).  tqdm is imported here:
    the benchmarks build their objectives with :func:`objective_settings` where only torch's stack is installed."""
    from tqdm import tqdm

    return tqdm(
        total=run.steps_per_epoch,
        initial=run.step_in_epoch,
        desc=f"epoch {run.epoch + 1}/{run.cfg.epochs}",
        file=sys.stderr,
        leave=False,
        dynamic_ncols=True,
        disable=None,
    )


def epoch_line(out: Path, record: dict) -> str:
    """The line an epoch ends with: its log record, floats to 4 significant digits."""
    values = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in record.items())
    return f"ring: {out.name} {values}"


def export(encoder: torch.nn.Module, out: Path, cfg: PretrainConfig) -> None:
    """The trained trunks (encoder.pt, and encoder_ab.pt for CMC), each checked before the first is written, with
    their checksum record; then the checkpoints the finished cell no longer needs go (:func:`finish`)."""
    trunks = export_trunks(encoder)
    for name, state in trunks.items():
        health.check_export(state, out / name)
    save_trunks(trunks, out, config_hash=config_hash(cfg), epochs=cfg.epochs)
    finish(out, cfg)


def run(cfg: PretrainConfig, out_dir: str | Path) -> Path:
    clock.start()  # what each pass of this cell costs (ring.engine.clock), recorded with its segment
    with clock.timing("data check"):
        cell = resolve(cfg)
    with default_dtype(compute_dtype(cfg.precision)):  # fp64: everything the cell creates, from its first tensor
        with clock.timing("setup"):
            pretraining = Pretraining(cfg, out_dir, cell)
        return pretraining.run()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config", required=True, help=f"cell config (YAML of PretrainConfig fields; {checks.REFERENCE_HINT})"
    )
    parser.add_argument("--out", required=True, help="cell folder: checkpoint, log and encoder go here")
    args = parser.parse_args(argv)
    clock.entered()  # the interpreter's start and the imports: this job's first fixed cost
    try:
        cfg = checks.load_checked("pretrain", args.config)
        run(cfg, args.out)
    except (ValueError, NotImplementedError, FileNotFoundError, FileError, dali.DaliMissing) as err:
        print(f"ring: {err}", file=sys.stderr)
        return 1
    finally:
        distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
