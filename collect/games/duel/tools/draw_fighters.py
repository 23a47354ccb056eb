"""Draw both fighters' animation frames from joint poses and write them as text art.

Run by hand when a pose changes (`python tools/draw_fighters.py`); the build itself only reads
the text it writes (`art/fighters.txt`), so the art stays reviewable one character per pixel.

A frame is a 32x32 canvas, feet at the bottom centre (x 16, row 31). Joints are (x, h): x in
pixels toward the way the fighter faces, h in pixels above the floor. Each body part is a capsule
painted back to front with its own 1-pixel outline, so limbs stay readable in front of the body.
Colours: 1 outline, 2 cloth, 3 skin (each fighter has its own palette in the ROM).
"""

from __future__ import annotations

import math
from pathlib import Path

SIZE = 32
OUT = Path(__file__).resolve().parent.parent / "art" / "fighters.txt"

STAND_LEGS = dict(kf=(3.5, 5.5), ff=(5, 0.8), kb=(-3, 5.5), fb=(-4.5, 0.8))
STAND_BODY = dict(head=(1, 20.5), neck=(0, 16.5), hip=(-0.5, 10))
GUARD = dict(ef=(4, 13), hf=(6, 17), eb=(-2, 12.5), hb=(3, 16))
CROUCH_BODY = dict(head=(2, 12.5), neck=(1, 9), hip=(-1, 4.5), kf=(5, 5), ff=(5.5, 0.8),
                   kb=(-4, 2.5), fb=(-2.5, 0.8))
TUCK = dict(head=(1, 21), neck=(0, 17), hip=(0, 11), kf=(5, 11), ff=(2.5, 6), kb=(2, 8),
            fb=(-3, 5.5))


def pose(*parts: dict, **joints) -> dict:
    out: dict = {}
    for p in parts:
        out.update(p)
    out.update(joints)
    return out


