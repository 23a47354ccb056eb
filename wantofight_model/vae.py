"""The game's autoencoders: the Wan2.1 VAE through diffusers' `AutoencoderKLWan` (4x in time, 8x or
4x in space) and the per-frame one of `frame_vae.py` (no time compression), behind one interface.

Frames are (B, 3, T, H, W) in [-1, 1]; for the Wan VAE T = 1 + 4k and latents are (B, 16, 1 + k, H/8, W/8),
normalised per channel with the `latents_mean` / `latents_std` of the VAE's config (as the Wan
pipelines do), so the DiT sees roughly unit-variance inputs. `time_factor` says how many frames a latent
frame holds after the first (4, or 1 for the per-frame autoencoder).

`StreamingDecoder` decodes a rollout chunk by chunk with the decoder's causal-conv feature cache
carried across chunks, which gives the same frames as decoding the whole latent video at once.
`build_vae(config)` and `load_vae_folder(path)` pick the class from `VAEConfig.kind` or the folder's
config.json.
"""

from __future__ import annotations

import importlib.util
import json

from pathlib import Path

import torch
from torch import nn

from wantofight_model.config import VAEConfig


def _autoencoder_class():
    try:
        from diffusers import AutoencoderKLWan
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("the Wan VAE needs diffusers: pip install 'wantofight[model]'") from err
    return AutoencoderKLWan


def _latent_channels(config) -> int:
    return config.z_dim if "z_dim" in config else config.latent_channels


class LatentVAE(nn.Module):
    """Normalising wrapper around a diffusers autoencoder whose config holds `latents_mean` / `latents_std`."""

    time_factor = 4

    def __init__(self, autoencoder: nn.Module):
        super().__init__()
        self.autoencoder = autoencoder
        cfg = autoencoder.config
        z = _latent_channels(cfg)
        mean = cfg.latents_mean or [0.0] * z
        std = cfg.latents_std or [1.0] * z
        self.register_buffer("latents_mean", torch.tensor(mean[:z]).view(1, z, 1, 1, 1), persistent=False)
        self.register_buffer("latents_std", torch.tensor(std[:z]).view(1, z, 1, 1, 1), persistent=False)

    @property
    def latent_channels(self) -> int:
        return _latent_channels(self.autoencoder.config)

    @property
    def space_factor(self) -> int:
        """Pixels per latent cell side: each stage but the last halves the resolution."""
        cfg = self.autoencoder.config
        return 2 ** (len(cfg.dim_mult if "dim_mult" in cfg else cfg.block_out_channels) - 1)

    def normalize(self, z: torch.Tensor) -> torch.Tensor:
        return (z - self.latents_mean.to(z)) / self.latents_std.to(z)

    def denormalize(self, z: torch.Tensor) -> torch.Tensor:
        return z * self.latents_std.to(z) + self.latents_mean.to(z)


