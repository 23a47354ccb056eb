"""Render docs/duel-sheet.png: both fighters in every pose, captured from the real emulator.

    python tools/contact_sheet.py [OUT.png]

Each cell replays a short script from a savestate (pads given as P1 keys / P2 keys, relative
words toward/away) and crops the screen around the fighters. Labels use a tiny 3x5 font below;
the PNG is written by OpenCV (`wantofight/images.py`, as `wtf inspect` writes its sheets).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
REPO = ROOT.parent.parent.parent
INTEGRATION = ROOT / "integration" / "Duel-Nes"
GAME = json.loads((ROOT / "game.json").read_text())
BUTTON = {"B": 0, "UP": 4, "DOWN": 5, "LEFT": 6, "RIGHT": 7, "A": 8}
SCALE = 2
CROP_Y = (104, 192)   # image rows (screen line - 8): from above a jump to the floor


def both(keys, n):
    return [(keys, keys, n)]


MOVE_KEYS = {"light_punch": ["A"], "light_kick": ["B"], "heavy_punch": ["toward", "A"],
             "heavy_kick": ["toward", "B"], "crouch_punch": ["DOWN", "A"], "sweep": ["DOWN", "B"]}

# (label, savestate, script, RAM writes before the script)
CELLS = [
    ("IDLE", "Fight", both([], 2), {}),
    ("WALK 1", "Fight", both(["toward"], 4), {}),
    ("WALK 2", "Fight", both(["toward"], 12), {}),
    ("WALK BACK", "Fight", both(["away"], 6), {}),
    ("CROUCH", "Fight", both(["DOWN"], 3), {}),
    ("JUMP", "Fight", both(["UP"], 12), {}),
]
for m in GAME["moves"]:
    name = m["name"]
    if m["stance"] == "air":
        key = "A" if name == "jump_punch" else "B"
        script = both(["UP"], 1) + both([], 8) + both([key], 1) + both([], m["startup"] + 1)  # +1: the screen is a frame late
        CELLS.append((f"{name.replace('_', ' ').upper()} 1", "Fight", both(["UP"], 1) + both([], 8) + both([key], 2), {}))
        CELLS.append((f"{name.replace('_', ' ').upper()} 2", "Fight", script, {}))
    else:
        CELLS.append((f"{name.replace('_', ' ').upper()} 1", "Fight", both(MOVE_KEYS[name], 2), {}))
        CELLS.append((f"{name.replace('_', ' ').upper()} 2", "Fight", both(MOVE_KEYS[name], 1) + both([], m["startup"] + 1), {}))
CELLS += [
    ("BLOCK HIGH", "Close", [(["A"], ["away"], 1), ([], ["away"], 4)], {}),
    ("BLOCK LOW", "Close", [([], ["DOWN", "away"], 1), (["DOWN", "A"], ["DOWN", "away"], 1), ([], ["DOWN", "away"], 5)], {}),
    ("HITSTUN", "Close", [(["toward", "A"], [], 1), ([], [], 9)], {}),
    ("KNOCKDOWN", "Close", [(["DOWN", "B"], [], 1), ([], [], 16)], {}),
    ("WAKE UP", "Close", [(["DOWN", "B"], [], 1), ([], [], 52)], {}),
    ("KO", "Close", [(["A"], [], 1), ([], [], 44)], {"p2_health": 2}),
    ("WIN", "Close", [([], ["A"], 1), ([], [], 100)], {"p1_health": 2}),
    ("OVERLAP JUMP", "Close", [(["UP", "toward"], [], 1), ([], [], 5)], {}),
    ("OVERLAP CLINCH", "Close", [(["toward"], ["toward"], 6), (["toward", "B"], ["toward", "A"], 1), (["toward"], ["toward"], 8)], {}),
    ("SPARK", "Close", [(["toward", "B"], ["DOWN", "A"], 1), ([], [], 9)], {}),
]

FONT = {  # 3x5 label glyphs, drawn for this tool
    "A": "010101111101101", "B": "110101110101110", "C": "011100100100011", "D": "110101101101110",
    "E": "111100110100111", "F": "111100110100100", "G": "011100101101011", "H": "101101111101101",
    "I": "111010010010111", "J": "001001001101010", "K": "101101110101101", "L": "100100100100111",
    "M": "101111111101101", "N": "110101101101101", "O": "010101101101010", "P": "110101110100100",
    "R": "110101110101101", "S": "011100010001110", "T": "111010010010010", "U": "101101101101111",
    "V": "101101101101010", "W": "101101111111101", "Y": "101101010010010",
    "0": "111101101101111", "1": "010110010010111", "2": "110001010100111", "Z": "111001010100111",
    " ": "000000000000000",
}


def text(img, x, y, s, colour, scale=2):
    for ch in s:
        g = FONT.get(ch, FONT[" "])
        for i, bit in enumerate(g):
            if bit == "1":
                yy, xx = y + (i // 3) * scale, x + (i % 3) * scale
                img[yy:yy + scale, xx:xx + scale] = colour
        x += 4 * scale


def capture(env, state, script, writes):
    env.em.set_state(gzip.decompress((INTEGRATION / f"{state}.state").read_bytes()))
    env.data.update_ram()
    for k, v in writes.items():
        env.data.set_value(k, v)
    obs = env.em.get_screen()
    for k1, k2, n in script:
        info = env.data.lookup_all()
        a = np.zeros(18, dtype=np.uint8)
        for base, keys, facing in ((0, k1, info["p1_facing"]), (9, k2, info["p2_facing"])):
            for k in keys:
                if k in ("toward", "away"):
                    k = "RIGHT" if (facing == GAME["facing"]["right"]) == (k == "toward") else "LEFT"
                if k in BUTTON:
                    a[base + BUTTON[k]] = 1
        for _ in range(n):
            obs, *_ = env.step(a)
    info = env.data.lookup_all()
    return obs, info


def main(out: Path) -> None:
    sys.path.insert(0, str(REPO))
    from wantofight.images import upscale, write_png
    from wantofight.collect.emulator import make_env

    env = make_env("Duel-Nes", state="Start")
    env.reset()
    cells = []
    for label, state, script, writes in CELLS:
        obs, info = capture(env, state, script, writes)
        cx = (info["p1_x"] + info["p2_x"]) // 2 - 8   # image x = screen x - 8 (fceumm crops 8)
        x0 = int(np.clip(cx - 56, 0, obs.shape[1] - 112))
        crop = obs[CROP_Y[0]:CROP_Y[1], x0:x0 + 112]
        crop = upscale(crop, SCALE)
        cell = np.full((crop.shape[0] + 16, crop.shape[1], 3), 24, dtype=np.uint8)
        cell[16:] = crop
        text(cell, 4, 3, label, (255, 255, 255))
        cells.append(cell)
    env.close()
    cols = 5
    h, w, _ = cells[0].shape
    rows = (len(cells) + cols - 1) // cols
    sheet = np.full((rows * (h + 4) + 4, cols * (w + 4) + 4, 3), 8, dtype=np.uint8)
    for i, c in enumerate(cells):
        y, x = 4 + (i // cols) * (h + 4), 4 + (i % cols) * (w + 4)
        sheet[y:y + h, x:x + w] = c
    write_png(out, sheet)
    print(f"{out}: {len(cells)} cells, {sheet.shape[1]}x{sheet.shape[0]}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "duel-sheet.png")
