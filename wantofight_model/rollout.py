"""The one chunk-by-chunk rollout loop: `wtf generate`, `wtf play`, the benchmark, stage 2's validation
videos and stage 3's self-forcing rollouts all run `rollout_chunks` (docs/model.md).

    context = CachedContext(model.dit, model.new_cache(B))          # or RecomputedContext(model.dit)
    for chunk in rollout_chunks(context, config, flow, prompt, prompt_keys, keys_stream, ref_tokens, steps=4):
        chunk.latents                                                # (B, C, 2, h, w), one chunk

The prompt enters the context from one forward pass per prompt chunk at `prompt_sigma`. Each chunk
then starts from noise and is denoised in `steps` steps over that context; which keys/values join
the context for the next chunks is `config.cache_write`, decided here and nowhere else:
    "clean"           after the chunk is done, one extra forward pass over its x0, noised to
                      `config.context_sigma` (0: clean), writes the context (Self-Forcing, CausVid);
    "denoising-step"  the forward pass of denoising step `config.cache_write_step` (-2: penultimate,
                      the paper's) writes it, so no extra pass is spent, but the context is noisy.
Teacher forcing (`true_chunks`, the benchmark's `--teacher-forced`) writes each finished chunk's true
latents instead of the model's own, by the clean write's pass, whatever `cache_write` says: every
chunk is then generated from the true context, and its error is the model's own, not its past's.
Stage 3's needs are parameters, not a second loop: per-sample noise generators, and the step whose
x0 prediction is a chunk's output (`exit_steps`), computed with gradient when gradients are on.

Letters: B batch, C latent channels, F latent frames, h x w latent grid, T pixel frames, P players.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

import torch

from wantofight_model.config import ModelConfig
from wantofight_model.kv_cache import RollingKVCache
from wantofight_model.scheduler import FlowMatchScheduler

Denoiser = Callable[..., torch.Tensor]
"""A `WanToFightDiT.forward`: (latents, timesteps, keys, ref_tokens, attention, cache, write_cache) -> velocity."""

Noise = torch.Generator | Sequence[torch.Generator] | None
"""One generator for the batch (inference), one per sample (training: draws independent of the batch
split), or None (the global RNG)."""


def randn_per_sample(shape: Sequence[int], generators: Sequence[torch.Generator], device,
                     dtype: torch.dtype | None = None) -> torch.Tensor:
    """(B, *shape) normal noise, row i drawn from generators[i]."""
    return torch.stack([torch.randn(tuple(shape), generator=g, device=device, dtype=dtype) for g in generators])


def draw_noise(shape: Sequence[int], noise: Noise, device, dtype: torch.dtype) -> torch.Tensor:
    """(B, *shape[1:]) normal noise from `noise` (see `Noise`); shape[0] is the batch."""
    if isinstance(noise, torch.Generator) or noise is None:
        return torch.randn(tuple(shape), generator=noise, device=device, dtype=dtype)
    if len(noise) != shape[0]:
        raise ValueError(f"{len(noise)} noise generators for a batch of {shape[0]}")
    return randn_per_sample(shape[1:], noise, device, dtype)


# ---------------------------------------------------------------------------------------------
# Where the earlier chunks live: the rolling KV cache, or (reference) the chunks themselves
# ---------------------------------------------------------------------------------------------

class CachedContext:
    """Earlier chunks as keys/values in the rolling KV cache: what inference runs."""

    def __init__(self, denoiser: Denoiser, cache: RollingKVCache):
        self.denoiser = denoiser
        self.cache = cache

    def __call__(self, x: torch.Tensor, t: torch.Tensor, keys: torch.Tensor, ref_tokens: torch.Tensor | None,
                 write: bool) -> torch.Tensor:
        """x (B, C, f, h, w) at timestep t -> velocity; `write` stages this pass's keys/values."""
        return self.denoiser(x, t, keys, ref_tokens, "block_causal", self.cache, write)

    def commit(self, num_frames: int) -> None:
        self.cache.commit(num_frames)


@dataclass
class RecomputedContext:
    """Reference path: every pass recomputes one full block-causal forward over all chunks so far plus x,
    each earlier chunk as the state and timestep its writing pass saw. Equals `CachedContext` (tests)."""

    denoiser: Denoiser
    states: list[torch.Tensor] = field(default_factory=list)
    timesteps: list[torch.Tensor] = field(default_factory=list)
    keys: list[torch.Tensor] = field(default_factory=list)
    pending: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
    """The current chunk's (state, timesteps, keys) of its writing pass, added by `commit`."""

    def __call__(self, x: torch.Tensor, t: torch.Tensor, keys: torch.Tensor, ref_tokens: torch.Tensor | None,
                 write: bool) -> torch.Tensor:
        B, _, F = x.shape[:3]
        t = torch.as_tensor(t, dtype=torch.float32, device=x.device).expand(B, F)  # (B, F)
        states = torch.cat(self.states + [x], dim=2)  # (B, C, F_all, h, w)
        velocity = self.denoiser(states, torch.cat(self.timesteps + [t], dim=1), torch.cat(self.keys + [keys], dim=1),
                                 ref_tokens, "block_causal")[:, :, -F:]
        if write:
            self.pending = (x, t, keys)
        return velocity

    def commit(self, num_frames: int) -> None:
        state, t, keys = self.pending
        self.states.append(state)
        self.timesteps.append(t)
        self.keys.append(keys)
        self.pending = None


