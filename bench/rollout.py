"""What the clean cache write costs: ms per chunk of a cached rollout in both `cache_write` modes.

The clean write (`cache_write="clean"`, the presets' default) spends one extra forward pass per chunk
over the finished chunk's x0; the paper's write (`"denoising-step"`) reuses the penultimate denoising
step's pass. Both modes run the same model and inputs, interleaved repeat by repeat, in one run; the
printed ratio is clean / denoising-step (about (steps + 1) / steps if a forward pass is all a chunk
costs). Rows: the `tiny` preset (64x64) and the shipped duel-tiny's geometry (128x128, width 128,
random weights). Not a test.

Usage: python bench/rollout.py [--chunks 12] [--steps 4] [--repeats 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace

import torch

from wantofight_model.generate import StreamingGenerator
from wantofight_model.model import WanToFight
from wantofight_model.presets import get_preset

from model import rollout  # bench/model.py: `python bench/rollout.py` puts bench/ first on the path

MODES = ("denoising-step", "clean")


def chunk_times(model: WanToFight, chunks: int, steps: int, seed: int) -> list[float]:
    """Wall time (s) of each chunk of one cached rollout (denoising, cache write and commit): the
    timing loop of bench/model.py, on the same random inputs."""
    times, _ = rollout(StreamingGenerator(model), model.config, chunks, steps, use_cache=True, seed=seed)
    return times


def measure(name: str, config, args) -> str:
    torch.manual_seed(0)
    base = WanToFight.from_config(config).eval()
    models = {}
    for mode in MODES:  # the same weights: only the write differs
        models[mode] = WanToFight.from_config(replace(config, cache_write=mode)).eval()
        models[mode].load_state_dict(base.state_dict())
        chunk_times(models[mode], 3, args.steps, seed=0)  # warm-up
    runs = {mode: [] for mode in MODES}
    for r in range(args.repeats):
        for mode in MODES:
            runs[mode].append(chunk_times(models[mode], args.chunks, args.steps, seed=r))
    # chunks from the 3rd on: the cache is full, so every chunk attends to the same 2-chunk context
    ms = {mode: statistics.median(t for run in runs[mode] for t in run[2:]) * 1000 for mode in MODES}
    geometry = f"{config.height}x{config.width}, dim {config.dim}"
    return (f"{name:<20} {geometry:<18} {ms['denoising-step']:11.1f} ms {ms['clean']:8.1f} ms "
            f"{ms['clean'] / ms['denoising-step']:7.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=12)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    if args.chunks < 3:
        parser.error("--chunks must be >= 3")
    torch.set_num_threads(args.threads)
    tiny = get_preset("tiny")
    duel = replace(tiny, height=128, width=128, dim=128, ffn_dim=256)  # inference/shipped/duel-tiny's model overrides
    print(f"ms per chunk (median of chunks 3..{args.chunks} x {args.repeats} repeats), {args.steps} steps, "
          f"{args.threads} thread(s), CPU")
    print(f"{'model':<20} {'geometry':<18} {'denoising-step':>14} {'clean':>11} {'ratio':>8}")
    for name, config in (("tiny", tiny), ("duel-tiny geometry", duel)):
        print(measure(name, config, args))


if __name__ == "__main__":
    main()
