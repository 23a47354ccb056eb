"""What the game VAE is trained on: the training forward, the per-sample loss and the fighters' pixels
(the stage picture and the mask of what differs from it inside the game's fighter rows)."""

from __future__ import annotations

import torch
from torch import nn

from wantofight.datasets.sampler import eval_indices
from wantofight.train.vae.config import EVAL_STEP, VAETrainConfig

class Reconstruction(nn.Module):
    """The training forward as one module (so DDP sees it): encode, sample the posterior, decode."""

    def __init__(self, autoencoder: nn.Module):
        super().__init__()
        self.autoencoder = autoencoder

    def forward(self, frames: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """frames (B, 3, T, H, W) in [-1, 1], noise (B, 16, F, H/8, W/8) -> (output frames, mean, logvar)."""
        posterior = self.autoencoder.encode(frames).latent_dist
        z = posterior.mean + posterior.std * noise.to(posterior.mean)
        return self.autoencoder.decode(z).sample, posterior.mean, posterior.logvar


def pixel_differences(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Vertical and horizontal neighbour differences of (B, C, T, H, W) frames."""
    return x[..., 1:, :] - x[..., :-1, :], x[..., :, 1:] - x[..., :, :-1]


def reconstruction_loss(out: torch.Tensor, frames: torch.Tensor, mean: torch.Tensor, logvar: torch.Tensor,
                        s: VAETrainConfig, fighters: torch.Tensor | None = None) -> torch.Tensor:
    """Per-sample loss (B,): weighted L1, MSE, edge L1 and KL (module docstring), and with `fighters`
    ((B, 1, T, H, W) `fighter_mask` of the frames) the extra MSE of `s.fighter_weight` on its pixels."""
    diff = out.float() - frames.float()
    loss = s.l1_weight * diff.abs().flatten(1).mean(1)
    if s.mse_weight:
        loss = loss + s.mse_weight * diff.square().flatten(1).mean(1)
    if s.fighter_weight and fighters is not None:
        loss = loss + s.fighter_weight * (diff.square() * fighters).flatten(1).mean(1)
    if s.edge_weight:
        for a, b in zip(pixel_differences(out.float()), pixel_differences(frames.float())):
            loss = loss + s.edge_weight * (a - b).abs().flatten(1).mean(1)
    if s.kl_weight:
        mean, logvar = mean.float(), logvar.float()
        kl = 0.5 * (mean.square() + logvar.exp() - 1.0 - logvar)
        loss = loss + s.kl_weight * kl.flatten(1).mean(1)
    return loss


def posterior_mean_loss(autoencoder: nn.Module, frames: torch.Tensor, s: VAETrainConfig,
                        fighters: torch.Tensor | None = None) -> torch.Tensor:
    """The batch's mean `reconstruction_loss` of `autoencoder` (diffusers' API) decoding its posterior mean:
    `wtf train vae`'s objective with `vae.sample_posterior=false`, outside the trainer (measurements, tests)."""
    posterior = autoencoder.encode(frames).latent_dist
    out = autoencoder.decode(posterior.mean).sample
    return reconstruction_loss(out, frames, posterior.mean, posterior.logvar, s, fighters).mean()


@torch.no_grad()
def stage_picture(dataset, count: int, size: tuple[int, int]) -> torch.Tensor:
    """The per-pixel median of the first frames of `count` fixed windows, (3, H, W) in [-1, 1]: the stage
    without the fighters, who stand somewhere else in most of them."""
    from wantofight.datasets.loader import frames_to_model

    firsts = [frames_to_model(torch.as_tensor(dataset[(i, EVAL_STEP)]["frames"])[None, :1], size)[0, 0]
              for i in eval_indices(len(dataset), count)]
    return torch.stack(firsts).median(0).values


def fighter_mask(frames: torch.Tensor, stage: torch.Tensor, rows: tuple[float, float] | None = None) -> torch.Tensor:
    """(B, 1, T, H, W) 1 where (B, 3, T, H, W) frames differ from the stage picture, grown by one pixel so
    their outlines count, on the rows the game's fighters can be drawn in (`rows`, fractions of the height,
    datasets/screen.py `fighter_rows`; None: every row, the HUD's changing parts included)."""
    from wantofight.datasets.screen import band_mask

    differs = ((frames - stage[None, :, None]).abs().sum(1, keepdim=True) > 0.1).float()
    grown = torch.nn.functional.max_pool3d(differs, (1, 3, 3), 1, (0, 1, 1))
    return grown * band_mask(rows, frames.shape[3]).to(grown)[:, None]
