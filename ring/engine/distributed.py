"""Data-parallel training, one process per GPU, set up from the job's environment.

The launcher (ring.cluster.jobs, from submitit's job environment) or a test exports ``WORLD_SIZE``,
``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``; the stages only call these
helpers, which are identities in a single process.  Every rank sees the same global batch order
and the same random draws; each works on its slice of the batch (:func:`local_rows`), and state
shared by all ranks (memory bank, queue) is updated from gathered tensors (:func:`all_gather`),
so N processes compute what one process computes with ``bn_groups`` BatchNorm groups.
"""

from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist

from ring.engine.groups import world_problem


def is_initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def world_size() -> int:
    return dist.get_world_size() if is_initialized() else 1


def rank() -> int:
    return dist.get_rank() if is_initialized() else 0


def is_main() -> bool:
    return rank() == 0


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", 0))


# How long a rank waits at the rendezvous and in any collective before it fails: long enough for the slowest
# single-rank work the others wait for (rank 0 writing an ImageNet checkpoint or exporting, the kNN monitor's
# embedding of a training set), short enough that a rank lost with its node frees the others' GPUs within the hour.
TIMEOUT = timedelta(minutes=30)


def init_from_env(device_type: str) -> bool:
    """Join the process group the environment describes (nccl on GPUs, gloo on CPUs)."""
    if is_initialized():
        return True
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    dist.init_process_group(
        "nccl" if device_type == "cuda" else "gloo",
        rank=int(os.environ["RANK"]),
        world_size=int(os.environ["WORLD_SIZE"]),
        timeout=TIMEOUT,
    )
    return True


def start(device: torch.device) -> torch.device:
    """Join the environment's process group, if any (:func:`init_from_env`); the device this process trains on (its
    local GPU when there are several processes on CUDA)."""
    init_from_env(device.type)
    if device.type == "cuda" and world_size() > 1:
        device = torch.device("cuda", local_rank())
        torch.cuda.set_device(device)
    return device


def local_batch(batch_size: int, bn_groups: int) -> int:
    """This process's share of a global batch of ``batch_size`` images in ``bn_groups`` BatchNorm groups; one
    sentence when the processes cannot split them as one process does (ring.engine.groups.world_problem, which the
    plan checks before submission)."""
    problem = world_problem(batch_size, bn_groups, world_size())
    if problem:
        raise ValueError(problem + ".")
    return batch_size // world_size()


# This process's group of the ranks that share one BatchNorm group (:func:`bn_process_group`), per span.
_BN_GROUPS: dict[int, dist.ProcessGroup] = {}


def bn_process_group(span: int) -> dist.ProcessGroup | None:
    """The process group of the ``span`` consecutive ranks (``rank // span``-th block) whose batches one BatchNorm group
    normalises together; None for ``span`` 1 (no collective).  Every rank creates every block's group, in the same
    order, the first time it is asked (``new_subgroups`` is a collective of all ranks): each asks when it builds its
    network, before any step."""
    if span == 1:
        return None
    if span not in _BN_GROUPS:
        if world_size() % span:
            raise ValueError(f"BatchNorm groups of {span} processes do not tile the {world_size()} processes.")
        _BN_GROUPS[span] = dist.group.WORLD if span == world_size() else dist.new_subgroups(span)[0]
    return _BN_GROUPS[span]


@torch.no_grad()
def all_gather(t: torch.Tensor) -> torch.Tensor:
    """Rows of every rank, in rank order (the tensor itself in a single process)."""
    if world_size() == 1:
        return t
    parts = [torch.empty_like(t) for _ in range(world_size())]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts)


def local_rows(t: torch.Tensor) -> torch.Tensor:
    """This rank's equal share of the rows of a global tensor."""
    n = t.shape[0] // world_size()
    return t[rank() * n : (rank() + 1) * n]


def _scalar_device() -> torch.device:
    # NCCL reduces only CUDA tensors; gloo only CPU ones.
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def mean_values(t: torch.Tensor) -> list[float]:
    """The mean over ranks of each entry of ``t`` (one all-reduce), read to the host once."""
    if world_size() == 1:
        return t.tolist()
    t = t.to(device=_scalar_device(), dtype=torch.float64)
    dist.all_reduce(t)
    return (t / world_size()).tolist()


def any_rank(*flags: bool) -> bool | tuple[bool, ...]:
    """Each flag true on every rank if it is true on one (one all-reduce for all of them): all ranks stop,
    or read their losses, at the same step.  One flag gives a bool, several a tuple."""
    if world_size() > 1:
        t = torch.tensor([int(f) for f in flags], device=_scalar_device())
        dist.all_reduce(t)
        flags = tuple(bool(v) for v in t.tolist())
    return flags[0] if len(flags) == 1 else tuple(flags)


