"""An adversarial patch critic on the fighters, for the game VAE (`--set vae.adv_weight=...`).

An MSE-trained VAE that is unsure of a pose draws the average of the poses it could be: the fighters
stand in the right place as blobs the benchmark's probe cannot read (docs/model.md, "What the round trip
loses"). A critic that learns to tell real fighter patches from reconstructed ones penalises the blur
itself, which no pixel loss does (VQGAN's patch discriminator; no perceptual network's weights can be
downloaded here, and this one trains from scratch in the same run).

    critic = FighterCritic()
    d_loss = critic_loss(critic(images(real)), critic(images(fake.detach())), cells)   # critic step
    g_loss = generator_loss(critic(images(fake)), cells)                                # decoder's term

Letters: B batch, T frames, N = B T images, H W pixels, h w = H/4 W/4 critic cells.
Only the cells over the fighters count (`fighter_cells` of the VAE's `fighter_mask`): the stage is drawn
well by MSE alone, and a critic free to judge it would spend its capacity there.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

CELL = 4
"""Pixels per critic cell side: the two stride-2 convolutions."""


class FighterCritic(nn.Module):
    """(N, 3, H, W) frames in [-1, 1] -> (N, 1, H/4, W/4) logits, high for real. Each logit sees a
    26-pixel square, a whole fighter at 128x128 (about 9 x 14 pixels), so it judges a pose, not a texture."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(3, width, 4, 2, 1), nn.LeakyReLU(0.2),              # (N, w, H/2, W/2)
            nn.Conv2d(width, 2 * width, 4, 2, 1), nn.LeakyReLU(0.2),      # (N, 2w, h, w)
            nn.Conv2d(2 * width, 2 * width, 3, 1, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(2 * width, 1, 3, 1, 1),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.layers(images)


def images(frames: torch.Tensor) -> torch.Tensor:
    """(B, C, T, H, W) -> (B T, C, H, W): the critic judges frames one by one."""
    return frames.transpose(1, 2).flatten(0, 1)


def fighter_cells(fighters: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, H, W) fighter mask -> (B T, 1, H/4, W/4): 1 on the critic cells that hold a fighter pixel."""
    return F.max_pool2d(images(fighters.float()), CELL)


def _cell_mean(values: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
    """Mean of (N, 1, h, w) values over the fighter cells, per frame (N,); 0 for a frame without any."""
    return (values * cells).flatten(1).sum(1) / cells.flatten(1).sum(1).clamp_min(1.0)


def critic_loss(real: torch.Tensor, fake: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
    """Hinge loss of the critic's (N, 1, h, w) logits on real and reconstructed frames, on the fighter cells."""
    return (_cell_mean(F.relu(1.0 - real.float()), cells) + _cell_mean(F.relu(1.0 + fake.float()), cells)).mean()


def generator_loss(fake: torch.Tensor, cells: torch.Tensor, batch_size: int) -> torch.Tensor:
    """The decoder's adversarial term per sample (B,): minus the critic's mean logit on its fighter cells."""
    return -_cell_mean(fake.float(), cells).view(batch_size, -1).mean(1)


def adaptive_scale(reconstruction: torch.Tensor, adversarial: torch.Tensor, last_layer: torch.Tensor) -> torch.Tensor:
    """||d reconstruction / d last_layer|| / ||d adversarial / d last_layer||, detached and at most 1e4
    (VQGAN): the adversarial term's gradient at the decoder's output layer as large as the pixel losses',
    so `vae.adv_weight` is a ratio, not a scale to search for per loss and resolution."""
    g_rec, = torch.autograd.grad(reconstruction, last_layer, retain_graph=True)
    g_adv, = torch.autograd.grad(adversarial, last_layer, retain_graph=True)
    return (g_rec.norm() / (g_adv.norm() + 1e-4)).clamp(0.0, 1e4).detach()


__all__ = ["FighterCritic", "adaptive_scale", "critic_loss", "fighter_cells", "generator_loss", "images"]
