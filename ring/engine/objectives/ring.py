"""Ring negative selection: the conditional negative distribution q(x | t(x_i)) of the paper.

Semantics (the contract every bank/queue objective relies on)
------------------------------------------------------------
For one query embedding ``q`` and a bank (IR/CMC memory bank, N entries) or queue (MoCo, K
entries) of keys, let ``s_j = q . key_j`` be the similarities and rank them **ascending**
(farthest first, as in the paper's Algorithm 1).  A percentile window ``[w_l, w_u]`` with
``0 <= w_l < w_u <= 100`` selects the entries whose ascending rank lies in::

    [N - n_out, N - n_in)      with  n_out = floor((100 - w_l) / 100 * N)
                                     n_in  = floor((100 - w_u) / 100 * N)

i.e. of the ``n_out`` entries closest to the query, the ``n_in`` very closest are dropped.  This
is exactly the slicing of the authors' code (sort descending, keep the first ``n_out``, drop the
first ``n_in``), written in the paper's percentile notation: ``w_l = 0, w_u = 100`` keeps all N
entries and recovers the base method.  The window is never empty: ``n_out`` is raised to
``n_in + 1`` when rounding would empty it (tiny banks only).

Ties: an entry is selected when ``lo <= s_j <= hi`` where ``lo`` / ``hi`` are the similarities
at the window's two boundary ranks, so entries tied with a boundary value are all included.
With continuous embeddings ties have probability zero; the rank definition above holds exactly.

How the paper's two descriptions map onto the window
----------------------------------------------------
* Sec. 4 speaks of percentiles ``w_l < w_u`` and anneals ``w_l`` upwards towards ``w_u``.
* The appendix anneals "the threshold from 100% to 10% in 100 epochs": that threshold is the
  fraction of the *closest* entries that remain eligible, ``p_out = (100 - w_l) / 100``, so it
  is ``w_l`` going from 0 to 90.  The authors' code additionally excludes a constant fraction
  ``inner = 0.1`` *of the eligible slice* ("dynamic inner" threshold), i.e.
  ``w_u = 100 - inner * (100 - w_l)``: 90 at the start and 99 after annealing.  Both
  parametrisations live in :mod:`ring.engine.anneal`; this module only ever sees ``(w_l, w_u)``.

How each objective uses the window
----------------------------------
* IRing / CMCRing (:func:`sample_in_window`): the k negatives are drawn uniformly, with
  replacement (as IR draws from the whole bank), among the window entries of each query: a uniform
  ``u`` picks the ``floor(u * size)``-th window entry in bank order.  :func:`sample_from_blocks` finds
  it from per-block counts; :func:`sample_from_mask` (IRing's earlier draw, Cave's) from a B x N
  running count.  Both give the same indices for the same window and ``u`` (tested), so a cell's
  draws do not depend on the ring-bench version that began it.
* MoCoRing (:func:`window_mask`): every queue entry inside the window is a negative; the positive
  stays in the softmax denominator, as in the authors' code (Algorithm 1 omits it).

Cost
----
The selection never sorts.  Per query it needs the values at two ranks, found by selection, O(N), and only for the
bounds that are not trivial (``w_l = 0`` and ``w_u = 100`` need none): on the CPU one introselect over the row
and one inside the eligible slice (:func:`_partition_bounds`), elsewhere an unsorted
``torch.topk`` of the eligible slice and a ``torch.kthvalue`` inside it (:func:`_topk_bounds`).  Queries are
processed in chunks so that at most ``max_chunk_elements`` similarities exist at once (:func:`chunk_elements`:
sized by the GPU's memory, 2**25 on CPUs): on an 80 GB GPU a 1.28M-entry ImageNet bank with a batch of 256 is one
chunk; with 2**25 (128 MiB in fp32) it is ten chunks of 26 queries.  Selection runs without autograd; only the chosen
negatives enter the loss.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from ring.engine.anneal import validate_window

DEFAULT_MAX_CHUNK_ELEMENTS = 2**25
# Device bytes per similarity a selection holds at once: the fp32 similarity, the window's boolean mask,
# its int32 running count (the cumulative-sum draw's; the blocked draw keeps one per 16 entries), and the
# eligible slice's values and indices (at most half a row, 6 bytes).
SELECTION_BYTES = 16


def chunk_elements(setting: int, device: torch.device) -> int:
    """The similarities a selection may hold at once: ``setting``, or for 0, sized by the device's memory.

    On a GPU, 0 allows a quarter of the memory free when training starts (at most an eighth of the
    device): a batch of 256 against ImageNet's 1.28M-entry bank is then one chunk on an 80 GB card,
    where the fixed 2**25 cut it into ten chunks of 26 rows, each re-reading the whole bank and each
    selection then running on 26 rows, a tenth of the GPU's parallelism.  Results do not depend on it:
    every row is selected on its own.  CPUs keep the fixed 128 MiB.
    """
    if setting > 0:
        return setting
    if device.type != "cuda":
        return DEFAULT_MAX_CHUNK_ELEMENTS
    free, total = torch.cuda.mem_get_info(device)
    return max(DEFAULT_MAX_CHUNK_ELEMENTS, int(min(free / 4, total / 8)) // SELECTION_BYTES)


def window_ranks(n: int, w_l: float, w_u: float) -> tuple[int, int]:
    """Ascending ranks ``[lo, hi)`` of the window among ``n`` similarities (see module doc)."""
    validate_window(w_l, w_u)
    if n < 1:
        raise ValueError("Ring selection needs a non-empty bank or queue.")
    # The tiny epsilon keeps e.g. (100 - 70) / 100 * 10 = 2.9999999 from flooring to 2.
    n_out = math.floor((100.0 - w_l) / 100.0 * n + 1e-9)
    n_in = math.floor((100.0 - w_u) / 100.0 * n + 1e-9)
    n_out = max(n_out, n_in + 1)
    return n - n_out, n - n_in


def _row_bounds(sims: torch.Tensor, lo_rank: int, hi_rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row similarity values at ascending ranks ``lo_rank`` and ``hi_rank - 1`` (an open side: -inf or inf).

    By :func:`_partition_bounds` on the CPU, else by :func:`_topk_bounds`: the same values (tested, ties included), so
    the same window and the same draws; the choice is speed alone, measured on the CPU in every window
    (``benchmarks/ring_radix.py --candidate partition``, ring_partition-cpu.json's ``kept``; docs/performance.md).
    """
    if sims.device.type == "cpu" and sims.dtype in (torch.float32, torch.float64):  # NumPy has no bfloat16
        return _partition_bounds(sims, lo_rank, hi_rank)
    return _topk_bounds(sims, lo_rank, hi_rank)


