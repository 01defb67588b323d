import math

import pytest
import torch
import torch.nn.functional as F

from ring.objectives.ir import nce_softmax_loss
from ring.objectives.la import background_neighbours, local_aggregation_loss


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

