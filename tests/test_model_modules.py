"""Shapes through every module, determinism, per-frame timesteps, save/load, configs and presets."""

import dataclasses

import pytest
import torch

from model_helpers import one_torch_thread  # noqa: F401  (autouse fixture)
from model_helpers import B, P, frames_for, keys, latents, ref_images, ref_tokens, tiny_config, tiny_model
from wantofight_model.config import ModelConfig, VAEConfig
from wantofight_model.keyboard import KeyboardEncoder, KeyboardInjection
from wantofight_model.kv_cache import RollingKVCache
from wantofight_model.player_association import PlayerAssociation
from wantofight_model.presets import PRESETS, get_preset
from wantofight_model.rope import apply_rope, rope_angles, rope_split
from wantofight_model.scheduler import FlowMatchScheduler
from wantofight_model.weights import load_model, read_config, save_model


# ---- configs and presets ----

def test_presets_registry_and_derived_sizes():
    assert set(PRESETS) == {"tiny", "wan-1.3b"}
    wan = get_preset("wan-1.3b")
    assert (wan.num_blocks, wan.dim, wan.num_heads, wan.ffn_dim, wan.patch_size) == (30, 1536, 12, 8960, (1, 2, 2))
    assert (wan.width, wan.height, wan.chunk_frames, wan.chunk_latent_frames) == (512, 384, 8, 2)
    assert wan.injection_blocks == (2, 5, 8, 11, 14, 17, 20, 23, 26, 29)  # after every 3rd block: 10 points
    assert (wan.keyboard_window, wan.context_chunks, wan.tokens_per_frame) == (3, 2, 768)
    assert wan.head_dim == 128 and rope_split(128) == (44, 42, 42)


def test_unknown_preset_lists_valid_ones():
    with pytest.raises(ValueError, match="tiny, wan-1.3b"):
        get_preset("huge")


