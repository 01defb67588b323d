import itertools
import json
import math

import pytest
import torch

from ring import toy_cnce
from ring.core.config import ToyCNCEConfig, save
from ring.plan import grid
from ring.reports import tables
from tests.helpers import run_module

TINY = dict(n_points=256, epochs=2, batch_size=64, negatives=20, eval_points=500, percentages=[50.0, 90.0])


def test_true_mi_of_the_papers_gaussians():
    cov = toy_cnce.joint_covariance(*(ToyCNCEConfig().cov_z, ToyCNCEConfig().cov_eps))
    assert cov.tolist() == [[2.0, 0.4], [0.4, 2.0]]
    # -1/2 log(1 - 0.4^2 / (2 * 2)) = -1/2 log 0.96
    assert toy_cnce.true_mi(cov) == pytest.approx(0.0204110, abs=1e-7)
    assert round(toy_cnce.true_mi(cov), 5) == tables.published()["table_toy_cnce"]["true_mi"]
    x, y = toy_cnce.sample_pairs(cov, 200_000, torch.Generator().manual_seed(0))
    assert torch.cov(torch.stack([x, y])).double() == pytest.approx(cov, abs=0.02)


@pytest.mark.parametrize("percentile, count", [(0, 2000), (10, 1800), (50, 1000), (95, 100)])
def test_eligible_count_is_the_closest_share_of_the_bank(percentile, count):
    assert toy_cnce.eligible_count(2000, percentile) == count


def test_percentile_restriction_on_a_hand_made_bank():
    # Two models, one query each, over a bank of 20 whose scores are a known permutation of 0..19.
    order = torch.tensor([7, 3, 19, 0, 12, 5, 16, 1, 9, 14, 2, 18, 6, 11, 4, 17, 8, 13, 10, 15])
    scores = order.float().view(1, 1, 20).repeat(2, 1, 1)
    counts = [toy_cnce.eligible_count(20, 75), toy_cnce.eligible_count(20, 0)]  # the closest 5, and the whole bank
    u = torch.rand(2, 1, 4000, generator=torch.Generator().manual_seed(1))
    drawn = toy_cnce.sample_negatives(scores, counts, u)
    closest = set(torch.nonzero(order >= 15).flatten().tolist())  # indices of scores 15..19
    assert counts == [5, 20] and set(drawn[0].flatten().tolist()) == closest
    assert set(drawn[1].flatten().tolist()) == set(range(20))


def test_bound_terms_on_hand_computed_values():
    positive = torch.tensor([1.0, 0.5])
    negative = torch.tensor([[0.0, 0.0, 2.0], [0.5, 0.5, 0.5]])
    expected = 1.0 - math.log((math.e + 1.0 + 1.0 + math.e**2) / 4)  # = -0.107517...
    got = toy_cnce.bound_terms(positive, negative)
    assert got[0].item() == pytest.approx(expected, abs=1e-6) and expected == pytest.approx(-0.107517, abs=1e-6)
    assert got[1].item() == pytest.approx(0.0, abs=1e-7)  # a constant critic bounds MI by exactly 0


def test_the_critic_is_bounded_by_its_temperature():
    cfg = ToyCNCEConfig()
    stack = [torch.stack([p, p]) for p in toy_cnce.two_encoders(cfg, torch.Generator().manual_seed(0))]
    values = torch.linspace(-50, 50, 101).repeat(2, 1)
    gx, hy = toy_cnce.mlp(stack[:10], values), toy_cnce.mlp(stack[10:], values)
    assert gx.shape == (2, 101, cfg.hidden) and gx.norm(dim=-1) == pytest.approx(torch.ones(2, 101), abs=1e-5)
    assert toy_cnce.critic_scores(gx, hy, cfg.temperature).abs().max() <= 1 / cfg.temperature + 1e-5


# One seed's numbers computed in stacks of different sizes: batched matmuls of another batch size
# may take another BLAS kernel (blocking, summation order, thread split), so results agree to float32
# rounding, not bit for bit.  Each critic value is bounded by 1/temperature = 2, so one rounding is
# ~2 * 6e-8; a bound term sums ~negatives + 1 such values through logsumexp (~1e-6 at worst), and
# the mean over eval points does not grow it.  A real bug (another seed's data, generator or critic)
# moves these means by their spread, ~1e-3 here: STACK_TOL sits two orders of magnitude below that.
STACK_TOL = 1e-5


