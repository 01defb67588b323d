"""How the processes of a data-parallel run split a batch and its BatchNorm groups (torch-free).

:mod:`ring.engine.span_norm` and :mod:`ring.engine.distributed` implement the layout; the plan's checks and the SLURM
preflight (ring.cluster.slurm) refuse one that cannot be laid out before any job starts, with the same sentence the
job would give.
"""

from __future__ import annotations


def bn_layout(bn_groups: int, world: int) -> tuple[int, int]:
    """How ``world`` processes hold ``bn_groups`` BatchNorm groups: (groups within each process, consecutive processes
    that share one group).  One of the two is 1; a layout that nests neither way fails (:func:`world_problem`)."""
    if bn_groups % world == 0:
        return bn_groups // world, 1
    return 1, world // bn_groups


def world_problem(batch_size: int, bn_groups: int, world: int) -> str | None:
    """Why ``world`` processes (nodes x gpus_per_node) cannot train a global batch of ``batch_size`` images in
    ``bn_groups`` BatchNorm groups, as one process computes it (one sentence), or None.  Each process takes an equal
    share of the batch; a group lies either within one process (``bn_groups`` a multiple of ``world``) or across
    ``world / bn_groups`` whole consecutive processes (``world`` a multiple of ``bn_groups``)."""
    if batch_size % world:
        return (
            f"batch_size={batch_size} does not split evenly over the {world} processes (nodes x gpus_per_node); "
            f"choose a batch_size that is a multiple of {world}, or other resources"
        )
    if bn_groups % world and world % bn_groups:
        return (
            f"bn_groups={bn_groups} and the {world} processes (nodes x gpus_per_node) do not nest (a BatchNorm group "
            f"lies within one process or spans whole processes); choose a divisor or a multiple of {world} for "
            "bn_groups, or other resources"
        )
    groups, _ = bn_layout(bn_groups, world)
    if (batch_size // world) % groups:
        return (
            f"the {batch_size // world} images of each of the {world} processes do not split into its {groups} "
            "BatchNorm groups; choose a batch_size that is a multiple of bn_groups"
        )
    return None