@pytest.mark.parametrize("bad, message", [
    (dict(dim=100, num_heads=12), "divisible by num_heads"),
    (dict(height=100), "multiples of 16"),
    (dict(chunk_frames=6), "multiple of 4"),
    (dict(patch_size=(2, 2, 2)), "patch_size"),
    (dict(num_blocks=2, keyboard_every=3), "keyboard_every=3"),
    (dict(vae=VAEConfig(z_dim=8)), "latent_channels"),
])
def test_config_validation_names_the_bad_value(bad, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(ModelConfig(), **bad)


def test_config_dict_round_trip():
    config = get_preset("tiny")
    assert ModelConfig.from_dict(config.to_dict()) == config


# ---- module shapes ----

def test_keyboard_encoder_aligns_frames_to_latents():
    enc = KeyboardEncoder(16, 8)
    assert enc(torch.zeros(B, 17, P, 16)).shape == (B, P, 5, 8)  # 1 + 4*4 frames from frame 0 -> 5 latents
    assert enc(torch.zeros(B, 8, P, 16)).shape == (B, P, 2, 8)  # one continuation chunk -> 2 latents
    with pytest.raises(ValueError, match="1 \\+ 4k"):
        enc(torch.zeros(B, 6, P, 16))
    # latent f depends on frames 4f-3 .. 4f only: change frame 6 (latent 2) and only latent 2 moves
    k = keys(17)
    k2 = k.clone()
    k2[:, 6] = 1 - k2[:, 6]
    diff = (enc(k) - enc(k2)).abs().sum(dim=(0, 1, 3))
    assert diff[2] > 0 and diff[[0, 1, 3, 4]].eq(0).all()
    # streaming: chunk-by-chunk encoding equals encoding the whole stream (up to conv blocking order)
    whole = enc(k)
    parts = torch.cat([enc(k[:, :1]), enc(k[:, 1:9]), enc(k[:, 9:17])], dim=2)
    torch.testing.assert_close(parts, whole, atol=1e-6, rtol=1e-6)


def test_without_time_compression_each_latent_frame_receives_exactly_its_own_key_row():
    """A per-frame autoencoder (`vae.kind="frame"`) gives every pixel frame a latent frame, so the keyboard
    encoder groups nothing: latent f is a function of key row f alone (docs/contracts.md, "Frame/key
    alignment"), from frame 0 or any continuation, and chunk by chunk equals the whole stream."""
    enc = KeyboardEncoder(16, 8, time_factor=1)
    k = keys(17)
    whole = enc(k)
    assert whole.shape == (B, P, 17, 8)
    for row in (1, 6, 9, 16):
        flipped = k.clone()
        flipped[:, row] = 1 - flipped[:, row]
        moved = (enc(k) - enc(flipped)).abs().sum(dim=(0, 1, 3))
        assert moved[row] > 0 and moved[[f for f in range(17) if f != row]].eq(0).all(), row
    same_row = torch.zeros(B, 17, P, 16)
    same_row[:, 3, 0, 5] = 1
    single = enc(same_row[:, 3:4])  # row 3 alone gives latent 3 of the stream
    torch.testing.assert_close(enc(same_row)[:, :, 3:4], single)
    parts = torch.cat([enc(k[:, :1]), enc(k[:, 1:9]), enc(k[:, 9:17])], dim=2)
    torch.testing.assert_close(parts, whole, atol=1e-6, rtol=1e-6)
    with pytest.raises(ValueError, match="4 key rows per latent frame or 1, got 2"):
        KeyboardEncoder(16, 8, time_factor=2)


def test_the_dit_takes_its_key_grouping_from_the_autoencoder():
    from wantofight_model.config import VAEConfig

    frame = tiny_config(vae=VAEConfig(kind="frame", base_dim=16, dim_mult=(1, 2, 2, 2), num_res_blocks=1))
    assert (frame.vae_time_factor, frame.chunk_latent_frames, frame.tokens_per_chunk) == (1, 8, 8 * 16)
    assert tiny_model(vae=frame.vae).dit.keyboard_encoder.time_factor == 1
    assert tiny_model().dit.keyboard_encoder.time_factor == 4
    saved = {**get_preset("tiny").to_dict(), "vae_time_factor": 4, "vae_space_factor": 8}  # as configs were saved
    assert ModelConfig.from_dict(saved) == get_preset("tiny")


def test_injection_and_association_shapes():
    inj = KeyboardInjection(64, 32, 4)
    x = torch.randn(B, 5 * 16, 64)
    assert inj(x, torch.randn(B, P, 5, 32), None).shape == x.shape
    assoc = PlayerAssociation(32, 64, 2)
    assert assoc(torch.randn(B, P, 5, 32), ref_tokens()).shape == (B, P, 5, 32)


def test_reference_encoder_shapes_and_frozen():
    model = tiny_model()
    tokens = model.encode_references(ref_images())
    assert tokens.shape == (B, P, 16, 64)
    assert not any(p.requires_grad for p in model.reference_encoder.parameters())
    model.train()
    assert not model.reference_encoder.training


def test_rope_is_relative():
    cos, sin = rope_angles(3, 2, 2, 16)
    q, k = torch.randn(1, 12, 1, 16), torch.randn(1, 12, 1, 16)
    cos2, sin2 = rope_angles(3, 2, 2, 16, frame_offset=7)
    s1 = apply_rope(q, cos, sin)[0, :, 0] @ apply_rope(k, cos, sin)[0, :, 0].T
    s2 = apply_rope(q, cos2, sin2)[0, :, 0] @ apply_rope(k, cos2, sin2)[0, :, 0].T
    torch.testing.assert_close(s1, s2, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("attention", ["bidirectional", "block_causal"])
def test_forward_shapes_and_determinism(attention):
    model = tiny_model()
    x, k, r = latents(5), keys(frames_for(5)), ref_images()
    out = model(x, torch.tensor([100.0, 900.0]), k, r, attention=attention)
    assert out.shape == x.shape
    assert torch.equal(out, model(x, torch.tensor([100.0, 900.0]), k, r, attention=attention))
    torch.manual_seed(0)
    again = tiny_model()
    assert torch.equal(out, again(x, torch.tensor([100.0, 900.0]), k, r, attention=attention))


def test_per_frame_and_per_chunk_timesteps():
    model = tiny_model()
    x, k, r = latents(5), keys(17), ref_tokens()
    per_frame = torch.tensor([[0.0, 250, 250, 900, 900], [10, 20, 20, 30, 30]])
    per_chunk = torch.tensor([[0.0, 250, 900], [10, 20, 30]])
    out = model(x, per_frame, k, r, attention="block_causal")
    assert out.shape == x.shape
    assert torch.equal(out, model(x, per_chunk, k, r, attention="block_causal"))
    same = model(x, torch.full((B, 5), 500.0), k, r)
    assert torch.equal(same, model(x, torch.full((B,), 500.0), k, r))
    with pytest.raises(ValueError, match="per chunk"):
        model(x, torch.zeros(B, 4), k, r)


def test_backward_and_gradient_checkpointing_equivalence():
    model = tiny_model().train()
    x, k, r = latents(5), keys(17), ref_tokens()
    grads = []
    for flag in (False, True):
        model.dit.gradient_checkpointing = flag
        model.zero_grad()
        out = model(x, torch.tensor([300.0, 600.0]), k, r, attention="block_causal")
        out.square().mean().backward()
        grads.append({n: p.grad.clone() for n, p in model.dit.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 0
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], atol=1e-6, rtol=1e-5)


def test_safetensors_round_trip_exact(tmp_path):
    model = tiny_model()
    path = tmp_path / "model.safetensors"
    save_model(model, path, model.config)
    torch.manual_seed(123)
    other = tiny_model(seed=123)
    load_model(other, path)
    for (name, a), (_, b) in zip(model.state_dict().items(), other.state_dict().items()):
        torch.testing.assert_close(a, b, atol=0, rtol=0, msg=name)
    x, k, r = latents(3), keys(9), ref_images()
    assert torch.equal(model(x, 500.0, k, r), other(x, 500.0, k, r))
    assert read_config(path) == model.config


# ---- cache and scheduler ----

def test_cache_is_sized_from_config():
    config = get_preset("tiny")
    cache = RollingKVCache.from_config(config, batch_size=B)
    assert cache.k.shape == (config.num_blocks, B, 2 * config.tokens_per_chunk, config.num_heads, config.head_dim)
    assert cache.keyboard.shape == (B, P, config.keyboard_window - 1, config.keyboard_dim)


def test_scheduler_shift_and_euler_reaches_clean_sample():
    sched = FlowMatchScheduler(shift=5.0)
    torch.testing.assert_close(sched.sigmas(4), torch.tensor([1.0, 0.9375, 5 / 6, 0.625, 0.0]))
    x0, noise = torch.randn(3, 4), torch.randn(3, 4)
    sig = sched.sigmas(4)
    for sampler in ("euler", "x0_renoise"):
        x = noise.clone()
        for i in range(4):  # the exact velocity carries x_sigma to x0 whatever the step sizes
            v = sched.velocity_target(x0, (x - (1 - sig[i]) * x0) / sig[i])
            x = sched.step(x, v, float(sig[i]), float(sig[i + 1]), sampler, noise=torch.randn(3, 4))
        torch.testing.assert_close(x, x0, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="euler"):
        sched.step(x, x, 1.0, 0.5, "heun")


def test_half_precision_keeps_timestep_path_in_float32():
    model = tiny_model().half_precision(torch.bfloat16)
    assert model.dit.blocks[0].self_attn.q.weight.dtype == torch.bfloat16
    assert model.dit.time_embedding[0].weight.dtype == torch.float32
    assert model.dit.blocks[0].modulation.dtype == torch.float32
    x = latents(3).to(torch.bfloat16)
    out = model(x, torch.tensor([250.0, 750.0]), keys(9).to(torch.bfloat16), ref_images().to(torch.bfloat16))
    assert out.dtype == torch.bfloat16 and out.shape == x.shape and torch.isfinite(out).all()
    cache = model.new_cache(2)
    assert cache.k.dtype == torch.bfloat16
