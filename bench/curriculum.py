"""Curriculum build throughput and memory at N and 4N episodes, side by side.

    python bench/curriculum.py [--episodes N] [--max-frames F] [--workers K]

Records 4N scripted-vs-random episodes once (a run of N and a run of 3N), then builds the
curriculum from N and from all 4N in fresh processes and prints clips/s, wall time and peak
memory (the largest resident set of the build process or any of its workers). Streaming keeps
memory flat: the target is a memory ratio ≤ 1.25 and a time ratio ≤ 4.5 between 4N and N.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUILD = """
import json, resource, sys
from pathlib import Path
from wantofight.annotate.curriculum import BuildOptions, build_curriculum
runs, out, workers = [Path(p) for p in sys.argv[1].split(',')], Path(sys.argv[2]), int(sys.argv[3])
manifest = build_curriculum(runs, out, BuildOptions(val_fraction=0.1), workers=workers, progress=False)
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"clips": manifest["clips"], "peak_kib": max(own, kids)}))
"""


def record(out: Path, episodes: int, max_frames: int, seed: int, workers: int) -> Path:
    from wantofight.collect.run import RunSettings, collect

    settings = RunSettings(policy="scripted", p2_policy="random", episodes=episodes, max_frames=max_frames,
                           fps=30, seed=seed)
    collect(settings, out, workers=workers, progress=False)
    return out


def build(runs: list[Path], out: Path, workers: int) -> dict:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", BUILD, ",".join(map(str, runs)), str(out), str(workers)],
                          capture_output=True, text=True, check=True, cwd=out.parent)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["seconds"] = time.perf_counter() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=2, help="N")
    parser.add_argument("--max-frames", type=int, default=1800)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        small = record(tmp / "run_n", args.episodes, args.max_frames, 1, args.workers)
        rest = record(tmp / "run_3n", 3 * args.episodes, args.max_frames, 2, args.workers)
        results = {}
        for name, runs in (("N", [small]), ("4N", [small, rest])):
            results[name] = build(runs, tmp / f"ds_{name}", args.workers)
    print(f"episodes N={args.episodes}, max {args.max_frames} frames at 30 fps, {args.workers} workers")
    for name, r in results.items():
        print(f"{name:>3}: {r['clips']:5d} clips in {r['seconds']:6.1f} s = {r['clips'] / r['seconds']:6.1f} clips/s, "
              f"peak memory {r['peak_kib'] / 1024:7.1f} MiB")
    mem = results["4N"]["peak_kib"] / results["N"]["peak_kib"]
    took = results["4N"]["seconds"] / results["N"]["seconds"]
    print(f"memory ratio 4N/N {mem:.2f} (target ≤ 1.25)   time ratio 4N/N {took:.2f} (target ≤ 4.5)")


if __name__ == "__main__":
    main()
