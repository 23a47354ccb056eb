"""Shared builders for the `tests/test_model_*.py` suite: the tiny preset on CPU, float32."""

from __future__ import annotations

import pytest
import torch

from wantofight_model.model import WanToFight
from wantofight_model.presets import get_preset

B, P, N_REF = 2, 2, 16


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny tensors gain nothing from intra-op threads, and on a shared 2-core machine OpenMP
    spinning makes them ~8x slower; test modules import this fixture to run single-threaded."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def tiny_config(**overrides):
    return get_preset("tiny", **overrides)


def open_all_paths(model: WanToFight, seed: int = 0, gate_bias: float | None = None) -> WanToFight:
    """Give the zero-initialised outputs (keyboard injection, association) random values, so the
    conditioning paths actually change the output (a trained model, in miniature)."""
    gen = torch.Generator().manual_seed(seed)
    dit = model.dit
    with torch.no_grad():
        for linear in [dit.association.o] + [inj.o for inj in dit.keyboard_injection]:
            linear.weight.copy_(torch.randn(linear.weight.shape, generator=gen) * 0.3)
            linear.bias.copy_(torch.randn(linear.bias.shape, generator=gen) * 0.1)
        if gate_bias is not None:
            for inj in dit.keyboard_injection:
                inj.gate.bias.fill_(gate_bias)
    return model


def tiny_model(seed: int = 0, opened: bool = True, **overrides) -> WanToFight:
    torch.manual_seed(seed)
    model = WanToFight.from_config(tiny_config(**overrides)).eval()
    return open_all_paths(model, seed) if opened else model


def latents(num_frames: int, seed: int = 1, batch: int = B) -> torch.Tensor:
    """(B, 16, F, 8, 8) for the tiny preset's 64x64 frames."""
    return torch.randn(batch, 16, num_frames, 8, 8, generator=torch.Generator().manual_seed(seed))


def keys(num_frames: int, seed: int = 2, batch: int = B) -> torch.Tensor:
    """(B, T, P, 16) random presses, row 0 all zeros (docs/contracts.md)."""
    k = (torch.rand(batch, num_frames, P, 16, generator=torch.Generator().manual_seed(seed)) > 0.7).float()
    k[:, 0] = 0
    return k


def ref_tokens(seed: int = 3, batch: int = B) -> torch.Tensor:
    """(B, P, N, C) reference tokens of the tiny CLIP width (64)."""
    return torch.randn(batch, P, N_REF, 64, generator=torch.Generator().manual_seed(seed))


def ref_images(seed: int = 4, batch: int = B) -> torch.Tensor:
    """(B, P, 3, 64, 64) in [-1, 1]."""
    return torch.rand(batch, P, 3, 64, 64, generator=torch.Generator().manual_seed(seed)) * 2 - 1


def frames_for(num_latent_frames: int) -> int:
    """Pixel frames of a stream starting at frame 0: T = 1 + 4 (F - 1)."""
    return 1 + 4 * (num_latent_frames - 1)
