"""Game autoencoders side by side for the same CPU time: the Wan layout (8x and 4x in space; the shipped VAE
trained further) against the per-frame 2D autoencoder (8x and 4x), each trained by `wtf train vae` on the
recipe's curriculum and scored by `wtf benchmark run --model vae` on the recipe's suite, beside the probe's
reading of their round trips (docs/model.md, "A per-frame autoencoder").

"The shipped model" here is the Wan-layout `duel-tiny` shipped on 2026-12-06 and replaced on 2026-12-07, kept as it
was in bench/assets/duel-tiny-2026-12-06 so that these measurements start from the same weights.

    python bench/vae_layouts.py [--minutes 20] [--jobs 2] [--max-cases 2] [--only frame-8x,wan-8x]

Needs bench/recipe.py's recordings and suite, the recipe's curriculum (bench/learns.py step 2) and the
benchmark's probe (python bench/probe.py). Each variant's step count is its budget over its own seconds per
step, timed here on the same batch shape before it trains (one torch thread per job), so every variant gets
its whole cosine schedule in about the same time. Writes runs/vae-layouts/VARIANT and one benchmark report
(runs/vae-layouts/report), then prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recipe  # noqa: E402
import vae_probe  # noqa: E402

ROOT = recipe.ROOT
SHIPPED = ROOT / "bench" / "assets" / "duel-tiny-2026-12-06" / "vae"  # the Wan-layout VAE shipped until 2026-12-07
COMMON = ["--size", "128x128", "--set", "precision=bf16", "--set", "data.batch_size=1", "--set", "data.frames=33",
          "--set", "vae.sample_posterior=false", "--set", "vae.crop=0", "--set", "vae.fighter_weight=20",
          "--set", "validation.every=0", "--set", "checkpoint.every=100000"]
SCRATCH = ["--set", "optim.lr=2e-3"]
VARIANTS = {
    # the shipped VAE (3,500 steps of the recipe) trained further with the recipe's last step's settings
    "wan-8x-further": ["--set", f"model.vae.pretrained={SHIPPED}", "--set", "vae.clip_frames=33",
                       "--set", "optim.lr=3e-4", "--set", "optim.warmup_steps=20"],
    "wan-8x": [*SCRATCH, "--set", "model.vae.is_residual=true"],
    "wan-4x": [*SCRATCH, "--set", "model.vae.is_residual=true", "--set", "model.vae.dim_mult=[1, 4, 4]",
               "--set", "model.vae.temperal_downsample=[true, true]"],
    "frame-8x": [*SCRATCH, "--set", "model.vae.kind=frame", "--set", "model.vae.base_dim=32",
                 "--set", "model.vae.dim_mult=[1, 2, 2, 2]"],
    "frame-4x": [*SCRATCH, "--set", "model.vae.kind=frame", "--set", "model.vae.base_dim=32",
                 "--set", "model.vae.dim_mult=[1, 2, 2]"],
    # frame-4x (trained first, into the same --out) continued: what more steps buy the chosen layout
    "frame-4x-further": ["--set", "model.vae.pretrained={out}/frame-4x", "--set", "model.vae.kind=frame",
                         "--set", "model.vae.base_dim=32", "--set", "model.vae.dim_mult=[1, 2, 2]",
                         "--set", "optim.lr=1e-3", "--set", "optim.warmup_steps=20"],
}
FPS = 30
"""Frames per second of the recordings (collect's default): the DiT's tokens per second of video."""


def settings(variant: str) -> tuple[dict, int]:
    """The variant's `model.vae` architecture fields (not the folder it starts from) and clip_frames, read back
    from its --set list."""
    sets = dict(v.split("=", 1) for v in VARIANTS[variant][1::2])
    import yaml

    arch = {k.removeprefix("model.vae."): yaml.safe_load(v) for k, v in sets.items()
            if k.startswith("model.vae.") and k != "model.vae.pretrained"}
    return arch, int(sets.get("vae.clip_frames", 9))


def seconds_per_step(variant: str, repeats: int = 4) -> float:
    """Median seconds of one training step (forward, loss, backward, AdamW) on the variant's batch shape."""
    import statistics

    import torch

    from wantofight.train.vae.config import GAME_VAE, VAETrainConfig
    from wantofight.train.vae.losses import Reconstruction, posterior_mean_loss
    from wantofight_model.config import VAEConfig
    from wantofight_model.vae import build_vae

    arch, clip = settings(variant)
    fields = {**GAME_VAE, **arch}
    vae = build_vae(VAEConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}))
    model = Reconstruction(vae.autoencoder.float()).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    frames = torch.rand(1, 3, clip, 128, 128) * 2 - 1
    fighters = (torch.rand(1, 1, clip, 128, 128) < 0.05).float()
    s = VAETrainConfig(fighter_weight=20, sample_posterior=False, clip_frames=clip)
    times = []
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = posterior_mean_loss(model.autoencoder, frames, s, fighters)
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:])


