"""Streaming generation: chunk after chunk, for as many chunks as the key stream provides.

    for frames in StreamingGenerator(model, vae).generate(first_frames, keys_stream, ref_images, steps=4):
        show(frames)  # (B, 3, 8, H, W): one chunk, 8 frames

Each chunk starts from noise and is denoised in `steps` Euler steps over the rolling KV cache of
the previous 2 chunks; the cache entries of a chunk are the keys/values of its penultimate
denoising step (`config.cache_write_step`, docs/model.md), so no extra forward pass is spent on them.
The prompt (the encoded first frames) enters the cache from one forward pass at t = 0.

`use_cache=False` is the reference path: every denoising step recomputes a full block-causal
forward over the whole sequence so far (each earlier chunk at the state and noise level of its
cache-write step). Both paths give the same chunks (tests) and the bench compares their speed.

Letters: B batch, C latent channels, F latent frames, h x w latent grid, P players.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import torch

from wantofight_model.config import SAMPLERS
from wantofight_model.model import WanToFight
from wantofight_model.scheduler import FlowMatchScheduler
from wantofight_model.vae import WanVAE

DenoiseFn = Callable[[torch.Tensor, float, bool], torch.Tensor]


@dataclass
class _History:
    """Reference path only: every chunk so far, as the cache would have seen it."""

    states: list[torch.Tensor] = field(default_factory=list)
    timesteps: list[torch.Tensor] = field(default_factory=list)
    keys: list[torch.Tensor] = field(default_factory=list)
    pending: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
    """The current chunk's (state, timesteps, keys) at its cache-write step, added by `commit`."""

    def commit(self) -> None:
        state, timesteps, keys = self.pending
        self.states.append(state)
        self.timesteps.append(timesteps)
        self.keys.append(keys)
        self.pending = None