# Steps between two collective reads of the stop and checkpoint flags (:class:`StepFlags`).  A stop requested on any
# rank during step s is sent with step ceil(s / 8) * 8 and acted on by every rank after the next step: at most 8 steps
# later than one process acts (after step s itself).  That is under half a second at the slowest committed GPU step
# (docs/cluster.md computes it from the priced figures), 8 s if a step took a second: well inside signal_delay_s
# (120 s in ring/resources/cluster.yaml), which must also cover the checkpoint write.
FLAGS_EVERY = 8


class _Reduction:
    """One asynchronous all-reduce (a sum) of a rank's flags, launched at one step and read at a later one."""

    def __init__(self, flags: tuple[bool, ...]):
        device = _scalar_device()
        values = torch.tensor([int(f) for f in flags], dtype=torch.int32, pin_memory=device.type == "cuda")
        # A pinned source and destination: neither copy makes the host wait for the device.
        self.summed = summed = values.to(device, non_blocking=True)  # held until read: the reduction writes it
        self.work = dist.all_reduce(summed, async_op=True)
        self.ready = None
        if device.type == "cuda":
            self.work.wait()  # NCCL: the current stream waits for the reduction, the host does not
            self.host = torch.empty(values.shape, dtype=values.dtype, pin_memory=True).copy_(summed, non_blocking=True)
            self.ready = torch.cuda.Event()
            self.ready.record()
        else:
            self.host = summed

    def result(self) -> tuple[bool, ...]:
        # A step later the host waits at most for the step before the one it has just queued.
        if self.ready is not None:
            self.ready.synchronize()
        else:
            self.work.wait()
        return tuple(bool(v) for v in self.host.tolist())


class StepFlags:
    """Flags that every rank must act on at the same step (stop for a preemption, write a checkpoint), decided
    together without a host read at every step.

    Called once per step with this rank's flags, it answers each flag true on every rank if it was true on one.
    In one process that is the flags themselves, at once.  Across processes a blocking all-reduce per step would
    make every rank wait for its device after each step (nothing queued ahead), so every ``every``-th step launches
    an asynchronous all-reduce of the flags and the next step reads it; the other steps answer false without
    a collective.  Every rank counts the same steps, so all read the same answer at the same step.
    :meth:`close` ends the loop with one blocking read, so that no request is lost at its end.
    """

    def __init__(self, count: int, every: int | None = None):
        every = FLAGS_EVERY if every is None else every
        if every < 1:
            raise ValueError(f"StepFlags reads every {every} steps; it must read every 1 or more steps.")
        self.count, self.every = count, every
        self.steps = 0
        self.pending: _Reduction | None = None

    def __call__(self, *flags: bool) -> tuple[bool, ...]:
        self._check(flags)
        if world_size() == 1:
            return tuple(flags)
        answer = self._take()
        self.steps += 1
        if self.steps % self.every == 0:
            self.pending = _Reduction(flags)
        return answer

    def close(self, *flags: bool) -> tuple[bool, ...]:
        """The last answer of a loop: the flags in flight, or-ed with these flags read now (a blocking read).
        In one process every step has answered at once: nothing is left."""
        self._check(flags)
        if world_size() == 1:
            return (False,) * self.count
        in_flight = self._take()
        now = any_rank(*flags)
        now = now if isinstance(now, tuple) else (now,)
        return tuple(a or b for a, b in zip(in_flight, now, strict=True))

    def _take(self) -> tuple[bool, ...]:
        if self.pending is None:
            return (False,) * self.count
        answer, self.pending = self.pending.result(), None
        return answer

    def _check(self, flags: tuple[bool, ...]) -> None:
        if len(flags) != self.count:
            raise ValueError(f"StepFlags was made for {self.count} flags and was given {len(flags)}.")


def broadcast_choice(choice: int) -> int:
    """Rank 0's ``choice`` (a small integer) on every rank: one process decides what all do (which checkpoint to
    resume: nodes on a shared filesystem may see different files for a while)."""
    if world_size() == 1:
        return choice
    t = torch.tensor([choice], dtype=torch.long, device=_scalar_device())
    dist.broadcast(t, src=0)
    return int(t.item())


def barrier() -> None:
    """Every rank waits here until all arrive (rank 0's file moves are done before others read)."""
    if world_size() > 1:
        dist.barrier()


def shutdown() -> None:
    if is_initialized():
        _BN_GROUPS.clear()
        dist.destroy_process_group()
