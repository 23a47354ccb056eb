"""A head with fewer inputs than outputs (`dim` < C pt ph pw) reaches only `dim` directions of each token's values:
a sampler starting from noise leaves the noise in the others, and the rollout sets them to 0 (`WanToFightDiT.reachable`,
docs/model.md "The head's rank")."""

from __future__ import annotations

import torch
from model_helpers import keys, latents, ref_images, tiny_model
from model_helpers import one_torch_thread  # noqa: F401

from wantofight_model.generate import StreamingGenerator

NARROW = {"patch_size": (1, 4, 4)}
"""The tiny preset (dim 64) with 4x4 patches of 16 channels: 256 values a token."""


def head_only_velocity(model, z: torch.Tensor) -> torch.Tensor:
    """The DiT's velocity with the head's bias at 0: only what the head's weight reaches."""
    with torch.no_grad():
        model.dit.head.head.bias.zero_()
        t = torch.full((z.shape[0], z.shape[2]), 500.0)
        return model.dit(z, t, keys(1 + 4 * (z.shape[2] - 1), batch=z.shape[0]), None, "block_causal")


def test_reachable_keeps_what_the_head_outputs_and_drops_the_rest():
    model = tiny_model(**NARROW)
    z = latents(3)
    v = head_only_velocity(model, z)
    assert torch.allclose(model.dit.reachable(v), v, atol=1e-4)  # the head's own output: kept, token layout right
    noise = torch.randn(z.shape, generator=torch.Generator().manual_seed(5))
    kept = model.dit.reachable(noise)
    # 64 of 256 directions a token: a quarter of white noise's energy
    assert 0.2 < kept.pow(2).mean() / noise.pow(2).mean() < 0.3
    assert torch.allclose(model.dit.reachable(kept), kept, atol=1e-4)  # a projection


def test_a_head_as_wide_as_its_outputs_reaches_everything():
    model = tiny_model()  # dim 64, 2x2 patches of 16 channels
    z = latents(3)
    assert model.dit.reachable(z) is z


def test_generated_chunks_hold_no_noise_the_head_cannot_remove():
    model = tiny_model(**NARROW)
    B = 1
    prompt = latents(1, batch=B)
    k = keys(17, batch=B)
    with torch.no_grad():
        chunks = list(StreamingGenerator(model).generate_latents(
            prompt, (k[:, 1 + 8 * c:9 + 8 * c] for c in range(2)), ref_images(batch=B), 4, prompt_keys=k[:, :1],
            generator=torch.Generator().manual_seed(0)))
    out = torch.cat(chunks, dim=2)
    unreachable = out - model.dit.reachable(out)
    assert unreachable.abs().max() < 1e-4, f"noise left outside the head's reach: std {unreachable.std():.3f}"
