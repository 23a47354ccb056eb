"""Stage-1 training throughput of the tiny preset on CPU: from clips (VAE on the fly) vs from the latent
cache, side by side in one run, with each step's time split into data, encode and compute.

    python bench/train.py                          # records a small dataset with the collector first
    python bench/train.py --data DS_DIR --steps 20 --frames 33

data    = waiting for the DataLoader (decode the MP4 window, resize, collate)
encode  = VAE-encoding the frames and CLIP-encoding the reference images (0 from the cache)
compute = forward, backward, AdamW, EMA
The first `--warmup` steps of each run are left out (allocator and kernel warm-up).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


def build_dataset(work: Path, clip_frames: int) -> Path:
    from wantofight.annotate.curriculum import BuildOptions, build_curriculum
    from wantofight.collect.run import RunSettings, collect

    drill, match = work / "drill", work / "match"
    collect(RunSettings(policy="drill", fps=30, episodes=1, max_frames=900), drill, workers=1, progress=False)
    collect(RunSettings(policy="scripted", p2_policy="random", episodes=2, max_frames=400, fps=30, seed=1), match,
            workers=1, progress=False)
    out = work / "ds"
    build_curriculum([drill, match], out, BuildOptions(clip_frames=clip_frames, val_fraction=0.2, seed=0,
                                                       balance=False), workers=2, progress=False)
    return out


def run(data: Path, out: Path, args) -> dict:
    from wantofight.train.metrics import read_metrics
    from wantofight.train.run import train

    sets = [f"data.frames={args.frames}", f"data.batch_size={args.batch_size}", f"data.num_workers={args.workers}",
            "validation.every=0", "checkpoint.every=100000", "data.tiers=[single-action, dual-action]"]
    t0 = time.perf_counter()
    train("stage1", preset="tiny", data=data, out=out, max_steps=args.steps, sets=sets, progress=False)
    wall = time.perf_counter() - t0
    records = read_metrics(out)[args.warmup:]
    mean = lambda key: statistics.fmean(r[key] for r in records)  # noqa: E731
    step_s = mean("data_s") + mean("encode_s") + mean("compute_s")
    return {"samples_per_s": args.batch_size / step_s, "data_s": mean("data_s"), "encode_s": mean("encode_s"),
            "compute_s": mean("compute_s"), "step_s": step_s, "wall_s": wall, "steps": len(records)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, help="curriculum DS_DIR (default: record and build a small one)")
    parser.add_argument("--frames", type=int, default=33, help="frames per sample, 1 + 8n (default 33)")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--workers", type=int, default=0, help="DataLoader workers")
    args = parser.parse_args()

    import torch

    from wantofight.datasets.latent_cache import encode_dataset

    work = Path(tempfile.mkdtemp(prefix="wtf-bench-train-"))
    t0 = time.perf_counter()
    data = args.data or build_dataset(work, clip_frames=max(args.frames, 33))
    built = time.perf_counter() - t0
    t0 = time.perf_counter()
    latents = work / "latents"
    manifest = encode_dataset(data, latents, vae="tiny", clip="tiny", frames=args.frames, size=(64, 64), ref_size=64,
                              tiers="single,dual", progress=False)
    encoded = time.perf_counter() - t0
    windows = sum(sum(c.values()) for c in manifest["counts"].values())

    results = {"clips": run(data, work / "run-clips", args), "latent cache": run(latents, work / "run-latents", args)}
    print(f"tiny preset, CPU ({torch.get_num_threads()} threads), {args.frames} frames, batch {args.batch_size}, "
          f"{args.workers} loader workers, mean of {results['clips']['steps']} steps after {args.warmup} warm-up")
    if args.data is None:
        print(f"dataset recorded and built in {built:.1f} s")
    print(f"latent cache: {windows} windows encoded once in {encoded:.1f} s ({encoded / max(windows, 1):.2f} s/window)")
    print()
    print(f"| source | samples/s | step s | data s | encode s | compute s | data+encode share |")
    print(f"|---|---|---|---|---|---|---|")
    for name, r in results.items():
        share = (r["data_s"] + r["encode_s"]) / r["step_s"]
        print(f"| {name} | {r['samples_per_s']:.2f} | {r['step_s']:.3f} | {r['data_s']:.3f} | {r['encode_s']:.3f} "
              f"| {r['compute_s']:.3f} | {share:.0%} |")
    ratio = results["latent cache"]["samples_per_s"] / results["clips"]["samples_per_s"]
    print(f"\nlatent cache vs clips: {ratio:.1f}x samples/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