def test_a_seed_gives_the_same_numbers_alone_and_stacked():
    cfg = ToyCNCEConfig(**TINY, own_critics=True)
    alone, stacked = toy_cnce.run_seeds(cfg, [1])[0], toy_cnce.run_seeds(cfg, [0, 1])[1]
    for protocol in ("nce_critic", "own_critics"):
        assert alone[protocol] == pytest.approx(stacked[protocol], abs=STACK_TOL)
    # The same NCE critic, scored once alone and once in the stack of every estimator's critic.
    assert alone["nce_critic"]["NCE"] == pytest.approx(alone["own_critics"]["NCE"], abs=STACK_TOL)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"percentages": [100]}, "outside \\[0, 100\\)"),
        ({"batch_size": 4096}, "exceeds n_points"),
        ({"cov_z": [[1, 2], [2, 1]], "cov_eps": [[0, 0], [0, 0]]}, "positive-definite"),
    ],
)
def test_bad_configs_fail_with_one_sentence(overrides, message):
    with pytest.raises(ValueError, match=message):
        toy_cnce.check(ToyCNCEConfig(**overrides))


def test_entry_point_writes_metrics_and_rejects_bad_configs(tmp_path, capsys):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    save(ToyCNCEConfig(**TINY, seed=3), good)
    save(ToyCNCEConfig(**{**TINY, "negatives": 0}), bad)
    run_module("ring.toy_cnce", "--config", good, "--out", tmp_path / "cell")
    metrics = json.loads((tmp_path / "cell" / toy_cnce.METRICS).read_text())
    assert metrics["seed"] == 3 and list(metrics["nce_critic"]) == ["NCE", "CNCE50", "CNCE90"]
    assert "own_critics" not in metrics
    assert toy_cnce.main(["--config", str(bad), "--out", str(tmp_path / "bad")]) == 1
    assert (
        capsys.readouterr().err
        == f"ring: Config {bad} (toy_cnce): negatives=0 must be an integer of at least 1; set negatives to 1 or more.\n"
    )
    assert not (tmp_path / "bad").exists()


def test_grids_carry_the_toy_block(root):
    paper = grid.load(root / "ring" / "resources" / "grids" / "paper.yaml")
    smoke = grid.load(root / "ring" / "resources" / "grids" / "smoke.yaml")
    assert paper.toy_cnce_seeds() == [0, 1, 2, 3, 4] and paper.toy_cnce_config(4).own_critics
    full = paper.toy_cnce_config(0)
    assert (full.n_points, full.epochs, full.batch_size, full.lr, full.weight_decay) == (2000, 100, 128, 0.03, 0.0)
    assert (full.layers, full.hidden, full.negatives, full.percentages) == (5, 10, 100, [10, 25, 50, 75, 90, 95])
    assert smoke.toy_cnce_seeds() == [0] and smoke.toy_cnce_config(0).epochs < full.epochs
    with pytest.raises(ValueError, match="toy_cnce: Unknown ToyCNCEConfig key 'epoch'"):
        grid.from_dict(
            "bad", {"datasets": ["digits"], "methods": ["IR"], "seeds": [0], "toy_cnce": {"seeds": [0], "epoch": 3}}
        )


@pytest.mark.slow
def test_full_size_bounds_keep_theorem_1s_order():
    """The appendix at full size (2000 points, 100 epochs, 100 negatives, 5 seeds): in the mean over
    seeds CNCE <= NCE <= true MI, CNCE loosening as w_l grows, and the NCE critic learned something."""
    cfg = ToyCNCEConfig()
    results = toy_cnce.run_seeds(cfg, [0, 1, 2, 3, 4])
    # Theorem 1 holds for any fixed critic and any bank, so under both protocols: held out, and the
    # training pairs with the training bank at the end of training.
    for protocol in ("nce_critic", "nce_critic_train"):
        mean = {name: sum(r[protocol][name] for r in results) / len(results) for name, _ in toy_cnce.estimators(cfg)}
        cnce = [mean[f"CNCE{p:g}"] for p in cfg.percentages]
        assert all(a > b for a, b in itertools.pairwise([mean["NCE"], *cnce])), (protocol, mean)
    held_out = sum(r["nce_critic"]["NCE"] for r in results) / len(results)
    assert 0.005 < held_out < results[0]["true_mi"]


def test_own_critics_keep_the_supremum_order_under_both_protocols():
    """Each estimator trained with its own bound: sup_f CNCE(f) <= sup_f NCE(f), since CNCE(f) <= NCE(f)
    for every f.  A shortened run (3 seeds, 500 points, 20 epochs): NCE's critic beats every CNCE critic
    on its mean, held out and on the training data."""
    cfg = ToyCNCEConfig(
        n_points=500, epochs=20, negatives=50, eval_points=5000, percentages=[10.0, 90.0], own_critics=True
    )
    results = toy_cnce.run_seeds(cfg, [0, 1, 2])
    for protocol in ("own_critics", "own_critics_train"):
        mean = {name: sum(r[protocol][name] for r in results) / len(results) for name, _ in toy_cnce.estimators(cfg)}
        assert all(mean["NCE"] > mean[f"CNCE{p:g}"] for p in cfg.percentages), (protocol, mean)
