"""ring.engine.health: the numerical-health contract (no non-finite number trained on, saved or tabled) and the
linear probe's verdict (diverged, at chance, or a high loss noted)."""

import math

import pytest
import torch

from ring.engine import health
from ring.engine.health import NonFinite


def test_the_divergence_rule_judges_the_accuracy_and_notes_a_high_loss():
    from ring.engine.health import divergence, loss_note

    # Digits: 10 classes, 450 test images; chance is 10% + 3 x 1.41% = 14.2%.  Above it a probe is no divergence,
    # whatever its finite loss (a CMC probe: 26.9% at 1.5e6); at it, one is, whatever its loss.
    for loss in (0.05, 2.3, 229.0, 1.5e6):
        assert divergence(loss, 10, "cell", 30, top1=26.9, test_images=450) is None
        assert "is at chance" in divergence(loss, 10, "cell", 30, top1=10.2, test_images=450)
    assert "is not finite" in divergence(float("inf"), 10, "cell", 30, top1=90.0, test_images=450)
    assert "is not finite" in divergence(float("nan"), 10, "cell", 30, top1=90.0, test_images=450)
    # Without an accuracy to judge, a loss above 100 ln K is the verdict.
    assert divergence(229.0, 10, "cell", 30) is None and "ln(1000) = 691" in divergence(1e6, 1000, "cell", 30, lr=0.01)
    # The note of a high loss above chance: the loss and the protocol; none at 100 ln K or below.
    assert loss_note(230.0, 10, "cell", 30, "SGD lr=0.01", 26.9, 450) is None
    note = loss_note(1.5e6, 10, "cell", 30, "SGD lr=0.01", 26.9, 450)
    assert "1.5e+06" in note and "SGD lr=0.01" in note and "above chance" in note


def test_the_chance_bar_is_three_binomial_standard_errors_above_one_over_k():
    # pytest.approx's default relative 1e-6: the same formula evaluated in another order of operations.
    assert health.chance_bar(10, 450) == pytest.approx(100 * (0.1 + 3 * math.sqrt(0.09 / 450)))  # 14.24
    assert health.chance_bar(1000, 50_000) == pytest.approx(100 * (1e-3 + 3 * math.sqrt(0.999e-3 / 50_000)))
    assert health.chance_bar(10, 0) == pytest.approx(100 * (0.1 + 3 * math.sqrt(0.09)))  # no images: one, not /0


def test_a_high_loss_is_above_100_ln_k_or_not_finite():
    bar = 100 * math.log(10)  # 230.26
    assert not health.high_loss(230.0, 10) and not health.high_loss(0.0, 10)
    assert health.high_loss(231.0, 10) and health.high_loss(math.inf, 10) and health.high_loss(math.nan, 10)
    assert health.high_loss(bar * 1.0001, 10) and not health.high_loss(bar * 0.9999, 10)


def test_without_a_log_line_or_an_accuracy_nothing_is_called_diverged():
    assert health.divergence(None, 10, "cell", 30) is None
    at_chance = health.divergence(None, 10, "cell", 30, lr=0.5, top1=9.0, test_images=450)
    assert at_chance.startswith("cell: the linear evaluation diverged: its test top-1 9.0% against chance 10.0%")
    assert "unknown (no log line)" in at_chance and "the features are too large for lr=0.5" in at_chance


def test_a_probes_verdict_is_either_the_sentence_or_the_scores_with_a_note_where_the_loss_stayed_high():
    scores = {"top1": 26.9, "top5": 80.0}
    healthy = health.probe_verdict(scores, 0.4, 10, 450, "cell", 30, 0.01, "SGD")
    assert healthy == scores
    noted = health.probe_verdict(scores, 1.5e6, 10, 450, "cell", 30, 0.01, "SGD")
    assert {k: noted[k] for k in scores} == scores and "stayed high under SGD" in noted["loss_note"]
    diverged = health.probe_verdict({"top1": 10.0, "top5": 50.0}, 0.4, 10, 450, "cell", 30, 0.01, "SGD")
    assert list(diverged) == ["diverged"] and "is at chance" in diverged["diverged"]
    assert health.probe_verdict(scores, None, 10, 450, "cell", 30, 0.01, "SGD") == scores  # no loss, no note


def test_the_first_non_finite_loss_stops_the_stage_with_one_sentence():
    health.check_loss(2.5, "cells/IR/seed0", 1, 1)
    with pytest.raises(NonFinite) as err:
        health.check_loss(math.nan, "cells/IR/seed0", 3, 17, lr=0.03)
    assert str(err.value) == (
        "cells/IR/seed0: the training loss became nan at epoch 3 step 17; the learning rate (lr=0.03) is likely "
        "too high for this batch size or the inputs are corrupt; lower lr and rerun."
    )
    with pytest.raises(NonFinite, match="became -inf at epoch 1 step 1; the learning rate is likely"):
        health.check_loss(-math.inf, "cell", 1, 1)


def test_the_first_non_finite_floating_tensor_is_named_and_integer_tensors_are_skipped():
    tensors = {
        "a": torch.zeros(3),
        "steps": torch.tensor([7]),  # integer buffers hold no NaN
        "b": torch.tensor([1.0, math.inf]),
        "c": torch.tensor([math.nan]),
        "note": "not a tensor",
    }
    assert health.first_non_finite(tensors) == "b"
    assert health.first_non_finite(list(tensors.items())[::-1]) == "c"  # pairs are read in their order
    assert health.first_non_finite({"a": torch.zeros(2), "n": torch.tensor([1])}) is None
    assert health.first_non_finite(torch.nn.Linear(2, 2).named_parameters()) is None


def test_a_non_finite_parameter_stops_the_epoch_before_its_checkpoint():
    model = torch.nn.Linear(2, 2)
    health.check_parameters(model.state_dict(), "cell", 4)
    with torch.no_grad():
        model.bias[0] = math.nan
    with pytest.raises(NonFinite, match=r"^cell: tensor bias became non-finite by the end of epoch 4; the learning"):
        health.check_parameters(model.state_dict(), "cell", 4)


def test_an_encoder_with_a_non_finite_tensor_is_never_written(tmp_path):
    state = {"conv1.weight": torch.tensor([1.0, float("nan")])}
    with pytest.raises(
        health.NonFinite, match=r"Refusing to write .*encoder.pt: its tensor conv1.weight is not finite"
    ):
        health.check_export(state, tmp_path / "encoder.pt")
    health.check_export({"conv1.weight": torch.ones(2)}, tmp_path / "encoder.pt")  # finite: no objection


def test_the_sentence_promises_a_checkpoint_only_where_one_was_written(tmp_path):
    """Issue 40 item 5: what a rerun starts from, as the cell's folder holds it when the stage stops."""
    checkpoint = tmp_path / "checkpoint.pt"
    assert health.likely_cause(0.1, checkpoint).endswith(
        "lower lr and rerun (no checkpoint was written before it: the rerun starts from scratch)"
    )
    checkpoint.write_bytes(b"state")
    with pytest.raises(NonFinite) as err:
        health.check_parameters({"w": torch.tensor([math.inf])}, "cell", 2, 0.1, checkpoint)
    assert str(err.value).endswith(f"(the last good checkpoint, {checkpoint}, is kept: the rerun resumes from it).")
