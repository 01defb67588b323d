import math

import pytest
import torch
import torch.nn.functional as F

from ring.engine.objectives import ring as ring_objective
from ring.engine.objectives.ir import InstanceDiscrimination
from ring.engine.objectives.moco import moco_loss


def reference_window(sims: torch.Tensor, w_l: float, w_u: float) -> torch.Tensor:
    """The authors' formulation: sort each row, slice the ranks (test-only; the library never sorts)."""
    lo, hi = ring_objective.window_ranks(sims.shape[1], w_l, w_u)
    order = sims.argsort(dim=1)
    mask = torch.zeros_like(sims, dtype=torch.bool)
    mask.scatter_(1, order[:, lo:hi], True)
    return mask


def test_window_ranks_map_percentiles_onto_ascending_ranks():
    assert ring_objective.window_ranks(10, 0, 100) == (0, 10)
    # keep the 5 closest (w_l = 50), drop the single closest (w_u = 90)
    assert ring_objective.window_ranks(10, 50, 90) == (5, 9)
    # the authors' default after annealing: top 10% kept, its closest 10% dropped
    assert ring_objective.window_ranks(4096, 90, 99) == (4096 - 409, 4096 - 40)
    # a window rounding to nothing still keeps one entry
    assert ring_objective.window_ranks(10, 95, 99) == (9, 10)


def test_window_mask_selects_exactly_the_hand_computed_entries():
    sims = torch.tensor([[0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6, 0.0]])
    # ascending ranks 5..8 are the values 0.5, 0.6, 0.7, 0.8 -> indices 2, 8, 4, 6
    mask = ring_objective.window_mask(sims, 50, 90)
    assert mask.nonzero()[:, 1].tolist() == [2, 4, 6, 8]
    # w_u = 100 also keeps the closest (0.9 at index 0)
    assert ring_objective.window_mask(sims, 50, 100).nonzero()[:, 1].tolist() == [0, 2, 4, 6, 8]


def test_window_mask_matches_sorting_reference_on_random_rows():
    g = torch.Generator().manual_seed(0)
    sims = torch.randn(7, 1000, generator=g)
    for w_l, w_u in [
        (0, 100),
        (10, 60),
        (90, 99),
        (33.3, 66.6),
        (0, 1),
        (0, 90),
        (60, 100),
        (49.9, 50.1),
        (99.8, 99.9),
    ]:
        assert torch.equal(ring_objective.window_mask(sims, w_l, w_u), reference_window(sims, w_l, w_u))


@pytest.mark.parametrize("max_chunk", [2**25, 4000, 1])
def test_sample_in_window_draws_only_window_entries_in_every_chunking(max_chunk):
    g = torch.Generator().manual_seed(1)
    q = F.normalize(torch.randn(9, 16, generator=g), dim=1)
    bank = F.normalize(torch.randn(800, 16, generator=g), dim=1)
    u = torch.rand(9, 500, generator=torch.Generator().manual_seed(2))
    idx = ring_objective.sample_in_window(q, bank, 40, 80, u, max_chunk_elements=max_chunk)
    allowed = reference_window(q @ bank.T, 40, 80)
    assert idx.shape == (9, 500)
    assert allowed.gather(1, idx).all()
    # uniform with replacement over 320 entries: 500 draws reach 320 * (1 - e^-1.56) = 253 on average
    assert all(220 < len(set(row.tolist())) < 285 for row in idx)
    # the chunking changes nothing
    again = ring_objective.sample_in_window(q, bank, 40, 80, u)
    assert torch.equal(idx, again)


def test_full_window_draws_exactly_what_ir_draws():
    g = torch.Generator().manual_seed(3)
    q = F.normalize(torch.randn(5, 8, generator=g), dim=1)
    bank = F.normalize(torch.randn(300, 8, generator=g), dim=1)
    u = torch.rand(5, 64, generator=torch.Generator().manual_seed(4))
    ring = ring_objective.sample_in_window(q, bank, 0, 100, u)
    uniform = ring_objective.sample_uniform(300, u)
    assert torch.equal(ring, uniform)


