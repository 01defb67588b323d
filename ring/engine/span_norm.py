"""BatchNorm groups that span processes: one group of the batch normalised over several consecutive ranks.

With fewer BatchNorm groups than processes (IR, CMC and LA have one; MoCo's 8 on 16 GPUs), each group is the batches of
``span = world / bn_groups`` consecutive ranks (ring.engine.groups.bn_layout), which normalise together: what one
process computes with ``bn_groups`` groups (:class:`ring.engine.grouped_bn.Grouped`).  Forward, the ranks of a group
exchange their per-channel statistics; backward, the two per-channel gradient sums that batch norm's backward needs.
Not ``torch.nn.SyncBatchNorm``: it refuses CPU tensors (CI's gloo processes could not test it) and would make every
layer of a single process pay its checks; a single process never builds these layers.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from ring.engine import distributed

DIMS = (0, 2, 3)  # a channel's values: over the batch, height and width (either memory format)


def _per_channel(stat: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return (stat if stat.dtype == like.dtype else stat.to(like.dtype)).view(1, -1, 1, 1)


def normalise(ctx, x, values, mean, var, weight, bias, eps: float, per_channel) -> torch.Tensor:
    """Batch norm's forward from a group's statistics: ``values`` (``x`` or a view of it) normalised by ``mean`` and
    the biased ``var``, then scaled and shifted as one multiply-add; saves what :func:`batch_norm_input_grad` needs
    (``x``, mean, 1 / std, the scale) and marks the statistics, returned for the running ones, not differentiable.
    ``per_channel`` shapes a per-channel statistic to broadcast over ``values``."""
    invstd = (var + eps).rsqrt()
    scale = invstd * weight
    y = torch.addcmul(per_channel(torch.addcmul(bias, mean, scale, value=-1)), values, per_channel(scale))
    ctx.save_for_backward(x, mean, invstd, scale)
    ctx.mark_non_differentiable(mean, var)
    ctx.set_materialize_grads(False)  # no zero gradients made for the statistics
    return y


def batch_norm_input_grad(dy, x, mean, invstd, scale, sum_dy, dot_hat, count: int, per_channel):
    """Batch norm's input gradient from a group's ``sum_dy`` and ``dot_hat`` (the sum of dy x_hat) over its ``count``
    values per channel: dx = scale (dy - mean(dy) - x_hat mean(dy x_hat)) = scale dy - slope x + offset.
    ``per_channel`` shapes a per-channel statistic to broadcast over ``x``."""
    slope = (scale * invstd).mul_(dot_hat).mul_(1.0 / count)
    offset = torch.addcmul(slope * mean, scale, sum_dy, value=-1 / count)
    dx = torch.addcmul(per_channel(offset), dy, per_channel(scale))
    return dx.addcmul_(x, per_channel(slope), value=-1)


class _SpanBatchNorm(torch.autograd.Function):
    """Training-mode batch norm of one group whose rows lie on the ``span`` ranks of ``group``.

    Forward: each rank's per-channel mean and biased variance (``var_mean``, numerically stable) are all-gathered and
    combined exactly for equal counts (every rank holds as many rows): mean = the ranks' mean, variance = the mean
    variance plus the variance of the means.  That is the group's statistics without the cancellation of
    E[x^2] - E[x]^2 in fp32, from one collective of 2 C values per rank; every rank combines the same gathered values
    in the same order, so all hold bitwise the same statistics.  Backward: the sums of dy and of dy (x - mean) over
    the group (one all-reduce of 2 C values), from which each rank's dx follows as in one process.  The affine
    parameters' gradients are this rank's own sums: data parallelism adds them over the ranks.  Statistics and the
    parameters' gradients are in the weight's dtype (bf16 activations' statistics come rounded to bf16 from
    ``var_mean``, as :class:`ring.engine.grouped_bn._ChannelsLastGroups` documents).  Returns (output, mean, biased
    variance), the last two not differentiable, for the running statistics.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, eps: float, span: int):
        group = distributed.bn_process_group(span)
        with torch.autocast(x.device.type, enabled=False):
            var, mean = torch.var_mean(x, DIMS, correction=0)
            local = torch.cat([mean, var]).to(weight.dtype)
            gathered = [torch.empty_like(local) for _ in range(span)]
            dist.all_gather(gathered, local, group=group)
            means, variances = torch.stack(gathered).view(span, 2, -1).unbind(1)
            mean = means.mean(0)
            var = variances.mean(0) + (means - mean).square().mean(0)
            y = normalise(ctx, x, x, mean, var, weight, bias, eps, lambda t: _per_channel(t, x))
        ctx.span = span
        return y, mean, var

    @staticmethod
    def backward(ctx, dy, _mean, _var):
        x, mean, invstd, scale = ctx.saved_tensors
        dtype = scale.dtype
        sum_dy = dy.sum(DIMS, dtype=dtype)
        dot = torch.addcmul((dy * x).sum(DIMS, dtype=dtype), mean, sum_dy, value=-1)  # this rank's sum dy (x - mean)
        grad_weight, grad_bias = dot * invstd, sum_dy.clone()
        sums = torch.cat([sum_dy, dot])
        dist.all_reduce(sums, group=distributed.bn_process_group(ctx.span))
        sum_dy, dot = sums.chunk(2)
        count = x.numel() // len(mean) * ctx.span  # the group's values per channel
        dx = batch_norm_input_grad(
            dy, x, mean, invstd, scale, sum_dy, dot * invstd, count, lambda t: _per_channel(t, x)
        )
        return dx, grad_weight, grad_bias, None, None


class SpanBatchNorm2d(nn.BatchNorm2d):
    """``nn.BatchNorm2d`` whose training statistics are those of the ``span`` consecutive ranks' batches together
    (:class:`_SpanBatchNorm`); the running statistics are updated from them on every rank alike (rank 0, group 0,
    saves them, as one process with groups keeps group 0's).  Evaluation mode is ``nn.BatchNorm2d``'s; parameters
    and ``state_dict`` keys are its own.  :class:`ring.engine.grouped_bn.Grouped` turns a network's layers into
    these."""

    span = 1

    def prepare(self, span: int) -> None:
        if self.momentum is None:
            raise ValueError("BatchNorm groups need a fixed momentum (momentum=None averages over all batches).")
        self.span = span
        distributed.bn_process_group(span)  # a collective: created on every rank before the first step

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return super().forward(x)
        self.num_batches_tracked.add_(1)
        y, mean, var = _SpanBatchNorm.apply(x, self.weight, self.bias, self.eps, self.span)
        count = x.numel() // x.shape[1] * self.span
        torch._foreach_lerp_([self.running_mean, self.running_var], [mean, var * (count / (count - 1))], self.momentum)
        return y
