import copy

import pytest
import torch
from torchvision.models import resnet18

from ring.core.methods import METHODS
from ring.engine.encoder import (
    LAB_HIGH,
    LAB_LOW,
    Encoder,
    LabEncoder,
    export_trunks,
    lab_views,
    load_feature_extractor,
    load_trunk,
    save_trunks,
    torchvision_state_dict,
)


def test_export_is_torchvision_resnet18_without_fc():
    encoder = Encoder()
    result = resnet18().load_state_dict(torchvision_state_dict(encoder), strict=False)
    assert sorted(result.missing_keys) == ["fc.bias", "fc.weight"]
    assert result.unexpected_keys == []


def test_feature_map_and_normalised_output():
    encoder = Encoder().eval()
    x = torch.randn(2, 3, 224, 224)
    assert encoder.feature_map(x).shape == (2, 512, 7, 7)
    out = encoder(x)
    assert out.shape == (2, 128)
    assert torch.allclose(out.norm(dim=1), torch.ones(2), atol=1e-5)


def test_mlp_head_option_and_unknown_head():
    assert isinstance(Encoder(head="mlp").head, torch.nn.Sequential)
    with pytest.raises(ValueError, match="Unknown head 'conv'"):
        Encoder(head="conv")


def test_loading_a_foreign_state_dict_names_the_keys():
    state = torchvision_state_dict(Encoder())
    state["extra.weight"] = torch.zeros(1)
    del state["layer4.1.bn2.bias"]
    with pytest.raises(
        ValueError, match=r"missing=\['fc.bias', 'fc.weight', 'layer4.1.bn2.bias'\] unexpected=\['extra.weight'\]"
    ):
        load_trunk(state)


def test_load_trunk_reproduces_encoder_features():
    encoder = Encoder().eval()
    trunk = load_trunk(torchvision_state_dict(encoder)).eval()
    from ring.engine.encoder import trunk_feature_map

    x = torch.randn(1, 3, 64, 64)
    assert torch.equal(trunk_feature_map(trunk, x), encoder.feature_map(x))


def test_precision_options_leave_the_cpu_path_unchanged():
    from ring.engine.encoder import Precision, resolve_precision

    assert resolve_precision("auto", "auto", torch.device("cpu")) == (False, False)
    assert resolve_precision("auto", "auto", torch.device("cuda")) == (True, True)
    assert resolve_precision("auto", "auto", torch.device("cuda"), bn_groups=8) == (True, False)  # NCHW: no copies
    torch.manual_seed(0)
    plain = Encoder()
    wrapped = Precision(Encoder(), *resolve_precision("auto", "auto", torch.device("cpu")))
    wrapped.module.load_state_dict(plain.state_dict())
    x = torch.randn(4, 3, 32, 32)
    out_plain, out_wrapped = plain(x), wrapped(x)
    assert torch.equal(out_plain, out_wrapped)
    out_plain.sum().backward()
    out_wrapped.sum().backward()
    for (name, a), b in zip(plain.named_parameters(), wrapped.module.parameters(), strict=True):
        assert torch.equal(a.grad, b.grad), name


def test_bf16_and_channels_last_keep_fp32_embeddings():
    from ring.engine.encoder import Precision

    torch.manual_seed(0)
    plain = Encoder().eval()
    fast = Precision(Encoder().eval(), bf16=True, channels_last=True)
    fast.module.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, 32, 32)
    out = fast(x)
    assert out.dtype == torch.float32
    assert torch.allclose(out, plain(x), atol=0.05)  # bf16 network, same function
    with pytest.raises(ValueError, match="Unknown precision 'fp16'"):
        from ring.engine.encoder import resolve_precision

        resolve_precision("fp16", "auto", torch.device("cpu"))


