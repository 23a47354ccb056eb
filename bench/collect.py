"""Collection speed, measured side by side in one run (ratios; absolute times are noisy here).

    python bench/collect.py [--game duel] [--policy scripted] [--frames 3000] [--episodes 8]

Prints: raw emulator steps/s; the emulator frames/s the whole pipeline sustains with 1 worker at
--fps 60 and --fps 30 as ratios to raw (target ≥ 0.5; steady state, after the worker's first
episode); 2 workers vs 1 on the wall clock, start-up included (target ≥ 1.7×); bytes per recorded
frame (video, Parquet, savestate, input log and meta together).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def raw_steps_per_second(game_name: str, steps: int) -> float:
    from wantofight.collect.emulator import make_env
    from wantofight.collect.game_registry import resolve_game

    game = resolve_game(game_name)
    env = make_env(game.retro_game, state=game.default_state, players=game.players)
    env.reset()
    rng = np.random.default_rng(0)
    presses = rng.integers(0, 2, size=(steps // 16 + 1, game.players, game.buttons.num_buttons)).astype(np.uint8)
    started = time.perf_counter()
    for i in range(steps):
        if i % 16 == 0:
            for p in range(game.players):
                env.em.set_button_mask(presses[i // 16, p], p)
        env.em.step()
    elapsed = time.perf_counter() - started
    env.close()
    return steps / elapsed


def run(game: str, policy: str, fps: int, workers: int, episodes: int, frames: int, out: Path):
    """Returns (emulator frames/s over the wall clock, emulator frames/s inside episodes, recorded
    frames, bytes on disk)."""
    from wantofight.collect.run import RunSettings, collect

    settings = RunSettings(game=game, policy=policy, episodes=episodes, max_frames=frames, fps=fps, seed=1)
    started = time.perf_counter()
    results = collect(settings, out, workers=workers, progress=False)
    wall = time.perf_counter() - started
    recorded = sum(r.frames for r in results)
    emulated = recorded * (60 // fps)
    # Sustained: the steady state after each worker's first episode (which pays the imports, the
    # encoder's first set-up and the emulator's first frames).
    steady = sorted(results, key=lambda r: r.episode_id)[1:] or results
    in_episode = sum(r.frames for r in steady) * (60 // fps) / sum(r.seconds for r in steady)
    size = sum(p.stat().st_size for p in (out / "episodes").rglob("*") if p.is_file())
    return emulated / wall, in_episode, recorded, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="duel")
    parser.add_argument("--policy", default="scripted")
    parser.add_argument("--episodes", type=int, default=8, help="episodes for the 1-vs-2-worker comparison")
    parser.add_argument("--frames", type=int, default=3000, help="recorded frames per episode")
    args = parser.parse_args()

    raw = raw_steps_per_second(args.game, 20000)
    print(f"raw emulator (em.step, one core):            {raw:9,.0f} steps/s")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _, sustained60, rec60, size60 = run(args.game, args.policy, 60, 1, 4, args.frames, tmp / "f60")
        _, sustained30, rec30, size30 = run(args.game, args.policy, 30, 1, 4, args.frames, tmp / "f30")
        # Enough episodes that process start-up (imports, emulator boot) is a small share of the wall clock.
        wall1, _, _, _ = run(args.game, args.policy, 30, 1, args.episodes, args.frames, tmp / "w1")
        wall2, _, _, _ = run(args.game, args.policy, 30, 2, args.episodes, args.frames, tmp / "w2")
    print(f"pipeline, 1 worker, --fps 60:               {sustained60:9,.0f} emulator frames/s = {sustained60 / raw:.2f} × raw (target ≥ 0.5)")
    print(f"pipeline, 1 worker, --fps 30:               {sustained30:9,.0f} emulator frames/s = {sustained30 / raw:.2f} × raw (target ≥ 0.5)")
    print(f"2 workers vs 1 ({args.episodes} episodes, wall clock):    {wall2 / wall1:9.2f} ×  (target ≥ 1.7)")
    print(f"bytes per recorded frame, --fps 60:         {size60 / rec60:9,.0f}  (all episode files)")
    print(f"bytes per recorded frame, --fps 30:         {size30 / rec30:9,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
