"""A pretraining cell's checkpoint: what it and the snapshots hold, how the cell picks one up, and what it keeps.

:class:`PretrainCheckpoint` saves the whole training state (atomically, checksummed: ring.engine.checkpoint),
resumes from the latest checkpoint that verifies and is this cell's (its config's, or one a longer schedule
continues; rank 0 decides, every rank follows), or starts a study cell from another cell's snapshot
(``init_from``).  Before training, :func:`finished_without_checkpoint` brings the cell in line with its config
(ring.core.cell_runs) and tells a finished run whose checkpoint was dropped; after the export, :func:`finish` drops
the checkpoints the cell no longer needs (``keep_checkpoint``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ring.core import cell_runs
from ring.core.config import SNAPSHOT_FILE, PretrainConfig, config_hash, hashed_values
from ring.core.files import CHECKSUMS, read_record
from ring.core.stages import STAGES
from ring.engine import distributed
from ring.engine.checkpoint import (
    CheckpointError,
    atomic_save,
    checksummed,
    finish_checkpoints,
    load_verified,
    previous_path,
    resume_state,
    rng_state,
    save_checkpoint,
    set_rng_state,
)

CHECKPOINT = "checkpoint.pt"


@dataclass(frozen=True)
class Position:
    """Where a cell's training stands: what a checkpoint saves beside its parts' states, and what it restores."""

    epoch: int = 0
    step_in_epoch: int = 0
    loss_sum: float = 0.0  # the epoch's losses so far


class PretrainCheckpoint:
    """What a pretraining cell's checkpoint and snapshots hold, and how the cell picks one up (:meth:`resume`, through
    :func:`ring.engine.checkpoint.resume_state`) or starts from another cell's snapshot (``init_from``).

    ``parts`` are the objects whose states it saves and loads in place (encoder, objective, optimizer, scheduler, and
    schedule, None without a Ring schedule); the cell's :class:`Position` is given to each save and returned by each
    restore."""

    def __init__(self, out: Path, cfg: PretrainConfig, parts: dict):
        self.out, self.cfg, self.parts = out, cfg, parts

    def state(self, position: Position) -> dict:
        """The whole training state: what the checkpoint and the snapshots hold."""
        schedule = self.parts["schedule"]
        return {
            "config_hash": config_hash(self.cfg),
            "config": hashed_values(self.cfg),  # what a longer schedule compares against (cell_runs.continues)
            "method": self.cfg.method,  # named by the error when another method's cell finds it
            "epoch": position.epoch,
            "step_in_epoch": position.step_in_epoch,
            "loss_sum": position.loss_sum,
            **{name: self.parts[name].state_dict() for name in ("encoder", "objective", "optimizer", "scheduler")},
            "schedule": schedule.state_dict() if schedule else None,
            "rng": rng_state(),
        }

    def save(self, position: Position) -> None:
        if distributed.is_main():  # every rank holds the same state
            save_checkpoint(self.state(position), self.out / CHECKPOINT)

    def resume(self) -> Position | None:
        """The position of the checkpoint the cell resumes from, its parts loaded; None: a fresh start."""
        path = self.out / CHECKPOINT
        # The latest checkpoint that verifies, else the previous one (saying so), else a fresh start: decided by
        # rank 0 alone (it moves a corrupt file aside; another node may not see a new file yet), followed by all.
        state, failure = None, None
        if distributed.is_main():
            try:
                state = resume_state(path, "pretraining checkpoint", self._belongs, self._set_aside)
            except CheckpointError as err:  # told to the others first: they must not wait for rank 0 in vain
                failure = err
        choice = distributed.broadcast_choice(3 if failure else 0 if state is None else 1 if path.exists() else 2)
        if failure:
            raise failure
        if choice == 3:
            raise CheckpointError(f"{self.out}: rank 0 could not resume this cell; its log says why.")
        if choice == 0:
            return None
        if state is None:  # another rank: the file rank 0 resumes from
            chosen = path if choice == 1 else previous_path(path)
            state = load_verified(chosen, "pretraining checkpoint")
        return self.load(state, path, "move it away to start again")

    def _belongs(self, state: dict) -> bool:
        """Whether a checkpoint is this cell's to resume: its config's, or one a longer schedule continues."""
        cfg = self.cfg
        written_by = state.get("method")  # absent in checkpoints from before it was recorded
        if written_by is not None and written_by != cfg.method:
            raise CheckpointError(
                f"The checkpoint {self.out / CHECKPOINT} was written by method {written_by}, but this cell trains "
                f"{cfg.method}; move the checkpoint away to start this cell again (or back to a {written_by} cell)."
            )
        return state.get("config_hash") == config_hash(cfg) or cell_runs.continues(
            "pretrain", state.get("config"), hashed_values(cfg)
        )

    def _set_aside(self, state: dict) -> None:
        """Another config's run (a cell without run.json, or a config written by hand): kept, not resumed."""
        if distributed.is_main():
            out, found = self.out, state.get("config_hash")
            aside = cell_runs.set_aside(out, str(found), STAGES["pretrain"].run_files)
            print(
                f"ring: {out}: its checkpoint was written with another config (hash {found}); the previous "
                f"run is kept in {aside} and this cell starts over",
                file=sys.stderr,
            )
            cell_runs.drop_checkpoints(aside, self.cfg, log=lambda line: print(line, file=sys.stderr))

    def init_from_snapshot(self) -> Position:
        """Start from another cell's snapshot (``init_from``): its whole training state, this cell's Ring schedule."""
        path = Path(self.cfg.init_from)
        state = load_verified(
            path, "snapshot", fix="rerun the cell that writes it, with this epoch in its snapshot_epochs"
        )
        if int(state["epoch"]) >= self.cfg.epochs:
            raise ValueError(
                f"init_from {path} is at epoch {state['epoch']}, not before epochs={self.cfg.epochs}; "
                "raise epochs or start from an earlier snapshot."
            )
        return self.load({**state, "schedule": None}, path, "start from a snapshot of the same dataset and objective")

    def load(self, state: dict, path: Path, fix: str) -> Position:
        """``state`` loaded into the parts; the position it was saved at."""
        parts = self.parts
        try:
            for name in ("encoder", "objective", "optimizer", "scheduler"):
                parts[name].load_state_dict(state[name])
            if parts["schedule"] and state["schedule"] is not None:
                parts["schedule"].load_state_dict(state["schedule"])
            set_rng_state(state["rng"])
            return Position(int(state["epoch"]), int(state["step_in_epoch"]), float(state["loss_sum"]))
        except (KeyError, RuntimeError, ValueError) as err:
            raise CheckpointError(
                f"The checkpoint {path} does not match this cell ({str(err).splitlines()[0]}); {fix}."
            ) from None

    def snapshot(self, position: Position) -> None:
        """The training state at the start of an epoch of ``snapshot_epochs``, for study cells to start from."""
        path = self.out / SNAPSHOT_FILE.format(epoch=position.epoch)
        if (
            position.step_in_epoch == 0
            and position.epoch in self.cfg.snapshot_epochs
            and not path.exists()
            and distributed.is_main()
        ):
            atomic_save(checksummed(self.state(position)), path)


