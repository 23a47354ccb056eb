"""Speed of the built-in DUEL game: env.step per second on one core, and the 6502's load.

    python bench/game.py [--steps 5000]

Plays random button presses (changing every few frames, both pads) from the `Fight` savestate,
with image observations as the recorder gets them. The ROM keeps `cpu_load` (percent of the
previous 29,781-cycle frame the CPU was busy, NMI included) and `frame` (logic updates); a
logic update that overran its frame would show as `frame` advancing less than the steps taken.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5000)
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})

    from wantofight.collect.emulator import make_env

    env = make_env("Duel-Nes", state="Fight")
    env.reset()
    rng = np.random.default_rng(0)
    # hold each random pad state for 1-8 frames, as a button-mashing player would
    actions, holds = rng.integers(0, 2, size=(args.steps, 18), dtype=np.uint8), rng.integers(1, 9, args.steps)
    actions[:, [1, 3, 10, 12]] = 0  # no START (it does nothing anyway) and the unused slot
    loads, frames = np.zeros(args.steps, dtype=np.int64), np.zeros(args.steps, dtype=np.int64)
    a, left, k = actions[0], 0, 0
    t0 = time.perf_counter()
    for i in range(args.steps):
        if left == 0:
            a, left, k = actions[k], int(holds[k]), k + 1
        left -= 1
        obs, _, terminated, _, info = env.step(a)
        loads[i], frames[i] = info["cpu_load"], info["frame"]
        if terminated:
            env.reset()
            frames[i] = -1
    dt = time.perf_counter() - t0
    # the same emulator without the env wrapper (no observation, no RAM variables), for scale
    t1 = time.perf_counter()
    for _ in range(args.steps):
        env.em.step()
    raw = args.steps / (time.perf_counter() - t1)
    env.close()

    ok = frames >= 0
    steady = np.diff(frames)[(frames[1:] >= 0) & (frames[:-1] >= 0)]
    print(f"observation            {obs.shape} {obs.dtype}")
    print(f"env.step/s (1 core)    {args.steps / dt:,.0f}   ({args.steps} steps in {dt:.2f} s)")
    print(f"raw em.step/s          {raw:,.0f}   (env.step runs at {args.steps / dt / raw:.0%} of it)")
    print(f"load average (1 min)   {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"6502 cpu_load          mean {loads[ok].mean():.1f}%  max {loads[ok].max()}% of a 60 Hz frame")
    print(f"logic frames overrun   {int((steady != 1).sum())} of {steady.size}")


if __name__ == "__main__":
    main()
