import pytest
import torch

from ring.engine.objectives.kmeans import Clusterings, assign, kmeans


def test_kmeans_finds_the_two_obvious_clusters_by_hand():
    # On a line with one wide gap every initial pair of points converges to the same answer.
    x = torch.tensor([[0.0, 0.0], [1.0, 0.0], [10.0, 0.0], [11.0, 0.0]])
    for seed in range(4):
        centroids, labels = kmeans(x, 2, iters=5, generator=torch.Generator().manual_seed(seed))
        assert labels[0] == labels[1] != labels[2] == labels[3]
        assert sorted(centroids.tolist()) == [[0.5, 0.0], [10.5, 0.0]]
    assert assign(torch.tensor([[9.0, 9.0], [2.0, -3.0]]), centroids, chunk_elements=2).tolist() == [
        labels[2].item(),
        labels[0].item(),
    ]


def test_kmeans_rejects_more_clusters_than_points():
    with pytest.raises(ValueError, match="kmeans_k=5 must lie between 1 and the 4"):
        kmeans(torch.zeros(4, 2), 5, 3, torch.Generator())


def test_clusterings_are_computed_once_per_epoch_and_survive_a_state_dict():
    g = torch.Generator().manual_seed(1)
    memory = torch.nn.functional.normalize(torch.randn(60, 4, generator=g), dim=1)
    c = Clusterings(60, h=3, k=5, iters=10, seed=7)
    assert not c.ready
    assert c.update(memory, epoch=2) and c.ready
    assert not c.update(torch.randn(60, 4), epoch=2)  # a resume inside the epoch keeps them
    restored = Clusterings(60, h=3, k=5, iters=10, seed=7)
    restored.load_state_dict(c.state_dict())
    assert torch.equal(restored.labels, c.labels) and int(restored.epoch) == 2
    # recomputing the same epoch from the same bank gives the same clusters (seeded per epoch)
    again = Clusterings(60, h=3, k=5, iters=10, seed=7)
    again.update(memory, epoch=2)
    assert torch.equal(again.labels, c.labels)
    assert not torch.equal(c.labels[0], c.labels[1]) or not torch.equal(c.labels[1], c.labels[2])


def test_same_cluster_is_the_union_over_clusterings():
    c = Clusterings(4, h=2, k=2, iters=1, seed=0)
    c.labels.copy_(torch.tensor([[0, 0, 1, 1], [0, 1, 1, 0]]))
    close = c.same_cluster(torch.tensor([0, 2]), torch.tensor([[1, 2, 3], [0, 1, 3]]))
    assert close.tolist() == [[True, False, True], [False, True, True]]


def test_kmeans_ends_at_a_lloyd_fixed_point():
    x = torch.randn(200, 3, generator=torch.Generator().manual_seed(3))
    centroids, labels = kmeans(x, 6, iters=50, generator=torch.Generator().manual_seed(4))
    assert torch.equal(labels, assign(x, centroids))
    for j in labels.unique():
        assert torch.allclose(centroids[j], x[labels == j].mean(dim=0), atol=1e-5)
