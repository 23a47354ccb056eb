"""Typed, validated configuration of the WanToFight generator (docs/model.md).

One `ModelConfig` describes everything that sizes a tensor: the Wan2.1 DiT backbone, the keyboard
injection, the player association, the rolling KV cache, the sampler and the VAE. Presets
(`presets.py`) are functions returning one of these; nothing else in the package holds a size.

Time bookkeeping (used everywhere, so fixed here):
    pixel frames  T = 1 + 4 (F - 1)     Wan VAE: 4x in time, the first latent holds frame 0 alone
                  (a per-frame autoencoder, `vae.kind="frame"`: T = F, and a chunk is 8 latent frames)
    latent frames F
    chunk 0       = latent frame 0 (pixel frame 0, the prompt frame)
    chunk c >= 1  = latent frames 2c-1, 2c = pixel frames 8c-7 .. 8c (L = 8 frames, docs/model.md)
so a 161-frame training sample is 41 latent frames = chunk 0 + 20 chunks.
"""

from __future__ import annotations

import math

from dataclasses import asdict, dataclass, field
from typing import Literal

AttentionMode = Literal["bidirectional", "block_causal"]
ATTENTION_MODES = ("bidirectional", "block_causal")
SAMPLERS = ("euler", "x0_renoise")
MASK_BACKENDS = ("dense", "flex")
CACHE_WRITES = ("clean", "denoising-step")

