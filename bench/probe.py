"""The state probe: held-out accuracy per field at 128x128 and at native size, training time, and
reading speed next to the tiny model's generation speed, measured side by side in one run.

    python bench/probe.py [--root data/bench] [--steps 2000] [--sizes 128x128,native] [--out runs/bench-probe]

Records the benchmark recipe where missing (bench/recipe.py), trains one probe per size on the
probe runs (episodes split 80/20 by the probe itself), scores each on its held-out episodes and on
the held-out recordings of the suite, then reads 2,048 frames batched with 1 and 2 torch threads and
streams 16 chunks from a random-weight `tiny` model on the same machine: the ratio says how much of
a benchmark run the probe can take. Targets (docs/benchmark.md): x within 4 px >= 95%, state >= 90%,
facing >= 98% for both players; >= 1,000 frames/s; training <= 15 minutes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recipe  # noqa: E402

from wantofight.benchmark.probe import (ProbeConfig, eval_probe, format_metrics, frame_set, load_probe,  # noqa: E402
                                        parse_size, train_probe)
from wantofight.benchmark.episodes import open_runs  # noqa: E402


def read_speed(probe, pixels: torch.Tensor, threads: int) -> float:
    torch.set_num_threads(threads)
    probe.read(pixels[:256])
    t0 = time.perf_counter()
    probe.read(pixels)
    return len(pixels) / (time.perf_counter() - t0)


def generation_speed(chunks: int = 16) -> float:
    """Frames/s of a random-weight tiny model streaming `chunks` chunks (the 4-step student's path)."""
    from wantofight.inference.generation import LoadedGenerator, build_vae, stream_chunks
    from wantofight_model.model import WanToFight
    from wantofight_model.presets import get_preset

    config = get_preset("tiny")
    torch.manual_seed(0)
    model = WanToFight.from_config(config).eval().requires_grad_(False)
    loaded = LoadedGenerator(model, build_vae(config), config, "stage3", "random tiny")
    prompt = torch.zeros(1, 3, 1, config.height, config.width)
    masks = np.zeros((1 + 8 * chunks, 2), np.uint16)
    refs = torch.zeros(1, 2, 3, config.clip_image_size, config.clip_image_size)
    frames, t0 = 0, None
    for k, (chunk, _) in enumerate(stream_chunks(loaded, prompt, masks, refs, steps=4)):
        if k == 1:
            t0 = time.perf_counter()  # chunk 1 warms up; time chunks 2..
        elif k > 1:
            frames += len(chunk)
    return frames / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=recipe.ROOT / "data" / "bench")
    parser.add_argument("--out", type=Path, default=recipe.ROOT / "runs" / "bench-probe")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--sizes", default="128x128,native")
    parser.add_argument("--threads", type=int, default=2, help="torch threads for training")
    args = parser.parse_args()

    recipe.ensure(args.root)
    rows = []
    for text in args.sizes.split(","):
        size = parse_size(text)
        out = args.out / text
        if (out / "probe.json").is_file():
            print(f"== {text}: reusing {out} (delete it to retrain)")
            report = __import__("json").loads((out / "report.json").read_text())
        else:
            torch.set_num_threads(args.threads)
            report = train_probe(recipe.runs(args.root, "probe"), out, ProbeConfig(size=size, steps=args.steps))
        minutes = (report["decode_s"] + report["train_s"]) / 60
        print(f"== probe {text}: {report['parameters']:,} parameters, {report['train_frames']:,} training frames, "
              f"{minutes:.1f} min to train ({args.threads} threads)")
        print("held-out episodes of the probe runs:")
        print(format_metrics(report["held_out"]))
        heldout = eval_probe(out, recipe.runs(args.root, "heldout")[:1], max_frames=20000)
        print("held-out recordings of the suite (heldout-match, 20,000 frames spread evenly):")
        print(format_metrics(heldout))
        probe = load_probe(out)
        _, episodes = open_runs(recipe.runs(args.root, "heldout")[:1])
        pixels = frame_set(episodes[:2], probe.size, max_frames=2048).pixels[:2048]
        rows.append((text, minutes, read_speed(probe, pixels, 1), read_speed(probe, pixels, 2),
                     heldout["targets"]))
    torch.set_num_threads(1)
    gen = generation_speed()
    print("\nspeed (frames/s, batches of 256) beside the tiny model streaming 4-step chunks on this machine")
    print(f"{'probe':<10} {'train min':>9} {'1 thread':>9} {'2 threads':>9} {'x tiny gen':>10}  targets met")
    for text, minutes, one, two, targets in rows:
        met = ", ".join(f"{k} {'yes' if v['met'] else 'NO'}" for k, v in targets.items())
        print(f"{text:<10} {minutes:>9.1f} {one:>9.0f} {two:>9.0f} {max(one, two) / gen:>9.1f}x  {met}")
    print(f"tiny model generation: {gen:.1f} frames/s (1 thread)")


if __name__ == "__main__":
    main()
