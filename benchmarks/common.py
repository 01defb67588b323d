"""Shared by the benchmark scripts: machine description, timing and result files."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).parent / "results"


def machine() -> dict:
    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
    }
    if torch.cuda.is_available():
        info.update(device=torch.cuda.get_device_name(0), cuda=torch.version.cuda)
    else:
        info["device"] = "cpu"
    return info


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def timeit(fn, device: torch.device, repeats: int, warmup: int = 1) -> float:
    """Median seconds of ``fn()`` over ``repeats`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def write(name: str, payload: dict, tiny: bool) -> Path:
    """Results go to results/<name>-<device>.json; tiny runs (the tests') go to a scratch name."""
    device = payload["machine"]["device"].replace(" ", "_")
    path = RESULTS / (f"{name}-{device}.json" if not tiny else f".tiny-{name}.json")
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(json.dumps(payload, indent=2))
    print(f"wrote {path}", file=sys.stderr)
    return path
