"""Write the integration's savestates by booting the ROM in stable-retro.

    python tools/make_states.py          (after `make`; needs stable-retro)

Start   power-on, a few frames in: round 1 intro (phase 0)
Fight   the first frame of round 1's fighting phase
Close   Fight, then both fighters walk toward each other until 20 px apart
Swapped Fight with the fighters' places (and facings) exchanged by writing RAM
States are gzipped emulator snapshots, as stable-retro saves them.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
INTEGRATION = ROOT / "integration" / "Duel-Nes"
BOOT_FRAMES = 4  # the reset code waits two vblanks before the first game frame
RIGHT, LEFT = 7, 6  # MultiBinary(18) indices of P1's pad; P2's are +9


def main() -> None:
    import stable_retro

    stable_retro.data.Integrations.add_custom_path(str(INTEGRATION.parent))
    game = json.loads((ROOT / "game.json").read_text())
    env = stable_retro.make(game="Duel-Nes", state=stable_retro.State.NONE, players=2,
                            inttype=stable_retro.data.Integrations.ALL,
                            use_restricted_actions=stable_retro.Actions.ALL, render_mode=None)
    env.reset()
    idle = np.zeros(18, dtype=np.uint8)
    ram = env.data.lookup_all
    for _ in range(BOOT_FRAMES):
        env.step(idle)
    assert ram()["phase"] == 0 and ram()["p1_health"] == game["health_max"], ram()
    save(env, "Start")

    while ram()["phase"] != 1:
        env.step(idle)
    fight = env.em.get_state()
    save(env, "Fight")

    walk = idle.copy()
    walk[RIGHT] = 1         # P1 faces right, P2 faces left: both toward
    walk[9 + LEFT] = 1
    while ram()["p2_x"] - ram()["p1_x"] > 20:
        env.step(walk)
    env.step(idle)
    info = ram()
    assert (info["p1_x"], info["p2_x"], info["p1_state"], info["p2_state"]) == (118, 138, 0, 0), info
    save(env, "Close")

    env.em.set_state(fight)
    env.data.update_ram()
    x1, x2 = ram()["p1_x"], ram()["p2_x"]
    env.data.set_value("p1_x", x2)
    env.data.set_value("p2_x", x1)
    env.data.set_value("p1_facing", game["facing"]["left"])
    env.data.set_value("p2_facing", game["facing"]["right"])
    save(env, "Swapped")
    env.close()


def save(env, name: str) -> None:
    # mtime=0 keeps the gzip bytes reproducible
    data = gzip.compress(env.em.get_state(), mtime=0)
    (INTEGRATION / f"{name}.state").write_bytes(data)
    print(f"{name}.state  {env.data.lookup_all()}")


if __name__ == "__main__":
    main()