def _topk_bounds(sims: torch.Tensor, lo_rank: int, hi_rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_row_bounds` by torch's selections (CUDA's ``topk`` is a radix selection).

    When the eligible slice is at most half the row (the annealed window), one unsorted ``topk`` of
    its ``n_out`` largest values gives the lower bound (their minimum) and a ``kthvalue`` inside
    that slice gives the upper bound: one selection over N plus one over n_out, no sort.
    """
    n = sims.shape[1]
    rows = sims.shape[0]
    n_out, n_in = n - lo_rank, n - hi_rank
    lo = torch.full((rows, 1), -math.inf, dtype=sims.dtype, device=sims.device) if lo_rank == 0 else None
    hi = torch.full((rows, 1), math.inf, dtype=sims.dtype, device=sims.device) if n_in == 0 else None
    if lo is None and n_out <= n // 2:
        top = torch.topk(sims, n_out, dim=1, largest=True, sorted=False).values
        lo = top.min(dim=1, keepdim=True).values
        if hi is None:
            hi = torch.kthvalue(top, n_out - n_in, dim=1, keepdim=True).values
    if hi is None and n_in + 1 <= n // 2:  # the (n_in + 1)-th largest
        hi = torch.topk(sims, n_in + 1, dim=1, largest=True, sorted=False).values.min(dim=1, keepdim=True).values
    if lo is None:
        lo = torch.kthvalue(sims, lo_rank + 1, dim=1, keepdim=True).values
    if hi is None:
        hi = torch.kthvalue(sims, hi_rank, dim=1, keepdim=True).values
    return lo, hi


PARTITION_ROWS = 8  # rows :func:`_partition_bounds` copies and partitions at once


def _partition_bounds(sims: torch.Tensor, lo_rank: int, hi_rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_row_bounds` on the CPU by NumPy's introselect of the float values alone (``topk`` and ``kthvalue``
    move and write (value, index) pairs): one selection over each row for the lower rank (the upper where the lower
    side is open), then the upper rank inside the part right of the lower one, the window's eligible slice.  No
    window takes two selections over the whole row, as the half-way windows' ``topk`` and ``kthvalue`` did.  Blocks of
    rows are shared out over torch's intra-op threads: NumPy releases the GIL while it partitions."""
    rows, n = sims.shape
    lo = torch.full((rows, 1), -math.inf, dtype=sims.dtype)
    hi = torch.full((rows, 1), math.inf, dtype=sims.dtype)
    if lo_rank == 0 and hi_rank == n:
        return lo, hi
    values = sims.detach().contiguous().numpy()  # the similarities' own memory: no copy

    def part(start: int, stop: int) -> None:
        block = values[start:stop]
        if lo_rank > 0:
            block = np.partition(block, lo_rank, axis=1)[:, lo_rank:]  # the lower bound leads the part above it
            lo[start:stop] = torch.from_numpy(block[:, :1].copy())
        if hi_rank < n:
            at = hi_rank - 1 - (n - block.shape[1])  # the upper rank within what is left
            hi[start:stop] = torch.from_numpy(np.partition(block, at, axis=1)[:, at : at + 1])

    # A few rows at a time: NumPy partitions a copy, and a chunk's worth (up to 2**25 similarities) would double the
    # selection's memory; PARTITION_ROWS rows of a 1.28M-entry bank copy 41 MB.
    starts = range(0, rows, PARTITION_ROWS)
    threads = min(torch.get_num_threads(), len(starts))
    if threads == 1:
        for start in starts:
            part(start, min(start + PARTITION_ROWS, rows))
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda start: part(start, min(start + PARTITION_ROWS, rows)), starts))
    return lo, hi