def build_vae(config: VAEConfig, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> LatentVAE:
    """The autoencoder of `config`: random-init of its kind and size, or the folder `config.pretrained`
    (which must hold the kind and compression the config says, since the DiT is sized by them)."""
    if config.pretrained is not None:
        vae = load_vae_folder(config.pretrained, device, dtype)
        if (vae.time_factor, vae.space_factor) != (config.time_factor, config.space_factor):
            kind = "frame" if vae.time_factor == 1 else "wan"
            raise ValueError(f"model.vae.pretrained={config.pretrained} holds a {type(vae.autoencoder).__name__} "
                             f"({vae.time_factor}x in time, {vae.space_factor}x in space) but model.vae says "
                             f"{config.kind}, {config.time_factor}x / {config.space_factor}x: pass --set "
                             f"model.vae.kind={kind} and the matching model.vae.dim_mult")
        return vae
    if config.kind == "frame":
        from wantofight_model.frame_vae import FrameVAE, frame_autoencoder

        with torch.device(device):
            ae = frame_autoencoder(config.base_dim, config.dim_mult, config.num_res_blocks, config.z_dim,
                                   config.norm_groups)
        return FrameVAE(ae if dtype == torch.float32 else ae.to(dtype))
    return WanVAE.from_config(config, device, dtype)


def vae_folder_kind(path: str | Path) -> str:
    """"wan" or "frame": the class a VAE folder (or a repo root with `vae/`) was saved from."""
    path = Path(path)
    folder = path / "vae" if (path / "vae" / "config.json").exists() else path
    try:
        name = json.loads((folder / "config.json").read_text()).get("_class_name")
    except (OSError, ValueError):
        raise FileNotFoundError(f"no VAE at {path}: expected a diffusers folder with config.json "
                                "(AutoencoderKLWan or FrameAutoencoder)") from None
    if name == "FrameAutoencoder":
        return "frame"
    if name in ("AutoencoderKLWan", None):
        return "wan"
    raise ValueError(f"{folder / 'config.json'} holds a {name}; valid: AutoencoderKLWan, FrameAutoencoder")


def load_vae_folder(path: str | Path, device: torch.device | str = "cpu",
                    dtype: torch.dtype = torch.float32) -> LatentVAE:
    """A saved game VAE or the Wan2.1 VAE from a local diffusers folder, whichever class it holds."""
    if not Path(path).exists():
        raise FileNotFoundError(f"no VAE at {path}: give a folder saved by `wtf train vae` or the Wan2.1 VAE's "
                                "diffusers folder")
    if vae_folder_kind(path) == "frame":
        from wantofight_model.frame_vae import FrameAutoencoder, FrameVAE

        folder = Path(path) / "vae" if (Path(path) / "vae" / "config.json").exists() else Path(path)
        ae = FrameAutoencoder.from_pretrained(folder, torch_dtype=dtype,
                                              low_cpu_mem_usage=importlib.util.find_spec("accelerate") is not None)
        return FrameVAE(ae.to(device))
    return WanVAE.from_pretrained(path, device, dtype)


class WanVAE(LatentVAE):
    """Normalising wrapper around `AutoencoderKLWan`; its layers take the faster CPU kernels of
    cpu_kernels.py (the same frames, several times faster on the CPU)."""

    time_factor = 4

    def __init__(self, autoencoder: nn.Module):
        from wantofight_model.cpu_kernels import use_fast_cpu_kernels

        super().__init__(use_fast_cpu_kernels(autoencoder))

    @classmethod
    def from_config(cls, config: VAEConfig, device: torch.device | str = "cpu",
                    dtype: torch.dtype = torch.float32) -> "WanVAE":
        """Random-init VAE of the given size, or the Wan2.1 VAE from `config.pretrained` (a local folder)."""
        AutoencoderKLWan = _autoencoder_class()
        if config.pretrained is not None:
            return cls.from_pretrained(config.pretrained, device, dtype)
        with torch.device(device):
            autoencoder = AutoencoderKLWan(base_dim=config.base_dim, z_dim=config.z_dim,
                                           dim_mult=list(config.dim_mult), num_res_blocks=config.num_res_blocks,
                                           temperal_downsample=list(config.temperal_downsample),
                                           is_residual=config.is_residual)
        return cls(autoencoder if dtype == torch.float32 else autoencoder.to(dtype))

    @classmethod
    def from_pretrained(cls, path: str | Path, device: torch.device | str = "cpu",
                        dtype: torch.dtype = torch.float32) -> "WanVAE":
        """Load from a local Wan2.1 diffusers folder (the repo root with `vae/`, or the `vae/` folder)."""
        AutoencoderKLWan = _autoencoder_class()
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"no Wan VAE at {path}")
        subfolder = "vae" if (path / "vae" / "config.json").exists() else None
        # diffusers loads with low_cpu_mem_usage when `accelerate` is installed; without it, asking for
        # the plain load keeps it from printing a five-line warning at every load.
        low_memory = importlib.util.find_spec("accelerate") is not None
        autoencoder = AutoencoderKLWan.from_pretrained(path, subfolder=subfolder, torch_dtype=dtype,
                                                       low_cpu_mem_usage=low_memory)
        return cls(autoencoder.to(device))

    @torch.no_grad()
    def encode(self, frames: torch.Tensor) -> torch.Tensor:
        """frames (B, 3, 1 + 4k, H, W) in [-1, 1] -> normalised latents (B, 16, 1 + k, H/8, W/8) (posterior mode)."""
        if (frames.shape[2] - 1) % 4:
            raise ValueError(f"the Wan VAE needs 1 + 4k frames, got {frames.shape[2]}")
        dtype = next(self.autoencoder.parameters()).dtype
        posterior = self.autoencoder.encode(frames.to(dtype)).latent_dist
        return self.normalize(posterior.mode())

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Normalised latents (B, 16, F, h, w) -> frames (B, 3, 1 + 4 (F - 1), 8h, 8w) in [-1, 1]."""
        dtype = next(self.autoencoder.parameters()).dtype
        return self.autoencoder.decode(self.denormalize(latents).to(dtype)).sample

    def streaming_decoder(self) -> "StreamingDecoder":
        return StreamingDecoder(self)

    def streaming_encoder(self) -> "StreamingEncoder":
        return StreamingEncoder(self)


class StreamingEncoder:
    """Encode frames piece after piece, carrying the causal encoder's feature cache: the first piece
    is 1 frame (one latent frame), every later one 4k frames (k latent frames), and the latents equal
    `WanVAE.encode` of all the frames at once (tests). The benchmark's teacher-forced mode encodes a
    case's recorded chunks this way as the model reaches them; memory is that of one piece.
    """

    def __init__(self, vae: WanVAE):
        self.vae = vae
        self._feat_map = [None] * vae.autoencoder._cached_conv_counts["encoder"]
        self._started = False

    @torch.no_grad()
    def encode(self, frames: torch.Tensor) -> torch.Tensor:
        """frames (B, 3, T, H, W) in [-1, 1], T = 1 for the first piece and 4k after it -> normalised
        latents (B, 16, 1 or k, H/8, W/8) (posterior mode)."""
        T = frames.shape[2]
        if self._started and (T == 0 or T % 4):
            raise ValueError(f"after the first frame the Wan VAE encodes 4k frames at a time, got {T}")
        if not self._started and T != 1:
            raise ValueError(f"the first piece of a stream is 1 frame (its own latent frame), got {T}")
        ae = self.vae.autoencoder
        x = frames.to(next(ae.parameters()).dtype)
        if ae.config.patch_size is not None:
            from diffusers.models.autoencoders.autoencoder_kl_wan import patchify

            x = patchify(x, patch_size=ae.config.patch_size)
        pieces = [x] if not self._started else list(x.split(4, dim=2))  # the encoder's own step: 1, then 4
        out = []
        for piece in pieces:
            out.append(ae.encoder(piece, feat_cache=self._feat_map, feat_idx=[0]))
        self._started = True
        moments = ae.quant_conv(torch.cat(out, dim=2))  # pointwise: no temporal cache needed
        return self.vae.normalize(moments.chunk(2, dim=1)[0])  # the mean: DiagonalGaussianDistribution.mode()


class StreamingDecoder:
    """Decode latent chunks one after the other, carrying the causal decoder's feature cache.

    The first latent frame of the stream decodes to 1 frame, every later one to 4 (as in the
    Wan VAE's own frame-by-frame decode loop). Memory is constant: the cache holds the last two
    feature frames of each causal convolution.
    """

    def __init__(self, vae: WanVAE):
        self.vae = vae
        ae = vae.autoencoder
        self._feat_map = [None] * ae._cached_conv_counts["decoder"]
        self._started = False

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """latents (B, 16, f, h, w) -> frames (B, 3, 4f (or 4f - 3 for the first chunk), 8h, 8w)."""
        ae = self.vae.autoencoder
        dtype = next(ae.parameters()).dtype
        x = ae.post_quant_conv(self.vae.denormalize(latents).to(dtype))  # pointwise: no temporal cache needed
        frames = []
        for i in range(x.shape[2]):
            conv_idx = [0]
            frames.append(ae.decoder(x[:, :, i:i + 1], feat_cache=self._feat_map, feat_idx=conv_idx,
                                     first_chunk=not self._started))
            self._started = True
        return torch.clamp(torch.cat(frames, dim=2), -1.0, 1.0)