def train(variant: str, minutes: float, out: Path, data: Path) -> dict:
    folder = out / variant
    if (folder / "report.json").is_file():
        return json.loads((folder / "report.json").read_text())
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}
    step = float(subprocess.run([sys.executable, __file__, "--time-step", variant], env=env, check=True,
                                capture_output=True, text=True).stdout.split()[-1])
    steps = max(20, round(minutes * 60 / (step * 1.15)))  # 15% for data loading and the logging
    print(f"{variant}: {step:.2f} s a step -> {steps} steps", flush=True)
    log = out / f"{variant}.log"
    with log.open("w") as f:
        done = subprocess.run(["wtf", "train", "vae", "--data", str(data), "--out", str(folder), "--steps", str(steps),
                               "--no-progress", *COMMON, *(a.format(out=out) for a in VARIANTS[variant])],
                              env=env, stdout=f,
                              stderr=subprocess.STDOUT)
    if done.returncode:
        raise SystemExit(f"{variant} failed; see {log}")
    return json.loads((folder / "report.json").read_text())


def benchmark(folder: Path, report: Path, probe: Path, max_cases: int) -> None:
    subprocess.run(["wtf", "benchmark", "run", str(ROOT / "data" / "bench" / "suite"), "--probe", str(probe),
                    "--out", str(report), "--model", "vae", "--vae", str(folder), "--max-cases", str(max_cases),
                    "--scenarios", "single-action,dual-action,static,jump_over", "--no-lpips", "--videos", "0",
                    "--resume", "--no-progress"], check=True, stdout=subprocess.DEVNULL)


