import copy
import math

import pytest
import torch

from ring.engine.encoder import Encoder
from ring.engine.grouped_bn import Grouped


def _chunked(module, x, groups):
    """What Grouped computed before the one-pass layers: the network once per consecutive chunk."""
    return torch.cat([module(chunk) for chunk in x.chunk(groups)], dim=0)


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.slow
def test_one_pass_groups_equal_the_network_run_per_chunk(channels_last):
    torch.manual_seed(0)
    exact = Encoder().double()  # the chunked computation in fp64: what both fp32 orders approximate
    reference, grouped = copy.deepcopy(exact).float(), Grouped(copy.deepcopy(exact).float(), 4)
    x = torch.randn(16, 3, 32, 32)
    x32 = x.contiguous(memory_format=torch.channels_last) if channels_last else x
    if channels_last:
        reference, grouped = (
            reference.to(memory_format=torch.channels_last),
            grouped.to(memory_format=torch.channels_last),
        )
    outputs = {"exact": _chunked(exact, x.double(), 4), "chunked": _chunked(reference, x32, 4), "grouped": grouped(x32)}
    for out in outputs.values():
        (out * torch.arange(128.0, dtype=out.dtype)).sum().backward()

    # The same statistics of the same values, summed in other orders (one call over 4 x C channels instead of
    # 4 calls over C; a batch of 16 instead of 4 in the convolutions' weight gradients): fp32 rounding.  The
    # one-pass result must be as close to the fp64 computation as the chunked fp32 one is (measured: both about
    # 2e-4 of the gradient's norm with channels-last, 1e-7 apart in NCHW), with a floor for exact agreement.
    def error(a, b):
        return (a.double() - b).norm() / b.norm()

    assert error(outputs["grouped"], outputs["exact"]) <= 2 * error(outputs["chunked"], outputs["exact"]) + 1e-6
    nets = {"exact": exact, "chunked": reference, "grouped": grouped.module}
    params = {name: dict(net.named_parameters()) for name, net in nets.items()}
    for key, want in params["exact"].items():
        budget = 2 * error(params["chunked"][key].grad, want.grad) + 1e-6
        assert error(params["grouped"][key].grad, want.grad) <= budget, key


def test_running_statistics_are_group_zeros():
    """GPU 0 of a 4-GPU run normalises the first quarter of the batch and keeps its statistics."""
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(3)
    grouped = Grouped(torch.nn.Sequential(bn), 4)
    x = torch.randn(8, 3, 5, 5) * 2 + 1
    grouped(x)
    first = x[:2]
    torch.testing.assert_close(bn.running_mean, 0.9 * torch.zeros(3) + 0.1 * first.mean(dim=(0, 2, 3)))
    torch.testing.assert_close(bn.running_var, 0.9 * torch.ones(3) + 0.1 * first.var(dim=(0, 2, 3), unbiased=True))
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert bn.running_mean.shape == (3,) and int(bn.num_batches_tracked) == 1
    bn.eval()  # evaluation normalises with the kept statistics, as nn.BatchNorm2d does
    torch.testing.assert_close(
        bn(x), torch.nn.functional.batch_norm(x, bn.running_mean, bn.running_var, bn.weight, bn.bias)
    )


def test_group_statistics_survive_copies_and_moves():
    """MoCo's key encoder is a deep copy; .to() and load_state_dict replace buffers: each keeps its own statistics."""
    torch.manual_seed(0)
    grouped = Grouped(Encoder(), 2)
    x = torch.randn(4, 3, 32, 32)
    grouped(x)
    key = copy.deepcopy(grouped)
    before = grouped.module.trunk.bn1.running_mean.clone()
    key(x * 3)
    assert torch.equal(grouped.module.trunk.bn1.running_mean, before), "the copy shares the original's statistics"
    assert not torch.equal(key.module.trunk.bn1.running_mean, before)
    moved = grouped.to(torch.float64)
    moved(x.double())
    assert moved.module.trunk.bn1.running_mean.dtype == torch.float64
    grouped.module.load_state_dict(key.module.state_dict())
    assert torch.equal(grouped.module.trunk.bn1.running_mean, key.module.trunk.bn1.running_mean)


LAYOUTS = {"channels_first": torch.contiguous_format, "channels_last": torch.channels_last}
# The layout copies a layer might make of its activation or of the activation's gradient.
COPY_OPS = ("aten::contiguous", "aten::copy_", "aten::clone", "aten::_to_copy")


def _group_layer(groups, layout):
    """A float64 GroupBatchNorm2d (non-trivial affine parameters) and a batch of 4 images per group in ``layout``."""
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(5).double()
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5), bn.bias.uniform_(-1.0, 1.0)
    layer = Grouped(torch.nn.Sequential(copy.deepcopy(bn)), groups).module[0]
    layer.prepare(groups)
    x = (torch.randn(4 * groups, 5, 3, 4, dtype=torch.float64) * 2 + 1).contiguous(memory_format=LAYOUTS[layout])
    return bn, layer, x


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_group_layer_is_batch_norm_run_on_each_group(layout):
    """Rows ``G b + j`` are group ``j``: outputs, gradients and group 0's running statistics (two steps, so the
    momentum compounds) are those of one nn.BatchNorm2d per group, in float64 (sums in other orders: 1e-13 apart)."""
    groups = 4
    bn, layer, x = _group_layer(groups, layout)
    chunks = [copy.deepcopy(bn) for _ in range(groups)]
    x_ref, x_grouped = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
    for step in range(2):
        weights = torch.randn_like(x)
        y = layer(x_grouped * (step + 1))
        y_ref = torch.stack([chunks[j](x_ref[j::groups] * (step + 1)) for j in range(groups)], 1).flatten(0, 1)
        torch.testing.assert_close(y, y_ref)
        (y * weights).sum().backward()
        (y_ref * weights).sum().backward()
    torch.testing.assert_close(x_grouped.grad, x_ref.grad)
    torch.testing.assert_close(layer.weight.grad, sum(c.weight.grad for c in chunks))
    torch.testing.assert_close(layer.bias.grad, sum(c.bias.grad for c in chunks))
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(layer, name), getattr(chunks[0], name))
    layer.eval(), chunks[0].eval()
    torch.testing.assert_close(layer(x), chunks[0](x))


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_group_layer_copies_no_activation(layout):
    """Channels-last groups ran 5,027 images/s on an H200 against 6,514 in NCHW, the layer copying its
    input and its gradient into NCHW.  Training (forward and backward) and evaluation, counted by the profiler:
    channels-last makes no copy at all; NCHW copies only its G x C affine parameters (``repeat``)."""
    _, layer, x = _group_layer(4, layout)
    x.requires_grad_()
    weights = torch.randn_like(x)  # in x's layout: the input's gradient then needs no copy to accumulate
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        (layer(x) * weights).sum().backward()
        with torch.no_grad():
            layer.eval()(x)
    copies = [(e.name, e.input_shapes) for e in prof.events() if e.name in COPY_OPS]
    of_activations = [c for c in copies if any(shape and math.prod(shape) >= x.numel() for shape in c[1])]
    assert not (copies if layout == "channels_last" else of_activations), copies
    assert x.grad.is_contiguous(memory_format=LAYOUTS[layout])
