"""The GPU decoder's handover under PyTorch's CUDA sanitizer: no race as shipped, a race with a misplaced release.

    python benchmarks/stream_sanitizer.py [--tiny] [--batches 8]      # both runs; needs CUDA

Builds a small jpeg95 store (``benchmarks/store_loader.py``'s photo-like originals at 64 px), then runs
``store_decode: gpu``'s pipeline (``ring.data.gpu_decode``: the decoder thread, its ring of buffers, the training
loop making eager views from them) twice, each in its own process with ``TORCH_CUDA_SANITIZER=1``
(``torch.cuda._sanitizer``, CSAN: every kernel's reads and writes of CUDA tensors against the happens-before order of
streams, events and host waits):

* ``shipped``: the ring as the training loop uses it; CSAN must report no unsynchronized access;
* ``planted``: the ring with each release event recorded on the decoder's stream instead of the training stream, so
  the decoder's host wait no longer covers the views' reads of the buffer it rewrites; CSAN must report it.

The result (``stream_sanitizer-<device>.json``) passes when both do.  Two things make CSAN see the whole pipeline:
its dispatch mode is per thread, so the decoder thread enters it too (the same mode, one history of accesses), and
the device is synchronised once after the decoder's buffers are allocated, because CSAN counts ``torch.empty`` as a
write on the default stream although it runs no kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, write  # noqa: E402
from ring.data import gpu_decode, store_layout  # noqa: E402

SIZE, CROP = 64, 56
CAUGHT = 3  # a run's exit status when CSAN reported a race (argparse's errors are 2)
EXPECTED = {"shipped": 0, "planted": CAUGHT}
NO_CUDA = (
    "stream_sanitizer: PyTorch's CUDA sanitizer watches CUDA streams and this machine has no CUDA device; run "
    "benchmarks/stream_sanitizer.py on a GPU (benchmarks/gpu_suite.sh does)."
)


class WrongStreamRing(gpu_decode.SlotRing):
    """The planted fault: a release event recorded on the producer's stream, which the consumer's reads are not on."""

    def release(self, slot: int) -> None:
        self._held.remove(slot)
        done = self.sync.event()
        done.record(self.producer_stream)
        self._free.put((slot, done))


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=sorted(EXPECTED), help="one run in this process (the suite runs both)")
    parser.add_argument("--store", type=Path, help="the jpeg95 store a --variant run reads")
    parser.add_argument("--batches", type=int, default=8, help="batches of each run (at least 4: the ring's 3 slots)")
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run")
    args = parser.parse_args(argv)
    if args.batches <= gpu_decode.SLOTS:
        parser.error(
            f"--batches {args.batches}: a buffer is rewritten only from batch {gpu_decode.SLOTS + 1} on; "
            f"pass at least {gpu_decode.SLOTS + 1}."
        )
    if args.variant and args.store is None:
        parser.error("--variant needs --store, the jpeg95 store the run reads.")
    return args


def sanitized_run(variant: str, store_dir: Path, batches: int) -> int:
    """One run of the pipeline under CSAN: 0 when it reports nothing, :data:`CAUGHT` when it reports a race."""
    from torch.cuda import _sanitizer as csan

    from ring.data import augment, store
    from ring.data.views import store_views
    from ring.engine.runtime import epoch_batches, make_loader

    if not csan.cuda_sanitizer.enabled:
        csan.enable_cuda_sanitizer()
    serialize(csan.cuda_sanitizer.dispatch.event_handler)
    device = torch.device("cuda")
    reader = store.StoreReader(store_dir, "train")
    make = augment.DeviceViews(None, device, reader.size, CROP, (0.5,) * 3, (0.25,) * 3)
    tv = store_views(reader, augment.ViewParams(reader.size, 0.2), 2, 0, make, 32, "gpu")
    decoder = tv.device_views
    if variant == "planted":
        decoder.ring = WrongStreamRing(len(decoder.buffers), decoder.sync, decoder.stream)
    produce = decoder._produce

    def produce_sanitized(loader, stop) -> None:
        with csan.cuda_sanitizer.dispatch:  # CSAN's mode is per thread: the decoder thread enters it too
            produce(loader, stop)

    decoder._produce = produce_sanitized
    torch.cuda.synchronize()  # the buffers' allocation: CSAN's default-stream "write" that runs no kernel
    order = epoch_batches(len(reader), 32, 0, 0)[:batches]
    # No loader workers: the loader runs in the decoder thread, and a worker forked from a thread in CSAN's mode would
    # inherit it and initialise CUDA in the fork at its first tensor operation.
    loader = make_loader(tv.dataset, order, 0, device, collate_fn=tv.collate)
    total = torch.zeros((), device=device)
    try:
        for step, batch in enumerate(tv.feed(loader)):
            views, _index = tv.batch(batch, 0, step)
            total += sum(v.float().mean() for v in views)  # no host wait until the end: none may hide a race
        torch.cuda.synchronize()
    except csan.CUDASanitizerErrors as err:
        print(f"stream_sanitizer: {variant}: CSAN reported {len(err.errors)} race(s)", file=sys.stderr)
        return CAUGHT
    print(f"stream_sanitizer: {variant}: no race in {len(order)} batches (views' sum {float(total):.4g})")
    return 0


def serialize(handler) -> None:
    """One lock around every update of CSAN's history: the decoder thread's kernels and host waits and the training
    thread's arrive at once, and CSAN's bookkeeping (dicts iterated while updated) is written for one thread."""
    from torch._utils import CallbackRegistry
    from torch.cuda import _gpu_trace

    lock = threading.RLock()

    def locked(fn):
        def call(*args, **kwargs):
            with lock:
                return fn(*args, **kwargs)

        return call

    handler._handle_kernel_launch = locked(handler._handle_kernel_launch)
    for registry in vars(_gpu_trace).values():
        if isinstance(registry, CallbackRegistry):  # streams', events' and allocations' callbacks
            registry.callback_list[:] = [locked(cb) for cb in registry.callback_list]


def build_store(folder: Path, images: int) -> Path:
    from benchmarks.store_loader import make_photos
    from ring import prepare

    workers = min(8, os.cpu_count() or 1)  # this process is not sanitized: the build may use processes
    make_photos(folder, images, 4, workers)
    prepare.build(prepare.Target.of_folder(folder, "jpeg95", SIZE, shard_images=1000), workers)
    return store_layout.store_dir(folder, "jpeg95", SIZE)


def both_runs(args: argparse.Namespace) -> dict:
    """Each variant in its own process (CSAN's history is the process's), with its exit status and last lines."""
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        store_dir = build_store(Path(tmp) / "photos", 32 * args.batches)
        for variant, expected in EXPECTED.items():
            start = time.perf_counter()
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--variant",
                    variant,
                    "--store",
                    str(store_dir),
                    "--batches",
                    str(args.batches),
                ],
                env={**os.environ, "TORCH_CUDA_SANITIZER": "1"},
                capture_output=True,
                text=True,
            )
            sys.stderr.write(done.stderr)
            runs[variant] = {
                "rc": done.returncode,
                "expected_rc": expected,
                "seconds": time.perf_counter() - start,
                "said": (done.stdout + done.stderr).strip().splitlines()[-3:],
            }
    return runs


def main(argv=None) -> int:
    args = parse(argv)
    if not torch.cuda.is_available():
        print(NO_CUDA, file=sys.stderr)
        return 2
    if args.variant:
        return sanitized_run(args.variant, args.store, args.batches)
    runs = both_runs(args)
    wrong = [v for v, r in runs.items() if r["rc"] != r["expected_rc"]]
    payload = {
        "machine": machine(),
        "batches": args.batches,
        "runs": runs,
        "status": "fail: " + ", ".join(f"{v} exited {runs[v]['rc']}, not {EXPECTED[v]}" for v in wrong)
        if wrong
        else "pass",
    }
    write("stream_sanitizer", payload, tiny=args.tiny)
    print(json.dumps({v: r["rc"] for v, r in runs.items()}), file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
