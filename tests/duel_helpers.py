"""Drive the built-in DUEL game through stable-retro with scripted pad input.

A script is a list of steps `(p1_keys, p2_keys, frames)`; keys are NES button names or the
relative words `toward` / `away`, resolved against each player's facing when the step begins.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

GAME_DIR = Path(__file__).resolve().parent.parent / "collect" / "games" / "duel"
INTEGRATION = GAME_DIR / "integration" / "Duel-Nes"
GAME = json.loads((GAME_DIR / "game.json").read_text())
STATE = GAME["state_ids"]
MOVES = {m["name"]: m for m in GAME["moves"]}
FACING_RIGHT = GAME["facing"]["right"]

# MultiBinary(18): P1 at 0-8, P2 at 9-17, each B, (none), SELECT, START, UP, DOWN, LEFT, RIGHT, A
BUTTON = {"B": 0, "SELECT": 2, "START": 3, "UP": 4, "DOWN": 5, "LEFT": 6, "RIGHT": 7, "A": 8}


def load(env, name: str) -> dict:
    """Load an integration savestate into a running env; returns its RAM variables."""
    env.em.set_state(gzip.decompress((INTEGRATION / f"{name}.state").read_bytes()))
    env.data.update_ram()
    return env.data.lookup_all()


def action(keys1, keys2, facing1: int, facing2: int) -> np.ndarray:
    a = np.zeros(18, dtype=np.uint8)
    for base, keys, facing in ((0, keys1, facing1), (9, keys2, facing2)):
        for k in keys:
            if k in ("toward", "away"):
                right = (facing == FACING_RIGHT) == (k == "toward")
                k = "RIGHT" if right else "LEFT"
            a[base + BUTTON[k]] = 1
    return a


def run(env, script, frames: bool = False):
    """Play a script; returns the RAM after every step (and the screens if `frames`)."""
    rams, screens = [], []
    for keys1, keys2, n in script:
        info = env.data.lookup_all()
        a = action(keys1, keys2, info["p1_facing"], info["p2_facing"])
        for _ in range(n):
            obs, _, _, _, info = env.step(a)
            rams.append(dict(info))
            if frames:
                screens.append(obs.copy())
    return (rams, screens) if frames else rams


def swap_players(script):
    """The same script played by the other pad."""
    return [(k2, k1, n) for k1, k2, n in script]


def mirrored(ram: dict) -> dict:
    """RAM as it would read with the players' roles exchanged and the stage mirrored about x 128.

    `cpu_load` is left out: P1's and P2's code paths differ by a few cycles.
    """
    out = {k: v for k, v in ram.items() if k != "cpu_load"}
    for a, b in (("p1", "p2"), ("p2", "p1")):
        for var in ("health", "state", "wins", "move", "stun", "y", "dealt"):
            out[f"{a}_{var}"] = ram[f"{b}_{var}"]
        out[f"{a}_x"] = 256 - ram[f"{b}_x"]
        out[f"{a}_facing"] = 1 - ram[f"{b}_facing"]
    return out


def mirrors(a: list[dict], b: list[dict]) -> bool:
    """Run `b` is run `a` with the players exchanged and the stage mirrored, frame by frame."""
    return [mirrored(r) for r in a] == [mirrored(mirrored(r)) for r in b]
