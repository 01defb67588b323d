"""ring.engine.objectives.samplers: the memory bank's negative samplers, one registered class each, resolved once
when the objective is built."""

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from ring.core.methods import METHODS, NEGATIVES
from ring.engine.objectives import samplers
from ring.engine.objectives.cave import sample_in_clusters
from ring.engine.objectives.ir import InstanceDiscrimination
from ring.engine.objectives.kmeans import Clusterings
from ring.engine.objectives.la import background_neighbours
from ring.engine.objectives.ring import sample_in_window, sample_uniform

CLUSTERED = {"cave", "background"}


def test_the_registry_resolves_each_name_to_its_strategy():
    assert set(samplers.SAMPLERS) == set(NEGATIVES)
    for name, cls in samplers.SAMPLERS.items():
        strategy = samplers.resolve(name)
        assert type(strategy) is cls and strategy.name == name
        assert strategy.needs_clusters == (name in CLUSTERED), name
    assert [n for n, c in samplers.SAMPLERS.items() if c.negatives_are_background] == ["background"]


def test_every_sampler_a_method_declares_is_registered_and_its_clusters_come_with_k_means():
    """ring.core.methods declares samplers by name (the core layer cannot import the engine): each name is a
    registered sampler, and a method whose sampler needs clusters builds them (Method.uses_kmeans)."""
    for name, m in METHODS.items():
        assert m.sampler in samplers.SAMPLERS, name
        if samplers.SAMPLERS[m.sampler].needs_clusters:
            assert m.uses_kmeans, name


def test_an_unknown_name_is_refused_in_one_sentence():
    message = "^Negatives 'hard' is not a sampler; choose one of uniform, ring, cave, background.$"
    with pytest.raises(ValueError, match=message):
        samplers.resolve("hard")
    with pytest.raises(ValueError, match=message):
        InstanceDiscrimination(50, 8, 20, 0.07, 0.5, ring=False, max_chunk_elements=64, sampler="hard")


@pytest.mark.parametrize("name", list(samplers.SAMPLERS))
def test_the_clustered_samplers_are_uniform_until_k_means_is_on(name):
    ir = InstanceDiscrimination(
        50, 8, 10, 0.07, 0.5, ring=name == "ring", max_chunk_elements=64, sampler=name,
        clusterings=Clusterings(50, 1, 5, 1, 0), warmup_epochs=2,
    )  # fmt: skip
    q, index = F.normalize(torch.randn(4, 8, generator=torch.Generator().manual_seed(1)), dim=1), torch.arange(4)
    u = torch.rand(4, 10, generator=torch.Generator().manual_seed(2))
    window = (0.0, 50.0)
    before = "uniform" if name in CLUSTERED else name
    ir.start_epoch(1)
    assert type(ir.active_strategy()) is samplers.SAMPLERS[before]
    if before == "uniform":
        assert torch.equal(ir.negative_indices(q, window, u, index=index), sample_uniform(50, u))
    ir.start_epoch(2)
    assert ir.active_strategy() is ir.strategy and ir.active_sampler() == name


def _objective(la_own_entry="positive"):
    clusterings = Clusterings(12, 2, k=3, iters=1, seed=0)
    clusterings.labels.copy_(torch.tensor([[0, 0, 1, 1, 2, 2, 0, 1, 2, 0, 1, 2], [0, 1, 1, 2, 2, 0, 0, 1, 2, 2, 1, 0]]))
    clusterings.epoch.fill_(0)
    return SimpleNamespace(max_chunk_elements=40, clusterings=clusterings, background_size=5, la_own_entry=la_own_entry)


@pytest.mark.parametrize("la_own_entry", ["positive", "topk"])
def test_each_strategy_returns_the_indices_of_the_function_it_wraps(la_own_entry):
    generator = torch.Generator().manual_seed(7)
    memory = F.normalize(torch.randn(12, 4, generator=generator), dim=1)
    q = F.normalize(torch.randn(3, 4, generator=generator), dim=1)
    index, u = torch.tensor([0, 5, 11]), torch.rand(3, 6, generator=generator)
    o = _objective(la_own_entry)
    expected = {
        "uniform": sample_uniform(12, u),
        "ring": sample_in_window(q, memory, 20.0, 70.0, u, 40),
        "cave": sample_in_clusters(o.clusterings, index, u, 40),
        "background": background_neighbours(q, memory, index, 5, 40, include_own=la_own_entry == "topk"),
    }
    for name, indices in expected.items():
        drawn = samplers.resolve(name).draw(o, q, memory, index, (20.0, 70.0), u)
        assert torch.equal(drawn, indices), name