def test_iring_with_full_window_is_ir_loss():
    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 8))

    def normalized(x):
        return F.normalize(encoder(x), dim=1)

    ir = InstanceDiscrimination(
        50, 8, negatives=20, temperature=0.07, bank_momentum=0.5, ring=False, max_chunk_elements=64
    )
    iring = InstanceDiscrimination(
        50, 8, negatives=20, temperature=0.07, bank_momentum=0.5, ring=True, max_chunk_elements=64
    )
    iring.load_state_dict(ir.state_dict())
    x = torch.randn(6, 12)
    index = torch.tensor([0, 5, 7, 9, 11, 49])
    loss_ir = ir(normalized, [x], index, None, torch.Generator().manual_seed(7))
    loss_ring = iring(normalized, [x], index, (0.0, 100.0), torch.Generator().manual_seed(7))
    assert torch.equal(loss_ir, loss_ring)
    # a real window changes the negatives and so the loss
    iring.load_state_dict(ir.state_dict())
    other = iring(normalized, [x], index, (50.0, 90.0), torch.Generator().manual_seed(7))
    assert not torch.equal(loss_ir, other)


def test_mocoring_with_full_window_is_moco_loss_and_window_uses_every_entry():
    g = torch.Generator().manual_seed(5)
    q = F.normalize(torch.randn(4, 8, generator=g), dim=1)
    k = F.normalize(torch.randn(4, 8, generator=g), dim=1)
    queue = F.normalize(torch.randn(40, 8, generator=g), dim=1)
    assert torch.equal(moco_loss(q, k, queue, 0.07), moco_loss(q, k, queue, 0.07, (0.0, 100.0)))
    # hand-computed MoCoRing loss: positive plus every queue entry inside the window
    windowed = moco_loss(q, k, queue, 0.07, (50.0, 90.0))
    sims = q @ queue.T
    mask = reference_window(sims, 50, 90)
    expected = []
    for i in range(4):
        logits = torch.cat([(q[i] * k[i]).sum().view(1), sims[i][mask[i]]]) / 0.07
        expected.append(-(logits[0] - torch.logsumexp(logits, 0)))
    assert torch.allclose(windowed, torch.stack(expected).mean(), atol=1e-6)


def test_selection_never_sorts(monkeypatch):
    def forbidden(*_a, **_k):
        raise AssertionError("Ring selection must not sort")

    for name in ("sort", "argsort", "msort"):
        monkeypatch.setattr(torch, name, forbidden)
        monkeypatch.setattr(torch.Tensor, name, forbidden)
    q = F.normalize(torch.randn(3, 8), dim=1)
    bank = F.normalize(torch.randn(500, 8), dim=1)
    ring_objective.sample_in_window(q, bank, 20, 70, torch.rand(3, 10))
    ring_objective.window_mask(q @ bank.T, 20, 70)


@pytest.mark.slow
def test_million_entry_bank_is_processed_in_bounded_chunks(monkeypatch):
    n, budget = 1_281_167, 2**22
    g = torch.Generator().manual_seed(0)
    bank = F.normalize(torch.randn(n, 4, generator=g), dim=1)
    q = F.normalize(torch.randn(12, 4, generator=g), dim=1)
    seen = []
    real = ring_objective._row_bounds

    def spy(sims, lo, hi):
        seen.append(sims.numel())
        return real(sims, lo, hi)

    monkeypatch.setattr(ring_objective, "_row_bounds", spy)
    idx = ring_objective.sample_in_window(q, bank, 90, 99, torch.rand(12, 256), max_chunk_elements=budget)
    assert len(seen) == 4 and max(seen) <= budget  # 3 queries of 1.28M similarities per chunk
    # every drawn entry lies in the query's window, checked against an exact rank computation
    lo_rank, hi_rank = ring_objective.window_ranks(n, 90, 99)
    for i in (0, 11):
        sims = bank @ q[i]
        chosen = sims[idx[i]]
        below = (sims[None, :] < chosen[:, None]).sum(dim=1)  # ascending rank of each chosen value
        assert bool(((below >= lo_rank) & (below < hi_rank)).all())