def finished_without_checkpoint(out: Path, cfg: PretrainConfig) -> bool:
    """Bring the cell in line with ``cfg`` (the workflow decided this already; a config written by hand is decided
    here), and say whether it is a finished run of this config without its checkpoint (an undone edit brought it
    back after keep_superseded: results dropped the checkpoint): its verified encoder is the result, and nothing
    retrains.  Not where a snapshot that study cells start from went with it: the cell retrains to write it."""
    checkpoints = (out / CHECKPOINT, previous_path(out / CHECKPOINT))
    if distributed.is_main():
        cell_runs.prepare(out, "pretrain", cfg, log=lambda line: print(line, file=sys.stderr))
        if not any(path.exists() for path in checkpoints):
            cell_runs.restore_exports(out, cfg)  # the exports Snakemake deleted, from the verified copies
    distributed.barrier()
    snapshots = [out / SNAPSHOT_FILE.format(epoch=epoch) for epoch in cfg.snapshot_epochs]
    if (
        any(path.exists() for path in checkpoints)
        or not all(path.exists() for path in snapshots)
        or not cell_runs.finished_exports(out, config_hash(cfg))
    ):
        return False
    if distributed.is_main():
        cell_runs.write_record(out, cfg)
        print(
            f"ring: {out}: finished with this config (its encoder verifies against its checksum record) "
            "and its checkpoint was dropped; nothing to train",
            file=sys.stderr,
        )
    return True


def finish(out: Path, cfg: PretrainConfig) -> None:
    """A finished cell keeps what it needs again (``keep_checkpoint``): the previous checkpoint goes once the exports
    verify against their checksum record (they, not it, stand for the run now), the final one too under ``none``.
    Exports that do not verify keep both: the next run resumes and exports again.  The kept copies are what is
    verified: encoder.pt itself may be gone already (save_trunks: a Snakemake rerun deletes it while this job runs)."""
    if read_record(out / CHECKSUMS).get("config_hash") != config_hash(cfg) or not cell_runs.verified_copies(out):
        print(f"ring: {out}: its exports do not verify after writing; its checkpoints are kept", file=sys.stderr)
        return
    freed = finish_checkpoints(out / CHECKPOINT, cfg.keep_checkpoint)
    if freed and cfg.keep_checkpoint == "none":
        print(
            f"ring: {out}: finished; dropped its checkpoints ({freed / 1e6:.1f} MB) under keep_checkpoint: none (a "
            "longer epochs trains from scratch)",
            file=sys.stderr,
        )
