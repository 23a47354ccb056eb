"""How well a game VAE round-trips frames: PSNR over 8-bit RGB (whole frames, the last latent frame,
the fighters' pixels) and the per-channel latent statistics its config stores."""

from __future__ import annotations

import math

import torch
from torch import nn

from wantofight.fidelity import eight_bit
from wantofight.datasets.sampler import eval_indices
from wantofight.train.vae.config import EVAL_STEP
from wantofight.train.vae.losses import fighter_mask

def db(squared: float, values: int) -> float:
    """PSNR in dB of a sum of squared 8-bit errors over `values` values."""
    from wantofight.fidelity import psnr_db

    return psnr_db(squared / max(1, values), peak=255.0)


def psnr_8bit(a: torch.Tensor, b: torch.Tensor) -> float:
    """PSNR in dB over 8-bit RGB (as bench/vae_recon.py) of frames in [-1, 1]."""
    return db((eight_bit(a) - eight_bit(b)).square().sum().item(), a.numel())


@torch.no_grad()
def measure(vae, dataset, count: int, size: tuple[int, int], batch_size: int = 2,
            stage: torch.Tensor | None = None, done=None, rows: tuple[float, float] | None = None) -> dict:
    """Round trip of fixed windows through a VAE (normalised latents, posterior mode):
    {"psnr": dB over 8-bit RGB, "windows", "latent_rms": RMS of the normalised latents}, and with a
    `stage` picture (`stage_picture`) "fighters_psnr": dB over the pixels that differ from it only. The
    stage is most of every frame, so PSNR alone can be high with no fighter drawn (docs/model.md).
    "last_psnr": dB over each window's last 4 frames (its last latent frame), where a VAE trained on
    windows shorter than these has drifted (docs/model.md). `done(n)` hears each batch of n windows."""
    from wantofight.datasets.loader import frames_to_model

    indices = eval_indices(len(dataset), count)
    squared, pixels, z_sq, z_n, fg_squared, fg_values = 0.0, 0, 0.0, 0, 0.0, 0
    last_squared, last_values = 0.0, 0
    for start in range(0, len(indices), batch_size):
        items = [dataset[(i, EVAL_STEP)] for i in indices[start:start + batch_size]]
        frames = frames_to_model(torch.stack([torch.as_tensor(it["frames"]) for it in items]), size)
        frames = frames.transpose(1, 2)  # (B, 3, T, H, W)
        z = vae.encode(frames)
        out = vae.decode(z)
        errors = (eight_bit(out) - eight_bit(frames)).square()
        squared += errors.sum().item()
        pixels += frames.numel()
        last_squared += errors[:, :, -4:].sum().item()
        last_values += errors[:, :, -4:].numel()
        if stage is not None:
            mask = fighter_mask(frames.float(), stage.to(frames), rows)
            fg_squared += (errors * mask).sum().item()
            fg_values += int(mask.sum().item()) * 3
        z_sq += z.float().square().sum().item()
        z_n += z.numel()
        if done is not None:
            done(len(items))
    result = {"psnr": db(squared, pixels), "last_psnr": db(last_squared, last_values), "windows": len(indices),
              "latent_rms": math.sqrt(z_sq / max(1, z_n))}
    if stage is not None:
        result["fighters_psnr"] = db(fg_squared, fg_values)
    return result


@torch.no_grad()
def latent_statistics(autoencoder: nn.Module, dataset, count: int, size: tuple[int, int],
                      batch_size: int = 2, done=None) -> tuple[list[float], list[float]]:
    """Per-channel mean and std of the posterior mode over `count` windows (Wan's latents_mean / _std);
    `done(n)` hears each batch of n windows."""
    from wantofight.datasets.loader import frames_to_model

    total = total_sq = None
    n = 0
    indices = eval_indices(len(dataset), count)
    for start in range(0, len(indices), batch_size):
        items = [dataset[(i, EVAL_STEP)] for i in indices[start:start + batch_size]]
        frames = frames_to_model(torch.stack([torch.as_tensor(it["frames"]) for it in items]), size)
        z = autoencoder.encode(frames.transpose(1, 2)).latent_dist.mode().double()  # (B, 16, F, h, w)
        z = z.transpose(0, 1).flatten(1)  # (16, B F h w)
        total = z.sum(1) if total is None else total + z.sum(1)
        total_sq = z.square().sum(1) if total_sq is None else total_sq + z.square().sum(1)
        n += z.shape[1]
        if done is not None:
            done(len(items))
    mean = total / n
    std = (total_sq / n - mean.square()).clamp_min(1e-12).sqrt()
    return [round(float(v), 6) for v in mean], [round(float(v), 6) for v in std]
