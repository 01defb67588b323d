"""A stage as a job: what the launchers (local, SLURM through submitit) run.

Importing this module does not import torch: the waiting client on a login node stays light.
:class:`StageJob` is a submitit ``Checkpointable``.  On SLURM's preemption / time-limit signal
(USR2) it does not let submitit requeue in the middle of an optimizer step: the signal only asks
the stage to stop (:func:`ring.runtime.request_stop`); the stage writes its atomic checkpoint at
the next step boundary and raises :class:`ring.runtime.Preempted`; then submitit's own handler
requeues the job, which resumes from that checkpoint.
"""

from __future__ import annotations

import importlib
import signal
import sys

from submitit.helpers import Checkpointable

STAGES = {"pretrain": "ring.pretrain", "lincls": "ring.lincls", "transfer": "ring.transfer",
          "detection": "ring.detection.runner"}
# The file each stage writes last in its --out folder: present means the stage's outputs are complete.
OUTPUT = {"pretrain": "encoder.pt", "lincls": "metrics.json", "transfer": "metrics.json", "detection": "metrics.json"}


class StageFailed(RuntimeError):
    """The stage's entry point returned a non-zero status (its message is in the job's log)."""


class StageJob(Checkpointable):
    def __init__(self, stage: str, argv: list[str]):
        if stage not in STAGES:
            raise ValueError(f"Unknown stage {stage!r}; stages are {', '.join(STAGES)}.")
        self.stage = stage
        self.argv = list(argv)

    def __call__(self) -> str:
        from ring import runtime

        import submitit

        if submitit.JobEnvironment().num_tasks > 1:
            # One task per GPU: export RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT for the stage.
            submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
        submitit_handler = signal.getsignal(signal.SIGUSR2)
        signal.signal(signal.SIGUSR2, lambda *_: runtime.request_stop())
        module = importlib.import_module(STAGES[self.stage])
        try:
            status = module.main(self.argv)
        except runtime.Preempted as stop:
            print(f"ring: {stop}; requeueing", file=sys.stderr, flush=True)
            if callable(submitit_handler):
                submitit_handler(signal.SIGUSR2, None)  # checkpoint() below, requeue, exit
            raise
        finally:
            signal.signal(signal.SIGUSR2, submitit_handler)
        if status:
            raise StageFailed(f"ring.{self.stage} exited with status {status}")
        return "done"

    def run_here(self) -> int:
        """The local launcher: the stage's entry point in this process, its exit status returned."""
        return importlib.import_module(STAGES[self.stage]).main(self.argv)

    # checkpoint(): submitit's default resubmits this same object; the stage resumes from disk.

    def __repr__(self) -> str:
        return f"StageJob({self.stage!r}, {self.argv!r})"
