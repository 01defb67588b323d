import math

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


# -- issue 48: k-means assigns tile by tile, never holding its N x k distance matrix ------------------------------


def _nearest_by_the_whole_matrix(x: torch.Tensor, centroids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The assignment before issue 48 in one piece, and each row's gap between its two smallest distances."""
    d = (centroids * centroids).sum(dim=1) - 2.0 * x @ centroids.T
    two = d.topk(2, dim=1, largest=False).values
    return d.argmin(dim=1), two[:, 1] - two[:, 0]


@pytest.mark.parametrize("tile", [None, 1, 777, 2**25])
def test_assign_gives_the_whole_matrixs_labels_in_every_tiling(tile):
    g = torch.Generator().manual_seed(5)
    x = torch.nn.functional.normalize(torch.randn(3000, 32, generator=g), dim=1)
    centroids = x[torch.randperm(3000, generator=g)[:70]] + 0.01 * torch.randn(70, 32, generator=g)
    expected, gap = _nearest_by_the_whole_matrix(x, centroids)
    labels = assign(x, centroids, chunk_elements=tile)
    # fp32 distances of unit vectors carry ~32 * 2**-24 of rounding: rows whose two nearest are closer than 1e-5
    # may fall either way in a differently blocked GEMM; every other row must agree.
    clear = gap > 1e-5
    assert clear.float().mean() > 0.99
    assert torch.equal(labels[clear], expected[clear])
    # exact ties (small integers: every distance exact, whatever the blocking) keep the first centroid, as argmin
    # over the whole matrix did
    points = torch.randint(-4, 5, (50, 8), generator=g).float()
    twins = torch.randint(-4, 5, (1, 8), generator=g).float().repeat(2, 1)
    assert assign(points, twins, chunk_elements=tile).eq(0).all()


def test_assign_never_holds_more_than_a_tile_of_distances():
    """Profiled on the CPU: before issue 48 the first 2**25 distances (here all 20,000 x 200) existed at once."""
    g = torch.Generator().manual_seed(6)
    x, centroids = torch.randn(20_000, 16, generator=g), torch.randn(200, 16, generator=g)
    with torch.profiler.profile(record_shapes=True) as prof:
        assign(x, centroids)
    sizes = [math.prod(shape) for e in prof.events() for shape in e.input_shapes if shape]
    assert max(sizes) <= max(2**18, x.numel())  # a tile, or the input itself
    assert len([e for e in prof.events() if e.name == "aten::addmm"]) == -(-20_000 // (2**18 // 200))