POSES = {
    "idle0": pose(STAND_BODY, GUARD, STAND_LEGS),
    "idle1": pose(STAND_BODY, GUARD, STAND_LEGS, head=(1, 20), neck=(0, 16),
                  ef=(4, 12.5), hf=(6, 16.5), hb=(3, 15.5)),
    "walk0": pose(STAND_BODY, GUARD, kf=(4.5, 5.5), ff=(7, 0.8), kb=(-3.5, 5), fb=(-6.5, 0.8)),
    "walk1": pose(STAND_BODY, GUARD, kf=(1.5, 5.5), ff=(1, 0.8), kb=(0.5, 5), fb=(-1.5, 0.8)),
    "crouch": pose(CROUCH_BODY, ef=(5, 7), hf=(7, 10.5), eb=(0, 6), hb=(4, 9.5)),
    "jump": pose(TUCK, ef=(4, 15), hf=(6, 19), eb=(-2, 14), hb=(3, 18)),
    "block_high": pose(STAND_BODY, STAND_LEGS, head=(-1, 20.5), neck=(-1, 16.5),
                       ef=(4, 16), hf=(4.5, 22), eb=(3, 13.5), hb=(3.5, 19.5)),
    "block_low": pose(CROUCH_BODY, head=(1, 12.5), neck=(0, 9), ef=(4, 7.5), hf=(5, 12.5),
                      eb=(3, 6), hb=(4, 11)),
    "hit": pose(head=(-4, 19), neck=(-2.5, 15.5), hip=(0, 10), ef=(-1, 12), hf=(2, 9),
                eb=(-6, 14), hb=(-8.5, 17), kf=(3, 5.5), ff=(4, 0.8), kb=(-2.5, 5.5),
                fb=(-4, 0.8)),
    "down": pose(head=(-11, 3.5), neck=(-7.5, 3), hip=(1, 3), ef=(-5, 6.5), hf=(-2, 7.5),
                 eb=(-9, 1.5), hb=(-13, 1.5), kf=(6, 6), ff=(11, 1.5), kb=(6, 3.5),
                 fb=(12.5, 1.2)),
    "rise": pose(CROUCH_BODY, head=(0, 11.5), neck=(0, 8.5), ef=(2, 5), hf=(4, 2),
                 eb=(-1, 5), hb=(1, 2)),
    "win": pose(STAND_BODY, kf=(2.5, 5.5), ff=(3.5, 0.8), kb=(-2.5, 5.5), fb=(-3.5, 0.8),
                ef=(3, 22), hf=(3.5, 28), eb=(-2.5, 12), hb=(0.5, 9.5)),
    # attacks: frame 0 is startup / recovery, frame 1 the active pose
    "light_punch0": pose(STAND_BODY, GUARD, STAND_LEGS, ef=(3, 13.5), hf=(4.5, 18)),
    "light_punch1": pose(STAND_BODY, GUARD, STAND_LEGS, head=(2, 20.5), neck=(1, 16.5),
                         ef=(7.5, 16.5), hf=(12.5, 17)),
    "light_kick0": pose(STAND_BODY, GUARD, kf=(5, 10), ff=(6, 5), kb=(-1.5, 5), fb=(-2.5, 0.8)),
    "light_kick1": pose(STAND_BODY, GUARD, head=(0, 20.5), neck=(-1, 16.5), kf=(6, 9.5),
                        ff=(12.5, 9.5), kb=(-1.5, 5), fb=(-2.5, 0.8)),
    "heavy_punch0": pose(STAND_BODY, GUARD, STAND_LEGS, head=(-1, 20.5), neck=(-1, 16.5),
                         eb=(-5.5, 14), hb=(-3.5, 17.5)),
    "heavy_punch1": pose(STAND_BODY, STAND_LEGS, head=(3, 20), neck=(2, 16.5), ef=(2, 12),
                         hf=(4, 15), eb=(8, 16), hb=(13.5, 16.5)),
    "heavy_kick0": pose(head=(-2, 20), neck=(-1.5, 16.5), hip=(-0.5, 10), kf=(5, 12.5),
                        ff=(3, 8), kb=(-1, 5), fb=(-1.5, 0.8), ef=(1, 14), hf=(3, 17),
                        eb=(-4, 13), hb=(-2, 16)),
    "heavy_kick1": pose(head=(-3, 19.5), neck=(-2, 16), hip=(0, 10), kf=(7, 13), ff=(13.5, 18),
                        kb=(-1, 5), fb=(-1.5, 0.8), ef=(0, 13), hf=(2.5, 16), eb=(-5, 13),
                        hb=(-7, 15.5)),
    "crouch_punch0": pose(CROUCH_BODY, ef=(3, 7), hf=(5, 10.5), eb=(0, 6), hb=(4, 9.5)),
    "crouch_punch1": pose(CROUCH_BODY, head=(3, 12.5), ef=(8, 9), hf=(12.5, 9.5), eb=(0, 6),
                          hb=(4, 9.5)),
    "sweep0": pose(head=(-1, 11), neck=(-1, 7.5), hip=(-1, 4), ef=(2, 4), hf=(3.5, 1),
                   eb=(-3, 4), hb=(-2, 1), kf=(4, 3), ff=(7, 0.8), kb=(-4.5, 2.5),
                   fb=(-6.5, 0.8)),
    "sweep1": pose(head=(-2, 11), neck=(-2, 7.5), hip=(-1, 4), ef=(1, 4), hf=(2.5, 1),
                   eb=(-4, 4), hb=(-3.5, 1), kf=(7, 2.5), ff=(13.5, 1.5), kb=(-4.5, 2.5),
                   fb=(-7, 0.8)),
    "jump_punch0": pose(TUCK, ef=(2, 15), hf=(4, 18.5), eb=(-3, 14), hb=(-1, 17.5)),
    "jump_punch1": pose(TUCK, ef=(6, 14.5), hf=(11, 12.5), eb=(-2, 14), hb=(2, 17.5)),
    "jump_kick0": pose(TUCK, ef=(4, 15), hf=(6, 19), eb=(-2, 14), hb=(3, 18), kf=(4, 9),
                       ff=(6, 5)),
    "jump_kick1": pose(TUCK, ef=(3, 15.5), hf=(5, 19.5), eb=(-3, 15), hb=(0, 18.5),
                       kf=(5, 8.5), ff=(11.5, 3.5)),
}

# Body plans: radii in pixels and which colour each part wears.
FIGHTERS = {
    "kai": dict(  # slim karateka: red gi, bare forearms, headband with tails
        head_r=3.3, torso_r=2.9, upper_arm_r=1.5, forearm_r=1.2, fist_r=1.5, thigh_r=1.8,
        shin_r=1.5, shoulders=0.0, colours=dict(torso=2, upper_arm=2, forearm=3, fist=3,
                                                 thigh=2, shin=2, foot=3, head=3),
        hair="headband"),
    "gor": dict(  # broad brawler: bare chest, green trousers, dark boots and gloves, crest
        head_r=3.0, torso_r=3.8, upper_arm_r=2.0, forearm_r=1.7, fist_r=2.0, thigh_r=2.3,
        shin_r=1.8, shoulders=3.5, colours=dict(torso=3, upper_arm=3, forearm=3, fist=1,
                                                 thigh=2, shin=2, foot=1, head=3),
        hair="crest"),
}


