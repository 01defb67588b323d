"""Budgets of one training step that a CPU can check (issue 23): what the host does per step.

A GPU step is bound by the host when the host launches more work than the device can hide, or when
it waits for the device.  Both show on the CPU under torch.profiler: the top-level aten calls of a
step (``benchmarks.profile_counts``) and the calls that read a device value back to the host.
"""

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.profile_counts import SYNC_OPS, top_level_aten_calls
from ring.pretrain import Pretraining

from .helpers import pretrain_config

# The paper's methods and their Ring variants; LA and the +C_i rows are profiled after their k-means warm-up.
METHODS = ("IR", "IRing", "CMC", "CMCRing", "MoCo", "MoCoRing", "LA", "IRCave", "IRingCi")
BATCH = 16


def _run(tmp_path, method, **overrides):
    # bf16 autocast and channels-last as on a GPU (the CPU default is fp32 NCHW): the step a GPU runs.
    cfg = pretrain_config(method, batch_size=BATCH, precision="bf16", channels_last="on", threads=1,
                          kmeans_warmup_epochs=1, **overrides)
    return Pretraining(cfg, tmp_path / method)


def _profile_step(run) -> "Counter":
    if hasattr(run.objective, "start_epoch"):  # k-means methods: clusters as after the warm-up
        run.objective.start_epoch(run.cfg.kmeans_warmup_epochs)
    torch.manual_seed(0)
    views = [torch.randn(BATCH, 3, run.cfg.crop, run.cfg.crop) for _ in range(run.n_views)]
    index = torch.randperm(len(run.train_set))[:BATCH]
    run.encoder.train()
    run.train_step(views, index)  # the first step allocates the optimizer's state
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run.train_step(views, index)
    return top_level_aten_calls(prof)


@pytest.mark.parametrize("method", METHODS)
def test_a_training_step_never_waits_for_the_device(tmp_path, method):
    calls = _profile_step(_run(tmp_path, method))
    syncs = {op: calls[op] for op in SYNC_OPS if calls[op]}
    assert not syncs, f"{method}: a training step reads device values on the host: {syncs}"


def test_bn_groups_cost_few_calls(tmp_path):
    """MoCo's 8 BatchNorm groups run in one pass of the network, not eight (3,344 calls against 770 before).

    What is left is per BatchNorm layer, whatever the number of groups: the group view of its input
    and output and the affine parameters repeated per group (4 calls forward, 6 backward; 405 -> 700
    calls per MoCo step at 8 groups, measured), where one group calls ``batch_norm`` once.  Issue 23
    asked for 1.3x; that needs the layer fused into one call (a custom kernel or torch.compile)."""
    one = sum(_profile_step(_run(tmp_path / "one", "MoCo", bn_groups=1)).values())
    eight = sum(_profile_step(_run(tmp_path / "eight", "MoCo", bn_groups=8)).values())
    four = sum(_profile_step(_run(tmp_path / "four", "MoCo", bn_groups=4)).values())
    assert four == eight, "the calls of a step must not grow with the number of groups"
    assert eight <= 1.8 * one, f"MoCo with 8 BatchNorm groups makes {eight} top-level calls per step, 1 group {one}"


def test_the_momentum_update_is_two_calls(tmp_path):
    run = _run(tmp_path, "MoCo")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run.objective._momentum_update(run.model)
    calls = top_level_aten_calls(prof)
    assert sum(calls.values()) <= 2, calls
