"""ring.engine.objectives.ir: the non-parametric softmax of instance discrimination (the paper's Eq. 3), its memory
bank and the loss module IR, IRing and the k-means methods share."""

import math

import pytest
import torch
import torch.nn.functional as F

from ring.engine.objectives.ir import InstanceDiscrimination, MemoryBank, nce_softmax_loss, random_unit_rows
from ring.engine.objectives.kmeans import Clusterings


def _unit(*angles: float) -> torch.Tensor:
    return torch.tensor([[math.cos(a), math.sin(a)] for a in angles])


def test_nce_softmax_loss_is_eq_3_by_hand():
    """-log(e^{q.p/t} / (e^{q.p/t} + sum_j e^{q.n_j/t})), averaged over the queries, on unit vectors in the plane
    whose dot products are cosines of known angles."""
    t = 0.5
    q = _unit(0.0, math.pi / 2)
    pos = _unit(0.3, math.pi / 2 + 1.0)
    neg = torch.stack([_unit(1.2, 2.5, -0.7), _unit(0.0, math.pi, 2.0)])  # B x k x D, k = 3
    expected = []
    for qa, pa, negs in ((0.0, 0.3, (1.2, 2.5, -0.7)), (math.pi / 2, math.pi / 2 + 1.0, (0.0, math.pi, 2.0))):
        positive = math.exp(math.cos(pa - qa) / t)
        expected.append(-math.log(positive / (positive + sum(math.exp(math.cos(n - qa) / t) for n in negs))))
    # float32 logits (|l| <= 2) through torch's logsumexp against float64 math: a few float32 ulps, ~1e-7 relative;
    # 1e-5 leaves margin and still catches a wrong temperature or a dropped term (changes in the first digits).
    assert nce_softmax_loss(q, pos, neg, t).item() == pytest.approx(sum(expected) / 2, rel=1e-5)


def test_random_unit_rows_are_unit_length_and_seeded():
    rows = random_unit_rows(50, 8, torch.Generator().manual_seed(3))
    # float32 normalisation: each norm is 1 within a few ulps (1.2e-7 each); 1e-6 is that with margin.
    assert rows.shape == (50, 8) and torch.allclose(rows.norm(dim=1), torch.ones(50), atol=1e-6)
    assert torch.equal(rows, random_unit_rows(50, 8, torch.Generator().manual_seed(3)))


def test_the_bank_moves_the_written_rows_towards_the_new_embeddings_and_renormalises():
    bank = MemoryBank(4, 2, momentum=0.5)
    bank.memory.copy_(_unit(0.0, 1.0, 2.0, 3.0))
    before = bank.memory.clone()
    bank.update(torch.tensor([0, 2]), _unit(math.pi / 2, 2.0))
    # m M[0] + (1 - m) q = (0.5, 0.5) -> (1, 1) / sqrt 2; row 2 mixed with itself stays itself.
    s = 1 / math.sqrt(2)
    # float32 normalisation of exact halves: within a few ulps of the float64 value.
    assert torch.allclose(bank.memory[0], torch.tensor([s, s]), atol=1e-6)
    assert torch.allclose(bank.memory[2], before[2], atol=1e-6)
    assert torch.equal(bank.memory[[1, 3]], before[[1, 3]])  # rows not in the batch are untouched
    assert len(bank) == 4


def _ir(n=50, negatives=20, **kw):
    return InstanceDiscrimination(
        n, 8, negatives=negatives, temperature=0.07, bank_momentum=0.5, ring=False, max_chunk_elements=64, **kw
    )


def test_a_forward_step_is_the_loss_on_the_old_bank_then_the_momentum_update():
    torch.manual_seed(0)
    encoder = torch.nn.Linear(12, 8)

    def model(x):
        return F.normalize(encoder(x), dim=1)

    ir = _ir()
    memory = ir.bank.memory.clone()
    x, index = torch.randn(4, 12), torch.tensor([3, 9, 17, 40])
    loss = ir(model, [x], index, None, torch.Generator().manual_seed(5))
    draws = ir.draws(torch.zeros(4, 8), torch.Generator().manual_seed(5))  # the same uniform draws
    assert draws.shape == (4, 20) and bool(((draws >= 0) & (draws < 1)).all())
    q = model(x)
    negatives = memory[(draws * 50).long()]
    # The same float32 operations on the same values: equal up to summation order inside bmm (1e-6 relative).
    assert torch.allclose(loss, nce_softmax_loss(q, memory[index], negatives, 0.07), rtol=1e-6)
    moved = F.normalize(0.5 * memory[index] + 0.5 * q.detach(), dim=1)
    assert torch.allclose(ir.bank.memory[index], moved, atol=1e-6)
    untouched = torch.ones(50, dtype=torch.bool)
    untouched[index] = False
    assert torch.equal(ir.bank.memory[untouched], memory[untouched])
    assert [m.data_ptr() for m in ir.memories()] == [ir.bank.memory.data_ptr()]


