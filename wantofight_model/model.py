"""`WanToFight`: the denoiser plus its frozen reference-image encoder, built from a config.

The VAE lives apart (`vae.py`): training usually runs on cached latents, and the generator owns
the encode/decode around the denoiser.
"""

from __future__ import annotations

import torch
from torch import nn

from wantofight_model.config import ModelConfig
from wantofight_model.dit import WanToFightDiT
from wantofight_model.kv_cache import RollingKVCache
from wantofight_model.player_association import ReferenceEncoder


class WanToFight(nn.Module):
    """Denoiser (`dit`, trainable) + frozen CLIP reference encoder (`reference_encoder`)."""

    def __init__(self, config: ModelConfig, reference_encoder: ReferenceEncoder):
        super().__init__()
        self.config = config
        self.dit = WanToFightDiT(config)
        self.reference_encoder = reference_encoder

    @classmethod
    def from_config(cls, config: ModelConfig, device: torch.device | str = "cpu") -> "WanToFight":
        """Build on `device` ("meta" sizes the model without allocating it)."""
        with torch.device(device):
            return cls(config, ReferenceEncoder.from_config(config, device=device))

    def encode_references(self, references: torch.Tensor) -> torch.Tensor:
        """Reference images (B, P, 3, h, w) in [-1, 1] -> CLIP tokens (B, P, N, C); tokens pass through."""
        if references.ndim == 5:
            return self.reference_encoder(references).to(self.dit.patch_embedding.weight.dtype)
        if references.ndim == 4:
            return references
        raise ValueError(f"references of shape {tuple(references.shape)}: expected images (B, P, 3, h, w) "
                         "or CLIP tokens (B, P, N, C)")

    def forward(self, latents: torch.Tensor, timesteps: torch.Tensor | float, keys: torch.Tensor | None = None,
                references: torch.Tensor | None = None, attention: str = "bidirectional",
                cache: RollingKVCache | None = None, write_cache: bool = False) -> torch.Tensor:
        """Flow-matching velocity (B, C, F, H, W); see `WanToFightDiT.forward` for the arguments.

        `references` are images (B, P, 3, h, w) or precomputed tokens (B, P, N, C); the trainer
        should precompute tokens once per clip, since the encoder is frozen.
        """
        ref_tokens = self.encode_references(references) if references is not None else None
        return self.dit(latents, timesteps, keys, ref_tokens, attention, cache, write_cache)

    def half_precision(self, dtype: torch.dtype = torch.bfloat16) -> "WanToFight":
        """Inference precision: everything in `dtype` except the DiT's timestep path (see the DiT)."""
        self.reference_encoder.to(dtype)
        self.dit.half_precision(dtype)
        return self

    def new_cache(self, batch_size: int) -> RollingKVCache:
        weight = self.dit.patch_embedding.weight
        return RollingKVCache.from_config(self.config, batch_size, weight.device, weight.dtype)
