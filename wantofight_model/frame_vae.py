"""A per-frame autoencoder: diffusers' 2D `AutoencoderKL` applied to each frame of a video.

No time compression: frames (B, 3, T, H, W) in [-1, 1] with any T give latents (B, z, T, H/s, W/s),
s = 4 or 8, one latent frame per pixel frame, so each key row gets a latent frame of its own and a
frame's latent depends on that frame alone (no feature cache, nothing to drift over a long stream).
The game VAE comparison in docs/model.md ("A per-frame autoencoder") measured it against the Wan layout.

`FrameAutoencoder` keeps `AutoencoderKL`'s weights, config and folder format (`save_pretrained` /
`from_pretrained`, `latents_mean` / `latents_std` in its config) and only folds time into the batch,
so the game VAE's trainer, its loss and its statistics take it as they take `AutoencoderKLWan`.
"""

from __future__ import annotations

import torch

from wantofight_model.vae import LatentVAE


def _autoencoder_kl():
    try:
        from diffusers import AutoencoderKL
        from diffusers.models.autoencoders.vae import DecoderOutput, DiagonalGaussianDistribution
        from diffusers.models.modeling_outputs import AutoencoderKLOutput
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("the frame autoencoder needs diffusers: pip install 'wantofight[model]'") from err
    return AutoencoderKL, DecoderOutput, DiagonalGaussianDistribution, AutoencoderKLOutput


_AutoencoderKL, _DecoderOutput, _Gaussian, _EncoderOutput = _autoencoder_kl()

PIECE = 32
"""Frames per call of the 2D network outside training: memory stays that of 32 frames however long
the video (a 60-s benchmark case is 3,600 frames)."""


def _fold(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(B, C, T, H, W) -> (B T, C, H, W) and B."""
    B, C, T, H, W = x.shape
    return x.transpose(1, 2).reshape(B * T, C, H, W), B


def _unfold(x: torch.Tensor, batch: int) -> torch.Tensor:
    """(B T, C, H, W) -> (B, C, T, H, W)."""
    BT, C, H, W = x.shape
    return x.reshape(batch, BT // batch, C, H, W).transpose(1, 2)


class FrameAutoencoder(_AutoencoderKL):
    """`AutoencoderKL` whose `encode` / `decode` take videos (B, C, T, H, W) as well as images."""

    def _pieces(self, fn, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() or x.shape[0] <= PIECE:
            return fn(x)
        return torch.cat([fn(piece) for piece in x.split(PIECE)])

    def encode(self, x: torch.Tensor, return_dict: bool = True):
        if x.ndim != 5:
            return super().encode(x, return_dict=return_dict)
        flat, batch = _fold(x)
        moments = _unfold(self._pieces(self._encode, flat), batch)
        posterior = _Gaussian(moments)  # splits mean / logvar on dim 1, the channels, in 5D too
        return _EncoderOutput(latent_dist=posterior) if return_dict else (posterior,)

    def decode(self, z: torch.Tensor, return_dict: bool = True, generator=None):
        if z.ndim != 5:
            return super().decode(z, return_dict=return_dict)
        flat, batch = _fold(z)
        frames = _unfold(self._pieces(lambda piece: self._decode(piece).sample, flat), batch)
        return _DecoderOutput(sample=frames) if return_dict else (frames,)


def frame_autoencoder(base_dim: int, dim_mult: tuple[int, ...], num_res_blocks: int, z_dim: int,
                      norm_groups: int) -> FrameAutoencoder:
    """A random-init `FrameAutoencoder`: len(dim_mult) stages of `base_dim x mult` channels, each but the last
    halving the resolution (4 stages: 8x), `num_res_blocks` ResNet blocks per stage, GroupNorm of
    `norm_groups`, a self-attention block at the latent resolution."""
    channels = tuple(base_dim * m for m in dim_mult)
    return FrameAutoencoder(
        in_channels=3, out_channels=3, block_out_channels=channels,
        down_block_types=("DownEncoderBlock2D",) * len(channels), up_block_types=("UpDecoderBlock2D",) * len(channels),
        layers_per_block=num_res_blocks, latent_channels=z_dim, norm_num_groups=norm_groups,
        latents_mean=[0.0] * z_dim, latents_std=[1.0] * z_dim, scaling_factor=1.0, force_upcast=False)


class FrameVAE(LatentVAE):
    """Normalising wrapper around `FrameAutoencoder` (no time compression)."""

    time_factor = 1

    @torch.no_grad()
    def encode(self, frames: torch.Tensor) -> torch.Tensor:
        """frames (B, 3, T, H, W) in [-1, 1] -> normalised latents (B, z, T, H/s, W/s) (posterior mode)."""
        dtype = next(self.autoencoder.parameters()).dtype
        return self.normalize(self.autoencoder.encode(frames.to(dtype)).latent_dist.mode())

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Normalised latents (B, z, F, h, w) -> frames (B, 3, F, s h, s w) in [-1, 1]."""
        dtype = next(self.autoencoder.parameters()).dtype
        return self.autoencoder.decode(self.denormalize(latents).to(dtype)).sample.clamp(-1.0, 1.0)

    def streaming_decoder(self) -> "FrameStream":
        return FrameStream(self.decode)

    def streaming_encoder(self) -> "FrameStream":
        return FrameStream(self.encode)


class FrameStream:
    """Pieces of any length, one after the other: each frame is coded alone, so a stream is its pieces'
    codes side by side (the same interface as the Wan VAE's cached streams)."""

    def __init__(self, code):
        self._code = code

    def encode(self, frames: torch.Tensor) -> torch.Tensor:
        return self._code(frames)

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        return self._code(latents)
