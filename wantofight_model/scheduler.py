"""Flow-matching noise schedule and Euler samplers with Wan's timestep shift.

Convention (Wan / rectified flow): x_sigma = (1 - sigma) x0 + sigma noise, sigma in [0, 1], the
model predicts the velocity v = noise - x0, and the timestep it is told is t = 1000 sigma.
Wan's shift moves sampling steps towards high noise: sigma' = s sigma / (1 + (s - 1) sigma).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from wantofight_model.config import SAMPLERS


@dataclass(frozen=True)
class FlowMatchScheduler:
    """Sigma schedule and update rules; stateless."""

    num_train_timesteps: int = 1000
    """t = num_train_timesteps * sigma is what the DiT's time embedding receives."""
    shift: float = 5.0
    """Wan's timestep shift s (Wan2.1 T2V: 5)."""

    def __post_init__(self) -> None:
        if self.shift <= 0:
            raise ValueError(f"shift must be > 0, got {self.shift}")

    def shift_sigma(self, sigma: torch.Tensor) -> torch.Tensor:
        return self.shift * sigma / (1 + (self.shift - 1) * sigma)

    def sigmas(self, steps: int) -> torch.Tensor:
        """steps + 1 shifted sigmas from 1 down to 0. For 4 steps: 1, .9375, .8333, .625, 0 (Self-Forcing's
        1000/750/500/250 list after the shift)."""
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        return self.shift_sigma(torch.linspace(1.0, 0.0, steps + 1, dtype=torch.float64)).float()

    def timestep(self, sigma: torch.Tensor | float) -> torch.Tensor:
        return torch.as_tensor(sigma, dtype=torch.float32) * self.num_train_timesteps

    @staticmethod
    def add_noise(x0: torch.Tensor, noise: torch.Tensor, sigma: torch.Tensor | float) -> torch.Tensor:
        """x_sigma; sigma broadcastable to x0 (e.g. (B, 1, F, 1, 1) for per-frame noise levels)."""
        return (1 - sigma) * x0 + sigma * noise

    @staticmethod
    def velocity_target(x0: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """The training target of the DiT."""
        return noise - x0

    @staticmethod
    def step(x: torch.Tensor, velocity: torch.Tensor, sigma: float, sigma_next: float, sampler: str = "euler",
             noise: torch.Tensor | None = None) -> torch.Tensor:
        """One update from sigma to sigma_next.

        "euler": the ODE step x + (sigma_next - sigma) v (teacher and student alike).
        "x0_renoise": predict x0 = x - sigma v and re-noise it to sigma_next with fresh `noise`
        (the stochastic few-step sampler used by DMD / Self-Forcing students).
        """
        if sampler == "euler":
            return x + (sigma_next - sigma) * velocity
        if sampler == "x0_renoise":
            x0 = x - sigma * velocity
            if sigma_next == 0:
                return x0
            if noise is None:
                raise ValueError("sampler 'x0_renoise' needs fresh noise")
            return (1 - sigma_next) * x0 + sigma_next * noise
        raise ValueError(f"unknown sampler {sampler!r}; valid: {', '.join(SAMPLERS)}")
