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

import torch
import torch.distributed as dist


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


def init_from_env(device_type: str) -> bool:
    """Join the process group the environment describes (nccl on GPUs, gloo on CPUs)."""
    if is_initialized():
        return True
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    dist.init_process_group("nccl" if device_type == "cuda" else "gloo",
                            rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    return True


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
    return t[rank() * n:(rank() + 1) * n]


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


def barrier() -> None:
    """Every rank waits here until all arrive (rank 0's file moves are done before others read)."""
    if world_size() > 1:
        dist.barrier()


def shutdown() -> None:
    if is_initialized():
        dist.destroy_process_group()