class StreamingGenerator:
    """Chunk-wise autoregressive sampler around a `WanToFight` model (and optionally its VAE)."""

    def __init__(self, model: WanToFight, vae: WanVAE | None = None, scheduler: FlowMatchScheduler | None = None,
                 sampler: str = "euler"):
        self.model = model
        self.vae = vae
        config = model.config
        self.scheduler = scheduler or FlowMatchScheduler(config.num_train_timesteps, config.timestep_shift)
        if sampler not in SAMPLERS:
            raise ValueError(f"unknown sampler {sampler!r}; valid: {', '.join(SAMPLERS)}")
        self.sampler = sampler

    # ---- pixels in, pixels out ----
    @torch.no_grad()
    def generate(self, first_frames: torch.Tensor, keys_stream: Iterable[torch.Tensor], ref_images: torch.Tensor,
                 steps: int = 4, first_keys: torch.Tensor | None = None,
                 generator: torch.Generator | None = None) -> Iterator[torch.Tensor]:
        """first_frames (B, 3, 1 + 8m, H, W) in [-1, 1] (usually one frame); keys_stream yields
        (B, 8, P, 16) per chunk to generate; ref_images (B, P, 3, h, w). Yields (B, 3, 8, H, W)."""
        if self.vae is None:
            raise ValueError("generate() decodes frames and needs a VAE; use generate_latents() without one")
        prompt = self.vae.encode(first_frames).to(self.model.dit.patch_embedding.weight.dtype)
        decoder = self.vae.streaming_decoder()
        decoder.decode(prompt)  # fills the causal decoder cache; the prompt frames themselves are known
        for latents in self.generate_latents(prompt, keys_stream, ref_images, steps, first_keys, generator):
            yield decoder.decode(latents)

    # ---- latents in, latents out ----
    @torch.no_grad()
    def generate_latents(self, prompt: torch.Tensor, keys_stream: Iterable[torch.Tensor], references: torch.Tensor,
                         steps: int = 4, prompt_keys: torch.Tensor | None = None,
                         generator: torch.Generator | None = None, use_cache: bool = True,
                         prompt_sigma: float = 0.0) -> Iterator[torch.Tensor]:
        """prompt (B, C, 1 + 2m, h, w) clean latents; yields one (B, C, 2, h, w) chunk per keys entry.

        `prompt_sigma` > 0 noises the prompt to that level before it enters the cache (and tells the
        model), matching a trainer that used context-noise augmentation.
        """
        config = self.model.config
        B, C, F0, h, w = prompt.shape
        per_chunk = config.chunk_latent_frames
        if (F0 - 1) % per_chunk:
            raise ValueError(f"prompt of {F0} latent frames: expected 1 + {per_chunk} m (chunk 0 + whole chunks)")
        P = config.num_players
        if prompt_keys is None:
            prompt_keys = torch.zeros(B, 1 + config.vae_time_factor * (F0 - 1), P, config.num_keys,
                                      device=prompt.device, dtype=prompt.dtype)
        ref_tokens = self.model.encode_references(references)
        sigmas = self.scheduler.sigmas(steps).tolist()
        write_step = min(max(steps + config.cache_write_step if config.cache_write_step < 0
                             else config.cache_write_step, 0), steps - 1)

        cache = self.model.new_cache(B) if use_cache else None
        history = None if use_cache else _History()

        def denoiser(keys: torch.Tensor) -> DenoiseFn:
            if use_cache:
                return lambda x, sigma, write: self.model.dit(x, self.scheduler.timestep(sigma), keys, ref_tokens,
                                                              "block_causal", cache, write)
            return lambda x, sigma, write: self._recompute(history, x, sigma, write, keys, ref_tokens)

        def close_chunk(num_frames: int) -> None:
            if use_cache:
                cache.commit(num_frames)
            else:
                history.commit()

        # Prompt chunks enter the context from one forward pass each, at noise level prompt_sigma.
        if prompt_sigma > 0:
            noise = torch.randn(prompt.shape, generator=generator, device=prompt.device, dtype=prompt.dtype)
            prompt = self.scheduler.add_noise(prompt, noise, prompt_sigma)
        bounds = [0, 1] + list(range(1 + per_chunk, F0 + 1, per_chunk))
        frame_bounds = [0 if f == 0 else 1 + config.vae_time_factor * (f - 1) for f in bounds]
        for j in range(len(bounds) - 1):
            keys = prompt_keys[:, frame_bounds[j]:frame_bounds[j + 1]]
            denoiser(keys)(prompt[:, :, bounds[j]:bounds[j + 1]], prompt_sigma, True)
            close_chunk(bounds[j + 1] - bounds[j])

        for keys in keys_stream:
            if keys.shape[1] != config.chunk_frames:
                raise ValueError(f"each keys entry must cover one chunk of {config.chunk_frames} frames, "
                                 f"got shape {tuple(keys.shape)}")
            denoise = denoiser(keys.to(prompt))
            x = torch.randn((B, C, per_chunk, h, w), generator=generator, device=prompt.device, dtype=prompt.dtype)
            for i in range(steps):
                velocity = denoise(x, sigmas[i], i == write_step)
                noise = None
                if self.sampler == "x0_renoise" and sigmas[i + 1] > 0:
                    noise = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
                x = self.scheduler.step(x, velocity, sigmas[i], sigmas[i + 1], self.sampler, noise)
            close_chunk(per_chunk)
            yield x

    def _recompute(self, history: _History, x: torch.Tensor, sigma: float, write: bool, keys: torch.Tensor,
                   ref_tokens: torch.Tensor) -> torch.Tensor:
        """Reference denoiser: full block-causal forward over every chunk so far plus `x`."""
        B, _, F = x.shape[:3]
        t = self.scheduler.timestep(sigma).to(x.device).expand(B, F)  # (B, F)
        states = torch.cat(history.states + [x], dim=2)  # (B, C, F_all, h, w)
        timesteps = torch.cat(history.timesteps + [t], dim=1)  # (B, F_all)
        all_keys = torch.cat(history.keys + [keys], dim=1)  # (B, T_all, P, 16)
        velocity = self.model.dit(states, timesteps, all_keys, ref_tokens, "block_causal")[:, :, -F:]
        if write:
            history.pending = (x, t, keys)
        return velocity