def dit_cost(variant: str) -> tuple[int, int]:
    """(latent frames per second of video, DiT tokens per second of video) at 128x128 with 2x2 patches."""
    arch, _ = settings(variant)
    time_factor = 1 if arch.get("kind") == "frame" else 4
    space = 2 ** (len(arch.get("dim_mult", [1, 4, 4, 4])) - 1)
    latent_frames = FPS / time_factor
    return round(latent_frames), round(latent_frames * (128 // space // 2) ** 2)


def generation_ms(folder: Path, variant: str, chunks: int = 6) -> float:
    """Milliseconds per 8 frames of video that the recipe's DiT (width 128, random weights, 4-step chunks, one
    thread) takes streaming through this VAE at 128x128: what the layout's latent grid costs the DiT."""
    from dataclasses import replace

    import numpy as np
    import torch

    from wantofight.inference.generation import LoadedGenerator, build_vae, stream_chunks
    from wantofight_model.model import WanToFight
    from wantofight_model.presets import get_preset

    arch, _ = settings(variant)
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in arch.items()}
    base = get_preset("tiny")
    config = replace(base, height=128, width=128, dim=128, ffn_dim=256,
                     vae=replace(base.vae, **fields, pretrained=str(folder)))
    torch.manual_seed(0)
    model = WanToFight.from_config(config).eval().requires_grad_(False)
    loaded = LoadedGenerator(model, build_vae(config), config, "stage3", variant)
    prompt = torch.zeros(1, 3, 1, 128, 128)
    refs = torch.zeros(1, 2, 3, config.clip_image_size, config.clip_image_size)
    frames, t0 = 0, 0.0
    for k, (chunk, _) in enumerate(stream_chunks(loaded, prompt, np.zeros((1 + 8 * chunks, 2), np.uint16), refs,
                                                 steps=4)):
        if k == 1:
            t0 = time.perf_counter()  # chunk 1 warms up; time chunks 2..
        elif k > 1:
            frames += len(chunk)
    return 8000 * (time.perf_counter() - t0) / frames


def table(out: Path, reports: dict, probe: Path, windows: int) -> str:
    from wantofight.benchmark.report import fmt_ci

    bench = json.loads((out / "report" / "report.json").read_text())
    by = {v["name"]: v for v in bench["variants"]}
    gains = bench.get("gain_over_first_frame", {}).get("variants", {})
    lines = ["| VAE | steps | train s | val PSNR / fighters' PSNR dB | probe state on round trip (originals) | "
             "actor gain | single gain | x error px | latent frames / DiT tokens per s of video | ms per 8 frames |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for variant, rep in reports.items():
        name = f"vae {variant}"
        v, g = by.get(name, {}), gains.get(name, {})
        hits = vae_probe.round_trip_reading(out / variant, probe, ROOT / "data" / "bench", windows)
        sc = [s for s in v.get("scenarios", {}).values() if s.get("cases") and s.get("x_error") is not None]
        x_err = sum(s["x_error"] for s in sc) / max(1, len(sc))
        cell = lambda c: fmt_ci(g[c]["gain"], g[c]["ci"], "gain", g[c]["cases"]) if c in g else "n/a"  # noqa: E731
        lf, tokens = dit_cost(variant)
        lines.append(f"| {variant} | {rep['steps']} | {rep['train_seconds']:.0f} | {rep['psnr']['val']:.1f} / "
                     f"{rep['fighters_psnr']['val']:.1f} | {vae_probe.share(hits, 'state'):.3f} "
                     f"({vae_probe.share(hits, 'state_orig'):.3f}) | {cell('actor')} | {cell('single-action')} | "
                     f"{x_err:.1f} | {lf} / {tokens} | {generation_ms(out / variant, variant):.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0, help="training budget of each variant")
    parser.add_argument("--jobs", type=int, default=2, help="variants trained at once (one thread each)")
    parser.add_argument("--max-cases", type=int, default=2, help="benchmark cases per scenario")
    parser.add_argument("--windows", type=int, default=1, help="probe windows per held-out episode")
    parser.add_argument("--only", default=",".join(VARIANTS), help="variants, comma-separated")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "vae-layouts")
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "learns" / "curriculum")
    parser.add_argument("--probe", type=Path, default=ROOT / "runs" / "bench-probe" / "128x128")
    parser.add_argument("--time-step", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.time_step:
        import torch

        torch.set_num_threads(1)
        print(seconds_per_step(args.time_step))
        return
    variants = [v for v in args.only.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"--only {','.join(unknown)}: unknown; valid: {', '.join(VARIANTS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        reports = dict(zip(variants, pool.map(lambda v: train(v, args.minutes, args.out, args.data), variants)))
    for variant in variants:
        benchmark(args.out / variant, args.out / "report", args.probe, args.max_cases)
    subprocess.run(["wtf", "benchmark", "run", str(ROOT / "data" / "bench" / "suite"), "--probe", str(args.probe),
                    "--out", str(args.out / "report"), "--model", "emulator", "--model", "first-frame",
                    "--max-cases", str(args.max_cases), "--scenarios", "single-action,dual-action,static,jump_over",
                    "--no-lpips", "--videos", "0", "--resume", "--no-progress"], check=True, stdout=subprocess.DEVNULL)
    import torch

    torch.set_num_threads(1)
    print(table(args.out, reports, args.probe, args.windows))


if __name__ == "__main__":
    main()
