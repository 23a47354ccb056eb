"""`--ray` vs `--workers` on the same cores, measured side by side in one run (ratios; absolute times are noisy here).

    python bench/ray.py [--cpus 2] [--episodes 8] [--frames 1500] [--rounds 2]

Starts a one-machine Ray cluster with --cpus CPUs (as `ray start --head --num-cpus N` would), then
alternates the local run (`--workers N`) and the Ray run (N actors) of the same work, --rounds times
each, and prints Ray's throughput as a ratio to the local one (target ≥ 0.9):

- collect: episodes/s over the wall clock of `collect()`, actors' emulator set-up included (the
  cluster itself is already up, as on a real one);
- build-curriculum: clips/s of the whole build (plan, annotate, cut, shards);
- encode: windows/s with the tiny VAE (the unit is 16 windows; a real VAE's cost per window dwarfs
  the scheduling).

It also prints the per-worker figures that docs/scaling.md sizes a cluster from: recorded frames/s
per worker and bytes per recorded frame (all episode files) and per clip.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

# `python bench/ray.py` puts bench/ first on sys.path, where `import ray` would find this file.
sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != Path(__file__).resolve().parent]


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file but the manifests (they name the run's own paths)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and p.name != "manifest.json"}


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpus", type=int, default=2, help="local workers = Ray actors = cluster CPUs")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--frames", type=int, default=1500, help="recorded frames per episode (--fps 30)")
    parser.add_argument("--rounds", type=int, default=2, help="local/Ray pairs per command (times are summed)")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    import ray

    from wantofight.annotate.curriculum import BuildOptions, build_curriculum
    from wantofight.cluster import Cluster
    from wantofight.collect.run import RunSettings, collect
    from wantofight.datasets.latent_cache import encode_dataset

    # worker_niceness 0: Ray's default (15) starves its workers whenever anything else runs, while the
    # local workers run at our priority; side by side, both must compete alike (wantofight/cluster.py).
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False,
             _system_config={"worker_niceness": 0})
    cluster = Cluster("local", workers=args.cpus)
    settings = RunSettings(policy="scripted", p2_policy="random", episodes=args.episodes, max_frames=args.frames,
                           fps=30, seed=1)
    options = BuildOptions(clip_frames=33, val_fraction=0.25)
    encode = dict(vae="tiny", frames=9, size=(64, 64), ref_size=32, tiers="full", batch_size=4, progress=False)
    seconds = {(what, where): 0.0 for what in ("collect", "build", "encode") for where in ("local", "ray")}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for r in range(args.rounds):
            for where in ("local", "ray"):
                on = {"cluster": cluster} if where == "ray" else {}
                run, ds, lat = tmp / f"{where}{r}" / "run", tmp / f"{where}{r}" / "ds", tmp / f"{where}{r}" / "lat"
                seconds["collect", where] += timed(lambda: collect(settings, run, workers=args.cpus, progress=False,
                                                                   **on))
                seconds["build", where] += timed(lambda: build_curriculum([run], ds, options, workers=args.cpus,
                                                                          progress=False, **on))
                seconds["encode", where] += timed(lambda: encode_dataset(ds, lat, workers=0, **encode, **on))
        manifest = json.loads((tmp / "local0" / "ds" / "manifest.json").read_text())
        clips = manifest["clips"]
        latents = json.loads((tmp / "local0" / "lat" / "manifest.json").read_text())
        windows = sum(sum(c.values()) for c in latents["counts"].values())
        recorded = sum(m["frame_count"] for s in manifest["sources"] for m in s["episodes"].values())
        episode_bytes = folder_bytes(tmp / "local0" / "run" / "episodes")
        shard_bytes = folder_bytes(tmp / "local0" / "ds") - len((tmp / "local0" / "ds" / "manifest.json").read_bytes())
        same = all(files_of(tmp / f"local{r}") == files_of(tmp / f"ray{r}") for r in range(args.rounds))
        shutil.rmtree(tmp, ignore_errors=True)
    ray.shutdown()

    n, rounds = args.episodes * args.rounds, args.rounds
    print(f"{args.cpus} CPUs: {args.cpus} local workers vs a Ray cluster of {args.cpus} CPUs ({args.cpus} actors); "
          f"{args.episodes} episodes x {args.frames} frames at 30 fps, {args.rounds} rounds")
    for what, unit, count in (("collect", "episodes", n), ("build-curriculum", "clips", clips * rounds),
                              ("encode (tiny VAE)", "windows", windows * rounds)):
        key = what.split()[0].replace("build-curriculum", "build")
        local, remote = count / seconds[key, "local"], count / seconds[key, "ray"]
        print(f"{what:18s} local {local:8.2f} {unit}/s   ray {remote:8.2f} {unit}/s   ray/local {remote / local:5.2f}"
              f"  (target >= 0.9)")
    print(f"per worker, collect:     {recorded * rounds / seconds['collect', 'ray'] / args.cpus:8,.0f} recorded frames/s "
          f"(ray, wall clock, set-up included)")
    print(f"bytes per recorded frame: {episode_bytes / recorded:8,.0f}  (all episode files, --fps 30)")
    print(f"bytes per clip:           {shard_bytes / max(clips, 1):8,.0f}  (33-frame full-match clips, shards)")
    print(f"ray outputs identical to local (episodes, annotations, shards, latents): {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
