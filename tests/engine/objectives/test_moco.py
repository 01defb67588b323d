"""ring.engine.objectives.moco: MoCo's loss (the paper's Eq. 4), its momentum key encoder, the shuffled key batch and
the FIFO queue."""

import math

import pytest
import torch
import torch.nn.functional as F

from ring.engine.objectives.moco import MomentumContrast, moco_loss


def _unit(*angles: float) -> torch.Tensor:
    return torch.tensor([[math.cos(a), math.sin(a)] for a in angles])


def test_moco_loss_is_eq_4_by_hand():
    """-log(e^{q.k/t} / (e^{q.k/t} + sum_j e^{q.queue_j/t})) over every queue entry, averaged over the queries."""
    t = 0.2
    q, k = _unit(0.0, 1.0), _unit(0.4, 1.0)
    angles = (0.5, 2.0, -1.0, 3.0)
    queue = _unit(*angles)
    expected = 0.0
    for qa, ka in ((0.0, 0.4), (1.0, 1.0)):
        positive = math.exp(math.cos(ka - qa) / t)
        expected -= math.log(positive / (positive + sum(math.exp(math.cos(a - qa) / t) for a in angles))) / 2
    # float32 logits up to 5 through cross_entropy against float64 math: a few ulps of the result (~1e-7
    # relative); 1e-5 keeps margin and still fails for a wrong temperature or a lost queue entry.
    assert moco_loss(q, k, queue, t).item() == pytest.approx(expected, rel=1e-5)


def test_the_window_keeps_the_positive_and_only_the_queue_entries_inside_it():
    # 10 queue entries at angles 0.1 .. 1.0 from the query: similarities fall with the angle, so ascending rank r is
    # the entry at angle 1.0 - 0.1 r.  Window (50, 90): ranks 5..8, the angles 0.5, 0.4, 0.3, 0.2.
    q, k = _unit(0.0), _unit(0.05)
    queue = _unit(*[0.1 * (i + 1) for i in range(10)])
    t = 0.5
    positive = math.exp(math.cos(0.05) / t)
    kept = sum(math.exp(math.cos(a) / t) for a in (0.2, 0.3, 0.4, 0.5))
    # As in test_moco_loss_is_eq_4_by_hand: float32 against float64, a few ulps.
    assert moco_loss(q, k, queue, t, (50.0, 90.0)).item() == pytest.approx(
        -math.log(positive / (positive + kept)), rel=1e-5
    )


def _moco(queue_size=6, dim=4, m=0.9):
    torch.manual_seed(0)
    encoder = torch.nn.Linear(3, dim)
    return encoder, MomentumContrast(encoder, dim, queue_size, key_momentum=m, temperature=0.1, ring=False)


def test_the_key_encoder_starts_as_a_frozen_copy_and_follows_with_momentum():
    encoder, moco = _moco(m=0.9)
    keys = list(moco.key_encoder.parameters())
    assert all(torch.equal(a, b) for a, b in zip(keys, encoder.parameters(), strict=True))
    assert all(not p.requires_grad for p in keys) and all(p.requires_grad for p in encoder.parameters())
    old = [p.clone() for p in keys]
    with torch.no_grad():
        for p in encoder.parameters():
            p.add_(1.0)
    moco._momentum_update(encoder)
    # The documented claim: the same two roundings per element as a loop of mul_ / add_, so bit-identical.
    for key, before, query in zip(keys, old, encoder.parameters(), strict=True):
        assert torch.equal(key, before.mul_(0.9).add_(query.detach(), alpha=0.1))


def test_shuffled_keys_come_back_in_the_batch_order():
    _, moco = _moco()
    x = torch.randn(8, 3)
    keys = moco._keys(x, torch.Generator().manual_seed(1))
    # A linear key encoder maps each row alone; only the matmul's blocking over a permuted batch may differ, by
    # float32 rounding of 3-term sums (~1e-7); 1e-6 absolute covers it and fails for any row out of place.
    assert torch.allclose(keys, moco.key_encoder(x), atol=1e-6)


def test_the_queue_is_first_in_first_out_and_wraps_around():
    _, moco = _moco(queue_size=5, dim=2)
    start = moco.queue.clone()
    first, second = torch.full((3, 2), 1.0), torch.full((3, 2), 2.0)
    moco._enqueue(first)
    assert torch.equal(moco.queue[:3], first) and torch.equal(moco.queue[3:], start[3:]) and int(moco.queue_ptr) == 3
    moco._enqueue(second)  # rows 3, 4, then 0 again
    assert moco.queue[:, 0].tolist() == [2.0, 1.0, 1.0, 2.0, 2.0] and int(moco.queue_ptr) == 1


class _Normalise(torch.nn.Module):
    def forward(self, x):
        return F.normalize(x, dim=1)


def test_a_step_contrasts_against_the_queue_before_enqueuing_its_own_keys():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), _Normalise())
    moco = MomentumContrast(model, 4, 6, key_momentum=0.9, temperature=0.1, ring=False)
    queue = moco.queue.clone()
    x1, x2 = torch.randn(2, 3), torch.randn(2, 3)
    loss = moco(model, [x1, x2], torch.tensor([0, 1]), generator=torch.Generator().manual_seed(2))
    k = moco.key_encoder(x2)
    # The same float32 operations (row order aside, see test_shuffled_keys_come_back_in_the_batch_order).
    assert torch.allclose(loss, moco_loss(model(x1), k, queue, 0.1), rtol=1e-5)
    assert torch.allclose(moco.queue[:2], k, atol=1e-6) and torch.equal(moco.queue[2:], queue[2:])


def test_a_queue_shorter_than_a_batch_is_refused_in_one_sentence():
    with pytest.raises(ValueError, match=r"^queue_size=0 must be at least the batch size\.$"):
        MomentumContrast(torch.nn.Linear(2, 2), 2, 0, 0.99, 0.1, ring=False)
    from ring.core import catalog
    from ring.core.methods import method
    from ring.pretrain import objective_settings
    from tests.helpers import pretrain_config

    cfg = pretrain_config("MoCo", queue_size=32, batch_size=64)
    settings = objective_settings(cfg, method("MoCo"), catalog.spec(cfg.dataset))
    with pytest.raises(ValueError, match=r"^queue_size=32 is smaller than batch_size=64; raise queue_size\.$"):
        MomentumContrast.from_settings(settings, torch.nn.Linear(2, 2), 100, 1000)