LEGACY_FIELDS = {"cache_write": "denoising-step", "previous_frame_input": False, "previous_frame_max_sigma": 0.1}
"""Fields added after models were saved, with the value every model saved without them was made with:
a saved config that lacks one loads with this value, so its outputs do not change."""
DERIVED_FIELDS = ("vae_time_factor", "vae_space_factor")
"""Fields that saved configs hold but that are now read from `vae` (4 and 8 in every one of them)."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _positive(name: str, value: int | float) -> None:
    _check(value > 0, f"{name} must be > 0, got {value!r}")


VAE_KINDS = ("wan", "frame")


@dataclass(frozen=True)
class VAEConfig:
    """The autoencoder: the Wan2.1 VAE (diffusers `AutoencoderKLWan`; the defaults are the published one) or a
    per-frame 2D one (`kind="frame"`, wantofight_model/frame_vae.py: no time compression)."""

    kind: str = "wan"
    """"wan": the Wan layout, 4x in time (causal 3D convolutions); "frame": diffusers' 2D `AutoencoderKL` on
    each frame, 1x in time (docs/model.md, "A per-frame autoencoder")."""
    base_dim: int = 96
    """Channel width of the first VAE stage (Wan2.1: 96; tests: 16)."""
    dim_mult: tuple[int, ...] = (1, 2, 4, 4)
    """Per-stage channel multipliers (Wan2.1: 1, 2, 4, 4); each stage but the last halves the resolution,
    so 4 stages compress 8x in space and 3 stages 4x."""
    num_res_blocks: int = 2
    """Residual blocks per stage (Wan2.1: 2)."""
    temperal_downsample: tuple[bool, ...] = (False, True, True)
    """Which spatial downsamples also halve time (diffusers spells it 'temperal'); the Wan layout needs two
    (4x in time); the per-frame autoencoder ignores it (1x in time)."""
    z_dim: int = 16
    """Latent channels (Wan2.1: 16)."""
    is_residual: bool = False
    """Wan2.2's parameter-free shortcuts around every down- and upsampling (diffusers' `is_residual`):
    the same latent layout; a game VAE with them learns small sprites far faster (docs/model.md)."""
    norm_groups: int = 8
    """GroupNorm groups of the per-frame autoencoder (every stage's width must divide by it); unused by
    the Wan layout, whose norm is a channel RMS norm."""
    pretrained: str | None = None
    """Local diffusers folder (a game VAE, or the Wan2.1 repo root with `vae/`); None = random init."""

    @classmethod
    def from_dict(cls, data: dict) -> "VAEConfig":
        """A saved VAE config (`asdict`); fields it predates (`kind`, `norm_groups`) take their defaults."""
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})

    def __post_init__(self) -> None:
        _check(self.kind in VAE_KINDS, f"vae.kind={self.kind!r}; valid: {', '.join(VAE_KINDS)}")
        _positive("vae.base_dim", self.base_dim)
        _positive("vae.num_res_blocks", self.num_res_blocks)
        _check(len(self.dim_mult) in (3, 4),
               f"vae.dim_mult must have 4 stages (8x spatial compression) or 3 (4x), got {self.dim_mult}")
        if self.kind == "wan":
            _check(len(self.temperal_downsample) == len(self.dim_mult) - 1,
                   f"vae.temperal_downsample needs len(dim_mult) - 1 = {len(self.dim_mult) - 1} entries, "
                   f"got {len(self.temperal_downsample)}")
            _check(sum(self.temperal_downsample) == 2,
                   f"vae.temperal_downsample must downsample time exactly twice (4x), got {self.temperal_downsample}")
        else:
            _positive("vae.norm_groups", self.norm_groups)
            widths = [self.base_dim * m for m in self.dim_mult]
            _check(all(w % self.norm_groups == 0 for w in widths),
                   f"vae.norm_groups={self.norm_groups} must divide every stage's width {widths}")

    @property
    def time_factor(self) -> int:
        """Frames per latent frame after the first: 4 (Wan layout) or 1 (per frame)."""
        return 4 if self.kind == "wan" else 1

    @property
    def space_factor(self) -> int:
        """Pixels per latent cell side: 8 (4 stages) or 4 (3 stages)."""
        return 2 ** (len(self.dim_mult) - 1)


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of the WanToFight generator. Validated on construction; see `presets.py`."""

    # ---- backbone (Wan2.1 DiT) ----
    dim: int = 1536
    """Hidden width of the DiT (Wan2.1-1.3B: 1536)."""
    num_heads: int = 12
    """Self-attention heads (Wan2.1-1.3B: 12 x 128)."""
    ffn_dim: int = 8960
    """Feed-forward inner width (Wan2.1-1.3B: 8960)."""
    num_blocks: int = 30
    """Transformer blocks (Wan2.1-1.3B: 30)."""
    patch_size: tuple[int, int, int] = (1, 2, 2)
    """(time, height, width) patch of the latent; time must be 1 so a token lives in one latent frame."""
    latent_channels: int = 16
    """Wan-VAE latent channels (in and out of the DiT)."""
    freq_dim: int = 256
    """Sinusoidal timestep-embedding width (Wan2.1: 256)."""
    eps: float = 1e-6
    """LayerNorm / RMSNorm epsilon (Wan2.1: 1e-6)."""
    rope_theta: float = 10000.0
    """3D RoPE base (Wan2.1: 10000)."""

    previous_frame_input: bool = False
    """Each latent frame also gets, as extra input channels, the last latent frame before its chunk as that
    frame stands in the input or the cache (zeros in chunk 0): GameNGen's channel-concatenated past, which
    makes "the context, moved" one layer away instead of an attention lookup (docs/model.md). The added
    channels of the patch embedding start at zero, so a model given them computes what it did without."""
    previous_frame_max_sigma: float = 0.1
    """The previous frame is read where its noise level is at most this (the clean cache write, stage 2's clean
    context chunks), and is zeros where it is noisier: the model is not told that frame's level."""

    # ---- video geometry ----
    height: int = 384
    """Pixel height (the paper's 512x384 output)."""
    width: int = 512
    """Pixel width."""
    chunk_frames: int = 8
    """Pixel frames per autoregressive chunk, L = 8 (the paper's) = 2 latent frames."""
    context_chunks: int = 2
    """Previous chunks a chunk attends to under the block-causal mask, and the KV-cache depth."""

    # ---- keyboard injection ----
    num_players: int = 2
    """Players P; keys tensors are (B, T, P, 16)."""
    num_keys: int = 16
    """Key slots per player (docs/contracts.md, layout version 1)."""
    keyboard_dim: int = 256
    """Width of the keyboard latents produced by the 1D-conv encoder."""
    keyboard_every: int = 3
    """Inject keyboard cross-attention after every n-th block (paper: 3 -> 10 points in 30 blocks)."""
    keyboard_window: int = 3
    """Keyboard latents a video latent sees: its own step and the (window - 1) before it (paper: 3)."""
    keyboard_gate_bias: float = 0.0
    """Initial bias b of the sigmoid gate g = sigmoid(W h + b)."""

    # ---- player association ----
    clip_model: str = "ViT-H-14"
    """open_clip architecture of the frozen reference-image encoder (Wan2.1 I2V uses ViT-H/14)."""
    clip_pretrained: str | None = None
    """Local open_clip checkpoint file; None = random init (tests, meta-device sizing)."""
    clip_image_size: int = 224
    """Reference images are resized to this square size before the CLIP encoder."""
    clip_dim: int = 1280
    """Width of the CLIP vision tokens (ViT-H/14: 1280)."""
    association_heads: int = 4
    """Heads of the binding cross-attention (keyboard latents -> reference tokens)."""

    # ---- sampling / cache ----
    num_train_timesteps: int = 1000
    """Flow-matching timesteps t = 1000 sigma (Wan convention)."""
    timestep_shift: float = 5.0
    """Wan's sigma shift, sigma' = s sigma / (1 + (s - 1) sigma) (Wan2.1 T2V default 5)."""
    cache_write: str = "clean"
    """What a finished chunk leaves in the rolling cache (`rollout.py`): "clean" = the keys/values of one
    extra forward pass over its x0 at `context_sigma` (Self-Forcing, CausVid); "denoising-step" = those of
    denoising step `cache_write_step`, no extra pass (the paper's). Saved configs without it: the latter."""
    cache_write_step: int = -2
    """With cache_write="denoising-step": the step that writes; -2 = penultimate (the paper's choice)."""
    context_sigma: float = 0.0
    """With cache_write="clean": the noise level the finished chunk is written at (0 = clean)."""
    gradient_checkpointing: bool = False
    """Recompute block activations in backward (training only)."""
    mask_backend: str = "dense"
    """Full-sequence block-causal masks as a dense bool matrix for SDPA ("dense": CPU, tests, short
    clips) or a flex-attention BlockMask ("flex": GPU training on long clips; no backward on CPU)."""

    vae: VAEConfig = field(default_factory=VAEConfig)
    """The autoencoder (`VAEConfig`): its kind and stages set `vae_time_factor` and `vae_space_factor`."""

    def __post_init__(self) -> None:
        for name in ("dim", "num_heads", "ffn_dim", "num_blocks", "latent_channels", "freq_dim",
                     "height", "width", "chunk_frames", "num_players", "num_keys", "keyboard_dim",
                     "keyboard_every", "keyboard_window", "clip_image_size", "clip_dim",
                     "association_heads", "num_train_timesteps"):
            _positive(name, getattr(self, name))
        _check(self.context_chunks >= 0, f"context_chunks must be >= 0, got {self.context_chunks}")
        _check(self.dim % self.num_heads == 0,
               f"dim={self.dim} must be divisible by num_heads={self.num_heads}")
        _check(self.head_dim % 2 == 0 and self.head_dim >= 6,
               f"head_dim={self.head_dim} must be even and >= 6 for 3D RoPE")
        _check(self.patch_size[0] == 1, f"patch_size[0] must be 1 (one latent frame per token), got {self.patch_size}")
        cell = self.vae_space_factor * self.patch_size[1], self.vae_space_factor * self.patch_size[2]
        _check(self.height % cell[0] == 0 and self.width % cell[1] == 0,
               f"height x width = {self.height}x{self.width} must be multiples of {cell[0]}x{cell[1]} "
               f"(VAE {self.vae_space_factor}x times patch)")
        _check(self.chunk_frames % self.vae_time_factor == 0,
               f"chunk_frames={self.chunk_frames} must be a multiple of {self.vae_time_factor} (VAE time factor)")
        _check(self.keyboard_dim % self.association_heads == 0,
               f"keyboard_dim={self.keyboard_dim} must be divisible by association_heads={self.association_heads}")
        _check(self.keyboard_every <= self.num_blocks,
               f"keyboard_every={self.keyboard_every} exceeds num_blocks={self.num_blocks}: no injection point")
        _check(self.mask_backend in MASK_BACKENDS,
               f"mask_backend={self.mask_backend!r}; valid: {', '.join(MASK_BACKENDS)}")
        _check(self.cache_write in CACHE_WRITES,
               f"cache_write={self.cache_write!r}; valid: {', '.join(CACHE_WRITES)}")
        _check(0 <= self.previous_frame_max_sigma <= 1,
               f"previous_frame_max_sigma must be in [0, 1], got {self.previous_frame_max_sigma}")
        _check(0 <= self.context_sigma < 1, f"context_sigma must be in [0, 1), got {self.context_sigma}")
        _check(self.timestep_shift > 0, f"timestep_shift must be > 0, got {self.timestep_shift}")
        _check(self.vae.z_dim == self.latent_channels,
               f"vae.z_dim={self.vae.z_dim} must equal latent_channels={self.latent_channels}")

    # ---- derived sizes (one place) ----
    @property
    def vae_time_factor(self) -> int:
        """Frames per latent frame after the first: 4 (Wan layout) or 1 (per-frame autoencoder)."""
        return self.vae.time_factor

    @property
    def vae_space_factor(self) -> int:
        """Pixels per latent cell side: 8 or 4."""
        return self.vae.space_factor

    @property
    def head_dim(self) -> int:
        return self.dim // self.num_heads

    @property
    def head_outputs(self) -> int:
        """Values the head gives each token (latent channels x patch volume); above `dim` it reaches only `dim`
        directions of them (`WanToFightDiT.reachable`)."""
        return self.latent_channels * math.prod(self.patch_size)

    @property
    def chunk_latent_frames(self) -> int:
        """Latent frames per chunk c >= 1 (8 frames / 4 = 2; per-frame autoencoder: 8)."""
        return self.chunk_frames // self.vae_time_factor

    @property
    def latent_height(self) -> int:
        return self.height // self.vae_space_factor

    @property
    def latent_width(self) -> int:
        return self.width // self.vae_space_factor

    @property
    def tokens_per_frame(self) -> int:
        """DiT tokens per latent frame, N = (H/8/2) (W/8/2)."""
        return (self.latent_height // self.patch_size[1]) * (self.latent_width // self.patch_size[2])

    @property
    def tokens_per_chunk(self) -> int:
        return self.tokens_per_frame * self.chunk_latent_frames

    @property
    def injection_blocks(self) -> tuple[int, ...]:
        """Block indices after which keyboard cross-attention runs (every 3rd: 2, 5, ..., 29)."""
        return tuple(i for i in range(self.num_blocks) if (i + 1) % self.keyboard_every == 0)

    @property
    def cache_tokens(self) -> int:
        """Tokens the rolling cache holds: the last `context_chunks` full chunks."""
        return self.context_chunks * self.tokens_per_chunk

    def write_step(self, steps: int) -> int:
        """The denoising step (0 .. steps - 1) that writes the cache with cache_write="denoising-step"."""
        step = steps + self.cache_write_step if self.cache_write_step < 0 else self.cache_write_step
        return min(max(step, 0), steps - 1)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ModelConfig":
        """A saved config (`to_dict()`); fields it predates take their `LEGACY_FIELDS` value."""
        data = {k: v for k, v in {**LEGACY_FIELDS, **data}.items() if k not in DERIVED_FIELDS}
        data["vae"] = VAEConfig.from_dict(data.get("vae", {}))
        for key in ("patch_size",):
            if key in data:
                data[key] = tuple(data[key])
        return cls(**data)
