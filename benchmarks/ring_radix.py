"""Ring's window bounds by one exact selection, against today's ``topk`` + ``kthvalue`` and against IR (issue 48).

    python benchmarks/ring_radix.py              # a 200,000-entry bank on the CPU (ImageNet's 1.28M on a GPU)
    python benchmarks/ring_radix.py --candidate partition   # the CPU's bounds (ring.engine.objectives.ring)
    python benchmarks/ring_radix.py --tiny       # what the test suite runs

Two candidates, each written to its own JSON (``ring_radix``, ``ring_partition``):

* ``radix`` (:func:`radix_bounds`) maps every similarity to its order-preserving int32 bit pattern, counts the
  patterns' high 16 bits per row (one histogram that both bounds read), then, for the one or two buckets that hold
  a bound, counts their low 16 bits (a second pass over the row, both bounds in one histogram).  No count is read
  on the host, so a GPU step would not synchronise.  Measured slower on the CPU and not kept.
* ``partition`` (``ring.engine.objectives.ring._partition_bounds``, CPU tensors): NumPy's introselect over the
  float values alone, where ``topk`` and ``kthvalue`` move (value, index) pairs and write both: one selection over
  each row for the lower rank (the upper where the lower side is open), then the upper rank inside the part right
  of the lower one (the window's eligible slice), so that no window takes two selections over the whole row
  (the half-way windows took a ``topk`` and a ``kthvalue`` over it).  Kept on the CPU where measured not slower
  (:func:`kept`: where ``w_l > 0``).

Both give exactly the values of today's torch path (``ring.engine.objectives.ring._topk_bounds``, the GPU's, and the
CPU's before issue 48), asserted before timing on the benchmark's rows and on rows of ties, both signs and both
zeros; the draw inside the window is unchanged (``DRAW_BY_DEVICE``: the CPU's blocked draw already runs no
cumulative sum along a row), so the draws are the same (asserted).

Timed per selection chunk (the rows ``sample_in_window`` processes at once): the bounds alone, the whole
selection (similarities, bounds, mask, draw) with either bounds, and IR's draw (``sample_uniform``, which needs
no similarity), so that the chunk's extra time over IR is stated for both.  The library keeps the candidate
only if it is exact and not slower on the CPU (or measured faster on a GPU); the JSON records which it is.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, sync, timeit, write  # noqa: E402
from ring.engine.objectives import ring as ring_objective  # noqa: E402
from ring.engine.objectives.ir import InstanceDiscrimination  # noqa: E402

# The start and the end of annealing, and one half way (``inner`` 0.1: w_u = 100 - 0.1 (100 - w_l)), where today's
# bounds are two selections over the whole row (a topk for the upper bound, a kthvalue for the lower).
WINDOWS = ((0.0, 90.0), (45.0, 94.5), (90.0, 99.0))
DIGIT = 16  # bits per histogram level: two levels cover a 32-bit pattern
BINS = 1 << DIGIT


def ordered_keys(sims: torch.Tensor) -> torch.Tensor:
    """int32 keys whose signed order is the floats' order: a negative float's magnitude bits are reversed."""
    bits = sims.contiguous().view(torch.int32)
    return torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits)


def _row_histogram(digits: torch.Tensor, bins: int) -> torch.Tensor:
    """Per-row counts of ``digits`` (values in ``[0, bins)``): one flat ``bincount``, offset by row."""
    rows = digits.shape[0]
    offsets = torch.arange(rows, device=digits.device).mul_(bins).unsqueeze(1)
    return torch.bincount((digits + offsets).view(-1), minlength=rows * bins).view(rows, bins)


def _locate(hist: torch.Tensor, rank: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The bucket holding each row's ``rank``-th smallest (from 0) and that rank within the bucket."""
    through = hist.cumsum(1)
    bucket = torch.searchsorted(through, rank + 1)
    return bucket, rank - (through.gather(1, bucket) - hist.gather(1, bucket))


