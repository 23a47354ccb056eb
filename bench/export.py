"""`wtf export --format lerobot` throughput as a ratio to `wtf build-curriculum` on the same data.

    python bench/export.py [--episodes N] [--max-frames F]

Records N scripted-vs-random episodes at 60 fps once, then, each in a fresh process and one after
the other: builds the curriculum from the run (one worker), exports the run at 60 fps (its MP4s are
copied, lossless already), exports it at 30 fps (every second frame re-encoded losslessly), and
exports the curriculum (one episode per clip). Prints frames/s, wall time and peak memory of each
and the ratios to the build, all measured in this one run. A 60-s episode is 3,600 frames: memory
must not grow with it (the export streams one episode and DECODE_ROWS frames at a time).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEP = """
import json, resource, sys
from pathlib import Path
what, src, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
if what == "build":
    from wantofight.annotate.curriculum import BuildOptions, build_curriculum
    manifest = build_curriculum([src], out, BuildOptions(val_fraction=0.1), workers=1, progress=False)
    import pyarrow.parquet as pq
    frames = sum(pq.read_table(out / s["file"], columns=["num_frames"]).column(0).to_numpy().sum()
                 for s in manifest["shards"])
else:
    from wantofight.export.lerobot import export_lerobot
    fps = int(what.split("-")[1]) if what.startswith("run-") else None
    frames = export_lerobot(src, out, fps=fps, progress=False)["frames"]
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"frames": int(frames), "peak_kib": own}))
"""


def step(what: str, src: Path, out: Path) -> dict:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", STEP, what, str(src), str(out)], capture_output=True, text=True,
                          check=True, cwd=out.parent)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["seconds"] = time.perf_counter() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--max-frames", type=int, default=3600, help="rows per episode (3,600 = 60 s at 60 fps)")
    args = parser.parse_args()
    from wantofight.collect.run import RunSettings, collect

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        run = tmp / "run"
        collect(RunSettings(policy="scripted", p2_policy="random", episodes=args.episodes,
                            max_frames=args.max_frames, fps=60, seed=1), run, workers=2, progress=False)
        results = {"build-curriculum": step("build", run, tmp / "ds")}
        results["export run, 60 fps"] = step("run-60", run, tmp / "lr60")
        results["export run, 30 fps"] = step("run-30", run, tmp / "lr30")
        results["export curriculum"] = step("clips", tmp / "ds", tmp / "lrclips")
    base = results["build-curriculum"]
    base_rate = base["frames"] / base["seconds"]
    print(f"{args.episodes} scripted-vs-random episodes of {args.max_frames} rows at 60 fps, one process each")
    for name, r in results.items():
        rate = r["frames"] / r["seconds"]
        print(f"  {name:20s} {r['frames']:7,} frames in {r['seconds']:6.1f} s = {rate:7.0f} frames/s "
              f"({rate / base_rate:4.2f}x build-curriculum), peak memory {r['peak_kib'] / 1024:6.1f} MiB")


if __name__ == "__main__":
    main()