def to_canvas(p):
    return 16 + p[0], SIZE - p[1]


def capsule(a, b, r):
    """Pixels whose centres lie within r of segment a-b (canvas coordinates)."""
    (ax, ay), (bx, by) = to_canvas(a), to_canvas(b)
    out = set()
    x0, x1 = int(min(ax, bx) - r - 1), int(max(ax, bx) + r + 1)
    y0, y1 = int(min(ay, by) - r - 1), int(max(ay, by) + r + 1)
    dx, dy = bx - ax, by - ay
    ll = dx * dx + dy * dy
    for y in range(max(0, y0), min(SIZE, y1 + 1)):
        for x in range(max(0, x0), min(SIZE, x1 + 1)):
            px, py = x + 0.5, y + 0.5
            t = 0.0 if ll == 0 else max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / ll))
            cx, cy = ax + t * dx, ay + t * dy
            if (px - cx) ** 2 + (py - cy) ** 2 <= r * r:
                out.add((x, y))
    return out


def paint(img, mask, colour):
    """Paint a part with its own outline, over what is already there."""
    ring = set()
    for x, y in mask:
        for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if (nx, ny) not in mask and 0 <= nx < SIZE and 0 <= ny < SIZE:
                ring.add((nx, ny))
    for x, y in ring:
        img[y][x] = 1
    for x, y in mask:
        img[y][x] = colour


def add(a, b, k=1.0):
    return (a[0] + k * b[0], a[1] + k * b[1])


def draw(style: dict, j: dict):
    img = [[0] * SIZE for _ in range(SIZE)]
    c = style["colours"]
    neck, hip, head = j["neck"], j["hip"], j["head"]
    sh = add(neck, (0, -0.5))

    def arm(e, h):
        paint(img, capsule(sh, j[e], style["upper_arm_r"]), c["upper_arm"])
        paint(img, capsule(j[e], j[h], style["forearm_r"]), c["forearm"])
        paint(img, capsule(j[h], j[h], style["fist_r"]), c["fist"])

    def leg(k, f):
        foot = j[f]
        toe = add(foot, (2.2, 0)) if abs(foot[1] - hip[1]) > 4 else add(foot, (0, 0))
        paint(img, capsule(hip, j[k], style["thigh_r"]), c["thigh"])
        paint(img, capsule(j[k], foot, style["shin_r"]), c["shin"])
        paint(img, capsule(foot, toe, 1.1), c["foot"])

    arm("eb", "hb")
    leg("kb", "fb")
    torso = capsule(neck, hip, style["torso_r"])
    if style["shoulders"]:
        vx, vy = neck[0] - hip[0], neck[1] - hip[1]
        n = math.hypot(vx, vy) or 1.0
        px, py = -vy / n * style["shoulders"], vx / n * style["shoulders"]
        torso |= capsule(add(sh, (px, py)), add(sh, (-px, -py)), 2.0)
    paint(img, torso, c["torso"])
    if style["shoulders"]:  # belt
        belt = {(x, y) for x, y in capsule(hip, add(hip, (0, 1.2)), style["torso_r"]) if (x, y) in torso}
        for x, y in belt:
            img[y][x] = 1
    leg("kf", "ff")
    paint(img, capsule(head, head, style["head_r"]), c["head"])
    hx, hy = head
    if style["hair"] == "headband":
        for x, y in capsule(add(head, (-0.5, 1.6)), add(head, (-3, 1.2)), 1.6):
            img[y][x] = 1  # hair at the back of the head
        for x, y in capsule(add(head, (-2.5, 0.9)), add(head, (2.8, 0.9)), 0.7):
            img[y][x] = 2  # headband across the forehead
        for x, y in capsule(add(head, (-3.5, 0.9)), add(head, (-6.5, -0.6)), 0.6):
            img[y][x] = 2  # tails streaming behind
    else:
        for x, y in capsule(add(head, (-2.5, 2.4)), add(head, (1.5, 3.4)), 1.3):
            img[y][x] = 1  # crest on top
    for x, y in capsule(add(head, (1.8, 0.4)), add(head, (1.8, 0.4)), 0.5):
        img[y][x] = 1  # eye
    arm("ef", "hf")
    return img


def main() -> None:
    lines = ["# Generated by tools/draw_fighters.py: 32x32 frames, feet at the bottom centre,",
             "# facing right. '.' transparent, 1 outline, 2 cloth, 3 skin.", ""]
    for name, style in FIGHTERS.items():
        for frame, joints in POSES.items():
            img = draw(style, joints)
            lines.append(f"frame {name} {frame}")
            lines += ["".join(".123"[v] for v in row) for row in img]
            lines.append("")
    OUT.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