@torch.no_grad()
def radix_bounds(sims: torch.Tensor, lo_rank: int, hi_rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row similarities at ascending ranks ``lo_rank`` and ``hi_rank - 1``: ``_row_bounds``'s values, exactly."""
    rows = sims.shape[0]
    key = ordered_keys(sims)
    high = (key >> DIGIT).long().add_(BINS // 2)  # signed high half, shifted to [0, BINS)
    ranks = torch.tensor([lo_rank, hi_rank - 1], device=sims.device).expand(rows, 2)
    bucket, within = _locate(_row_histogram(high, BINS), ranks)
    b_lo, b_hi = bucket[:, :1], bucket[:, 1:]
    low = (key & (BINS - 1)).long()
    # Both bounds' buckets in one histogram: the lower's low digits in [0, BINS), the upper's in [BINS, 2 BINS),
    # the rest in one spare bin.  When both bounds share a bucket, its entries count once, in the lower half.
    digits = torch.where(high == b_lo, low, torch.where(high == b_hi, low + BINS, 2 * BINS))
    hist = _row_histogram(digits, 2 * BINS + 1)
    lower = hist[:, :BINS]
    upper = torch.where(b_lo == b_hi, lower, hist[:, BINS : 2 * BINS])
    low_lo, _ = _locate(lower, within[:, :1])
    low_hi, _ = _locate(upper, within[:, 1:])
    found = torch.cat([(b_lo - BINS // 2) * BINS + low_lo, (b_hi - BINS // 2) * BINS + low_hi], 1).to(torch.int32)
    values = torch.where(found < 0, found ^ 0x7FFFFFFF, found).view(torch.float32)
    # An open side is infinite, as _row_bounds gives it (sample_in_window then skips its comparison).
    lo = values[:, :1].fill_(-torch.inf) if lo_rank == 0 else values[:, :1]
    hi = values[:, 1:].fill_(torch.inf) if hi_rank == sims.shape[1] else values[:, 1:]
    return lo, hi


# "topk" below is today's torch path (ring_objective._topk_bounds, the CPU's before issue 48's partition and a
# GPU's now).
CANDIDATES = {"radix": radix_bounds, "partition": ring_objective._partition_bounds}


def _tied_rows(rows: int, n: int, g: torch.Generator) -> torch.Tensor:
    """Rows with heavy ties, both signs and both zeros: the cases a bit-pattern selection could get wrong."""
    sims = torch.randint(-40, 41, (rows, n), generator=g).float() / 40
    sims[:, ::7] = -0.0
    return sims


def check_exact(sims: torch.Tensor, g: torch.Generator, candidate: str) -> bool:
    """The candidate's bounds equal ``_row_bounds``'s on the benchmark's rows and on tied rows, every window."""
    for rows in (sims, _tied_rows(8, 3000, g).to(sims.device)):
        for window in (*WINDOWS, (30.0, 80.0), (0.0, 100.0), (99.8, 99.9)):
            ranks = ring_objective.window_ranks(rows.shape[1], *window)
            for old, new in zip(
                ring_objective._topk_bounds(rows, *ranks), CANDIDATES[candidate](rows, *ranks), strict=True
            ):
                if not torch.equal(old, new) or old.shape != new.shape:
                    raise AssertionError(f"{candidate} bounds differ from _row_bounds at window {window}")
    return True


def interleaved(bounds: dict, run, device: torch.device, repeats: int) -> dict[str, float]:
    """Median seconds of ``run(b)`` for each of ``bounds``, timed in turns (the order swapped every repeat) after one
    warm-up each: on a shared machine a load that comes and goes then falls on both, not on whichever ran second."""
    times = {name: [] for name in bounds}
    for b in bounds.values():
        run(b)
    for i in range(repeats):
        for name in list(bounds)[:: 1 if i % 2 == 0 else -1]:
            sync(device)
            start = time.perf_counter()
            run(bounds[name])
            sync(device)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def bench(batch: int, n: int, k: int, device: torch.device, repeats: int, candidate: str) -> dict:
    g = torch.Generator().manual_seed(0)
    bank = F.normalize(torch.randn(n, 128, generator=g), dim=1).to(device)
    q = F.normalize(torch.randn(batch, 128, generator=g), dim=1).to(device)
    rows = ring_objective._chunk_rows(
        batch, n, ring_objective.chunk_elements(0, device)
    )  # one chunk, as sample_in_window cuts them
    u = torch.rand(rows, k, generator=g).to(device)
    sims = q[:rows] @ bank.T
    exact = check_exact(sims, g, candidate)
    new = CANDIDATES[candidate]
    draw = ring_objective.DRAW_BY_DEVICE.get(device.type, ring_objective.sample_from_blocks)

    def chunk(bounds, window):  # sample_in_window's body for one chunk, with the given bounds
        lo_rank, hi_rank = ring_objective.window_ranks(n, *window)
        s = q[:rows] @ bank.T
        lo, hi = bounds(s, lo_rank, hi_rank)
        mask = ring_objective.padded_mask(s, lo if lo_rank > 0 else None, hi if hi_rank < n else None)
        return draw(mask, u)

    out = []
    for window in WINDOWS:
        ranks = ring_objective.window_ranks(n, *window)
        assert torch.equal(chunk(ring_objective._topk_bounds, window), chunk(new, window)), f"draws differ at {window}"
        row = {"window": window, "same_draws": True}
        pair = {"topk": ring_objective._topk_bounds, candidate: new}
        row |= {
            f"bounds_{k}_s": v for k, v in interleaved(pair, lambda b, r=ranks: b(sims, *r), device, repeats).items()
        }
        row |= {
            f"chunk_{k}_s": v for k, v in interleaved(pair, lambda b, w=window: chunk(b, w), device, repeats).items()
        }
        row["bounds_speedup"] = row["bounds_topk_s"] / row[f"bounds_{candidate}_s"]
        row["chunk_speedup"] = row["chunk_topk_s"] / row[f"chunk_{candidate}_s"]
        out.append(row)
    # IR's draw for the same chunk (no similarity), and LA's top-4096 of the same similarities (its close neighbours'
    # selection, whose tied members and order a different selection would change: measured, not replaced).
    ir = timeit(lambda: ring_objective.sample_uniform(n, u), device, repeats)
    matmul = timeit(lambda: q[:rows] @ bank.T, device, repeats)
    la = timeit(lambda: torch.topk(sims, min(4096, n - 1), dim=1, sorted=False), device, repeats)
    others = {"ir_draw_s": ir, "similarity_s": matmul, "la_top4096_s": la}
    return {"batch": batch, "n": n, "k": k, "chunk_rows": rows, "same_bounds": exact, "windows": out, **others}


def bench_objectives(batch: int, n: int, k: int, device: torch.device, repeats: int, candidate: str) -> dict:
    """IR's objective and IRing's with either bounds (loss, backward, bank update; no network), annealed window."""
    g = torch.Generator().manual_seed(1)
    q = F.normalize(torch.randn(batch, 128, generator=g), dim=1).to(device)
    index = torch.randint(0, n, (batch,), generator=g).to(device)
    budget = ring_objective.chunk_elements(0, device)
    times = {}
    for name, ring, bounds in (
        ("ir", False, ring_objective._topk_bounds),
        ("iring_topk", True, ring_objective._topk_bounds),
        (f"iring_{candidate}", True, CANDIDATES[candidate]),
    ):
        objective = InstanceDiscrimination(n, 128, k, 0.07, 0.5, ring, budget).to(device)

        def step(objective=objective):
            x = q.clone().requires_grad_()
            objective.contrast(x, objective.bank.memory, index, WINDOWS[1], objective.draws(x)).backward()
            objective.bank.update(index, x.detach())

        kept, ring_objective._row_bounds = (
            ring_objective._row_bounds,
            bounds,
        )  # sample_in_window reads the module's _row_bounds
        try:
            times[f"{name}_objective_s"] = timeit(step, device, repeats)
        finally:
            ring_objective._row_bounds = kept
    ir = times["ir_objective_s"]
    return {
        **times,
        "iring_over_ir_topk": times["iring_topk_objective_s"] / ir,
        f"iring_over_ir_{candidate}": times[f"iring_{candidate}_objective_s"] / ir,
    }


def kept(candidate: str, windows: list[dict]) -> str:
    """What the library keeps: the candidate where it is at least as fast, bounds and whole chunk alike, in every
    window, or in every window whose lower side is closed (``w_l > 0``, where today's bounds take two selections,
    or one and one inside the slice): "<candidate> where w_l > 0"; else today's "topk"."""
    faster = [min(row["bounds_speedup"], row["chunk_speedup"]) >= 1 for row in windows]
    if all(faster):
        return candidate
    closed = [f for f, row in zip(faster, windows, strict=True) if row["window"][0] > 0]
    return f"{candidate} where w_l > 0" if closed and all(closed) else "topk"


def stated(result: dict) -> str:
    """The figures docs/performance.md states from a committed ``ring_partition`` result, as this sentence
    (tests/project/test_benchmarks.py checks that the page holds it, so that no figure there is typed by hand)."""
    windows = "; ".join(
        f"({w['window'][0]:g}, {w['window'][1]:g}) the bounds {w['bounds_topk_s']:.2f} s against "
        f"{w['bounds_partition_s']:.2f} s, the whole chunk {w['chunk_topk_s']:.2f} s against "
        f"{w['chunk_partition_s']:.2f} s"
        for w in result["windows"]
    )
    o = result["objectives"]
    return (
        f"{windows} (torch's selections first, NumPy's second); IR's and IRing's objective without a network (annealed "
        f"window): IRing / IR {o['iring_over_ir_topk']:.2f} with the torch selections and "
        f"{o['iring_over_ir_partition']:.2f} with NumPy's; IR's draw for the chunk {result['ir_draw_s'] * 1e3:.1f} ms, "
        f"the chunk's similarity matmul {result['similarity_s']:.2f} s, LA's top-4,096 of the same similarities "
        f"{result['la_top4096_s']:.2f} s."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="seconds-long run for the test suite")
    parser.add_argument("--candidate", choices=CANDIDATES, default="radix", help="the one-selection bounds timed")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gpu = device.type == "cuda"
    if args.candidate == "partition" and gpu:
        raise SystemExit("--candidate partition selects on the CPU (NumPy); on a GPU time --candidate radix.")
    scale = (16, 20_000, 256, 2) if args.tiny else (256, 1_281_167 if gpu else 200_000, 4096, 10 if gpu else 3)
    result = bench(*scale[:3], device, scale[3], args.candidate)
    result["objectives"] = bench_objectives(*scale[:3], device, scale[3], args.candidate)
    result["kept"] = kept(args.candidate, result["windows"])
    write(f"ring_{args.candidate}", {"machine": machine(), **result}, tiny=args.tiny)


if __name__ == "__main__":
    main()
