"""The benchmark's collection recipe (docs/benchmark.md, "The recipe"), run as the documented commands.

    python bench/recipe.py [--root data/bench]

Records what is missing under ROOT: probe training data (seeds 1-3) and held-out recordings for the
suite (seeds 100-102 and the shipped walk-under key files). bench/probe.py and bench/benchmark.py
call `ensure()` first.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KEYS = ROOT / "collect" / "games" / "duel" / "keys"

PROBE_RUNS = {
    "probe-match": ["--policy", "scripted", "--episodes", "24", "--workers", "2", "--seed", "1"],
    "probe-mash": ["--policy", "mash", "--p2-policy", "scripted", "--episodes", "6", "--workers", "2", "--seed", "2"],
    # 12 drill episodes, not 2: the curriculum sends a tenth of each run's episodes (at least one) to val,
    # and with 2 episodes stage 1 kept only 54 single-action windows to learn the keys from (docs/model.md)
    "probe-drill": ["--policy", "drill", "--episodes", "12", "--workers", "2", "--seed", "3"],
}
HELDOUT_RUNS = {
    "heldout-match": ["--policy", "scripted", "--episodes", "40", "--workers", "2", "--seed", "100"],
    "heldout-drill": ["--policy", "drill", "--episodes", "1", "--seed", "101"],
    **{f"heldout-keys-{k}": ["--policy", f"keys:{KEYS / f'walk-under-{k}.keys'}", "--episodes", "1"] for k in "abc"},
}


def ensure(root: Path) -> dict[str, float]:
    """Record every run of the recipe that is not complete under `root`; seconds per run recorded."""
    seconds = {}
    for name, args in {**PROBE_RUNS, **HELDOUT_RUNS}.items():
        out = root / name
        # --resume tops a run up to --episodes, whose default (2) would add an episode to a 1-episode run
        episodes = args[args.index("--episodes"):args.index("--episodes") + 2]
        settings = ["--resume", *episodes] if (out / "run.json").is_file() else args
        t0 = time.perf_counter()
        subprocess.run(["wtf", "collect", *settings, "--out", str(out), "--no-progress"], check=True,
                       stdout=subprocess.DEVNULL)
        seconds[name] = time.perf_counter() - t0
    return seconds


def runs(root: Path, kind: str) -> list[Path]:
    return [root / name for name in (PROBE_RUNS if kind == "probe" else HELDOUT_RUNS)]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT / "data" / "bench")
    args = parser.parse_args()
    took = ensure(args.root)
    print("\n".join(f"{name:<20} {s:6.1f} s" for name, s in took.items()))
    print(f"{'total':<20} {sum(took.values()):6.1f} s")