@pytest.mark.parametrize(
    "w_l, w_u, message",
    [
        (90, 90, "w_l=90 >= w_u=90"),
        (95, 10, "w_l=95 >= w_u=10"),
        (-1, 50, "outside [0, 100]"),
        (0, 101, "outside [0, 100]"),
        (math.nan, 50, "outside [0, 100]"),
    ],
)
def test_bad_windows_fail_with_one_sentence(w_l, w_u, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        ring_objective.validate_window(w_l, w_u)


def test_more_negatives_than_bank_entries_is_refused():
    with pytest.raises(ValueError, match="k=11 negatives from a bank of 10"):
        ring_objective.sample_in_window(torch.randn(2, 4), torch.randn(10, 4), 0, 100, torch.rand(2, 11))
    with pytest.raises(ValueError, match="bank_negatives=11 is larger than the memory bank"):
        InstanceDiscrimination(10, 4, 11, 0.07, 0.5, ring=False, max_chunk_elements=100)


# -- IRing's blocked draw (issue 31): the cumulative-sum draw's indices without a B x N running count ----------


def _padded(mask: torch.Tensor) -> torch.Tensor:
    out = torch.zeros((mask.shape[0], -(-mask.shape[1] // ring_objective.PAD) * ring_objective.PAD), dtype=torch.bool)
    out[:, : mask.shape[1]] = mask
    return out


def test_blocked_draw_gives_the_cumulative_sum_draws_on_every_mask():
    """Same mask and u, same indices: sparse, dense, single-entry and edge rows, widths off the block grid."""
    g = torch.Generator().manual_seed(11)
    draws = 0
    for n, density in [
        (1, 1.0),
        (17, 0.5),
        (ring_objective.BLOCK, 1.0),
        (ring_objective.PAD, 0.01),
        (ring_objective.PAD + 1, 0.3),
        (5_000, 0.9),
        (20_000, 0.001),
        (50_000, 0.1),
        (3 * ring_objective.PAD - 7, 0.5),
    ]:
        mask = torch.rand(6, n, generator=g) < density
        mask[0] = False
        mask[0, -1] = True  # one entry, in the last column: every u draws it
        mask[1] = True
        mask[2] = False
        mask[2, 0] = True
        for row in range(3, 6):  # never empty (the window never is)
            mask[row, torch.randint(n, (1,), generator=g)] = True
        u = torch.rand(6, 4096, generator=g)
        u[:, :2] = torch.tensor([0.0, 1.0 - 2**-24])  # both ends of [0, 1) in float32
        expected = ring_objective.sample_from_mask(mask, u)
        assert torch.equal(ring_objective.sample_from_blocks(_padded(mask), u), expected), n
        assert (expected[0] == n - 1).all() and (expected[2] == 0).all()
        draws += u.numel()
    assert draws >= 100_000


def _tied_bank(n: int, dim: int, g: torch.Generator) -> torch.Tensor:
    """A bank whose similarities tie often: coarse coordinates and repeated rows, so boundary ties are exercised."""
    bank = torch.randint(-2, 3, (n, dim), generator=g).float()
    bank[n // 2 :] = bank[: n - n // 2]
    return bank


@pytest.mark.parametrize("max_chunk", [2**25, 9000])
def test_sample_in_window_draws_as_before_from_the_same_window_set(max_chunk):
    """The window set is window_mask's exactly (ties included) and the draws equal the cumulative-sum draw's."""
    g = torch.Generator().manual_seed(12)
    bank = _tied_bank(3000, 4, g)
    q = torch.randint(-2, 3, (8, 4), generator=g).float()
    sims = q @ bank.T
    draws = 0
    for w_l, w_u in [(0, 100), (0, 90), (40, 80), (90, 99), (99.8, 99.9)]:
        lo, hi = ring_objective._row_bounds(sims, *ring_objective.window_ranks(3000, w_l, w_u))
        window = ring_objective.padded_mask(sims, lo, hi)
        assert torch.equal(window[:, :3000], ring_objective.window_mask(sims, w_l, w_u)) and not window[:, 3000:].any()
        u = torch.rand(8, 3000, generator=g)
        new = ring_objective.sample_in_window(q, bank, w_l, w_u, u, max_chunk_elements=max_chunk)
        old = ring_objective.sample_in_window(
            q, bank, w_l, w_u, u, max_chunk_elements=max_chunk, draw=ring_objective.sample_from_mask
        )
        assert torch.equal(new, old), (w_l, w_u)
        assert window.gather(1, new).all()
        draws += u.numel()
    assert draws >= 100_000


def _chi_square_critical_1pct(df: int) -> float:
    """The chi-square distribution's 99th percentile by Wilson and Hilferty's cube-root normal approximation.

    Its relative error is below 1e-3 for df >= 100 (against tabulated quantiles), far inside the margin
    between a uniform draw's statistic (about df) and this bound (about df + 2.33 sqrt(2 df)).
    """
    z = 2.3263478740408408  # the standard normal's 99th percentile
    c = 2.0 / (9.0 * df)
    return df * (1.0 - c + z * math.sqrt(c)) ** 3


def test_blocked_draw_is_uniform_over_each_window():
    """400,000 draws over 4 windows of 800 entries: the histogram passes a chi-square test against uniform at 1%.

    Deterministic (fixed seeds); the statistic is the histogram's distance from the distribution the
    cumulative-sum draw has by construction (uniform over the window), so both draws share it.
    """
    g = torch.Generator().manual_seed(13)
    q = F.normalize(torch.randn(4, 16, generator=g), dim=1)
    bank = F.normalize(torch.randn(2000, 16, generator=g), dim=1)
    u = torch.rand(4 * 50, 2000, generator=g)  # each query 50 times: 100,000 draws each (k <= N per draw)
    idx = ring_objective.sample_in_window(
        q.repeat_interleave(50, dim=0), bank, 40, 80, u, draw=ring_objective.sample_from_blocks
    ).view(4, -1)
    window = reference_window(q @ bank.T, 40, 80)
    counts = torch.zeros(4, 2000).scatter_add_(1, idx, torch.ones_like(idx, dtype=torch.float))
    assert counts[~window].sum() == 0
    observed = counts[window]
    expected = u.numel() / observed.numel()  # 125 per entry
    statistic = float(((observed - expected) ** 2 / expected).sum())
    df = observed.numel() - 4  # one constraint per row: its draws sum to 100,000
    assert observed.numel() == 3200 and statistic < _chi_square_critical_1pct(df), statistic


def _cumsum_input_sizes(fn) -> list[int]:
    with torch.profiler.profile(record_shapes=True) as prof:
        fn()
    return [math.prod(e.input_shapes[0]) for e in prof.events() if e.name == "aten::cumsum"]


def test_blocked_draw_runs_no_bank_sized_cumulative_sum():
    """Profiled: every cumulative sum of the blocked draw is at most 1/BLOCK of the B x N similarities.

    The cumulative-sum draw, profiled the same way, runs one over all of them (the probe sees it).
    """
    g = torch.Generator().manual_seed(14)
    b, n = 4, 100_000
    q = F.normalize(torch.randn(b, 8, generator=g), dim=1)
    bank = F.normalize(torch.randn(n, 8, generator=g), dim=1)
    u = torch.rand(b, 64, generator=g)
    old = _cumsum_input_sizes(
        lambda: ring_objective.sample_in_window(q, bank, 40, 80, u, draw=ring_objective.sample_from_mask)
    )
    assert max(old) >= b * n
    new = _cumsum_input_sizes(lambda: ring_objective.sample_in_window(q, bank, 40, 80, u))
    assert new and max(new) <= b * -(-n // ring_objective.PAD) * ring_objective.PAD // ring_objective.BLOCK, new


def test_blocked_draw_refuses_an_unpadded_mask():
    with pytest.raises(ValueError, match="padded to a multiple of"):
        ring_objective.sample_from_blocks(torch.ones(2, 100, dtype=torch.bool), torch.rand(2, 3))


# -- issue 39: no pass over the B x N similarities that changes no draw ------------------------------------------

_VIEWS = {"aten::numpy_T", "aten::permute", "aten::as_strided", "aten::resolve_conj", "aten::slice", "aten::view"}
# Tensor.numpy()'s checks on a contiguous CPU float tensor, which copy nothing (the CPU's bounds hand NumPy the
# similarities' own memory).
_VIEWS |= {"aten::detach", "detach", "aten::to", "aten::resolve_neg"}


def _bank_sized_passes(fn, b: int, n: int) -> list[str]:
    """The operators that read or write at least B x N elements (views excluded), in the order they ran."""
    with torch.profiler.profile(record_shapes=True) as prof:
        fn()
    return [
        e.name
        for e in prof.events()
        if e.name not in _VIEWS and e.input_shapes and e.input_shapes[0] and math.prod(e.input_shapes[0]) >= b * n
    ]


@pytest.mark.parametrize(
    "w_l, w_u, passes",
    [
        # The bounds are selected in NumPy on the CPU (ring.engine.objectives.ring._partition_bounds: one introselect
        # over each row, and one inside its eligible slice; unseen by torch's profiler, where a GPU's topk would
        # lead each list).  The start of annealing (w_l = 0): one comparison (no zeroing, no lower one), the draw's
        # count.
        (0, 90, ["aten::le", "aten::sum"]),
        # The annealed window: the mask compared in place (only its padding cleared).
        (90, 99, ["aten::ge", "aten::le", "aten::__iand__", "aten::bitwise_and_", "aten::sum"]),
        (0, 100, []),  # the whole bank: IR's draw, no similarity at all
    ],
)
def test_selection_makes_only_the_windows_passes_over_the_bank(w_l, w_u, passes):
    """Profiled on the CPU: before issue 39 every window zeroed the whole B x N mask and compared against both
    bounds, infinite or not (7 passes at w_l = 0), and the full window ran the whole selection."""
    g = torch.Generator().manual_seed(15)
    b, n = 4, 100_000
    q = F.normalize(torch.randn(b, 8, generator=g), dim=1)
    bank = F.normalize(torch.randn(n, 8, generator=g), dim=1)
    u = torch.rand(b, 64, generator=g)
    assert _bank_sized_passes(lambda: ring_objective.sample_in_window(q, bank, w_l, w_u, u), b, n) == passes


def test_open_sided_mask_is_the_mask_with_infinite_bounds():
    """An open side (None) selects exactly what an infinite bound selects, ties and padding included."""
    g = torch.Generator().manual_seed(16)
    sims = _tied_bank(3000, 4, g)[:, :1].T.repeat(5, 1) + torch.randint(-2, 3, (5, 1), generator=g).float()
    lo, hi = ring_objective._row_bounds(sims, *ring_objective.window_ranks(3000, 30, 80))
    inf = torch.full_like(lo, math.inf)
    for low, high in [(lo, hi), (None, hi), (lo, None), (None, None)]:
        expected = ring_objective.padded_mask(sims, -inf if low is None else low, inf if high is None else high)
        assert torch.equal(ring_objective.padded_mask(sims, low, high), expected)
        assert not expected[:, 3000:].any()


def test_full_window_shortcut_is_the_draw_over_an_all_true_mask():
    """sample_in_window skips the selection for the whole bank: both draws over an all-True mask agree with it."""
    g = torch.Generator().manual_seed(17)
    n = ring_objective.PAD + 5
    u = torch.rand(3, 2000, generator=g)
    u[:, :2] = torch.tensor([0.0, 1.0 - 2**-24])
    mask = torch.ones(3, n, dtype=torch.bool)
    uniform = ring_objective.sample_uniform(n, u)
    assert torch.equal(ring_objective.sample_from_blocks(_padded(mask), u), uniform)
    assert torch.equal(ring_objective.sample_from_mask(mask, u), uniform)
    assert torch.equal(ring_objective.sample_in_window(torch.randn(3, 4), torch.randn(n, 4), 0, 100, u), uniform)


@pytest.mark.parametrize("threads", [1, 2])
def test_cpu_bounds_are_the_torch_selections_bounds_and_draw_the_same(threads, monkeypatch):
    """The CPU's window bounds (NumPy's introselect, one selection over the row) against the torch selections they
    replace (topk and kthvalue, still a GPU's): the same values on random and on heavily tied rows with both signs
    and both zeros, in every kind of window (open either side, half-way, annealed, whole, a single rank), on 1 and 2
    threads (blocks of rows shared between them); hence the same masks and, for the same uniform draws, the same
    negatives."""
    g = torch.Generator().manual_seed(48)
    ties = torch.randint(-40, 41, (6, 3001), generator=g).float() / 40
    ties[:, ::7] = -0.0
    rows = torch.cat([ties, torch.randn(5, 3001, generator=g)])
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    windows = [(0, 90), (45, 94.5), (90, 99), (30, 80), (0, 100), (49.9, 50.1), (99.8, 99.9), (10, 100)]
    for window in windows:
        ranks = ring_objective.window_ranks(rows.shape[1], *window)
        for old, new in zip(
            ring_objective._topk_bounds(rows, *ranks), ring_objective._row_bounds(rows, *ranks), strict=True
        ):
            assert old.shape == new.shape and old.dtype == new.dtype and torch.equal(old, new), window
    q = F.normalize(torch.randn(7, 16, generator=g), dim=1)
    bank = F.normalize(torch.randn(2000, 16, generator=g), dim=1)
    u = torch.rand(7, 64, generator=g)
    new = [ring_objective.sample_in_window(q, bank, *w, u, max_chunk_elements=3 * 2000) for w in windows]
    monkeypatch.setattr(ring_objective, "_row_bounds", ring_objective._topk_bounds)
    assert all(
        torch.equal(a, ring_objective.sample_in_window(q, bank, *w, u, 3 * 2000))
        for a, w in zip(new, windows, strict=True)
    )
