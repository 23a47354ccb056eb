"""Stage-1 training step on a GPU: `wan-1.3b`, 161 frames at 512x384, batch 1, bf16 autocast with
gradient checkpointing, random weights, synthetic latents. Writes bench/results/gpu_train.md.

Runs the real `Stage1Trainer.step()` (batch -> loss -> backward -> clip -> AdamW -> EMA) on an
in-memory latent dataset, so the numbers are the trainer's, not a stripped-down loop's. Random
weights cost exactly what trained ones do. One process, one GPU (no FSDP sharding).

    python bench/gpu_train.py                                   # any CUDA GPU, < 8 minutes
    python bench/gpu_train.py --preset tiny --device cpu --frames 17 --steps 2 --warmup 1   # smoke test
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


class SyntheticLatents:
    """A latent cache in memory: random normalised latents, keys and reference tokens of the preset's sizes."""

    is_latent = True

    def __init__(self, config, frames: int, n: int = 8, ref_tokens: int = 257):
        self.shape = (config.latent_channels, 1 + (frames - 1) // 4, config.latent_height, config.latent_width)
        self.frames, self.ref, self.clip_dim = frames, ref_tokens, config.clip_dim
        self.item_tiers = ["single-action"] * n

    def __len__(self) -> int:
        return len(self.item_tiers)

    def __getitem__(self, key) -> dict:
        i = key[0] if isinstance(key, tuple) else key
        gen = torch.Generator().manual_seed(i)
        keys = (torch.rand(self.frames, 2, 16, generator=gen) > 0.8).float()
        return {"latents": torch.randn(self.shape, generator=gen), "keys": keys,
                "effective": torch.ones(self.frames, 2, dtype=torch.bool),
                "ref_tokens": torch.randn(2, self.ref, self.clip_dim, generator=gen), "tier": "single-action",
                "clip_id": f"synthetic{i}", "start": 0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="wan-1.3b", help="model preset (wan-1.3b; tiny for a CPU smoke test)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--frames", type=int, default=161, help="frames per sample, 1 + 8n (161 = 41 latents)")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--steps", type=int, default=5, help="timed optimiser steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    parser.add_argument("--no-checkpointing", action="store_true", help="disable gradient checkpointing")
    parser.add_argument("--out", type=Path, default=RESULTS / "gpu_train.md")
    args = parser.parse_args()

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA device; this benchmark needs a GPU (smoke-test it with --preset tiny --device cpu)",
              file=sys.stderr)
        return 2

    from wantofight.train.config import resolve_config
    from wantofight.train.stage1 import Stage1Trainer

    ckpt = "false" if args.no_checkpointing else "true"
    config = resolve_config(args.preset, sets=[f"data.frames={args.frames}", f"data.batch_size={args.batch_size}",
                                               f"precision={args.precision}", f"model.gradient_checkpointing={ckpt}",
                                               "validation.every=0", "checkpoint.every=100000", "data.num_workers=0",
                                               "optim.warmup_steps=0", "data.curriculum=[{until: null, weights: "
                                               "{single-action: 1}}]", "parallel=none"])
    model_config = config.model_config()
    data = SyntheticLatents(model_config, args.frames)
    t0 = time.perf_counter()
    trainer = Stage1Trainer(config, None, Path(tempfile.mkdtemp(prefix="wtf-gpu-train-")), device=args.device,
                            progress=False, datasets={"train": data, "val": None}).setup()
    build_s = time.perf_counter() - t0
    params = sum(p.numel() for p in trainer.model.dit.parameters())

    times = []
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    for i in range(args.warmup + args.steps):
        start = time.perf_counter()
        stats = trainer.step()
        trainer.step_count += 1
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
        print(f"step {i + 1}: {time.perf_counter() - start:.3f} s  loss {stats.loss:.4f}", flush=True)
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else float("nan")
    reserved = torch.cuda.max_memory_reserved(device) / 2**30 if device.type == "cuda" else float("nan")
    step_s = statistics.median(times)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    F = 1 + (args.frames - 1) // 4
    tokens = F * model_config.tokens_per_frame
    lines = [
        f"# Stage-1 training step: {args.preset}",
        "",
        f"`python bench/gpu_train.py {' '.join(sys.argv[1:])}` on {name}, torch {torch.__version__}.",
        f"{args.frames} frames ({F} latent frames, {tokens} tokens) at {model_config.width}x{model_config.height}, "
        f"batch {args.batch_size}, {args.precision} autocast, gradient checkpointing "
        f"{'off' if args.no_checkpointing else 'on'}, AdamW + EMA, random weights, synthetic latents; "
        f"median of {args.steps} steps after {args.warmup} warm-up. DiT parameters: {params / 1e6:,.1f} M.",
        "",
        "| step s (median) | step s (min / max) | samples/s | frames/s | peak allocated GiB | peak reserved GiB |",
        "|---|---|---|---|---|---|",
        f"| {step_s:.3f} | {min(times):.3f} / {max(times):.3f} | {args.batch_size / step_s:.3f} | "
        f"{args.batch_size * args.frames / step_s:.1f} | {peak:.1f} | {reserved:.1f} |",
        "",
        f"Model build: {build_s:.1f} s.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
