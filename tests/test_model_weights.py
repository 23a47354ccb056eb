"""The Wan2.1 weight loader (diffusers and original layouts) and faithfulness to Wan2.1-1.3B."""

import pytest
import torch

from model_helpers import one_torch_thread  # noqa: F401  (autouse fixture)
from model_helpers import latents, tiny_config
from wantofight_model.dit import WanToFightDiT
from wantofight_model.presets import get_preset
from wantofight_model.weights import diffusers_to_original, is_dropped, load_wan_weights

diffusers = pytest.importorskip("diffusers")

# The published diffusers config of Wan-AI/Wan2.1-T2V-1.3B-Diffusers (transformer/config.json).
WAN_1_3B_CONFIG = dict(patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128, in_channels=16,
                       out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=8960, num_layers=30,
                       cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=None,
                       added_kv_proj_dim=None, rope_max_seq_len=1024)


def _tiny_diffusers(seed=0):
    c = tiny_config()
    torch.manual_seed(seed)
    return diffusers.WanTransformer3DModel(
        patch_size=c.patch_size, num_attention_heads=c.num_heads, attention_head_dim=c.head_dim,
        in_channels=16, out_channels=16, text_dim=32, freq_dim=c.freq_dim, ffn_dim=c.ffn_dim,
        num_layers=c.num_blocks, cross_attn_norm=True)


@pytest.fixture(scope="module")
def diffusers_checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wan-tiny") / "transformer"
    reference = _tiny_diffusers()
    reference.save_pretrained(folder)
    return folder.parent, reference


def test_loads_diffusers_layout_tensor_for_tensor(diffusers_checkpoint):
    folder, reference = diffusers_checkpoint
    dit = WanToFightDiT(tiny_config())
    report = load_wan_weights(dit, folder)
    assert report.ok and report.layout == "diffusers"
    ours = dit.state_dict()
    for name, tensor in reference.state_dict().items():
        mapped = diffusers_to_original(name)
        if is_dropped(mapped):
            continue
        assert torch.equal(ours[mapped], tensor), name
    assert len(report.loaded) == len(dit.backbone_state_dict())
    # text path: embedding (2 linears) + per block cross-attention (q/k/v/o + 2 norms) and its norm
    assert any(k.startswith("text_embedding.") for k in report.dropped)
    assert all(is_dropped(k) for k in report.dropped)


def test_backbone_matches_diffusers_numerically(diffusers_checkpoint):
    folder, reference = diffusers_checkpoint
    dit = WanToFightDiT(tiny_config())
    load_wan_weights(dit, folder)
    ref = _tiny_diffusers()
    ref.load_state_dict(reference.state_dict())
    with torch.no_grad():  # silence the text cross-attention we drop, then the two must agree
        for block in ref.blocks:
            block.attn2.to_out[0].weight.zero_()
            block.attn2.to_out[0].bias.zero_()
        x, t = latents(3, batch=1), torch.tensor([700.0])
        expected = ref(x, t, torch.randn(1, 5, 32)).sample
        assert (dit(x, t) - expected).abs().max() < 1e-5


def test_original_layout_file(tmp_path, diffusers_checkpoint):
    from safetensors.torch import save_file

    _, reference = diffusers_checkpoint
    original = {diffusers_to_original(k): v.contiguous() for k, v in reference.state_dict().items()}
    assert "blocks.0.self_attn.q.weight" in original and "head.modulation" in original
    save_file(original, str(tmp_path / "wan.safetensors"))
    dit = WanToFightDiT(tiny_config())
    report = load_wan_weights(dit, tmp_path / "wan.safetensors")
    assert report.ok and report.layout == "original"
    assert torch.equal(dit.state_dict()["blocks.1.ffn.0.weight"], reference.state_dict()["blocks.1.ffn.net.0.proj.weight"])


def test_strict_lists_missing_unexpected_and_mismatched(diffusers_checkpoint):
    _, reference = diffusers_checkpoint
    state = dict(reference.state_dict())
    del state["blocks.0.attn1.to_q.weight"]
    state["blocks.0.attn1.mystery.weight"] = torch.zeros(3)
    state["proj_out.bias"] = torch.zeros(7)
    dit = WanToFightDiT(tiny_config())
    with pytest.raises(ValueError) as err:
        load_wan_weights(dit, state, strict=True)
    message = str(err.value)
    assert "blocks.0.self_attn.q.weight" in message and "mystery" in message and "head.head.bias" in message
    report = load_wan_weights(dit, state, strict=False)
    assert report.missing == ["blocks.0.self_attn.q.weight"]  # a mismatch is reported once, as a mismatch
    assert report.unexpected == ["blocks.0.attn1.mystery.weight"]
    assert report.mismatched == ["head.head.bias: (7,) vs (64,)"]


def test_wan_1_3b_backbone_has_every_shape_of_diffusers_wan():
    with torch.device("meta"):
        reference = diffusers.WanTransformer3DModel(**WAN_1_3B_CONFIG)
        ours = WanToFightDiT(get_preset("wan-1.3b"))
    ref_shapes = {diffusers_to_original(k): tuple(v.shape) for k, v in reference.state_dict().items()}
    backbone = {k: tuple(v.shape) for k, v in ours.backbone_state_dict().items()}
    for name, shape in backbone.items():
        assert ref_shapes.get(name) == shape, name
    dropped = sorted(k for k in ref_shapes if k not in backbone)
    assert all(is_dropped(k) for k in dropped)
    # what we drop, listed: text embedding + per-block text cross-attention and its norm
    assert {k.split(".")[0] for k in dropped if not k.startswith("blocks.")} == {"text_embedding"}
    assert {k.split(".")[2] for k in dropped if k.startswith("blocks.")} == {"cross_attn", "norm3"}
    n_ref = sum(v.numel() for v in reference.parameters())
    n_dropped = sum(v.numel() for k, v in reference.state_dict().items() if is_dropped(diffusers_to_original(k)))
    assert sum(v.numel() for v in ours.backbone_state_dict().values()) == n_ref - n_dropped
    assert abs(n_ref - 1.419e9) < 1e6  # Wan2.1-T2V-1.3B: 1.419 B with the text path (docs/model.md)
