"""What an autoencoder layout costs the recipe's DiT to train: seconds per stage-1/2 step (forward and backward,
block-causal, batch 4 x 33 frames, the duel-tiny DiT at width 128 and 128x128, random weights), side by side
in one run. Not a test.

Rows: the Wan layout's latents (8x in space, 4x in time: 9 latent frames of 8x8 tokens), the per-frame
autoencoder at 8x (33 latent frames of 8x8 tokens), at 4x with 4x4 patches (the same tokens from 4x latents)
and at 4x with the preset's 2x2 patches (33 latent frames of 16x16 tokens); then the 4x layout on shorter
windows that still reach the rolling cache's steady state (a chunk that sees `context_chunks` chunks and not
the prompt): 25 frames at the preset's 2 context chunks, 17 frames at 1. The recipe's stage 1 trains 4,000
such steps twice and stage 2 2,000 (bench/learns.py), which is what the last column multiplies.

Usage: python bench/dit_step.py [--frames 33] [--threads 2] [--steps 3] [--only "Wan 8x, 2x2 patches;..."]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
LAYOUTS = {
    "Wan 8x, 2x2 patches": {},
    "frame 8x, 2x2 patches": {"vae": {"kind": "frame", "dim_mult": [1, 2, 2, 2]}},
    "frame 4x, 4x4 patches": {"vae": {"kind": "frame", "dim_mult": [1, 2, 2]}, "patch_size": [1, 4, 4]},
    "frame 4x, 2x2 patches": {"vae": {"kind": "frame", "dim_mult": [1, 2, 2]}},
    "frame 4x, 4x4, 25 frames": {"vae": {"kind": "frame", "dim_mult": [1, 2, 2]}, "patch_size": [1, 4, 4],
                                 "frames": 25},
    "frame 4x, 4x4, 17 fr, ctx 1": {"vae": {"kind": "frame", "dim_mult": [1, 2, 2]}, "patch_size": [1, 4, 4],
                                    "frames": 17, "context_chunks": 1},
}
"""Each layout's fields over the shipped model config; "frames" (the training window) overrides --frames."""
RECIPE_STEPS = 4000 * 2 + 2000


def step_seconds(fields: dict, frames: int, steps: int) -> tuple[int, int, float]:
    """(latent frames, tokens per window, best seconds per step) of the shipped DiT with `fields` over its config."""
    from wantofight_model.config import ModelConfig
    from wantofight_model.model import WanToFight

    config = json.loads((ROOT / "bench" / "assets" / "duel-tiny-2026-12-06" / "config.json").read_text())["model"]
    config["vae"].update(fields.get("vae", {}), pretrained=None)
    frames = fields.get("frames", frames)
    config.update({k: v for k, v in fields.items() if k not in ("vae", "frames")})
    cfg = ModelConfig.from_dict(config)
    torch.manual_seed(0)
    model = WanToFight.from_config(cfg)
    F = 1 + (frames - 1) // cfg.vae_time_factor
    B = 4
    latents = torch.randn(B, cfg.latent_channels, F, cfg.latent_height, cfg.latent_width)
    keys = (torch.rand(B, 1 + cfg.vae_time_factor * (F - 1), cfg.num_players, cfg.num_keys) > 0.8).float()
    with torch.no_grad():
        refs = model.encode_references(torch.rand(B, cfg.num_players, 3, cfg.clip_image_size, cfg.clip_image_size) * 2 - 1)
    sigmas = torch.rand(B, F) * 1000
    opt = torch.optim.AdamW(model.dit.parameters(), lr=1e-4)
    times = []
    for _ in range(steps + 1):  # the first step warms up
        t = time.perf_counter()
        model.dit(latents, sigmas, keys, refs, "block_causal").pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        times.append(time.perf_counter() - t)
    return F, F * cfg.tokens_per_frame, min(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=33)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--only", default=None, help="layout names separated by ; (the first is the ratio's base)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"DiT width 128, 128x128, batch 4 x {args.frames} frames, block-causal, forward + backward + AdamW, "
          f"{args.threads} threads, best of {args.steps} steps")
    print(f"{'layout':28} {'latent frames':>13} {'tokens':>7} {'s/step':>7} {'x Wan':>6} {'recipe stages 1-2':>18}")
    base = None
    names = args.only.split(";") if args.only else list(LAYOUTS)
    unknown = [n for n in names if n not in LAYOUTS]
    if unknown:
        raise SystemExit(f"unknown layout {unknown[0]!r}; valid: {', '.join(LAYOUTS)}")
    for name in names:
        fields = LAYOUTS[name]
        F, tokens, s = step_seconds(fields, args.frames, args.steps)
        base = base or s
        print(f"{name:28} {F:>13} {tokens:>7} {s:>7.2f} {s / base:>5.1f}x {RECIPE_STEPS * s / 3600:>15.1f} h", flush=True)


if __name__ == "__main__":
    main()
