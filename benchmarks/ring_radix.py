"""Ring's window bounds by one exact radix selection, against today's ``topk`` + ``kthvalue`` and against IR (issue 48).

    python benchmarks/ring_radix.py              # a 200,000-entry bank on the CPU (ImageNet's 1.28M on a GPU)
    python benchmarks/ring_radix.py --tiny       # what the test suite runs

The candidate (:func:`radix_bounds`) maps every similarity to its order-preserving int32 bit pattern, counts
the patterns' high 16 bits per row (one histogram that both bounds read), then, for the one or two buckets that
hold a bound, counts their low 16 bits (a second pass over the row, both bounds in one histogram).  The values
are exactly ``ring.engine.objectives.ring._row_bounds``'s (asserted before timing, ties and signs included), and
no count is read on the host, so a GPU step would not synchronise.  The draw inside the window is unchanged
(``DRAW_BY_DEVICE``): it already gives the same indices by either of two exact methods.

Timed per selection chunk (the rows ``sample_in_window`` processes at once): the bounds alone, the whole
selection (similarities, bounds, mask, draw) with either bounds, and IR's draw (``sample_uniform``, which needs
no similarity), so that the chunk's extra time over IR is stated for both.  The library keeps the candidate
only if it is exact and not slower on the CPU (or measured faster on a GPU); the JSON records which it is.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, timeit, write  # noqa: E402
from ring.engine.objectives import ring as R  # noqa: E402
from ring.engine.objectives.ir import InstanceDiscrimination  # noqa: E402

WINDOWS = ((0.0, 90.0), (90.0, 99.0))  # the start and the end of annealing
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


def _tied_rows(rows: int, n: int, g: torch.Generator) -> torch.Tensor:
    """Rows with heavy ties, both signs and both zeros: the cases a bit-pattern selection could get wrong."""
    sims = torch.randint(-40, 41, (rows, n), generator=g).float() / 40
    sims[:, ::7] = -0.0
    return sims


def check_exact(sims: torch.Tensor, g: torch.Generator) -> bool:
    """The candidate's bounds equal ``_row_bounds``'s on the benchmark's rows and on tied rows, every window."""
    for rows in (sims, _tied_rows(8, 3000, g).to(sims.device)):
        for window in (*WINDOWS, (30.0, 80.0), (0.0, 100.0), (99.8, 99.9)):
            ranks = R.window_ranks(rows.shape[1], *window)
            for old, new in zip(R._row_bounds(rows, *ranks), radix_bounds(rows, *ranks), strict=True):
                if not torch.equal(old, new) or old.shape != new.shape:
                    raise AssertionError(f"radix bounds differ from _row_bounds at window {window}")
    return True


def bench(batch: int, n: int, k: int, device: torch.device, repeats: int) -> dict:
    g = torch.Generator().manual_seed(0)
    bank = F.normalize(torch.randn(n, 128, generator=g), dim=1).to(device)
    q = F.normalize(torch.randn(batch, 128, generator=g), dim=1).to(device)
    rows = R._chunk_rows(batch, n, R.chunk_elements(0, device))  # one chunk, as sample_in_window cuts them
    u = torch.rand(rows, k, generator=g).to(device)
    sims = q[:rows] @ bank.T
    exact = check_exact(sims, g)
    draw = R.DRAW_BY_DEVICE.get(device.type, R.sample_from_blocks)

    def chunk(bounds, window):  # sample_in_window's body for one chunk, with the given bounds
        lo_rank, hi_rank = R.window_ranks(n, *window)
        s = q[:rows] @ bank.T
        lo, hi = bounds(s, lo_rank, hi_rank)
        mask = R.padded_mask(s, lo if lo_rank > 0 else None, hi if hi_rank < n else None)
        return draw(mask, u)

    out = []
    for window in WINDOWS:
        ranks = R.window_ranks(n, *window)
        assert torch.equal(chunk(R._row_bounds, window), chunk(radix_bounds, window)), f"draws differ at {window}"
        row = {"window": window, "same_draws": True}
        for name, bounds in (("topk", R._row_bounds), ("radix", radix_bounds)):
            row[f"bounds_{name}_s"] = timeit(lambda r=ranks, b=bounds: b(sims, *r), device, repeats)
            row[f"chunk_{name}_s"] = timeit(lambda w=window, b=bounds: chunk(b, w), device, repeats)
        row["bounds_speedup"] = row["bounds_topk_s"] / row["bounds_radix_s"]
        out.append(row)
    return {"batch": batch, "n": n, "k": k, "chunk_rows": rows, "same_bounds": exact, "windows": out}


def bench_objectives(batch: int, n: int, k: int, device: torch.device, repeats: int) -> dict:
    """IR's objective and IRing's with either bounds (loss, backward, bank update; no network), annealed window."""
    g = torch.Generator().manual_seed(1)
    q = F.normalize(torch.randn(batch, 128, generator=g), dim=1).to(device)
    index = torch.randint(0, n, (batch,), generator=g).to(device)
    budget = R.chunk_elements(0, device)
    times = {}
    for name, ring, bounds in (
        ("ir", False, R._row_bounds),
        ("iring_topk", True, R._row_bounds),
        ("iring_radix", True, radix_bounds),
    ):
        objective = InstanceDiscrimination(n, 128, k, 0.07, 0.5, ring, budget).to(device)

        def step(objective=objective):
            x = q.clone().requires_grad_()
            objective.contrast(x, objective.bank.memory, index, WINDOWS[1], objective.draws(x)).backward()
            objective.bank.update(index, x.detach())

        kept, R._row_bounds = R._row_bounds, bounds  # sample_in_window reads the module's _row_bounds
        try:
            times[f"{name}_objective_s"] = timeit(step, device, repeats)
        finally:
            R._row_bounds = kept
    ir = times["ir_objective_s"]
    return {
        **times,
        "iring_over_ir_topk": times["iring_topk_objective_s"] / ir,
        "iring_over_ir_radix": times["iring_radix_objective_s"] / ir,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="seconds-long run for the test suite")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gpu = device.type == "cuda"
    scale = (16, 20_000, 256, 2) if args.tiny else (256, 1_281_167 if gpu else 200_000, 4096, 10 if gpu else 3)
    result = bench(*scale[:3], device, scale[3])
    result["objectives"] = bench_objectives(*scale[:3], device, scale[3])
    result["kept"] = "radix" if all(row["bounds_speedup"] >= 1 for row in result["windows"]) else "topk"
    write("ring_radix", {"machine": machine(), **result}, tiny=args.tiny)


if __name__ == "__main__":
    main()
