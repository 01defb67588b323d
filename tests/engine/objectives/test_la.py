import math

import pytest
import torch
import torch.nn.functional as F

from ring.engine.objectives.ir import nce_softmax_loss
from ring.engine.objectives.la import background_neighbours, local_aggregation_loss, local_aggregation_loss_topk


def test_la_loss_is_the_positive_mass_within_the_background_by_hand():
    # own entry 0.5; background entries 0.3 (same cluster: a close neighbour) and 0.1; tau = 0.5
    l_pos, l_bg = torch.tensor([[0.5]]), torch.tensor([[0.3, 0.1]])
    close = torch.tensor([[True, False]])
    loss = local_aggregation_loss(l_pos, l_bg, close, l_bg, ~close, temperature=0.5)
    expected = -math.log((math.exp(1.0) + math.exp(0.6)) / (math.exp(1.0) + math.exp(0.6) + math.exp(0.2)))
    assert loss.item() == pytest.approx(expected, rel=1e-5)


def test_ci_loss_puts_close_neighbours_over_ring_negatives_by_hand():
    # +C_i: close neighbours from the background, negatives drawn elsewhere (the Ring window)
    l_pos, l_close, l_neg = torch.tensor([[0.9]]), torch.tensor([[0.8, 0.7]]), torch.tensor([[0.2, 0.4, 0.2]])
    close = torch.tensor([[False, True]])
    loss = local_aggregation_loss(l_pos, l_close, close, l_neg, None, temperature=1.0)
    positives = math.exp(0.9) + math.exp(0.7)
    expected = -math.log(positives / (positives + 2 * math.exp(0.2) + math.exp(0.4)))
    assert loss.item() == pytest.approx(expected, rel=1e-5)


def test_without_close_neighbours_it_is_ir_loss():
    g = torch.Generator().manual_seed(0)
    q = F.normalize(torch.randn(6, 8, generator=g), dim=1)
    pos = F.normalize(torch.randn(6, 8, generator=g), dim=1)
    neg = F.normalize(torch.randn(6, 5, 8, generator=g), dim=1)
    l_pos = (q * pos).sum(1, keepdim=True)
    l_neg = torch.bmm(neg, q.unsqueeze(2)).squeeze(2)
    none = torch.zeros_like(l_neg, dtype=torch.bool)
    la = local_aggregation_loss(l_pos, l_neg, none, l_neg, None, 0.07)
    assert torch.allclose(la, nce_softmax_loss(q, pos, neg, 0.07))


def test_background_neighbours_are_the_closest_entries_without_the_instance():
    memory = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [-1.0, 0.0], [0.6, 0.8]])
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    index = torch.tensor([0, 2])
    for chunk in (100, 5):  # one query per chunk too
        idx = background_neighbours(q, memory, index, k=2, max_chunk_elements=chunk)
        assert [sorted(r) for r in idx.tolist()] == [[1, 4], [1, 4]]


# --- LA's code's own-entry rule (neuroailab/LocalAggregation-Pytorch, src/objectives/localagg.py) ------


def test_topk_rule_keeps_the_own_entry_only_when_it_is_among_the_k_closest():
    memory = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [-1.0, 0.0], [0.6, 0.8]])
    q = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    index = torch.tensor([0, 3])  # query 0 sits on its own entry; query 1's entry (-1, 0) is the farthest
    idx = background_neighbours(q, memory, index, k=2, max_chunk_elements=100, include_own=True)
    assert [sorted(r) for r in idx.tolist()] == [[0, 1], [0, 1]]  # the whole bank's 2 closest, own or not


def test_topk_rule_loss_is_the_close_mass_of_the_background_softmax_by_hand():
    # B_i of two entries: the own entry (0.5, close by definition) and another (0.3, other cluster); tau 0.5
    l_bg, close = torch.tensor([[0.5, 0.3], [0.2, 0.1]]), torch.tensor([[True, False], [False, False]])
    loss = local_aggregation_loss_topk(l_bg, close, temperature=0.5)
    # LA's code: relative_prob = sum_close e^{l/t} / sum_B e^{l/t}; loss = -mean log(relative_prob + 1e-7)
    first = -math.log(math.exp(1.0) / (math.exp(1.0) + math.exp(0.6)) + 1e-7)
    second = -math.log(0.0 + 1e-7)  # no close neighbour in B_i: a constant, 16.118 nats
    assert loss.item() == pytest.approx((first + second) / 2, rel=1e-6)
    l_bg.requires_grad_(True)
    local_aggregation_loss_topk(l_bg, close, 0.5).backward()
    assert torch.isfinite(l_bg.grad).all() and l_bg.grad[1].abs().max() < 1e-6  # the empty row passes no gradient


def test_la_method_uses_the_reference_rule_and_ours_is_a_variant():
    from ring.core.methods import METHODS
    from ring.engine.objectives.ir import InstanceDiscrimination
    from ring.engine.objectives.kmeans import Clusterings

    assert dict(METHODS["LA"].fixed)["la_own_entry"] == "topk"
    assert dict(METHODS["LAOwnPositive"].fixed)["la_own_entry"] == "positive"
    # One query on its own entry, two clusterings with hand-set labels: entry 1 shares query 0's cluster.
    memory = F.normalize(torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [-1.0, 0.2]]), dim=1)
    losses = {}
    for rule in ("topk", "positive"):
        clusterings = Clusterings(4, 1, 2, 1, 0)
        clusterings.labels = torch.tensor([[0, 0, 1, 1]])
        obj = InstanceDiscrimination(
            4,
            2,
            2,
            1.0,
            0.5,
            False,
            100,
            sampler="background",
            close_positives=True,
            clusterings=clusterings,
            la_own_entry=rule,
        )
        obj.bank.memory.copy_(memory)
        obj.kmeans_on = True
        q = torch.tensor([[1.0, 0.0]])
        losses[rule] = obj.contrast(q, obj.bank.memory, torch.tensor([0]), None, torch.zeros(1, 2)).item()
    s = (memory @ torch.tensor([1.0, 0.0])).tolist()
    # topk: B = {0, 1}, both close -> -log(1 + 1e-7); positive: B = {1, 2} without the own entry, P = {0, 1}
    assert losses["topk"] == pytest.approx(-math.log(1.0 + 1e-7), abs=1e-6)
    positives = math.exp(s[0]) + math.exp(s[1])
    assert losses["positive"] == pytest.approx(-math.log(positives / (positives + math.exp(s[2]))), rel=1e-5)
    with pytest.raises(ValueError, match="la_own_entry='own' is not a rule"):
        InstanceDiscrimination(4, 2, 2, 1.0, 0.5, False, 100, la_own_entry="own")
