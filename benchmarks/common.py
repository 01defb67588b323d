"""Shared by the benchmark scripts: machine description, timing and result files."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

# The committed results are package data (ring/resources/figures: `ring estimate` prices from them, installed or not).
# RING_BENCH_RESULTS redirects the result files (benchmarks/gpu_suite.sh writes them under $OUT; a plug-in's own
# figures go to its package's folder: docs/adding-a-method.md).
RESULTS = Path(os.environ.get("RING_BENCH_RESULTS") or Path(__file__).resolve().parents[1] / "ring/resources/figures")


def kornia_or_shim() -> str:
    """Import kornia, or register a plain-torch stand-in for the one function ring.engine.encoder uses.

    The lent GPU machines have torch and torchvision but not kornia; ring.engine.encoder imports it for
    CMC's Lab conversion.  The stand-in is the same sRGB -> XYZ (D65) -> CIE Lab formula, elementwise,
    so its cost is the same order as kornia's and negligible next to two ResNet-18s.  The benchmark
    records which one ran.
    """
    try:
        import kornia

        return f"kornia {kornia.__version__}"
    except ImportError:
        import types

        def rgb_to_lab(rgb: torch.Tensor) -> torch.Tensor:
            lin = torch.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
            m = torch.tensor(
                [[0.412453, 0.357580, 0.180423], [0.212671, 0.715160, 0.072169], [0.019334, 0.119193, 0.950227]],
                device=rgb.device,
                dtype=rgb.dtype,
            )
            xyz = torch.einsum("ij,bjhw->bihw", m, lin) / torch.tensor(
                [0.950456, 1.0, 1.088754], device=rgb.device, dtype=rgb.dtype
            ).view(1, 3, 1, 1)
            f = torch.where(xyz > 0.008856, xyz.clamp_min(1e-12) ** (1 / 3), 7.787 * xyz + 4.0 / 29.0)
            L = torch.where(xyz[:, 1:2] > 0.008856, 116.0 * f[:, 1:2] - 16.0, 903.3 * xyz[:, 1:2])
            return torch.cat([L, 500.0 * (f[:, :1] - f[:, 1:2]), 200.0 * (f[:, 1:2] - f[:, 2:])], 1)

        kornia = types.ModuleType("kornia")
        kornia.color = types.SimpleNamespace(rgb_to_lab=rgb_to_lab)
        sys.modules["kornia"] = kornia
        return "plain-torch rgb_to_lab stand-in (kornia not installed)"


# Before any benchmark imports ring.engine.encoder (which imports kornia).
LAB_CONVERSION = kornia_or_shim()


def machine() -> dict:
    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
    }
    if torch.cuda.is_available():
        info.update(device=torch.cuda.get_device_name(0), cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
    else:
        info["device"] = "cpu"
    try:
        import torchvision

        info["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    info["torch_cuda_build"] = torch.version.cuda
    info["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
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


def items_per_second(batches, step, device: torch.device, warmup: int, count=len) -> float:
    """Items per second of ``step(batch)`` over ``batches`` after ``warmup`` of them (untimed: first-call
    allocations, cuDNN autotuning); ``count(batch)`` says how many items a batch holds."""
    it = iter(batches)
    for _ in range(warmup):
        step(next(it))
    sync(device)
    start, items = time.perf_counter(), 0
    for batch in it:
        step(batch)
        items += count(batch)
    sync(device)
    return items / (time.perf_counter() - start)


def write(name: str, payload: dict, tiny: bool, folder: Path | None = None) -> Path:
    """Results go to results/<name>-<device>.json (or into ``folder``); tiny runs (the tests') go to a scratch name."""
    device = payload["machine"]["device"].replace(" ", "_")
    folder = folder or RESULTS
    path = folder / (f"{name}-{device}.json" if not tiny else f".tiny-{name}.json")
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(json.dumps(payload, indent=2))
    print(f"wrote {path}", file=sys.stderr)
    return path


def loader_run(description: str) -> tuple[argparse.Namespace, torch.device, int]:
    """A loader benchmark's ``--workers`` and ``--tiny``, its device, and how many batches it reads: the loader's
    workers decode 2 batches each ahead, so 3x that depth is timed past a warm-up batch, or the figure is the
    prefetch's (``RING_BENCH_STEPS`` asks for more)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--tiny", action="store_true", help="seconds-long run for the test suite")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    batches = 3 if args.tiny else max(int(os.environ.get("RING_BENCH_STEPS", 10)), 3 * 2 * args.workers) + 1
    return args, device, batches


def loader_header(workers: int, batch: int, batches: int, resize: int, crop: int) -> dict:
    """What a loader benchmark's result says first: the machine, the images' sizes, the batch and the loader (its
    ``timed_batches``: past the warm-up batch)."""
    return {
        "machine": machine(),
        "resize": resize,
        "image_size": crop,
        "batch": batch,
        "workers": workers,
        "timed_batches": batches - 1,
    }
