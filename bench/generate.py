"""Streaming generation on CPU (`tiny`): the 4-step student vs the multi-step teacher, the full vs the
pruned VAE decoder, and per-chunk latency early (chunk 3) vs late (chunk 50) in a long rollout.

    python bench/generate.py                     # tiny preset, CPU, about a minute
    python bench/generate.py --chunks 50 --teacher-steps 20 --threads 2

Random weights cost what trained ones do (the pruned decoder is pruned structurally, keep 0.5), so the
ratios are the point; every row is measured in this run, side by side. Frames/s counts generated
frames (8 per chunk) over denoising + streaming decode wall time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from wantofight.inference.generation import build_vae
from wantofight.train.vae.pruned_decoder import count_parameters, prune_decoder, with_decoder
from wantofight_model.generate import StreamingGenerator
from wantofight_model.model import WanToFight
from wantofight_model.presets import get_preset


def rollout(model, vae, steps: int, sampler: str, chunks: int, seed: int = 0) -> list[float]:
    """Wall seconds of each chunk (denoise + decode) of one streaming rollout."""
    config = model.config
    gen = torch.Generator().manual_seed(seed)
    first = torch.rand(1, 3, 1, config.height, config.width, generator=gen) * 2 - 1
    refs = torch.rand(1, 2, 3, config.clip_image_size, config.clip_image_size, generator=gen) * 2 - 1
    keys = [(torch.rand(1, config.chunk_frames, 2, 16, generator=gen) > 0.8).float() for _ in range(chunks)]
    generator = StreamingGenerator(model, vae, sampler=sampler)
    times = []
    with torch.no_grad():
        prompt = vae.encode(first)
        decoder = vae.streaming_decoder()
        decoder.decode(prompt)
        t0 = time.perf_counter()
        for latents in generator.generate_latents(prompt, keys, refs, steps, generator=gen):
            decoder.decode(latents)
            times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=50, help="chunks of the long student rollout (latency at 3 vs N)")
    parser.add_argument("--short", type=int, default=6, help="chunks timed for the other rows")
    parser.add_argument("--student-steps", type=int, default=4)
    parser.add_argument("--teacher-steps", type=int, default=20)
    parser.add_argument("--keep", type=float, default=0.5, help="pruned decoder: fraction of hidden channels kept")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    if args.chunks < 3:
        print("error: --chunks must be >= 3", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = get_preset("tiny")
    model = WanToFight.from_config(config).eval()
    vae = build_vae(config)
    pruned, _ = prune_decoder(vae.autoencoder.decoder, args.keep)
    small = with_decoder(vae, pruned.eval())
    L = config.chunk_frames
    print(f"tiny preset, CPU, {args.threads} thread(s); decoder parameters: full "
          f"{count_parameters(vae.autoencoder.decoder):,}, pruned {count_parameters(pruned):,} (keep {args.keep:g})")

    rollout(model, vae, 1, "euler", 2)  # warm-up
    long = rollout(model, vae, args.student_steps, "x0_renoise", args.chunks)
    rows = [("student", args.student_steps, "full", long[1:args.short + 1])]
    for name, steps, sampler in (("student", args.student_steps, "x0_renoise"), ("teacher", args.teacher_steps, "euler")):
        for dec_name, dec_vae in (("full", vae), ("pruned", small)):
            if (name, dec_name) != ("student", "full"):
                rows.append((name, steps, dec_name, rollout(model, dec_vae, steps, sampler, args.short + 1)[1:]))

    print(f"\n{'model':<8} {'steps':>5} {'decoder':<7} {'ms/chunk':>9} {'frames/s':>9}")
    fps = {}
    for name, steps, dec_name, times in rows:
        med = statistics.median(times)
        fps[(name, dec_name)] = L / med
        print(f"{name:<8} {steps:>5} {dec_name:<7} {1000 * med:>9.1f} {L / med:>9.2f}")
    print(f"\nstudent / teacher frames/s (full decoder): x{fps[('student', 'full')] / fps[('teacher', 'full')]:.2f}; "
          f"pruned / full decoder (student): x{fps[('student', 'pruned')] / fps[('student', 'full')]:.2f}")
    early, late = long[2], long[args.chunks - 1]
    window = statistics.median(long[1:6]), statistics.median(long[-5:])
    print(f"student per-chunk latency: chunk 3 {1000 * early:.1f} ms, chunk {args.chunks} {1000 * late:.1f} ms "
          f"(medians of chunks 2-6 vs the last 5: {1000 * window[0]:.1f} vs {1000 * window[1]:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
