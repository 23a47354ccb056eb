"""VAE training variants side by side: the same real clips in the same order, a few hundred steps each.

    python bench/vae_variants.py --data DS_DIR [--steps 400] [--variants mode-full-lr2e-3,sample-crop64-lr1e-3]

A direct loop over the `wtf train vae` architecture (base 8, (1, 4, 4, 4)), bf16 autocast, AdamW,
50 warm-up steps, gradient clip 1, MSE (+ 1e-6 KL), one torch thread. Every 100 steps: PSNR over
8-bit RGB of 6 fixed val windows of 9 whole 128x128 frames (posterior mode), and the seconds so far.
Writes /tmp/vae_variant_NAME.png (3 val frames over their reconstructions) so you can see whether the
fighters come through, which PSNR alone does not say (the stage is most of every frame).
`fg`: weight (1 + fg) on pixels that differ from the per-pixel median of 120 train frames (the
fighters, the HUD's changing parts).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

VARIANTS = {
    "sample-crop64-lr1e-3": dict(sample=True, crop=64, lr=1e-3, batch=2),  # `wtf train vae`'s defaults
    "mode-crop64-lr1e-3": dict(sample=False, crop=64, lr=1e-3, batch=2),
    "mode-crop64-lr3e-3": dict(sample=False, crop=64, lr=3e-3, batch=2),
    "mode-full-lr2e-3": dict(sample=False, crop=0, lr=2e-3, batch=1),
    "mode-full-lr2e-3-fg20": dict(sample=False, crop=0, lr=2e-3, batch=1, fg=20.0),
}
SIZE = (128, 128)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="curriculum DS_DIR with a val split")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    from wantofight.images import upscale, write_png
    from wantofight.datasets.clip_dataset import ClipDataset
    from wantofight.datasets.loader import frames_to_model
    from wantofight.train.vae.measure import psnr_8bit
    from wantofight_model.config import VAEConfig
    from wantofight_model.vae import WanVAE

    train = ClipDataset(args.data, "train", frames=9, size=SIZE, pixels="uint8")
    val = ClipDataset(args.data, "val", frames=9, size=SIZE, pixels="uint8")
    cache: dict[tuple[str, int], torch.Tensor] = {}

    def window(ds, split: str, i: int) -> torch.Tensor:  # (3, T, H, W) in [-1, 1]
        if (split, i) not in cache:
            cache[split, i] = frames_to_model(ds[i]["frames"][None], SIZE).permute(0, 2, 1, 3, 4)[0]
        return cache[split, i]

    val_x = torch.stack([window(val, "val", int(i)) for i in np.linspace(0, len(val) - 1, 6).astype(int)])
    background = torch.stack([window(train, "train", int(i))[:, 0] for i in
                              np.linspace(0, len(train) - 1, 120).astype(int)]).median(0).values  # (3, H, W)
    order = np.random.default_rng(0).integers(0, len(train), args.steps * 2)

    def batch(step: int, v: dict) -> tuple[torch.Tensor, torch.Tensor]:
        xs, ws = [], []
        for j in range(v["batch"]):
            x, bg = window(train, "train", int(order[step * 2 + j])), background
            if v["crop"]:
                y0, x0 = np.random.default_rng(step * 7 + j).integers(0, SIZE[0] - v["crop"] + 1, 2)
                x, bg = (t[..., y0:y0 + v["crop"], x0:x0 + v["crop"]] for t in (x, bg))
            fg = ((x - bg[:, None]).abs().sum(0, keepdim=True) > 0.1).float()
            xs.append(x)
            ws.append(1 + v.get("fg", 0.0) * fg)
        return torch.stack(xs), torch.stack(ws)

    print(f"{'variant':<24} " + " ".join(f"{s:>12}" for s in range(100, args.steps + 1, 100)) + "   (dB / s)")
    for name in args.variants.split(","):
        v = VARIANTS[name]
        torch.manual_seed(0)
        ae = WanVAE.from_config(VAEConfig(base_dim=8, dim_mult=(1, 4, 4, 4), num_res_blocks=1)).autoencoder.train()
        opt = torch.optim.AdamW(ae.parameters(), lr=v["lr"], weight_decay=0.0)
        row, t0 = [], time.perf_counter()
        for step in range(args.steps):
            x, w = batch(step, v)
            for group in opt.param_groups:
                group["lr"] = v["lr"] * min(1.0, (step + 1) / 50)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                post = ae.encode(x).latent_dist
                z = post.mean + post.std * torch.randn_like(post.mean) if v["sample"] else post.mean
                out = ae.decode(z).sample
            mean, logvar = post.mean.float(), post.logvar.float()
            kl = 0.5 * (mean.square() + logvar.exp() - 1 - logvar).mean()
            loss = (w * (out.float() - x).square()).mean() / w.mean() + 1e-6 * kl
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(ae.parameters(), 1.0)
            opt.step()
            if (step + 1) % 100 == 0:
                ae.eval()
                with torch.no_grad():
                    rec = torch.cat([ae.decode(ae.encode(val_x[i:i + 2]).latent_dist.mode()).sample
                                     for i in range(0, len(val_x), 2)])
                ae.train()
                row.append(f"{psnr_8bit(rec, val_x):5.2f}/{time.perf_counter() - t0:<6.0f}")
        print(f"{name:<24} " + " ".join(f"{r:>12}" for r in row), flush=True)
        to8 = lambda t: ((t[:3, :, 4].permute(0, 2, 3, 1).clamp(-1, 1) + 1) * 127.5).round().byte().numpy()  # noqa: E731
        picture = np.concatenate([np.concatenate(list(to8(val_x)), 1), np.concatenate(list(to8(rec)), 1)], 0)
        write_png(Path(f"/tmp/vae_variant_{name}.png"), upscale(picture[None], 2)[0])


if __name__ == "__main__":
    main()
