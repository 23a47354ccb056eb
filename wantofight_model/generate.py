"""Streaming generation: chunk after chunk, for as many chunks as the key stream provides.

    for frames in StreamingGenerator(model, vae).generate(first_frames, keys_stream, ref_images, steps=4):
        show(frames)  # (B, 3, 8, H, W): one chunk, 8 frames

Each chunk starts from noise and is denoised in `steps` Euler steps over the rolling KV cache of
the previous 2 chunks, by the one rollout loop of `rollout.py` (which also says what a finished chunk
leaves in the cache: `config.cache_write`). The prompt (the encoded first frames) enters the cache
from one forward pass at t = 0.

`use_cache=False` is the reference path: every denoising step recomputes a full block-causal
forward over the whole sequence so far (each earlier chunk at the state and noise level of its
cache-writing pass). Both paths give the same chunks (tests) and the bench compares their speed.

Letters: B batch, C latent channels, F latent frames, h x w latent grid, P players.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import torch

from wantofight_model.config import SAMPLERS
from wantofight_model.model import WanToFight
from wantofight_model.rollout import CachedContext, RecomputedContext, rollout_chunks
from wantofight_model.scheduler import FlowMatchScheduler
from wantofight_model.vae import LatentVAE


class StreamingGenerator:
    """Chunk-wise autoregressive sampler around a `WanToFight` model (and optionally its VAE)."""

    def __init__(self, model: WanToFight, vae: LatentVAE | None = None, scheduler: FlowMatchScheduler | None = None,
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
                         prompt_sigma: float = 0.0,
                         true_chunks: Iterable[torch.Tensor] | None = None) -> Iterator[torch.Tensor]:
        """prompt (B, C, 1 + 2m, h, w) clean latents; yields one (B, C, 2, h, w) chunk per keys entry.

        `prompt_sigma` > 0 noises the prompt to that level before it enters the cache (and tells the
        model), matching a trainer that used context-noise augmentation. `true_chunks` (teacher
        forcing) yields each chunk's true latents, which the context keeps instead of the generated ones.
        """
        config = self.model.config
        if prompt_keys is None:
            B, _, F0 = prompt.shape[:3]
            prompt_keys = torch.zeros(B, 1 + config.vae_time_factor * (F0 - 1), config.num_players, config.num_keys,
                                      device=prompt.device, dtype=prompt.dtype)
        dit = self.model.dit
        context = CachedContext(dit, self.model.new_cache(prompt.shape[0])) if use_cache else RecomputedContext(dit)
        for chunk in rollout_chunks(context, config, self.scheduler, prompt, prompt_keys, keys_stream,
                                    self.model.encode_references(references), steps=steps, sampler=self.sampler,
                                    noise=generator, prompt_sigma=prompt_sigma, true_chunks=true_chunks,
                                    reachable=dit.reachable):
            yield chunk.latents
