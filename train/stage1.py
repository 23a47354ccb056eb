"""Stage 1 (docs/training.md): bidirectional flow-matching pretraining with the curriculum.

Conditioning of a 161-frame sample (41 latent frames = chunk 0 + 20 chunks of 8 frames):

    latent frame 0 (chunk 0, pixel frame 0)  context: clean, or noised to sigma_ctx (GameNGen)
    latent frames 1 .. 40 (chunks 1 .. 20)    targets: noised to one sigma per sample

    x[:, :, 0]  = (1 - sigma_ctx) z0 + sigma_ctx n0     timestep t0 = 1000 sigma_ctx
    x[:, :, 1:] = (1 - sigma) z + sigma n               timestep t  = 1000 sigma
    loss        = mean over frames 1.. of || v_theta(x, t, keys, refs) - (n - z) ||^2

The model is *told* the context noise level through its per-latent-frame timestep input (B, F):
WanToFight's adaLN modulation is computed per frame (dit.py), so latent frame 0 is modulated by
t0 while the targets are modulated by t. This is the model's own mechanism for per-frame noise
levels (the one stage 2's diffusion forcing uses); no extra embedding is needed. With probability
`1 - context.noise_prob` the context is clean (t0 = 0), which is how it is fed at sampling time.

Target sigmas: u ~ U(0, 1), sigma = shift(u) with Wan's shift (`train_shift`, default the model's
`timestep_shift`), so training spends its steps at the noise levels the sampler visits.
Keys cover all 161 frames (the keyboard encoder compresses them to the 41 latent steps) and the
two reference-token sets bind each key stream to its fighter; both modules train jointly.
"""

from __future__ import annotations

import torch

from wantofight.train.trainer import Trainer
from wantofight_model.scheduler import FlowMatchScheduler


class Stage1Trainer(Trainer):
    """Bidirectional attention, one noise level per sample for the targets, a noise-augmented context."""

    stage = "stage1"
    attention = "bidirectional"

    @property
    def flow(self) -> FlowMatchScheduler:
        shift = self.config.train_shift or self.model_config.timestep_shift
        return FlowMatchScheduler(self.model_config.num_train_timesteps, shift)

    # ---- the draws of one micro-batch ----
    def draw(self, latents: torch.Tensor, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-sample noise (B, C, F, h, w) and per-frame sigmas (B, F), each sample from its own seed."""
        B = latents.shape[0]
        F = latents.shape[2]
        ctx = self.config.context
        noises, sigmas = [], []
        for i in range(B):
            gen = self.noise_generator(step, micro, self.global_index(i, B))
            u, use_ctx_noise, ctx_u = torch.rand(3, generator=gen, device=self.device)
            noises.append(torch.randn(latents.shape[1:], generator=gen, device=self.device))
            sigma = self.flow.shift_sigma(u)
            sigma_ctx = ctx_u * ctx.noise_max if use_ctx_noise < ctx.noise_prob else torch.zeros_like(ctx_u)
            sigmas.append(torch.cat([sigma_ctx.view(1), sigma.view(1).expand(F - 1)]))
        return torch.stack(noises), torch.stack(sigmas)  # (B, C, F, h, w), (B, F)

    def loss(self, batch: dict, micro: int, step: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        z = batch["latents"]  # (B, C, F, h, w)
        step = self.step_count if step is None else step
        noise, sigmas = self.draw(z, step, micro)
        x = self.flow.add_noise(z, noise, sigmas[:, None, :, None, None])
        timesteps = self.flow.timestep(sigmas).to(self.device)  # (B, F): t0 = context level
        with self.autocast():
            velocity = self.wrapped(x, timesteps, batch["keys"], batch["ref_tokens"], self.attention)
        target = self.flow.velocity_target(z, noise)
        squared = (velocity.float() - target).pow(2)
        weights = self.loss_weights(z)  # the fighters' cells count more under fighter_weight
        if weights is not None:
            squared = squared * weights
        per_sample = self.reduce_loss(squared)
        return per_sample.mean(), per_sample

    def reduce_loss(self, squared: torch.Tensor) -> torch.Tensor:
        """(B, C, F, h, w) squared errors -> (B,) losses over the target frames: here all but the context."""
        return squared[:, :, 1:].mean(dim=(1, 2, 3, 4))

    # ---- validation sampler ----
    @torch.no_grad()
    def sample(self, batch: dict, steps: int, num_latent_frames: int) -> torch.Tensor:
        """Bidirectional multi-step Euler sampling, exactly as trained: frame 0 is the clean context
        (t = 0) and frames 1.. are denoised jointly from noise under the clip's keys."""
        z = batch["latents"][:, :, :num_latent_frames]
        B, C, F, h, w = z.shape
        T = 1 + self.model_config.vae_time_factor * (F - 1)
        keys = batch["keys"][:, :T]
        gen = self.noise_generator(-1, 0, 0)
        x = torch.randn((B, C, F - 1, h, w), generator=gen, device=self.device)
        flow = FlowMatchScheduler(self.model_config.num_train_timesteps, self.model_config.timestep_shift)
        sigmas = flow.sigmas(steps).tolist()
        for s, s_next in zip(sigmas[:-1], sigmas[1:]):
            t = flow.timestep(torch.cat([torch.zeros(B, 1), torch.full((B, F - 1), s)], dim=1)).to(self.device)
            with self.autocast():
                v = self.wrapped(torch.cat([z[:, :, :1], x], dim=2), t, keys, batch["ref_tokens"], self.attention)
            x = flow.step(x, v[:, :, 1:].float(), s, s_next)
        return torch.cat([z[:, :, :1], x], dim=2)
