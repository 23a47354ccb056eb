"""Weighting the fighters' latent cells in the flow-matching loss (`fighter_weight`, docs/training.md).

The fighters are a few of a 16x16 latent's 256 cells, and the stage behind them is the same in every
clip, so a small DiT spends a plain MSE on the stage and draws no fighters at all (docs/model.md).
The latent analogue of the game VAE's `vae.fighter_weight`:

    stage latent   the per-cell median of fixed train windows' latents, one per latent frame index
                   (a causal VAE's first latent frames differ from its later ones even on a still stage)
    fighter cells  the cells whose latent differs from it by more than THRESHOLD (mean over channels),
                   inside the rows the game's fighters can be drawn in (datasets/screen.py `fighter_rows`):
                   the HUD's changing parts (health bars, timer) differ too but are no fighter
    weights        1 + fighter_weight on those cells, 1 elsewhere, multiplying the squared error
"""

from __future__ import annotations

import torch

THRESHOLD = 0.3
"""Mean absolute difference over channels, in normalised latent units (std ~1), that marks a cell."""


def stage_latent(latents: torch.Tensor) -> torch.Tensor:
    """(C, F, h, w) per-cell median of (N, C, F, h, w) windows' latents: the stage without the fighters,
    who stand somewhere else in most windows."""
    return latents.float().median(0).values


def fighter_cells(z: torch.Tensor, stage: torch.Tensor, rows: tuple[float, float] | None = None) -> torch.Tensor:
    """(B, 1, F, h, w) 1.0 where (B, C, F, h, w) latents differ from the (C, F', h, w) stage latent, on the
    latent rows that overlap `rows` (fractions of the height; None: every row); frames past F' compare
    with its last frame (the causal VAE's later latent frames are alike)."""
    from wantofight.datasets.screen import band_mask

    frames = z.shape[2]
    if stage.shape[1] < frames:
        stage = torch.cat([stage, stage[:, -1:].expand(-1, frames - stage.shape[1], -1, -1)], dim=1)
    differs = (z.float() - stage[None, :, :frames].to(z.device)).abs().mean(1, keepdim=True)
    band = band_mask(rows, z.shape[3]).to(z.device)[:, None]  # (h, 1)
    return (differs > THRESHOLD).float() * band


def cell_weights(z: torch.Tensor, stage: torch.Tensor, weight: float,
                 rows: tuple[float, float] | None = None) -> torch.Tensor:
    """(B, 1, F, h, w) loss weights: 1 + `weight` on the fighter cells, 1 elsewhere."""
    return 1.0 + weight * fighter_cells(z, stage, rows)
