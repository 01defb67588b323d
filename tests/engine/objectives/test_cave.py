import torch

from ring.engine.objectives.cave import sample_in_clusters
from ring.engine.objectives.kmeans import Clusterings


def _clusterings(labels):
    labels = torch.tensor(labels)
    c = Clusterings(labels.shape[1], labels.shape[0], k=2, iters=1, seed=0)
    c.labels.copy_(labels)
    c.epoch.fill_(0)
    return c


def test_negatives_come_only_from_the_instances_clusters_by_hand():
    c = _clusterings([[0, 0, 1, 1, 2]])
    index = torch.tensor([0, 4, 3])
    u = torch.tensor([[0.0, 0.6, 0.99], [0.0, 0.5, 0.99], [0.1, 0.5, 0.7]])
    # instance 0's cluster is {0, 1}; instance 4 is alone; instance 3's cluster is {2, 3}
    assert sample_in_clusters(c, index, u, max_chunk_elements=2**20).tolist() == [[0, 1, 1], [4, 4, 4], [2, 3, 3]]


def test_several_clusterings_give_the_union_of_clusters_in_every_chunking():
    c = _clusterings([[0, 0, 1, 1, 2, 2], [0, 1, 1, 2, 2, 0]])
    index = torch.tensor([1, 5])
    u = torch.rand(2, 400, generator=torch.Generator().manual_seed(0))
    for chunk in (2**20, 12):
        idx = sample_in_clusters(c, index, u, max_chunk_elements=chunk)
        assert set(idx[0].tolist()) == {0, 1, 2}  # {0, 1} in the first clustering, {1, 2} in the second
        assert set(idx[1].tolist()) == {4, 5, 0}
