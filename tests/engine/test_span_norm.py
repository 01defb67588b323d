"""BatchNorm groups that span processes (ring.engine.span_norm): 4 gloo processes compute, rows for rows, what one
process computes with ``bn_groups`` groups (outputs, the input's and the parameters' gradients, running statistics),
eager and compiled, and a single process builds none of it."""

import copy
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ring.engine import distributed
from ring.engine.grouped_bn import GroupBatchNorm2d, Grouped
from ring.engine.groups import bn_layout
from ring.engine.span_norm import SpanBatchNorm2d

WORLD = 4
ROWS = 4  # images per process


def _net() -> torch.nn.Module:
    """Two convolution + BatchNorm blocks (non-trivial affine parameters), in float64."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 5, 3, padding=1),
        torch.nn.BatchNorm2d(5),
        torch.nn.ReLU(inplace=True),
        torch.nn.Conv2d(5, 4, 3, padding=1),
        torch.nn.BatchNorm2d(4),
        torch.nn.Flatten(),
    ).double()
    with torch.no_grad():
        for bn in (net[1], net[4]):
            bn.weight.uniform_(0.5, 1.5), bn.bias.uniform_(-1.0, 1.0)
    return net


def _steps(model, params, x, weights, rows):
    """Two training steps' outputs and input gradients (the loss a fixed weighting of ``rows``' outputs), then a step
    in evaluation mode; the parameters' gradients summed over both steps."""
    outputs, grads = [], []
    for step in range(2):
        xs = (x[rows] * (step + 1)).requires_grad_()
        y = model(xs)
        (y * weights[rows]).sum().backward()
        outputs.append(y.detach()), grads.append(xs.grad)
    model.eval()
    outputs.append(model(x[rows]).detach())
    model.train()
    return outputs, grads, [p.grad for p in params]


def _compare_all(rank: int, port: int, bn_groups: tuple[int, ...], compile_: bool) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        for groups in bn_groups:  # in one process group: starting 4 processes costs more than the arithmetic
            _compare(rank, groups, compile_)
    finally:
        distributed.shutdown()


def _compare(rank: int, bn_groups: int, compile_: bool) -> None:
    groups, span = bn_layout(bn_groups, WORLD)
    torch.manual_seed(1)
    x = torch.randn(WORLD * ROWS, 3, 4, 4, dtype=torch.float64) * 2 + 1
    weights = torch.randn(WORLD * ROWS, 4 * 16, dtype=torch.float64)
    # One process: bn_groups groups over the whole batch (consecutive chunks), as ring.pretrain builds it.
    one = Grouped(_net(), bn_groups)
    ref_out, ref_grad, ref_params = _steps(one, list(one.parameters()), x, weights, slice(None))
    # This rank: its consecutive share of the batch, one group shared with span - 1 neighbours.
    net = _net()
    # Compiled as ring.engine.encoder.Precision compiles (there its output is cast to fp32; here it stays fp64).
    model = Grouped(torch.compile(net) if compile_ else net, groups, span)
    assert all(isinstance(m, SpanBatchNorm2d) for m in (net[1], net[4]))
    mine = slice(rank * ROWS, (rank + 1) * ROWS)
    out, grad, params = _steps(model, list(net.parameters()), x, weights, mine)
    for p in params:  # data parallelism adds the ranks' gradients (DDP averages them: the loss is a mean there)
        dist.all_reduce(p)
    # float64: the same statistics summed in another order (per rank, then over ranks) agree to ~1e-15 of
    # their size; 1e-10 leaves room for the compiled kernels' own orders and fails on any wrong term.
    tight = {"rtol": 1e-10, "atol": 1e-10}
    # Evaluation normalises with the running statistics: one process's are group 0's (compared below per group).
    for a, b in zip(out if rank < span else out[:2], ref_out, strict=False):
        torch.testing.assert_close(a, b[mine], **tight)
    for a, b in zip(grad, ref_grad, strict=True):
        torch.testing.assert_close(a, b[mine], **tight)
    for a, b in zip(params, ref_params, strict=True):
        torch.testing.assert_close(a, b, **tight)
    for mine_bn, ref_bn in ((net[1], one.module[1]), (net[4], one.module[4])):
        # Every rank holds its group's statistics; group 0's are what one process keeps (and rank 0 saves).
        group = rank // span
        c = len(ref_bn.running_mean)
        ref_stats = ref_bn._group_stats if bn_groups > 1 else (ref_bn.running_mean, ref_bn.running_var)
        torch.testing.assert_close(mine_bn.running_mean, ref_stats[0][group * c : (group + 1) * c], **tight)
        torch.testing.assert_close(mine_bn.running_var, ref_stats[1][group * c : (group + 1) * c], **tight)
        assert int(mine_bn.num_batches_tracked) == int(ref_bn.num_batches_tracked) == 2
    # MoCo's key encoder is a deep copy: it normalises across the same ranks, without gradients.
    key = copy.deepcopy(model)
    with torch.no_grad():
        torch.testing.assert_close(key(x[mine]), one(x)[mine], **tight)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_four_processes_equal_one_process_with_as_many_groups():
    """bn_groups 1 (one group over the 4 ranks: IR, CMC, LA) and 2 (two groups of 2 ranks: MoCo on twice its GPUs)."""
    mp.spawn(_compare_all, args=(_free_port(), (1, 2), False), nprocs=WORLD)


@pytest.mark.slow
def test_four_compiled_processes_equal_one_process_with_two_groups():
    """torch.compile (inductor, as ring.pretrain compiles) around the collectives, in subgroups of 2 ranks (the eager
    tests cover a group over all ranks; compiling costs ~1 min of 2 CPUs): the arithmetic stays the eager layers'."""
    mp.spawn(_compare_all, args=(_free_port(), (2,), True), nprocs=WORLD)


def test_one_process_builds_no_spanning_layer_and_no_collective(monkeypatch):
    """The single-process path is today's: no SpanBatchNorm2d, no process group (a collective would fail here)."""
    monkeypatch.setattr(dist, "all_gather", lambda *a, **k: pytest.fail("a collective in one process"))
    for bn_groups in (1, 8):
        groups, span = bn_layout(bn_groups, 1)
        assert (groups, span) == (bn_groups, 1)
        net = _net()
        Grouped(net, groups, span)(torch.randn(8, 3, 4, 4, dtype=torch.float64))
        assert type(net[1]) is (GroupBatchNorm2d if bn_groups > 1 else torch.nn.BatchNorm2d)
