"""Streaming-rollout costs of the WanToFight generator on CPU (default: the `tiny` preset).

Prints, measured side by side in one run:
  - per-chunk latency at chunk 3 vs chunk 20 of a cached rollout (constant cost: ratio ~1);
  - the speed-up of the cached rollout over the reference path that recomputes a full
    block-causal forward over every chunk so far at each denoising step;
  - the rolling KV-cache bytes at chunk 3 and chunk 20 (equal: constant memory).
Not a test. Usage: python bench/model.py [--preset tiny] [--chunks 20] [--steps 4] [--repeats 5] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from wantofight_model.generate import StreamingGenerator
from wantofight_model.model import WanToFight
from wantofight_model.presets import PRESETS, get_preset


def rollout(generator: StreamingGenerator, config, chunks: int, steps: int, use_cache: bool, seed: int = 0):
    """Per-chunk wall times (s) and, for the cached path, the cache bytes after each chunk."""
    B, P = 1, config.num_players
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randn(B, config.latent_channels, 1, config.latent_height, config.latent_width, generator=gen)
    refs = torch.rand(B, P, 3, config.clip_image_size, config.clip_image_size, generator=gen) * 2 - 1
    stream = [(torch.rand(B, config.chunk_frames, P, config.num_keys, generator=gen) > 0.8).float()
              for _ in range(chunks)]
    caches = []
    model = generator.model
    original = model.new_cache
    model.new_cache = lambda b: caches.append(original(b)) or caches[-1]
    times, cache_bytes = [], []
    try:
        start = time.perf_counter()
        for _ in generator.generate_latents(prompt, stream, refs, steps=steps, generator=gen, use_cache=use_cache):
            now = time.perf_counter()
            times.append(now - start)
            cache_bytes.append(caches[0].nbytes if caches else 0)
            start = now
    finally:
        model.new_cache = original
    return times, cache_bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.chunks < 3:
        parser.error("--chunks must be >= 3")

    torch.manual_seed(0)
    config = get_preset(args.preset)
    model = WanToFight.from_config(config).eval()
    generator = StreamingGenerator(model)
    rollout(generator, config, 4, args.steps, True)  # warm-up

    cached, uncached, cache_bytes = [], [], None
    for r in range(args.repeats):
        times, cache_bytes = rollout(generator, config, args.chunks, args.steps, True, seed=r)
        cached.append(times)
        uncached.append(rollout(generator, config, args.chunks, args.steps, False, seed=r)[0])

    def median_at(runs, chunk):  # chunk is 1-based, as printed
        return statistics.median(run[chunk - 1] for run in runs)

    last = args.chunks
    c3, cl = median_at(cached, 3), median_at(cached, last)
    u3, ul = median_at(uncached, 3), median_at(uncached, last)
    total_c = statistics.median(sum(run) for run in cached)
    total_u = statistics.median(sum(run) for run in uncached)
    print(f"preset={args.preset} steps={args.steps} chunks={args.chunks} repeats={args.repeats} "
          f"threads={torch.get_num_threads()} (medians over repeats)")
    print(f"{'':32}{'chunk 3':>12}{f'chunk {last}':>12}{'ratio':>8}")
    print(f"{'cached rollout (ms/chunk)':32}{c3 * 1e3:12.2f}{cl * 1e3:12.2f}{cl / c3:8.2f}")
    print(f"{'full recompute (ms/chunk)':32}{u3 * 1e3:12.2f}{ul * 1e3:12.2f}{ul / u3:8.2f}")
    print(f"{'KV-cache bytes':32}{cache_bytes[2]:12d}{cache_bytes[last - 1]:12d}"
          f"{cache_bytes[last - 1] / cache_bytes[2]:8.2f}")
    print(f"speed-up of the cached rollout over full recompute: {ul / cl:.2f}x at chunk {last}, "
          f"{total_u / total_c:.2f}x over all {last} chunks")


if __name__ == "__main__":
    main()
