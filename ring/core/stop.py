"""A stop request and its exception, without torch: the job wrapper on the compute node
(:mod:`ring.cluster.jobs`) turns SLURM's USR2 into :func:`request_stop`; a stage checks
:func:`stop_requested` at its step boundaries, checkpoints and raises :class:`Preempted`.
"""


class Preempted(Exception):
    """Raised at a step boundary after a stop was requested and a checkpoint was written."""


_stop_requested = False


def request_stop() -> None:
    """Ask the running stage to checkpoint and stop at its next step boundary (signal-safe)."""
    global _stop_requested
    _stop_requested = True


def stop_requested() -> bool:
    return _stop_requested
