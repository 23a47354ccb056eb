"""Write one reference portrait per fighter (`refs/kai.png`, `refs/gor.png`) from the emulator.

The portraits are the same kind of crop `ClipDataset` takes for its `ref_images` (datasets/frames.py):
a square around each fighter standing idle, from the `Fight` savestate. `wtf generate --refs` takes
them when no recording of the characters is at hand. Regenerate after changing the fighters' art:

    python collect/games/duel/tools/make_refs.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wantofight.images import write_png
from wantofight.collect.emulator import make_env
from wantofight.collect.game_registry import resolve_game
from wantofight.datasets.frames import crop_fighter

GAME = resolve_game("duel")
REFS = Path(__file__).resolve().parents[1] / "refs"


def main() -> None:
    screen = GAME.info["screen"]
    env = make_env(GAME.retro_game, state="Fight")
    try:
        env.reset()
        for _ in range(2):  # the NES shows RAM one frame late: step until the screen shows this RAM
            env.em.set_button_mask(np.zeros(9, np.uint8), 0)
            env.em.step()
        ram = env.data.lookup_all()
        frame = env.em.get_screen()
    finally:
        env.close()
    REFS.mkdir(exist_ok=True)
    for player, name in enumerate(GAME.info["fighters"]):
        p = f"p{player + 1}"
        crop = crop_fighter(frame, ram[f"{p}_x"], ram[f"{p}_y"], screen["crop_left"], screen["crop_top"])
        write_png(REFS / f"{name}.png", np.ascontiguousarray(crop))
        print(f"{name}: {crop.shape[1]}x{crop.shape[0]} → {REFS / f'{name}.png'}")


if __name__ == "__main__":
    main()
