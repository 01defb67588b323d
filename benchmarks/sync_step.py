"""One pretraining step per method on CUDA under ``torch.cuda.set_sync_debug_mode("error")``: no host read.

    python benchmarks/sync_step.py [--methods MoCo IR] [--tiny]

Issue 31, item 3: a step that reads the device from the host (``.item()``, ``.tolist()``, ``.cpu()``,
a data-dependent shape) stops every rank from queueing the next step.  Each method's step is the
real one (``benchmarks/throughput.build``: the objective, ``Grouped``/``Precision`` and the optimizer
as ``ring.pretrain`` runs them) at world size 1, followed by the stop/checkpoint decision
(``ring.engine.distributed.StepFlags``) as ``ring.pretrain`` takes it after every step.  One warm-up step
runs first (cuDNN's autotuning and lazy initialisation may synchronise once), then one step under the
"error" mode: a synchronising call raises, and its message is recorded.  Without CUDA every method
is recorded as "skipped: no CUDA".
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, sync, write  # noqa: E402
from ring.engine import distributed  # noqa: E402
from ring.engine.objectives import views_per_image  # noqa: E402


def one_method(name: str, tiny: bool, device: torch.device, set_mode=None) -> dict:
    """pass, or fail with the error's first line and where it was raised.  ``set_mode``: torch's
    ``set_sync_debug_mode`` (which initialises CUDA); the CPU tests pass their own to run the same code."""
    set_mode = set_mode or torch.cuda.set_sync_debug_mode
    from benchmarks.throughput import build

    n, batch, resize, crop = (512, 16, 32, 32) if tiny else (50_000, 256, 256, 224)
    cfg, m, model, objective, optimizer = build(name, n, batch, resize, crop, device, compile_=False)
    views = [torch.randn(batch, 3, crop, crop, device=device) for _ in range(views_per_image(m))]
    index = torch.randperm(n, device=device)[:batch]

    flags = distributed.StepFlags(2)

    def step():
        loss = objective(model, views, index, None)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        flags(False, False)  # the stop and checkpoint flags, as ring.pretrain passes them after every step

    step()
    sync(device)
    set_mode("error")
    try:
        step()
        return {"status": "pass"}
    except RuntimeError as err:
        return {
            "status": "fail",
            "error": str(err).splitlines()[0],
            "where": "".join(traceback.format_tb(err.__traceback__)[-3:]),
        }
    finally:
        set_mode("default")
        sync(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["MoCo", "IR"])
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    methods = {
        m: one_method(m, args.tiny, torch.device("cuda")) if cuda else {"status": "skipped: no CUDA"}
        for m in args.methods
    }
    write(
        "sync_step",
        {"machine": machine(), "world_size": 1, "mode": 'torch.cuda.set_sync_debug_mode("error")', "methods": methods},
        tiny=args.tiny,
    )


if __name__ == "__main__":
    main()
