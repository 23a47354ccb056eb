"""Distribution matching distillation (DMD / DMD2) with self-forcing rollouts, as library functions.

Three networks, all WanToFight denoisers in the flow-matching convention of `scheduler.py`
(x_sigma = (1 - sigma) x0 + sigma n, prediction v = n - x0, so x0_hat = x_sigma - sigma v):

    student  G   the 4-step causal generator being trained (initialised from the teacher)
    teacher  R   frozen stage-2 model: the *real* score
    critic   C   trained with the denoising loss on G's outputs: the *fake* score (initialised from R)

One generator step, for a batch of real conditioning (prompt frame, keys, reference tokens):

 1. rollout   x0 = G.rollout(noise)          chunk by chunk over the rolling KV cache, 4 steps each
              (self-forcing: every chunk is conditioned on the student's *own* earlier chunks, read
              from the cache exactly as at inference; gradient only through one denoising step per
              chunk, the "exit step", drawn at random per chunk as in Self-Forcing)
 2. noise     sigma ~ shift(U(t_min, t_max)), clamped to [t_min, t_max]     (timestep clamping:
              DMD2's 0.02 .. 0.98; the scores are unreliable at the extremes)
              x_sigma = (1 - sigma) x0 + sigma n
 3. scores    x0_real = R(x_sigma),  x0_fake = C(x_sigma)   (no gradient), the prompt frame clean
 4. gradient  g = (x0_fake - x0_real) / mean|x0 - x0_real|   (DMD's per-sample normalisation)
              loss = 0.5 || x0 - sg(x0 - g) ||^2   so that d loss / d x0 = g / numel
The critic is updated `critic_steps` times per generator step (two time-scale update rule, DMD2)
with the flow-matching loss on fresh, detached student rollouts:
              loss_C = || C(x_sigma) - (n - sg(x0)) ||^2 over the generated frames.

Letters: B batch, C latent channels, F latent frames, h x w latent grid, P players.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from wantofight_model.config import ModelConfig
from wantofight_model.kv_cache import RollingKVCache
from wantofight_model.rollout import CachedContext, Denoiser, randn_per_sample, rollout_chunks
from wantofight_model.scheduler import FlowMatchScheduler


# ---------------------------------------------------------------------------------------------
# Noise levels, one generator per sample (reproducible whatever the batch split; `randn_per_sample`)
# ---------------------------------------------------------------------------------------------

def dmd_sigmas(generators: Sequence[torch.Generator], flow: FlowMatchScheduler, t_min: float, t_max: float,
               device) -> torch.Tensor:
    """(B,) noise levels for the score evaluation: shift(U(t_min, t_max)) clamped to [t_min, t_max]."""
    if not 0 <= t_min < t_max <= 1:
        raise ValueError(f"need 0 <= t_min < t_max <= 1, got {t_min}, {t_max}")
    u = torch.stack([torch.rand((), generator=g, device=device) for g in generators])
    sigma = flow.shift_sigma(t_min + (t_max - t_min) * u)
    return sigma.clamp(t_min, t_max)


# ---------------------------------------------------------------------------------------------
# The DMD gradient
# ---------------------------------------------------------------------------------------------

def dmd_gradient(x0: torch.Tensor, x0_real: torch.Tensor, x0_fake: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """(x0_fake - x0_real) / mean|x0 - x0_real| per sample: the direction that moves the student's
    samples from its own distribution's score towards the data's. All (B, C, F, h, w)."""
    dims = tuple(range(1, x0.ndim))
    norm = (x0.detach().float() - x0_real.float()).abs().mean(dim=dims, keepdim=True).clamp_min(eps)
    return torch.nan_to_num((x0_fake.float() - x0_real.float()) / norm)


def dmd_loss(x0: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """0.5 || x0 - sg(x0 - grad) ||^2 (mean): its gradient w.r.t. x0 is grad / numel."""
    x0 = x0.float()
    return 0.5 * (x0 - (x0 - grad).detach()).pow(2).mean()


def predict_x0(denoiser: Denoiser, prompt: torch.Tensor, x_sigma: torch.Tensor, sigma: torch.Tensor,
               keys: torch.Tensor, ref_tokens: torch.Tensor, flow: FlowMatchScheduler,
               prompt_sigma: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """x0 and velocity predictions of the generated frames under block-causal attention.

    prompt (B, C, F0, h, w) clean latents (or noised to `prompt_sigma` (B,)); x_sigma (B, C, F, h, w)
    the generated frames noised to sigma (B,); keys cover prompt + generated frames.
    """
    B, F0 = prompt.shape[0], prompt.shape[2]
    F = x_sigma.shape[2]
    t_prompt = torch.zeros(B, F0, device=x_sigma.device) if prompt_sigma is None else \
        prompt_sigma.view(B, 1).expand(B, F0)
    timesteps = flow.timestep(torch.cat([t_prompt, sigma.view(B, 1).expand(B, F)], dim=1)).to(x_sigma.device)
    v = denoiser(torch.cat([prompt, x_sigma], dim=2), timesteps, keys, ref_tokens, "block_causal")[:, :, F0:]
    v = v.float()
    return x_sigma.float() - sigma.view(B, 1, 1, 1, 1) * v, v


@dataclass
class DMDTerms:
    loss: torch.Tensor
    per_sample: torch.Tensor
    """(B,) 0.5 mean g^2 of each sample (the loss's value per sample)."""
    grad_norm: float
    """Mean |g| of the normalised DMD gradient (0 when critic and teacher agree)."""
    sigma: torch.Tensor


def generator_loss(x0: torch.Tensor, prompt: torch.Tensor, keys: torch.Tensor, ref_tokens: torch.Tensor,
                   teacher: Denoiser, critic: Denoiser, flow: FlowMatchScheduler,
                   generators: Sequence[torch.Generator], t_min: float = 0.02, t_max: float = 0.98) -> DMDTerms:
    """The DMD loss of student samples x0 (B, C, F, h, w), carrying gradient to the student."""
    device = x0.device
    sigma = dmd_sigmas(generators, flow, t_min, t_max, device)
    noise = randn_per_sample(x0.shape[1:], generators, device)
    with torch.no_grad():
        x_sigma = flow.add_noise(x0.detach().float(), noise, sigma.view(-1, 1, 1, 1, 1))
        x0_real, _ = predict_x0(teacher, prompt, x_sigma, sigma, keys, ref_tokens, flow)
        x0_fake, _ = predict_x0(critic, prompt, x_sigma, sigma, keys, ref_tokens, flow)
        grad = dmd_gradient(x0, x0_real, x0_fake)
    per_sample = 0.5 * grad.pow(2).mean(dim=tuple(range(1, grad.ndim)))
    return DMDTerms(dmd_loss(x0, grad), per_sample, grad.abs().mean().item(), sigma)


def critic_loss(x0: torch.Tensor, prompt: torch.Tensor, keys: torch.Tensor, ref_tokens: torch.Tensor,
                critic: Denoiser, flow: FlowMatchScheduler, generators: Sequence[torch.Generator],
                t_min: float = 0.02, t_max: float = 0.98) -> torch.Tensor:
    """Flow-matching denoising loss of the critic on (detached) student samples x0."""
    x0 = x0.detach().float()
    sigma = dmd_sigmas(generators, flow, t_min, t_max, x0.device)
    noise = randn_per_sample(x0.shape[1:], generators, x0.device)
    x_sigma = flow.add_noise(x0, noise, sigma.view(-1, 1, 1, 1, 1))
    _, v = predict_x0(critic, prompt, x_sigma, sigma, keys, ref_tokens, flow)
    return (v - flow.velocity_target(x0, noise)).pow(2).mean()


# ---------------------------------------------------------------------------------------------
# Self-forcing rollout through the rolling KV cache
# ---------------------------------------------------------------------------------------------

@dataclass
class Rollout:
    latents: torch.Tensor
    """(B, C, 2 n, h, w): each chunk's x0 prediction at its exit step (with gradient there)."""
    exit_steps: list[int]
    """The denoising step each chunk's output (and gradient) came from."""
    forwards: list[int] = field(default_factory=list)
    """Denoiser calls per generated chunk (steps, + 1 with the clean cache write)."""


def self_forcing_rollout(denoiser: Denoiser, cache: RollingKVCache, config: ModelConfig, prompt: torch.Tensor,
                         keys: torch.Tensor, ref_tokens: torch.Tensor, flow: FlowMatchScheduler, steps: int,
                         generators: Sequence[torch.Generator], *, exit_steps: Sequence[int] | None = None,
                         sampler: str = "x0_renoise", prompt_sigma: float = 0.0,
                         reachable: Callable[[torch.Tensor], torch.Tensor] | None = None) -> Rollout:
    """Generate the chunks after `prompt` with inference's own loop (`rollout_chunks`, same draws in the
    same order per sample), keeping the gradient of each chunk's exit step.

    prompt (B, C, 1 + 2 m, h, w) clean latents; keys (B, 1 + 4 (F - 1), P, 16) cover the prompt and
    every chunk to generate (F = total latent frames); `exit_steps[c]` in [0, steps): chunk c's output
    is its x0 prediction at that step (default: the last step, i.e. exactly the inference output).
    All steps still run, without gradient after the exit step, so the cache is written as at inference.
    """
    F0 = prompt.shape[2]
    T0 = 1 + config.vae_time_factor * (F0 - 1)
    L = config.chunk_frames
    n_chunks = (keys.shape[1] - T0) // L
    if n_chunks < 1 or T0 + n_chunks * L != keys.shape[1]:
        raise ValueError(f"keys of {keys.shape[1]} frames: expected the prompt's {T0} + whole chunks of {L}")
    exit_steps = list(exit_steps) if exit_steps is not None else [steps - 1] * n_chunks
    if len(exit_steps) != n_chunks or not all(0 <= e < steps for e in exit_steps):
        raise ValueError(f"exit_steps must give one step in [0, {steps}) per chunk ({n_chunks}), got {exit_steps}")
    chunk_keys = (keys[:, T0 + c * L:T0 + (c + 1) * L] for c in range(n_chunks))
    chunks = list(rollout_chunks(CachedContext(denoiser, cache), config, flow, prompt, keys[:, :T0], chunk_keys,
                                 ref_tokens, steps=steps, sampler=sampler, noise=generators,
                                 prompt_sigma=prompt_sigma, exit_steps=exit_steps, reachable=reachable))
    return Rollout(torch.cat([c.latents for c in chunks], dim=2), exit_steps, [c.forwards for c in chunks])