def window_mask(sims: torch.Tensor, w_l: float, w_u: float) -> torch.Tensor:
    """Boolean B x N mask of the entries of each row that fall in the window.

    ``sims`` is already materialised (MoCo's B x K logits); the mask is computed without autograd.
    """
    lo_rank, hi_rank = window_ranks(sims.shape[1], w_l, w_u)
    with torch.no_grad():
        lo, hi = _row_bounds(sims.detach(), lo_rank, hi_rank)
        return (sims.detach() >= lo) & (sims.detach() <= hi)


def _chunk_rows(n_rows: int, n_cols: int, max_chunk_elements: int) -> int:
    return max(1, min(n_rows, max_chunk_elements // max(n_cols, 1)))


@torch.no_grad()
def sample_uniform(n: int, u: torch.Tensor) -> torch.Tensor:
    """IR's negatives: indices drawn uniformly (with replacement) from ``range(n)``.

    ``u`` holds uniform [0, 1) draws, one per negative (B x k); the caller draws them, so that
    data-parallel ranks can take their rows of one global draw.
    """
    return (u * n).long().clamp_(max=n - 1)


@torch.no_grad()
def sample_in_window(
    queries: torch.Tensor,
    bank: torch.Tensor,
    w_l: float,
    w_u: float,
    u: torch.Tensor,
    max_chunk_elements: int = DEFAULT_MAX_CHUNK_ELEMENTS,
    draw=None,
) -> torch.Tensor:
    """B x k bank indices drawn uniformly, with replacement, from each query's window.

    ``u`` (B x k uniform draws) is mapped onto each row's window; with ``w_l = 0, w_u = 100`` the
    same ``u`` gives exactly :func:`sample_uniform`'s indices, so IRing with a full window *is* IR.
    ``draw`` maps the window's mask and ``u`` to indices: :func:`sample_from_blocks` or :func:`sample_from_mask`,
    which give the same indices; by default the one measured faster on the device (:data:`DRAW_BY_DEVICE`).
    """
    draw = DRAW_BY_DEVICE.get(queries.device.type, sample_from_blocks) if draw is None else draw
    n = bank.shape[0]
    k = u.shape[1]
    if k > n:
        raise ValueError(f"Cannot draw k={k} negatives from a bank of {n} entries; lower k to at most {n}.")
    lo_rank, hi_rank = window_ranks(n, w_l, w_u)
    if lo_rank == 0 and hi_rank == n:  # the whole bank: its draw is IR's, index for index, with no similarity needed
        return sample_uniform(n, u)
    b = queries.shape[0]
    out = torch.empty((b, k), dtype=torch.long, device=queries.device)
    step = _chunk_rows(b, n, max_chunk_elements)
    for start in range(0, b, step):
        stop = min(start + step, b)
        sims = queries[start:stop] @ bank.T
        lo, hi = _row_bounds(sims, lo_rank, hi_rank)
        # An open side (w_l = 0: every entry is close enough; w_u = 100: none is too close) needs no comparison.
        mask = padded_mask(sims, lo if lo_rank > 0 else None, hi if hi_rank < n else None)
        del sims
        out[start:stop] = draw(mask, u[start:stop])
    return out


@torch.no_grad()
def sample_from_mask(mask: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """B x k column indices drawn uniformly, with replacement, among each row's ``True`` entries.

    ``u`` (B x k uniform draws) picks the ``floor(u * size)``-th selected entry of its row; every
    row must select at least one entry.  The r-th selected entry of a row is where the running
    count of selected entries first exceeds r: a cumulative sum plus a binary search, O(N) per row
    and no sort.  IRing drew this way before (:func:`sample_from_blocks` draws the same
    indices without the B x N running count); Cave still does.
    """
    counts = mask.cumsum(dim=1, dtype=torch.int32)
    sizes = counts[:, -1:].to(u.dtype)
    r = (u * sizes).long().clamp_(max=counts[:, -1:].long() - 1)
    return torch.searchsorted(counts, (r + 1).to(torch.int32), right=False)


# The blocked draw's layout: a row of the mask is cut into blocks of BLOCK entries, and the blocks into
# groups of GROUP blocks.  On CUDA a cumulative sum along rows gives a row at most one thread block, which
# walks it in sequence (256 rows of 1.28M entries: ~1,250 steps of 1,024 each), and the B x N int32 count
# it writes is binary-searched across the whole row; here no cumulative sum runs along more than GROUP
# elements and the search covers N / BLOCK counts.
BLOCK = 16  # entries per block: the last step reads one block (2 words of the boolean mask) per draw
GROUP = 256  # blocks per group
PAD = BLOCK * GROUP


@torch.no_grad()
def padded_mask(sims: torch.Tensor, lo: torch.Tensor | None, hi: torch.Tensor | None) -> torch.Tensor:
    """The window's B x N mask (``lo <= s <= hi``, ties included), padded with ``False`` to a multiple of PAD.

    ``lo`` / ``hi`` None: that side is open.  The first comparison writes into the mask itself and only the padding
    is cleared beforehand (zeroing the whole mask, and comparing against an infinite bound, were passes
    over B x N entries that changed nothing).
    """
    rows, n = sims.shape
    mask = torch.empty((rows, -(-n // PAD) * PAD), dtype=torch.bool, device=sims.device)
    mask[:, n:] = False
    inside = mask[:, :n]
    if lo is None and hi is None:
        inside.fill_(True)
    elif lo is None:
        torch.le(sims, hi, out=inside)
    else:
        torch.ge(sims, lo, out=inside)
        if hi is not None:
            inside &= sims <= hi
    return mask


@torch.no_grad()
def sample_from_blocks(mask: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """:func:`sample_from_mask`'s indices for the same ``mask`` and ``u``, with no B x N running count.

    The r-th selected entry of a row is found in two steps: the block holding it, by a binary search
    over the running count of selected entries per block (B x N/BLOCK, built from per-group counts so
    that no cumulative sum runs along a whole row), then its place inside that block, from the block's
    BLOCK mask entries gathered for that draw alone.  ``mask``'s width must be a multiple of PAD
    (:func:`padded_mask`); the padding selects nothing, so it draws nothing.
    """
    rows, width = mask.shape
    if width % PAD:
        raise ValueError(f"sample_from_blocks needs a mask padded to a multiple of {PAD} columns; got {width}.")
    k = u.shape[1]
    # Booleans are bytes: summing them as uint8 (at most BLOCK per block) reads the mask once, converting nothing.
    per_block = mask.view(torch.uint8).view(rows, width // PAD, GROUP, BLOCK).sum(-1, dtype=torch.uint8)
    within_group = per_block.cumsum(-1, dtype=torch.int32)
    per_group = within_group[..., -1]
    through_block = (within_group + (per_group.cumsum(-1, dtype=torch.int32) - per_group).unsqueeze(-1)).view(rows, -1)
    total = through_block[:, -1:]
    # sample_from_mask's r + 1 (r = floor(u * size), at most size - 1), in one dtype throughout.
    r1 = (u * total.to(u.dtype)).to(torch.int32).add_(1).clamp_(max=total)
    block = torch.searchsorted(through_block, r1, right=False)
    in_block = (r1 - through_block.gather(1, block)).add_(per_block.view(rows, -1).gather(1, block))
    # A block's BLOCK booleans are BLOCK // 8 consecutive 8-byte words: gather the words, read them back as bytes.
    words = BLOCK // 8
    word = torch.arange(words, device=mask.device).add(block.unsqueeze(-1), alpha=words)
    bits = mask.view(torch.int64).gather(1, word.view(rows, -1)).view(rows, k, words).view(torch.uint8)
    # The in_block-th selected entry (from 1) is the first whose running count within the block reaches in_block.
    running = bits.cumsum(-1, dtype=torch.uint8)
    offset = torch.searchsorted(running, in_block.to(torch.uint8).unsqueeze(-1), right=False).squeeze(-1)
    return offset.add_(block, alpha=BLOCK)


# Both draws give the same indices, so the choice is speed alone (benchmarks/ring_selection.py, "draw"): on an
# H200 at 256 x 1.28M the bank-wide cumulative sum takes 3.6 ms against 7.8 ms for the blocks' 22 calls
# (ring_selection-NVIDIA_H200.json); on this project's CPU the blocks are 2.5x faster (docs/performance.md).
DRAW_BY_DEVICE = {"cuda": sample_from_mask, "cpu": sample_from_blocks}