# ---------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------

@dataclass
class Chunk:
    latents: torch.Tensor
    """(B, C, 2, h, w): the chunk's x0 prediction at its exit step (the last: the sampler's output)."""
    forwards: int
    """Denoiser passes spent on the chunk: `steps`, plus one with the clean cache write."""


def rollout_chunks(context: CachedContext | RecomputedContext, config: ModelConfig, flow: FlowMatchScheduler,
                   prompt: torch.Tensor, prompt_keys: torch.Tensor, keys_stream: Iterable[torch.Tensor],
                   ref_tokens: torch.Tensor | None, *, steps: int = 4, sampler: str = "euler", noise: Noise = None,
                   prompt_sigma: float = 0.0, exit_steps: Sequence[int] | None = None,
                   true_chunks: Iterable[torch.Tensor] | None = None,
                   reachable: Callable[[torch.Tensor], torch.Tensor] | None = None) -> Iterator[Chunk]:
    """Yield one `Chunk` per keys entry, reading `keys_stream` only when the model is ready for it.

    prompt (B, C, 1 + 2 m, h, w) clean latents; prompt_keys (B, 1 + 8 m, P, 16); keys_stream yields
    (B, 8, P, 16); `exit_steps[c]` in [0, steps) picks chunk c's output step (default: the last);
    `true_chunks` yields chunk c's true latents (B, C, 2, h, w), read once chunk c is generated;
    `reachable` (the DiT's `reachable`) keeps the part of a finished chunk that the denoiser's head can move,
    for its output and for the state its clean write reads (the rest would stay at its starting noise).
    """
    reach = reachable or (lambda z: z)
    B, C, F0, h, w = prompt.shape
    per_chunk = config.chunk_latent_frames
    if (F0 - 1) % per_chunk:
        raise ValueError(f"prompt of {F0} latent frames: expected 1 + {per_chunk} m (chunk 0 + whole chunks)")
    sigmas = flow.sigmas(steps).tolist()
    write_step = config.write_step(steps) if config.cache_write == "denoising-step" else None
    truths = None if true_chunks is None else iter(true_chunks)
    if truths is not None:
        write_step = None  # the true chunk is written by the clean write's pass

    # The prompt enters the context from one forward pass per chunk (chunk 0 = frame 0, then pairs).
    if prompt_sigma > 0:
        prompt = flow.add_noise(prompt, draw_noise(prompt.shape, noise, prompt.device, prompt.dtype), prompt_sigma)
    bounds = [0, 1] + list(range(1 + per_chunk, F0 + 1, per_chunk))
    frame_bounds = [0 if f == 0 else 1 + config.vae_time_factor * (f - 1) for f in bounds]
    with torch.no_grad():
        for j in range(len(bounds) - 1):
            keys = prompt_keys[:, frame_bounds[j]:frame_bounds[j + 1]]
            context(prompt[:, :, bounds[j]:bounds[j + 1]], flow.timestep(prompt_sigma), keys, ref_tokens, True)
            context.commit(bounds[j + 1] - bounds[j])

    for c, keys in enumerate(keys_stream):
        if keys.shape[1] != config.chunk_frames:
            raise ValueError(f"each keys entry must cover one chunk of {config.chunk_frames} frames, "
                             f"got shape {tuple(keys.shape)}")
        exit_step = steps - 1 if exit_steps is None else exit_steps[c]
        keys = keys.to(prompt)
        x = draw_noise((B, C, per_chunk, h, w), noise, prompt.device, prompt.dtype)
        out = None
        for i in range(steps):
            with torch.set_grad_enabled(torch.is_grad_enabled() and i == exit_step):
                velocity = context(x, flow.timestep(sigmas[i]), keys, ref_tokens, i == write_step).to(x.dtype)
                x0 = x - sigmas[i] * velocity
            if i == exit_step:
                out = reach(x0)
            fresh = None
            if sampler == "x0_renoise" and sigmas[i + 1] > 0:
                fresh = draw_noise(x.shape, noise, x.device, x.dtype)
            x = flow.step(x, velocity.detach(), sigmas[i], sigmas[i + 1], sampler, fresh)
        forwards = steps
        if write_step is None:  # the clean write: one more pass, over the finished chunk (or the true one)
            with torch.no_grad():
                state = reach(x.detach()) if truths is None else true_chunk(truths, c, x)
                if config.context_sigma > 0:
                    state = flow.add_noise(state, draw_noise(x.shape, noise, x.device, x.dtype), config.context_sigma)
                context(state, flow.timestep(config.context_sigma), keys, ref_tokens, True)
            forwards += 1
        context.commit(per_chunk)
        yield Chunk(out, forwards)


def true_chunk(truths: Iterator[torch.Tensor], c: int, generated: torch.Tensor) -> torch.Tensor:
    """Chunk c's true latents from `truths`, checked against the generated chunk's shape."""
    truth = next(truths, None)
    if truth is None:
        raise ValueError(f"true_chunks ended before chunk {c}: teacher forcing needs one per generated chunk")
    if truth.shape != generated.shape:
        raise ValueError(f"true chunk {c} has shape {tuple(truth.shape)}, the generated one {tuple(generated.shape)}")
    return truth.to(generated)
