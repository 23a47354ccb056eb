"""Turn the text art and game.json into what the assembler includes.

    python tools/build_assets.py BUILD_DIR

Writes, all deterministic (sorted, no timestamps):
  chr.bin    8 KiB CHR-ROM: table 0 = background tiles then sprite pairs, table 1 = sprite pairs
  stage.bin  1 KiB nametable + attribute table of the stage
  assets.inc tile numbers, palettes, metasprites (8x16 sprite mode) for both fighters and the spark
  rules.inc  move table, boxes and timings from game.json, so the ROM and the docs share one source
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ART = ROOT / "art"

# Animation frames each fighter must have, in the order the ROM indexes them.
FRAMES = ["idle0", "idle1", "walk0", "walk1", "crouch", "jump", "block_high", "block_low", "hit",
          "down", "rise", "win"]
MOVE_NAMES = ["light_punch", "light_kick", "heavy_punch", "heavy_kick", "crouch_punch", "sweep",
              "jump_punch", "jump_kick"]
FRAMES += [f"{m}{k}" for m in MOVE_NAMES for k in (0, 1)]

STAGE_LEGEND = {" ": "blank", "s": "sky", "*": "star", "+": "star2", "~": "haze", "/": "hill_up",
                "\\": "hill_down", "h": "hill", "=": "ledge", "b": "brick", "B": "brick2",
                "L": "lamp", "_": "floor_edge", "p": "plank", "P": "plank2", "g": "grain"}

# NES colour numbers. Backdrop first, then 3 colours per palette.
BG_PALETTES = [[0x0F, 0x16, 0x28, 0x30], [0x0F, 0x01, 0x11, 0x30],
               [0x0F, 0x0F, 0x00, 0x10], [0x0F, 0x07, 0x17, 0x27]]
SPRITE_PALETTES = [[0x0F, 0x0F, 0x16, 0x37],   # kai: black outline, red gi, light skin
                   [0x0F, 0x0C, 0x1A, 0x17],   # gor: dark teal outline, green, brown skin
                   [0x0F, 0x27, 0x28, 0x30],   # spark
                   [0x0F, 0x0F, 0x10, 0x30]]


def read_blocks(path: Path, head: str):
    """Yield (header words, rows) for each `head ...` block of a text art file."""
    block = None
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            continue
        if line.startswith(head + " "):
            if block:
                yield block
            block = (line.split()[1:], [])
        elif line.strip() and block is not None:
            block[1].append(line)
    if block:
        yield block


def pixels(rows, w, h):
    assert len(rows) == h and all(len(r) == w for r in rows), (len(rows), rows[:2])
    return [[0 if c == "." else int(c) for c in r] for r in rows]


def tile_bytes(px, x0, y0):
    """16 bytes of an NES tile (two bit planes) from an 8x8 window of a pixel grid."""
    lo, hi = [], []
    for y in range(8):
        a = b = 0
        for x in range(8):
            v = px[y0 + y][x0 + x]
            a |= (v & 1) << (7 - x)
            b |= ((v >> 1) & 1) << (7 - x)
        lo.append(a)
        hi.append(b)
    return bytes(lo + hi)


def hud_tiles():
    """Health-bar cells (yellow health on red) and round-win markers, drawn procedurally."""
    out = {}
    for n in range(9):
        for side in "LR":
            g = [[0] * 8 for _ in range(8)]
            for y in range(1, 7):
                for x in range(8):
                    filled = x < n if side == "L" else x >= 8 - n
                    g[y][x] = 2 if filled else 1
            out[f"bar{side}{n}"] = g
    for name, fill in (("win_off", 0), ("win_on", 2)):
        g = [[0] * 8 for _ in range(8)]
        for y in range(8):
            for x in range(8):
                d = (x - 3.5) ** 2 + (y - 3.5) ** 2
                g[y][x] = 3 if 6 <= d <= 12.5 else (fill if d < 6 else 0)
        out[name] = g
    return out


class Chr:
    def __init__(self):
        self.tables = [bytearray(4096), bytearray(4096)]
        self.bg: dict[bytes, int] = {}
        self.bg_count = 0
        self.pairs: dict[bytes, int] = {}
        self.pair_slots = [(1, p) for p in range(128)]  # table 1 first, then leftover of table 0

    def bg_tile(self, data: bytes) -> int:
        if data not in self.bg:
            assert self.bg_count < 256
            self.tables[0][self.bg_count * 16:self.bg_count * 16 + 16] = data
            self.bg[data] = self.bg_count
            self.bg_count += 1
        return self.bg[data]

    def close_bg(self):
        first = (self.bg_count + 1) // 2
        self.pair_slots += [(0, p) for p in range(first, 128)]

    def pair(self, top: bytes, bottom: bytes) -> int:
        """OAM tile byte of an 8x16 sprite: bit 0 = pattern table, bits 7-1 = pair number."""
        key = top + bottom
        if key not in self.pairs:
            if not self.pair_slots:
                raise SystemExit(f"out of sprite tiles after {len(self.pairs)} pairs")
            table, p = self.pair_slots.pop(0)
            self.tables[table][p * 32:p * 32 + 32] = key
            self.pairs[key] = (p << 1) | table
        return self.pairs[key]


def metasprite(chr_: Chr, px, w, h, ax, ay):
    """(dy, tile, dx) for every non-empty 8x16 piece; (ax, ay) is the anchor inside the canvas."""
    out = []
    for col in range(w // 8):
        for row in range(h // 16):
            x0, y0 = col * 8, row * 16
            if not any(px[y][x] for y in range(y0, y0 + 16) for x in range(x0, x0 + 8)):
                continue
            t = chr_.pair(tile_bytes(px, x0, y0), tile_bytes(px, x0, y0 + 8))
            out.append((y0 - ay, t, x0 - ax))
    return out


def byte(v: int) -> str:
    return f"${v & 0xFF:02X}"


def main(build: Path) -> None:
    build.mkdir(parents=True, exist_ok=True)
    chr_ = Chr()
    inc = ["; Generated by tools/build_assets.py from art/ and game.json. Do not edit.", ""]

    blank = chr_.bg_tile(bytes(16))
    assert blank == 0
    glyphs = {}
    for (name,), rows in read_blocks(ART / "font.txt", "glyph"):
        glyphs[name] = chr_.bg_tile(tile_bytes(pixels(rows, 8, 8), 0, 0))
    bg_tiles, bg_pal = {}, {}
    for (name, pal), rows in read_blocks(ART / "bg.txt", "tile"):
        bg_tiles[name] = chr_.bg_tile(tile_bytes(pixels(rows, 8, 8), 0, 0))
        bg_pal[name] = int(pal)
    for name, g in hud_tiles().items():
        bg_tiles[name] = chr_.bg_tile(tile_bytes(g, 0, 0))
        bg_pal[name] = 0
    chr_.close_bg()

    for ch, t in sorted(glyphs.items()):
        label = {".": "DOT"}.get(ch, ch)
        inc.append(f"TILE_{label} = {t}")
    for name, t in sorted(bg_tiles.items()):
        inc.append(f"TILE_{name.upper()} = {t}")
    inc.append("")

    # --- stage nametable + attributes
    lines = [l for l in (ART / "stage.txt").read_text().splitlines() if not l.startswith("#")]
    assert len(lines) == 30 and all(len(l) == 32 for l in lines), "stage.txt must be 32x30"
    nt = bytearray(1024)
    pal_of = [[0] * 32 for _ in range(30)]
    for y, line in enumerate(lines):
        for x, ch in enumerate(line):
            if ch in STAGE_LEGEND:
                name = STAGE_LEGEND[ch]
                nt[y * 32 + x] = bg_tiles[name] if name != "blank" else blank
                pal_of[y][x] = bg_pal.get(name, 0)
            else:
                nt[y * 32 + x] = glyphs[ch]
    for by in range(8):
        for bx in range(8):
            a = 0
            for q, (dx, dy) in enumerate(((0, 0), (2, 0), (0, 2), (2, 2))):
                x, y = bx * 4 + dx, by * 4 + dy
                if y >= 30:
                    continue
                cells = {pal_of[y + j][x + i] for i in (0, 1) for j in (0, 1) if y + j < 30}
                assert len(cells) == 1, f"mixed palettes in 16x16 block at tile ({x}, {y})"
                a |= cells.pop() << (2 * q)
            nt[960 + by * 8 + bx] = a
    (build / "stage.bin").write_bytes(bytes(nt))
    inc.append("stage_message_row:  ; row 12 of the stage, restored under messages")
    inc.append("    .byte " + ",".join(str(v) for v in nt[12 * 32:13 * 32]))

    pals = [c for p in BG_PALETTES + SPRITE_PALETTES for c in p]
    inc.append("palettes:\n    .byte " + ",".join(byte(c) for c in pals))

    # --- fighters and spark
    fighters: dict[str, dict[str, list]] = {}
    for (who, frame), rows in read_blocks(ART / "fighters.txt", "frame"):
        fighters.setdefault(who, {})[frame] = pixels(rows, 32, 32)
    assert list(fighters) == ["kai", "gor"], list(fighters)
    for who, frames in fighters.items():
        missing = [f for f in FRAMES if f not in frames]
        assert not missing, f"{who} lacks frames {missing}"
        for f in FRAMES:
            ms = metasprite(chr_, frames[f], 32, 32, 16, 32)
            inc.append(f"ms_{who}_{f}:")
            for dy, t, dx in ms:
                inc.append(f"    .byte {byte(dy)}, {byte(t)}, {byte(dx)}")
            inc.append("    .byte $80")
    sparks = [pixels(rows, 16, 16) for _, rows in read_blocks(ART / "spark.txt", "frame")]
    for i, px in enumerate(sparks):
        inc.append(f"ms_spark{i}:")
        for dy, t, dx in metasprite(chr_, px, 16, 16, 8, 8):
            inc.append(f"    .byte {byte(dy)}, {byte(t)}, {byte(dx)}")
        inc.append("    .byte $80")
    for i, f in enumerate(FRAMES):
        inc.append(f"FRAME_{f.upper()} = {i}")
    for part in ("lo", "hi"):
        op = "<" if part == "lo" else ">"
        for who in fighters:
            inc.append(f"frames_{who}_{part}:")
            inc.append("    .byte " + ",".join(f"{op}ms_{who}_{f}" for f in FRAMES))
    inc.append(f"; {len(chr_.pairs)} sprite pairs, {chr_.bg_count} background tiles")
    (build / "assets.inc").write_text("\n".join(inc) + "\n")
    (build / "chr.bin").write_bytes(bytes(chr_.tables[0] + chr_.tables[1]))
    print(f"assets: {chr_.bg_count} bg tiles, {len(chr_.pairs)} sprite pairs "
          f"(of {128 + 128 - (chr_.bg_count + 1) // 2})")

    consts, tables = rules(json.loads((ROOT / "game.json").read_text()))
    (build / "rules.inc").write_text(consts)
    (build / "rules_tables.inc").write_text(tables)


def rules(g: dict) -> tuple[str, str]:
    """(constants, tables) as ca65 source."""
    out = ["; Generated by tools/build_assets.py from game.json. Do not edit.", ""]
    const = {
        "HEALTH_MAX": g["health_max"], "ROUND_TIME": g["round_time_seconds"],
        "ROUNDS_TO_WIN": g["rounds_to_win"], "GROUND_Y": g["ground_y"],
        "STAGE_LEFT": g["stage_x"][0], "STAGE_RIGHT": g["stage_x"][1],
        "START_X1": g["start_x"][0], "START_X2": g["start_x"][1],
        "WALK_FWD": g["walk_speed"]["forward"], "WALK_BACK": g["walk_speed"]["back"],
        "JUMP_FRAMES": g["jump"]["frames"], "JUMP_FWD": g["jump"]["speed_forward"],
        "JUMP_BACK": g["jump"]["speed_back"], "KNOCKDOWN_FRAMES": g["knockdown_frames"],
        "WAKEUP_FRAMES": g["wakeup_frames"], "GUARD_RANGE": g["guard_range"],
        "PUSH_SPEED": g["pushback_speed"], "INTRO_FRAMES": g["intro_frames"],
        "KO_PAUSE": g["ko_pause_frames"], "ROUND_OVER_FRAMES": g["round_over_frames"],
        "BODY_W": g["boxes"]["body_width"],
        "FACING_RIGHT": g["facing"]["right"], "FACING_LEFT": g["facing"]["left"],
    }
    for k, v in g["state_ids"].items():
        const[f"ST_{k.upper()}"] = v
    for k, v in g["phases"].items():
        const[f"PH_{k.upper()}"] = v
    for i, (k, box) in enumerate(sorted((k, b) for k, b in g["boxes"]["hurtbox"].items() if b)):
        for n, v in zip(("DX", "DY", "W", "H"), box):
            const[f"HURT_{k.upper()}_{n}"] = v
    moves = sorted(g["moves"], key=lambda m: m["id"])
    assert [m["id"] for m in moves] == list(range(1, len(moves) + 1)), "move ids must be 1..n"
    for m in moves:
        const[f"MV_{m['name'].upper()}"] = m["id"]
    out += [f"{k} = {v}" for k, v in const.items()]
    consts = "\n".join(out) + "\n"
    out = ["; Generated by tools/build_assets.py from game.json. Do not edit.", ""]

    def table(name, fn):
        out.append(f"{name}:\n    .byte 0," + ",".join(str(fn(m) & 0xFF) for m in moves))

    flag = {"any": 0, "high": 4, "low": 8}
    table("mv_startup", lambda m: m["startup"])
    table("mv_active_end", lambda m: m["startup"] + m["active"])
    table("mv_total", lambda m: m["startup"] + m["active"] + m["recovery"] if m["stance"] != "air" else 255)
    table("mv_damage", lambda m: m["damage"])
    table("mv_chip", lambda m: m["chip"])
    table("mv_hitstun", lambda m: m["hitstun"])
    table("mv_blockstun", lambda m: m["blockstun"])
    table("mv_push", lambda m: m["pushback"])
    table("mv_hb_dx", lambda m: m["hitbox"][0])
    table("mv_hb_dy", lambda m: m["hitbox"][1])
    table("mv_hb_w", lambda m: m["hitbox"][2])
    table("mv_hb_h", lambda m: m["hitbox"][3])
    table("mv_flags", lambda m: int(m["knockdown"]) | (2 if m["stance"] == "crouch" else 0)
          | flag[m["blocked_by"]] | (16 if m["stance"] == "air" else 0))
    t, hgt = g["jump"]["frames"], g["jump"]["height"]
    heights = [round(4 * hgt * i * (t - i) / (t * t)) for i in range(t + 1)]
    out.append("jump_height:\n    .byte " + ",".join(str(v) for v in heights))
    return consts, "\n".join(out) + "\n"


if __name__ == "__main__":
    main(Path(sys.argv[1]))
