"""A stage as a job: what the launchers (local, SLURM through submitit) run.

Importing this module does not import torch: the waiting client on a login node stays light.
:class:`StageJob` is a submitit ``Checkpointable``.  On SLURM's preemption / time-limit signal
(USR2) it does not let submitit requeue in the middle of an optimizer step: the signal only asks
the stage to stop (:func:`ring.core.stop.request_stop`); the stage writes its atomic checkpoint at
the next step boundary and raises :class:`ring.core.stop.Preempted`; then submitit's own handler
requeues the job, which resumes from that checkpoint.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import zlib

from submitit.helpers import Checkpointable

from ring.core import stop
from ring.core.refs import resolve
from ring.core.stages import STAGES, stages_with


def rendezvous_port(job_id: str, restart: int = 0) -> int:
    """The job's DDP rendezvous port, the same in every task of one run and another after each requeue
    (``restart``: SLURM_RESTART_COUNT), so that a straggler of the previous run cannot join the new run's store
    (submitit issue 1613): 20000-31999, below Linux's ephemeral ports (32768 and up). submitit's own choice
    (20000-60000) can land on a port that one of the node's open connections holds, and rank 0 then fails with
    EADDRINUSE (seen in CI)."""
    key = str(job_id) if not restart else f"{job_id}/{restart}"  # a first run keeps the port it always had
    return 20000 + zlib.crc32(key.encode()) % 12000


def master_problem(rank: int, node: str | None, master_addr: str) -> str | None:
    """Rank 0 must run on the node named by MASTER_ADDR (where the others look for its store): submitit takes the
    first node of SLURM's sorted node list, and SLURM places task 0 there; one sentence if it did not."""
    if rank != 0 or not node or node == master_addr:
        return None
    return (
        f"rank 0 runs on {node} but MASTER_ADDR names {master_addr}, where the other ranks would look for it; "
        "the job's node list and task placement disagree (check the site's srun options in profiles/slurm/site.yaml)"
    )


def export_distributed_env() -> None:
    """RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT for this task, from submitit's job
    environment. Values inherited from the submitting shell (sbatch exports its environment, e.g. a
    torchrun session's RANK or MASTER_PORT) are replaced: a shared port would collide between two
    jobs on one node."""
    import submitit

    dist_env = submitit.helpers.TorchDistributedEnvironment()
    restart = int(os.environ.get("SLURM_RESTART_COUNT", 0))
    dist_env.master_port = rendezvous_port(submitit.JobEnvironment().job_id, restart)
    problem = master_problem(dist_env.rank, os.environ.get("SLURMD_NODENAME"), dist_env.master_addr)
    if problem:
        raise RuntimeError(problem)
    # --gpus-per-node shows every task all the node's GPUs; each picks cuda:LOCAL_RANK itself.
    dist_env.export(set_cuda_visible_devices=False, overwrite=True)


# The job log's words for a stop signal that came after the outputs were complete (the launcher counts them
# into the job's provenance: ring.core.accounting.note_ignored_stops).
IGNORED_STOP = "received SLURM's stop signal (USR2) after its work was done"


def ignore_stop_signals_from_now_on(stage: str) -> None:
    """After the stage's outputs are complete, a USR2 (preemption, time limit) has nothing left to save: it must
    neither requeue a finished job (submitit's handler would) nor kill it.  Python puts the default action (terminate)
    back for every signal it handled when the interpreter shuts down, so a USR2 during the seconds of that shutdown
    ended the task with "srun: ... User defined signal 2" and the job FAILED; an ignored signal stays ignored.
    Until then a USR2 is noted in the job's log (the launcher prints it and notes it in provenance), then ignored;
    so is one that came after the stage's last step boundary, which only set the stop flag."""

    def note(*_):
        print(f"ring: the {stage} job {IGNORED_STOP}; ignored, the job ends normally", file=sys.stderr, flush=True)

    if stop.stop_requested():  # asked after the stage's last step boundary: nothing stopped, the outputs got written
        note()
    signal.signal(signal.SIGUSR2, note)
    atexit.register(signal.signal, signal.SIGUSR2, signal.SIG_IGN)


class StageFailed(RuntimeError):
    """The stage's entry point returned a non-zero status (its message is in the job's log)."""


class StageJob(Checkpointable):
    def __init__(self, stage: str, argv: list[str]):
        launched = stages_with("entry")  # the stages a launcher runs as a job
        if stage not in launched:
            raise ValueError(f"Unknown stage {stage!r}; stages are {', '.join(launched)}.")
        self.stage = stage
        self.argv = list(argv)

    def __call__(self) -> str:
        import submitit

        if submitit.JobEnvironment().num_tasks > 1:
            export_distributed_env()  # one task per GPU
        submitit_handler = signal.getsignal(signal.SIGUSR2)
        signal.signal(signal.SIGUSR2, lambda *_: stop.request_stop())
        module = resolve(STAGES[self.stage].entry)
        try:
            status = module.main(self.argv)
        except stop.Preempted as preempted:
            print(f"ring: {preempted}; requeueing", file=sys.stderr, flush=True)
            if callable(submitit_handler):
                submitit_handler(signal.SIGUSR2, None)  # checkpoint() below, requeue, exit
            raise
        except BaseException:
            signal.signal(signal.SIGUSR2, submitit_handler)
            raise
        if status:
            signal.signal(signal.SIGUSR2, submitit_handler)
            raise StageFailed(f"ring.{self.stage} exited with status {status}")
        ignore_stop_signals_from_now_on(self.stage)
        return "done"

    def run_here(self) -> int:
        """The local launcher: the stage's entry point in this process, its exit status returned."""
        return resolve(STAGES[self.stage].entry).main(self.argv)

    # checkpoint(): submitit's default resubmits this same object; the stage resumes from disk.

    def __repr__(self) -> str:
        return f"StageJob({self.stage!r}, {self.argv!r})"
