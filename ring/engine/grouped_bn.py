"""BatchNorm statistics per group of the batch, in one pass of the network: what ``bn_groups`` GPUs compute, each
normalising its own share of the batch, and what MoCo's shuffled BN relies on (``ring.engine.objectives.moco``).
:class:`Grouped` wraps a network and turns its ``BatchNorm2d`` layers into :class:`GroupBatchNorm2d` (or, a share
of one group normalised by several ranks, into ring.engine.span_norm's ``SpanBatchNorm2d``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ring.engine.span_norm import SpanBatchNorm2d, batch_norm_input_grad, normalise


def _per_channel(stat: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A G x C statistic as G x C x 1 x 1 in ``like``'s dtype, to broadcast over a B x G x C x H x W batch."""
    return (stat if stat.dtype == like.dtype else stat.to(like.dtype)).view(*stat.shape, 1, 1)


class _ChannelsLastGroups(torch.autograd.Function):
    """Training-mode batch norm per group of a channels-last batch, without a layout copy either way.

    Channels-last memory is N H W C: a group's channel is not a channel of any 4-d view of it (no view merges the
    group with the channel), so no ``batch_norm`` call fits.  The batch is viewed as B x G x C x H x W (free: it
    splits N) and reduced over B, H and W; the normalisation broadcasts G x C coefficients, and the backward pass is
    batch norm's, per group.  Statistics and gradients of the affine parameters are in the weight's dtype; bf16
    activations' statistics come rounded to bf16 from ``var_mean`` (measured on the CPU against fp64: 1e-3 relative
    error in the running statistics and the weight's gradient, where ``batch_norm`` keeps fp32; the output's own
    rounding is 2e-3 either way).  Returns (output, mean, biased variance): the last two G x C, not differentiable,
    for the running statistics.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, groups: int, eps: float):
        x5 = x.unflatten(0, (-1, groups))
        with torch.autocast(x.device.type, enabled=False):  # autocast would widen addcmul's operands: a copy
            var, mean = torch.var_mean(x5, (0, 3, 4), correction=0)
            if var.dtype != weight.dtype:
                var, mean = var.to(weight.dtype), mean.to(weight.dtype)
            y = normalise(ctx, x, x5, mean, var, weight, bias, eps, lambda t: _per_channel(t, x))
        ctx.groups = groups
        # Not a view of y: torchvision's ReLU works in place on this output (see GroupBatchNorm2d.forward).
        return torch.ops.aten._unsafe_view(y, x.shape), mean, var

    @staticmethod
    def backward(ctx, dy, _mean, _var):
        x, mean, invstd, scale = ctx.saved_tensors
        x5, dy5 = x.unflatten(0, (-1, ctx.groups)), dy.unflatten(0, (-1, ctx.groups))
        count = x5.numel() // mean.numel()  # values per statistic
        dims, dtype = (0, 3, 4), scale.dtype
        sum_dy = dy5.sum(dims, dtype=dtype)
        dot = torch.addcmul((dy5 * x5).sum(dims, dtype=dtype), mean, sum_dy, value=-1)  # sum of dy (x - mean)
        dot_hat = dot * invstd  # sum of dy x_hat: the weight's gradient per group
        dx = batch_norm_input_grad(dy5, x5, mean, invstd, scale, sum_dy, dot_hat, count, lambda t: _per_channel(t, x))
        return torch.ops.aten._unsafe_view(dx, x.shape), dot_hat.sum(0), sum_dy.sum(0), None, None


class GroupBatchNorm2d(nn.BatchNorm2d):
    """``nn.BatchNorm2d`` whose training statistics are per group of the batch, all groups in one call.

    With ``groups = G``, rows ``n = G b + j`` form group ``j`` (:class:`Grouped` interleaves the batch
    so that group ``j`` is its ``j``-th consecutive chunk).  An NCHW batch is viewed as
    ``N/G x (G C) x H x W``, so one ``batch_norm`` call computes the ``G C`` statistics, instead of
    ``G`` passes of the whole network over chunks of ``N/G`` images (MoCo's ``SplitBatchNorm`` does
    the same with strided groups).  That view is free for NCHW tensors and a copy each way for channels-last
    ones, which instead go through :class:`_ChannelsLastGroups`: no copy, more (smaller) calls.

    Running statistics are those of group 0, which is what GPU 0 of a ``G``-GPU run holds and exports:
    ``running_mean``/``running_var`` are the first ``C`` entries of ``G C`` buffers that the same
    ``batch_norm`` call updates (so they cost no call of their own; channels-last: one multi-tensor lerp).
    The other groups' entries are never read; they are not saved, and a resumed run rebuilds them, which
    changes nothing it computes.  (The sequential chunks this replaces updated the running statistics ``G``
    times per step, once per chunk: the exported statistics then weighted the last chunks most.)  Evaluation mode is
    ``nn.BatchNorm2d``'s.  The parameters and ``state_dict`` keys are ``nn.BatchNorm2d``'s.
    """

    groups = 1

    def prepare(self, groups: int) -> None:
        """Make ``running_mean``/``running_var`` group 0 of ``groups`` x C buffers (again after ``.to()``,
        ``load_state_dict`` of another storage or a deep copy): called outside the forward, so that a
        compiled forward sees fixed buffers."""
        if self.momentum is None:
            raise ValueError("BatchNorm groups need a fixed momentum (momentum=None averages over all batches).")
        self.groups = groups
        stats = getattr(self, "_group_stats", None)
        if (
            stats is not None
            and len(stats[0]) == groups * len(self.running_mean)
            and stats[0].data_ptr() == self.running_mean.data_ptr()
            and stats[1].data_ptr() == self.running_var.data_ptr()
            and all(r.data_ptr() == s.data_ptr() for r, s in zip(self._group_rows, stats, strict=True))
        ):
            return
        c = len(self.running_mean)
        stats = (self.running_mean.detach().repeat(groups), self.running_var.detach().repeat(groups))
        self.running_mean, self.running_var = stats[0][:c], stats[1][:c]
        self._group_stats = stats
        self._group_rows = tuple(s.view(groups, c) for s in stats)  # G x C, as the channels-last path updates them

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = self.groups
        if g == 1 or not self.training:
            return super().forward(x)
        n, c, h, w = x.shape
        self.num_batches_tracked.add_(1)
        if not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last):
            y, mean, var = _ChannelsLastGroups.apply(x, self.weight, self.bias, g, self.eps)
            count = n // g * h * w
            torch._foreach_lerp_(self._group_rows, (mean, var.mul_(count / (count - 1))), self.momentum)
            return y
        mean, var = self._group_stats
        y = F.batch_norm(
            x.reshape(n // g, g * c, h, w),
            mean,
            var,
            self.weight.repeat(g),
            self.bias.repeat(g),
            True,
            self.momentum,
            self.eps,
        )
        # Not a view of y: torchvision's ReLU works in place on this output, and an in-place op on a view
        # makes autograd copy the whole base tensor back (CopySlices) in the backward pass.
        return torch.ops.aten._unsafe_view(y, (n, c, h, w))


class Grouped(nn.Module):
    """BatchNorm statistics per group of the batch: ``groups`` consecutive chunks are normalised separately.

    This is what ``groups`` GPUs compute (each normalises its own share of the batch; with ``span`` > 1 this process's
    batch is a share of one group that ``span`` consecutive ranks normalise together: ring.engine.span_norm); MoCo's
    shuffled BN relies on it (``ring.engine.objectives.moco``), and data-parallel runs are equivalent to a
    single process with as many groups.  Every ``BatchNorm2d`` of ``module`` becomes a
    :class:`GroupBatchNorm2d` (same parameters, same ``state_dict``) and the network runs once over
    the whole batch, interleaved so that chunk ``j`` is the rows ``n = G b + j`` those layers group.
    """

    def __init__(self, module: nn.Module, groups: int, span: int = 1):
        super().__init__()
        if groups < 1:
            raise ValueError(f"bn_groups={groups} must be at least 1.")
        if span > 1 and groups > 1:
            raise ValueError(
                f"A process holds either several BatchNorm groups or a share of one, not {groups} x {span}."
            )
        self.module = module
        self.groups = groups
        # A plain list (not submodules): deep copies (MoCo's key encoder) map it to their own layers.
        self.norms = [m for m in module.modules() if isinstance(m, nn.BatchNorm2d)] if groups * span > 1 else []
        for norm in self.norms:
            # span > 1: this process's batch is a share of one group that ``span`` ranks normalise together.
            norm.__class__ = SpanBatchNorm2d if span > 1 else GroupBatchNorm2d
            if span > 1:
                norm.prepare(span)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = self.groups
        if g == 1:
            return self.module(x)
        if len(x) % g:
            raise ValueError(f"A batch of {len(x)} does not split into bn_groups={g} equal groups.")
        for norm in self.norms:
            norm.prepare(g)
        out = self.module(x.unflatten(0, (g, -1)).transpose(0, 1).flatten(0, 1))
        return out.unflatten(0, (-1, g)).transpose(0, 1).flatten(0, 1)
