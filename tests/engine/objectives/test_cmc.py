import math

import pytest
import torch
import torch.nn.functional as F

from ring.engine.objectives.cmc import MultiviewContrast


class Fixed(torch.nn.Module):
    """Returns given embeddings [z_L, z_ab] whatever the image (the loss is what is tested)."""

    def __init__(self, z):
        super().__init__()
        self.z = z

    def forward(self, x):
        return self.z


def _nce(q, pos, negs, tau):
    logits = [float(q @ pos) / tau] + [float(q @ n) / tau for n in negs]
    return -logits[0] + math.log(sum(math.exp(v) for v in logits))


def test_cmc_is_two_ir_losses_with_swapped_banks_by_hand():
    torch.manual_seed(0)
    cmc = MultiviewContrast(4, 2, negatives=2, temperature=0.5, bank_momentum=0.5, ring=False, max_chunk_elements=100)
    m_l = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    m_ab = torch.tensor([[0.6, 0.8], [0.8, -0.6], [-0.6, 0.8], [0.0, 1.0]])
    cmc.bank.memory.copy_(m_l)
    cmc.bank_ab.memory.copy_(m_ab)
    z_l, z_ab = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    index = torch.tensor([1])
    loss = cmc(
        Fixed(torch.cat([z_l, z_ab], dim=1)),
        [torch.zeros(1, 3, 4, 4)],
        index,
        generator=torch.Generator().manual_seed(5),
    )
    # the same uniform draws: one row per (view, query), L first
    u = torch.rand((2, 2), generator=torch.Generator().manual_seed(5))
    neg_l, neg_ab = (u * 4).long().tolist()
    expected = _nce(z_l[0], m_ab[1], [m_ab[j] for j in neg_l], 0.5) + _nce(
        z_ab[0], m_l[1], [m_l[j] for j in neg_ab], 0.5
    )
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    # each bank moves towards its own view's embedding
    assert torch.allclose(cmc.bank.memory[1], F.normalize(0.5 * m_l[1] + 0.5 * z_l[0], dim=0))
    assert torch.allclose(cmc.bank_ab.memory[1], F.normalize(0.5 * m_ab[1] + 0.5 * z_ab[0], dim=0))
    assert torch.equal(cmc.bank.memory[0], m_l[0])


def test_shared_draw_uses_one_index_set_for_both_views_by_hand():
    """CMC's code (HobbitLong/CMC, NCE/NCEAverage.py): one multinomial draw of k indices per query
    indexes both banks; with uniforms u the indices are floor(u N) in each bank."""
    cmc = MultiviewContrast(
        4,
        2,
        negatives=3,
        temperature=0.5,
        bank_momentum=0.5,
        ring=False,
        max_chunk_elements=100,
        negative_draw="shared",
    )
    m_l = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    m_ab = torch.tensor([[0.6, 0.8], [0.8, -0.6], [-0.6, 0.8], [0.0, 1.0]])
    cmc.bank.memory.copy_(m_l)
    cmc.bank_ab.memory.copy_(m_ab)
    z_l, z_ab = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    loss = cmc(
        Fixed(torch.cat([z_l, z_ab], dim=1)),
        [torch.zeros(1, 3, 4, 4)],
        torch.tensor([1]),
        generator=torch.Generator().manual_seed(5),
    )
    u = torch.rand((1, 3), generator=torch.Generator().manual_seed(5))  # one row: the query's, for both views
    neg = (u[0] * 4).long().tolist()
    expected = _nce(z_l[0], m_ab[1], [m_ab[j] for j in neg], 0.5) + _nce(z_ab[0], m_l[1], [m_l[j] for j in neg], 0.5)
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="cmc_negatives='both' is not a draw"):
        MultiviewContrast(4, 2, 3, 0.5, 0.5, False, 100, negative_draw="both")


def test_cmc_methods_default_to_the_shared_draw_and_keep_ours_as_a_switch():
    from ring.core.config import PretrainConfig, config_hash
    from ring.plan import grid as grid_plan

    small_bank = {"bank_negatives": 256}  # digits' bank holds 1,347 images: the paper's 4,096 fail the plan
    grid = grid_plan.from_dict(
        "g",
        {"datasets": ["digits"], "methods": ["CMC", "CMCRing", "IR"], "seeds": [0], "pretrain": {"all": small_bank}},
    )
    assert grid.pretrain_config("digits", "CMC", 0, "data").cmc_negatives == "shared"
    assert grid.pretrain_config("digits", "CMCRing", 0, "data").cmc_negatives == "shared"
    ir = grid.pretrain_config("digits", "IR", 0, "data")
    assert ir.cmc_negatives == "per_view"  # untouched: IR's config, and its hash, are what they were
    assert config_hash(ir) == config_hash(
        PretrainConfig(method="IR", dataset="digits", seed=0, data_root="data", **small_bank)
    )
    ours = grid_plan.from_dict(
        "g",
        {
            "datasets": ["digits"],
            "methods": ["CMC"],
            "seeds": [0],
            "pretrain": {"all": {**small_bank, "cmc_negatives": "per_view"}},
        },
    )
    assert ours.pretrain_config("digits", "CMC", 0, "data").cmc_negatives == "per_view"