def test_the_k_means_samplers_are_uniform_during_the_warm_up():
    clusterings = Clusterings(50, 1, 5, 1, 0)
    ir = _ir(sampler="cave", clusterings=clusterings, warmup_epochs=2)
    assert ir.active_sampler() == "uniform"
    ir.start_epoch(1)
    assert not ir.kmeans_on and ir.active_sampler() == "uniform"
    ir.start_epoch(2)
    assert ir.kmeans_on and ir.active_sampler() == "cave"
    assert _ir(sampler=None).sampler == "uniform"
    ring = InstanceDiscrimination(50, 8, 20, 0.07, 0.5, ring=True, max_chunk_elements=64)
    assert ring.sampler == "ring" and ring.active_sampler() == "ring"
    ring.start_epoch(5)  # no clusterings: nothing to do
    assert not ring.kmeans_on


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(negatives_count="k_minus_one"), "negatives_count='k_minus_one' is not a count; choose one of"),
        (dict(negatives=1, negatives_count="including_positive"), "bank_negatives=1 counts the positive"),
        (dict(la_own_entry="own"), "la_own_entry='own' is not a rule; choose one of"),
        (dict(negatives=51), "bank_negatives=51 is larger than the memory bank \\(50 training images\\)"),
        (dict(sampler="cave"), "Negatives 'cave' / close positives need k-means clusterings."),
        (dict(close_positives=True), "Negatives 'uniform' / close positives need k-means clusterings."),
    ],
)
def test_a_bad_configuration_is_refused_in_one_sentence(kw, message):
    with pytest.raises(ValueError, match=f"^{message}"):
        _ir(**kw)


def test_negatives_count_including_positive_is_the_authors_nce():
    """negatives_count: including_positive draws k - 1 negatives besides the positive, the authors' NCE
    (contrastive-ring-public instdisc.py: randint(k - 1) negatives, the positive prepended, a logsumexp over k);
    excluding_positive (the default) draws k, IR's and CMC's code's reading."""
    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 8))

    def normalized(x):
        return F.normalize(encoder(x), dim=1)

    x, index = torch.randn(6, 12), torch.tensor([0, 5, 7, 9, 11, 49])
    for count, drawn in (("excluding_positive", 20), ("including_positive", 19)):
        ir = InstanceDiscrimination(
            50,
            8,
            negatives=20,
            temperature=0.07,
            bank_momentum=0.5,
            ring=False,
            max_chunk_elements=64,
            negatives_count=count,
        )
        memory = ir.bank.memory.clone()
        loss = ir(normalized, [x], index, None, torch.Generator().manual_seed(7))
        # The authors' get_loss, on the same draws: the positive's dot product, then a logsumexp over the
        # positive and the drawn negatives.
        noise = (torch.rand((6, drawn), generator=torch.Generator().manual_seed(7)) * 50).long()
        q = normalized(x)
        witness_pos = (q * memory[index]).sum(1)
        witness_noise = torch.einsum("bd,bkd->bk", q, memory[noise])
        partition = torch.logsumexp(torch.cat([witness_pos[:, None], witness_noise], dim=1) / 0.07, dim=1)
        assert ir.negatives == drawn and ir.background_size == 20
        assert torch.allclose(loss, -(witness_pos / 0.07 - partition).mean(), atol=1e-5), count


def test_negatives_count_is_a_config_switch_that_keeps_las_background_and_refuses_no_negative():
    from ring.core import catalog
    from ring.core.config import config_hash
    from ring.core.methods import method
    from ring.engine.objectives import build_objective
    from ring.plan import checks
    from ring.pretrain import objective_settings
    from tests.helpers import pretrain_config

    def build_objective_of(name, cfg, encoder, n_train):
        settings = objective_settings(cfg, method(name), catalog.spec(cfg.dataset))
        return build_objective(settings, encoder, n_train, 2**25)

    default = pretrain_config("IRing")
    assert default.negatives_count == "excluding_positive"
    authors = pretrain_config("IRing", negatives_count="including_positive")
    assert config_hash(authors) != config_hash(default)
    assert config_hash(default) == config_hash(pretrain_config("IRing", negatives_count="excluding_positive"))
    encoder = torch.nn.Linear(2, 2)
    # TINY_PRETRAIN's 256 counts the positive
    assert build_objective_of("IRing", authors, encoder, 300).negatives == 255
    cmc = pretrain_config("CMC", negatives_count="including_positive")
    assert build_objective_of("CMC", cmc, encoder, 300).negatives == 255
    la = build_objective_of("LA", pretrain_config("LA", negatives_count="including_positive", kmeans_k=5), encoder, 300)
    assert (la.negatives, la.background_size) == (255, 256)  # LA's k background neighbours: no draw, their count kept
    with pytest.raises(checks.ConfigError, match="bank_negatives=1 counts the positive .* set it to at least 2"):
        checks.check(pretrain_config("IR", negatives_count="including_positive", bank_negatives=1), "here")
    with pytest.raises(checks.ConfigError, match="negatives_count='k_minus_one' is not one of excluding_positive"):
        checks.check(pretrain_config("IR", negatives_count="k_minus_one"), "here")
