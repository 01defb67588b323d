import pytest
import torch
import torch.nn.functional as F

from ring.engine.knn import holdout_accuracy, holdout_split, knn_accuracy


def test_holdout_split_is_fixed_disjoint_and_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    before = torch.get_rng_state()
    memory, val = holdout_split(1347, 0.1)
    assert torch.equal(torch.get_rng_state(), before)
    assert len(val) == 135 and len(memory) == 1212
    assert set(memory.tolist()).isdisjoint(val.tolist()) and len(set(memory.tolist()) | set(val.tolist())) == 1347
    torch.manual_seed(7)
    again = holdout_split(1347, 0.1)
    assert torch.equal(again[0], memory) and torch.equal(again[1], val)


@pytest.mark.parametrize("fraction", [0.0, 1.0, 0.999])
def test_holdout_split_rejects_fractions_leaving_nothing(fraction):
    with pytest.raises(ValueError, match="ring_val_fraction"):
        holdout_split(100, fraction)


def test_holdout_accuracy_is_the_knn_of_held_out_training_images_against_the_rest():
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(200) % 4
    centres = F.normalize(torch.randn(4, 16, generator=g), dim=1)
    feats = F.normalize(centres[labels] + 0.05 * torch.randn(200, 16, generator=g), dim=1)
    assert holdout_accuracy(feats, labels, 0.25, num_classes=4, k=10) == 100.0  # separable clusters
    memory, val = holdout_split(200, 0.25)
    shuffled = labels.clone()
    shuffled[val] = (labels[val] + 1) % 4  # wrong labels on the held-out images only
    expected = knn_accuracy(feats[memory], shuffled[memory], feats[val], shuffled[val], 4, 10)["knn_top1"]
    assert holdout_accuracy(feats, shuffled, 0.25, num_classes=4, k=10) == expected == 0.0


def test_window_same_class_by_hand():
    import math

    from ring.engine.knn import window_same_class

    a = math.radians(10)
    feats = torch.tensor([[1.0, 0.0], [math.cos(a), math.sin(a)], [0.0, 1.0], [-1.0, 0.0]])
    labels = torch.tensor([0, 0, 1, 1])
    # Full window: every entry, the query's own included: 2 of 4 share its class for every query.
    assert window_same_class(feats, labels, 0.0, 100.0, max_chunk_elements=100) == pytest.approx(50.0)
    # w_l = 50, w_u = 75 of 4 entries: ascending ranks [2, 3), each query's second closest (the closest
    # is itself): 0 -> 1 (same), 1 -> 0 (same), 2 -> 1 (other class), 3 -> 2 (same): 3 of 4.
    for chunk in (100, 4):  # one query per chunk too
        assert window_same_class(feats, labels, 50.0, 75.0, max_chunk_elements=chunk) == pytest.approx(75.0)
