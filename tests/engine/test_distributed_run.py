"""Data parallelism over a whole run: 2 and 4 gloo processes train, over two epochs, what one process trains with
``bn_groups`` BatchNorm groups (IR and MoCo, one group spread over the ranks and two groups), every parameter, every
buffer (BatchNorm running statistics and counts, MoCo's key encoder) and the bank or queue compared.

In float64.  The runs compute the same sums in other orders (per rank then over ranks, and a convolution over
another batch shape), so they part by rounding; fp32 rounding (1e-7) is not what these tests can bound over a run:
a ReLU whose input lies within rounding of 0 flips, and with 32-px digits layer4's maps are 1 x 1, so one flipped
element moves that step's gradient by about 1% (measured: one process on 1 and on 2 threads, one flip in layer4's
32,768 activations at step 2, the gradient 1.7e-2 apart, the weights 0.23 apart after two epochs of 21 steps,
where 2 processes measured 0.145).  In float64 rounding is 1e-16 and no ReLU input lies that close to 0; the
parted sums then grow only through training's own sensitivity, measured over two epochs of 21 IR steps (batch 64,
2 processes, one group) from 2.6e-14 after the first step to 1.2e-9 after the last, at most 1.4-fold per step.
These runs take 8 steps (about 1e-13 at that growth): 1e-6 leaves room for other shapes and orders, while a wrong
statistic, momentum, count, gradient scale, batch order or bank update moves a tensor by percents.
"""

import shutil

import pytest

from ring.core.config import PretrainConfig
from ring.engine.checkpoint import safe_load
from tests.engine.test_distributed import run_ranks
from tests.helpers import pretrain_config

pytestmark = pytest.mark.slow  # whole runs in several processes: outside the developer loop (pytest -m 'not slow')

# 4 steps an epoch over the first 224 digits, 14 images per rank on 4; 16-px views: the network's arithmetic at a
# quarter of 32 px's cost (layer3 and layer4 at 1 x 1).
IMAGES = 224
BATCH = 56
RESIZE = 16

# ring.pretrain's entry point on the first IMAGES digits (the same images in every run), so that a whole run costs
# seconds; the cell computes in float64 by its own key (precision: fp64).
WORKER = f"""
import sys, torch
from ring.data import datasets
from ring import pretrain
load = datasets.Source.load
datasets.Source.load = lambda self, split: (
    torch.utils.data.Subset(load(self, split), range({IMAGES})) if split == "pretrain" else load(self, split)
)
sys.exit(pretrain.main(sys.argv[1:]))
"""


def config(method: str, bn_groups: int) -> PretrainConfig:
    return pretrain_config(
        method,
        epochs=2,
        lr_milestones=[1],  # the schedule's step at the epoch's end is compared too
        knn_every=0,
        bn_groups=bn_groups,
        batch_size=BATCH,
        resize=RESIZE,
        crop=RESIZE,
        bank_negatives=64,  # at most the bank's IMAGES rows
        queue_size=BATCH * 2,
        threads=1,
        precision="fp64",  # see the module docstring
    )


def train(cfg: PretrainConfig, cell, world: int) -> dict:
    """``cfg`` trained in ``cell`` by ``world`` gloo processes; its last checkpoint, held in memory: the
    cell's files (a float64 checkpoint, its predecessor and snapshots, 0.4 GB for MoCo) go at once."""
    run_ranks(cfg, cell, world, ("-c", WORKER))
    state = safe_load(cell / "checkpoint.pt")
    shutil.rmtree(cell)
    return state


@pytest.fixture(scope="module")
def one_process(module_tmp):
    """The one-process run of each (method, bn_groups), trained once for all the parametrisations that compare
    against it."""
    runs = {}

    def reference(method: str, bn_groups: int) -> dict:
        if (method, bn_groups) not in runs:
            cell = module_tmp("one") / f"{method}-{bn_groups}"
            runs[method, bn_groups] = train(config(method, bn_groups), cell, world=1)
        return runs[method, bn_groups]

    return reference


def tensors_of(state: dict) -> dict[str, dict]:
    momentum = {str(i): s["momentum_buffer"] for i, s in state["optimizer"]["state"].items()}
    return {"encoder": state["encoder"], "objective": state["objective"], "momentum": momentum}


def gaps(single: dict, ddp: dict) -> dict[str, float]:
    """Every tensor of the encoder, the objective and SGD's momentum: relative distance of the data-parallel run's from
    one process's (counts: their difference)."""
    out = {}
    for part, tensors in tensors_of(single).items():
        assert tensors.keys() == tensors_of(ddp)[part].keys(), part
        for name, ref in tensors.items():
            got = tensors_of(ddp)[part][name]
            if not ref.is_floating_point():
                out[f"{part}.{name}"] = float((got - ref).abs().max()) if ref.numel() else 0.0
                continue
            out[f"{part}.{name}"] = float((got - ref).norm() / ref.norm().clamp_min(1e-30))
    return out


@pytest.mark.parametrize(
    ("method", "bn_groups", "world"),
    # Each method with one group spread over the ranks and with groups of its own, on 2 and on 4 processes.
    [("IR", 1, 2), ("IR", 2, 4), ("MoCo", 1, 4), ("MoCo", 2, 2)],
)
def test_processes_train_what_one_process_trains_over_two_epochs(tmp_path, one_process, method, bn_groups, world):
    ddp = train(config(method, bn_groups), tmp_path / "ddp", world)
    single = one_process(method, bn_groups)
    assert (ddp["epoch"], ddp["step_in_epoch"]) == (single["epoch"], single["step_in_epoch"]) == (2, 0)
    assert ddp["scheduler"] == single["scheduler"]
    apart = {k: v for k, v in gaps(single, ddp).items() if v > 1e-6}
    assert not apart, f"{world} processes part from one process: {apart}"