def test_lab_views_of_known_colours():
    mean, std = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
    white, black = (torch.ones(1, 3, 2, 2) - 0.5) / 0.25, (torch.zeros(1, 3, 2, 2) - 0.5) / 0.25
    (l_w, ab_w), (l_b, _) = lab_views(white, mean, std), lab_views(black, mean, std)
    assert torch.allclose(l_w, torch.ones_like(l_w), atol=1e-4) and torch.allclose(
        l_b, -torch.ones_like(l_b), atol=1e-4
    )
    # grey has a = b = 0, i.e. the middle of each channel's sRGB range mapped onto [-1, 1]
    grey_ab = torch.tensor(
        [(0 - (lo + hi) / 2) / ((hi - lo) / 2) for lo, hi in zip(LAB_LOW[1:], LAB_HIGH[1:], strict=True)]
    )
    assert torch.allclose(ab_w[0, :, 0, 0], grey_ab, atol=1e-3)
    pure_blue = (torch.tensor([0.0, 0.0, 1.0]).view(1, 3, 1, 1) - 0.5) / 0.25
    assert torch.allclose(lab_views(pure_blue, mean, std)[1].flatten()[1], torch.tensor(-1.0), atol=1e-3)  # b's low end


def test_cmc_features_concatenate_the_l_and_ab_trunks(tmp_path):
    torch.manual_seed(0)
    cmc = LabEncoder("linear", 128, mean=(0.5,) * 3, std=(0.25,) * 3).eval()
    files = export_trunks(cmc)
    assert sorted(files) == ["encoder.pt", "encoder_ab.pt"]
    save_trunks(files, tmp_path)
    extractor = load_feature_extractor(tmp_path / "encoder.pt", METHODS["CMC"].encoder_files, (0.5,) * 3, (0.25,) * 3)
    x = torch.randn(2, 3, 64, 64)
    lum, ab = lab_views(x, (0.5,) * 3, (0.25,) * 3)
    with torch.no_grad():
        expected = torch.cat([cmc.l.feature_map(lum), cmc.ab.feature_map(ab)], dim=1)
        assert torch.allclose(extractor(x), expected, atol=1e-5)
    assert expected.shape == (2, 1024, 2, 2) and "concatenated" in extractor.description
    (tmp_path / "encoder_ab.pt").unlink()
    with pytest.raises(Exception, match="encoder_ab.pt does not exist"):
        load_feature_extractor(tmp_path / "encoder.pt", METHODS["CMC"].encoder_files, (0.5,) * 3, (0.25,) * 3)
    with pytest.raises(ValueError, match="does not fit resnet18"):  # an L trunk is not an RGB trunk
        load_feature_extractor(tmp_path / "encoder.pt", METHODS["IR"].encoder_files, (0.5,) * 3, (0.25,) * 3)


def test_compile_auto_compiles_on_cuda_only_and_unknown_settings_fail():
    from ring.engine.encoder import resolve_compile

    assert [resolve_compile(s, torch.device(d)) for s, d in (("auto", "cpu"), ("off", "cuda"), ("on", "cpu"))] == [
        False,
        False,
        True,
    ]
    with pytest.raises(ValueError, match="Unknown compile 'yes'; choose auto, on or off"):
        resolve_compile("yes", torch.device("cpu"))


def test_a_compiled_network_keeps_its_keys_and_its_copies_run_their_own_weights():
    """A checkpoint (MoCo's key encoder is a copy of the network) must load whatever the compile setting."""
    from ring.engine.encoder import Precision

    plain, compiled = (
        Precision(torch.nn.Linear(2, 2), bf16=False, channels_last=False, compile_=c) for c in (False, True)
    )
    assert compiled.state_dict().keys() == plain.state_dict().keys() == {"module.weight", "module.bias"}
    x = torch.ones(1, 2)
    compiled(x)
    copy_ = copy.deepcopy(compiled)
    with torch.no_grad():
        copy_.module.weight.zero_()
        copy_.module.bias.fill_(3.0)
    out = copy_(x)
    assert torch.equal(out, torch.full((1, 2), 3.0)) and out.grad_fn.name() == "CompiledFunctionBackward"
    assert not torch.equal(compiled(x), out)
