"""The key HUD: a clip's frames with both players' 16 key slots, action labels, the frame counter and
an event timeline drawn under them.

`render_hud` is the library entry point; `wtf inspect`, `wtf browse`, the trainer's validation
videos, `wtf generate --hud` and the benchmark's videos all call it. The panel under the frame, top to
bottom (base pixels, before `scale`):

    P1 [UP][DN][LF][RT][A][B][C][D][X][Y][Z][L][R][ST][SE][MO]     key row, 11 px
       attack:punch                                                P1 action, 7 px
    P2 [..16 slots..]                                              key row, 11 px
       idle                                                        P2 action, 7 px
    ROW 123  FRAME 45 OF 161                                       counter, 7 px
    HIT   ====      |                                              one 6 px lane per event type,
    BLOCK      ==   |                                              the cursor marks the current frame

The counter: `ROW` is the episode row (as in frames.parquet), `FRAME t OF N` the frame's place in the
clip or video, from 0; a video with no recording behind it shows only `FRAME t OF N`. `add_titles`
puts a strip above a video naming its panels (`EMULATOR`, `GENERATED`).

A slot is lit in its player's colour while held; a slot pressed on this row (a new press) gets a
white border; a new press on a row whose `pN_effective` is false is drawn dimmed with a grey border
(the game could not act on it: an attack's recovery, hitstun, knockdown, ...).

Text is a 3×5 bitmap font of our own, kept over OpenCV's `putText` (bench/opencv.py): at the 5 px cap
height the panel has, putText draws antialiased grey letters that run together (the colon of `ATTACK:`
and the gaps between words vanish, and it is wider), and a pixel font stays two colours through the
upscale and the video codec. putText is faster, but text is a small part of a HUD's time. Upscaling is
OpenCV's nearest-neighbour resize (`images.upscale`); cells stay NumPy slices over all frames at once
(`cv2.rectangle` works a frame at a time, and was slower).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wantofight.images import upscale
from wantofight.key_layout import SLOTS

# ---------------------------------------------------------------------------------------------
# A 3×5 bitmap font: 5 rows of 3 pixels per glyph, "#" = ink. Upper case only; lower case maps to it.

_GLYPHS = {
    "A": ".#. #.# ### #.# #.#", "B": "##. #.# ##. #.# ##.", "C": ".## #.. #.. #.. .##", "D": "##. #.# #.# #.# ##.",
    "E": "### #.. ##. #.. ###", "F": "### #.. ##. #.. #..", "G": ".## #.. #.# #.# .##", "H": "#.# #.# ### #.# #.#",
    "I": "### .#. .#. .#. ###", "J": "..# ..# ..# #.# .#.", "K": "#.# #.# ##. #.# #.#", "L": "#.. #.. #.. #.. ###",
    "M": "#.# ### ### #.# #.#", "N": "##. #.# #.# #.# #.#", "O": ".#. #.# #.# #.# .#.", "P": "##. #.# ##. #.. #..",
    "Q": ".#. #.# #.# ##. .##", "R": "##. #.# ##. #.# #.#", "S": ".## #.. .#. ..# ##.", "T": "### .#. .#. .#. .#.",
    "U": "#.# #.# #.# #.# ###", "V": "#.# #.# #.# #.# .#.", "W": "#.# #.# ### ### #.#", "X": "#.# #.# .#. #.# #.#",
    "Y": "#.# #.# .#. .#. .#.", "Z": "### ..# .#. #.. ###",
    "0": "### #.# #.# #.# ###", "1": ".#. ##. .#. .#. ###", "2": "##. ..# .#. #.. ###", "3": "##. ..# .#. ..# ##.",
    "4": "#.# #.# ### ..# ..#", "5": "### #.. ##. ..# ##.", "6": ".## #.. ### #.# ###", "7": "### ..# .#. .#. .#.",
    "8": "### #.# ### #.# ###", "9": "### #.# ### ..# ##.",
    " ": "... ... ... ... ...", ":": "... .#. ... .#. ...", "_": "... ... ... ... ###", "-": "... ... ### ... ...",
    ".": "... ... ... ... .#.", "/": "..# ..# .#. #.. #..", ">": "#.. .#. ..# .#. #..", "<": "..# .#. #.. .#. ..#",
    "+": "... .#. ### .#. ...", "(": ".#. #.. #.. #.. .#.", ")": ".#. ..# ..# ..# .#.", "=": "... ### ... ### ...",
    "?": "##. ..# .#. ... .#.", "!": ".#. .#. .#. ... .#.", ",": "... ... ... .#. #..", "%": "#.# ..# .#. #.. #.#",
}  # fmt: skip
FONT: dict[str, np.ndarray] = {
    char: np.array([[c == "#" for c in row] for row in rows.split()], dtype=bool) for char, rows in _GLYPHS.items()
}
assert all(glyph.shape == (5, 3) for glyph in FONT.values())
GLYPH_W, GLYPH_H, ADVANCE = 3, 5, 4
_INK = {char: np.nonzero(glyph) for char, glyph in FONT.items()}
"""(rows, columns) of each glyph's ink."""


def text_width(text: str) -> int:
    return max(0, len(text) * ADVANCE - 1)


def draw_text(image: np.ndarray, y: int, x: int, text: str, color) -> None:
    """Stamp `text` (3×5 glyphs, 1 px spacing) into an (H, W, 3) or (T, H, W, 3) image, clipped."""
    if not text:
        return
    h, w = image.shape[-3], image.shape[-2]
    glyphs = [_INK.get(char, _INK["?"]) for char in text.upper()]
    ys = np.concatenate([rows for rows, _ in glyphs]) + y
    xs = np.concatenate([cols + i * ADVANCE for i, (_, cols) in enumerate(glyphs)]) + x
    keep = (ys >= 0) & (ys < h) & (xs >= 0) & (xs < w)
    image[..., ys[keep], xs[keep], :] = np.asarray(color, dtype=np.uint8)


# ---------------------------------------------------------------------------------------------
# Layout and colours

SLOT_LABELS = ("UP", "DN", "LF", "RT", "A", "B", "C", "D", "X", "Y", "Z", "L", "R", "ST", "SE", "MO")
assert len(SLOT_LABELS) == len(SLOTS)
EVENT_LANES = (
    "hit", "block", "trade", "knockdown", "ko", "side_swap", "overlap",
    "round_start", "round_end", "time_out", "idle", "non_gameplay",
)  # fmt: skip
LANE_LABELS = ("HIT", "BLOCK", "TRADE", "KDOWN", "KO", "SWAP", "OVRLP", "RSTRT", "REND", "TOUT", "IDLE", "NOGAM")

BACKGROUND = (18, 18, 24)
UNLIT = (48, 48, 58)
UNLIT_TEXT = (130, 130, 140)
LIT_TEXT = (0, 0, 0)
TEXT = (220, 220, 220)
PLAYER_COLORS = {1: (255, 90, 60), 2: (70, 150, 255)}
"""Fill of a held slot, per player."""
DIM_FACTOR = 0.4
NEW_BORDER = (255, 255, 255)
DIM_BORDER = (110, 110, 110)
EVENT_COLORS = {
    "hit": (255, 70, 70), "block": (90, 200, 255), "trade": (255, 160, 40), "knockdown": (200, 90, 255),
    "ko": (255, 255, 255), "side_swap": (255, 230, 60), "overlap": (120, 230, 120),
    "round_start": (160, 160, 160), "round_end": (160, 160, 160), "time_out": (160, 160, 160),
    "idle": (90, 90, 110), "non_gameplay": (90, 90, 90),
}  # fmt: skip
CURSOR = (255, 255, 255)
SEPARATOR = (110, 110, 120)
"""The line between panels shown side by side."""

CELL_W, CELL_H, CELL_GAP = 13, 11, 1
KEY_X0 = 10
"""Cells start after the `P1 ` prefix."""
LINE_H = 7
LANE_H = 6
LANE_X0 = 6 * ADVANCE
"""Timeline bars start after the 5-character lane label."""
TITLE_H, TITLE_Y = 10, 3
"""Height of `add_titles`' strip and the top of its text (base pixels; even, for yuv420p encoders)."""
PANEL_GAP = 2
"""Base pixels between two HUD videos placed side by side (`side_by_side`)."""


def dim(color) -> tuple[int, int, int]:
    return tuple(int(c * DIM_FACTOR) for c in color)


@dataclass(frozen=True)
class HudLayout:
    """Where everything sits in an output frame of `render_hud` (output pixels, `scale` applied)."""

    frame_height: int
    frame_width: int
    scale: int
    width: int
    """Base (unscaled) canvas width: the frame's, or the key rows' if wider."""
    height: int
    """Base canvas height, frame plus panel, rounded up to even."""

    @property
    def key_row_y(self) -> dict[int, int]:
        return {1: self.frame_height + 2, 2: self.frame_height + 2 + CELL_H + LINE_H + 2}

    @property
    def action_y(self) -> dict[int, int]:
        return {p: y + CELL_H + 1 for p, y in self.key_row_y.items()}

    @property
    def index_y(self) -> int:
        return self.action_y[2] + LINE_H + 1

    @property
    def timeline_y(self) -> int:
        return self.index_y + LINE_H + 1

    @property
    def output_shape(self) -> tuple[int, int]:
        """(H', W') of each output frame."""
        return self.height * self.scale, self.width * self.scale

    def slot_box(self, player: int, slot: int) -> tuple[int, int, int, int]:
        """(y0, y1, x0, x1) of a key cell in output pixels, border included."""
        y = self.key_row_y[player]
        x = KEY_X0 + slot * (CELL_W + CELL_GAP)
        s = self.scale
        return y * s, (y + CELL_H) * s, x * s, (x + CELL_W) * s

    def slot_fill(self, player: int, slot: int) -> tuple[int, int, int, int]:
        """(y0, y1, x0, x1) of a key cell's fill strip (inside the 1 px border, above the label)."""
        y0, _, x0, x1 = self.slot_box(player, slot)
        s = self.scale
        return y0 + s, y0 + 3 * s, x0 + s, x1 - s


def hud_layout(height: int, width: int, scale: int = 2) -> HudLayout:
    """The layout `render_hud` uses for (height, width) frames."""
    if scale < 1:
        raise ValueError(f"scale must be at least 1, got {scale}")
    base_w = max(width, KEY_X0 + len(SLOTS) * (CELL_W + CELL_GAP) + 1)
    base_w += base_w % 2
    panel = 2 + 2 * (CELL_H + LINE_H + 2) + LINE_H + 1 + len(EVENT_LANES) * LANE_H + 2
    base_h = height + panel
    base_h += base_h % 2  # even sizes for yuv420p encoders
    return HudLayout(height, width, scale, base_w, base_h)


# ---------------------------------------------------------------------------------------------
# Rendering


def render_hud(frames, p1_keys, p2_keys, p1_effective=None, p2_effective=None, labels=None, events=None,
               start_index: int = 0, scale: int = 2, p1_pressed=None, p2_pressed=None,
               timeline_span: tuple[int, int] | None = None, episode_rows: bool = True) -> np.ndarray:
    """Draw the key HUD under every frame.

    frames:        (T, H, W, 3) uint8 RGB.
    p1_keys, p2_keys: T uint16 masks (bit i = slot i of the key layout, docs/contracts.md).
    p1_effective, p2_effective: T bools (None entries count as effective), or None: whether the
                   row's new presses could act; new presses on false rows are dimmed.
    labels:        per-frame action labels: `(p1_action, p2_action)` or `{"p1": [...], "p2": [...]}`
                   (T strings each, None allowed), or None.
    events:        dicts with `event`, `start_frame`, `end_frame` (span `[start, end)` in the same
                   row numbering as `start_index`), optional `attacker`, `victim`, `players`, `move`,
                   `detail`; events of unknown type are ignored. Or None.
    start_index:   the row number of frames[0] (episode row for shard clips: `start_frame`).
    scale:         integer nearest-neighbour upscale of the whole canvas.
    p1_pressed, p2_pressed: T uint16 masks of new presses; default: derived from the keys with no
                   keys before frames[0].
    timeline_span: (first row, row count) the timeline strip and the `FRAME t OF N` counter cover;
                   default `(start_index, T)`. Rendering a long view in chunks passes the whole view's span.
    episode_rows:  whether `start_index` numbers episode rows, shown as `ROW r`; False for videos with no
                   recording behind them (validation, generation), which show only `FRAME t OF N`.
    Returns (T, H', W', 3) uint8 with (H', W') = `hud_layout(H, W, scale).output_shape`.
    """
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"frames must be (T, H, W, 3), got {frames.shape}")
    t_len, h, w, _ = frames.shape
    layout = hud_layout(h, w, scale)
    keys = {1: _masks(p1_keys, t_len, "p1_keys"), 2: _masks(p2_keys, t_len, "p2_keys")}
    pressed = {}
    for p, given in ((1, p1_pressed), (2, p2_pressed)):
        if given is None:
            previous = np.concatenate([[0], keys[p][:-1]]).astype(np.uint16)
            pressed[p] = keys[p] & ~previous
        else:
            pressed[p] = _masks(given, t_len, f"p{p}_pressed")
    effective = {1: _flags(p1_effective, t_len), 2: _flags(p2_effective, t_len)}
    actions = _labels(labels, t_len)

    first, span = timeline_span or (start_index, t_len)
    canvas = np.empty((t_len, layout.height, layout.width, 3), dtype=np.uint8)
    canvas[:] = _static_panel(layout, events, first, span)
    canvas[:, :h, :w] = frames
    for p in (1, 2):
        _draw_keys(canvas, layout, p, keys[p], pressed[p], effective[p])
    for t in range(t_len):
        image = canvas[t]
        for p in (1, 2):
            label = actions[p][t]
            if label:
                draw_text(image, layout.action_y[p], KEY_X0, str(label), PLAYER_COLORS[p])
        active = _active_events(events, start_index + t)
        offset = start_index + t - first
        row = f"ROW {start_index + t}  " if episode_rows else ""
        draw_text(image, layout.index_y, 2, f"{row}FRAME {offset} OF {span} {active}", TEXT)
        x = LANE_X0 + _lane_x(offset, span, layout)
        image[layout.timeline_y:layout.timeline_y + len(EVENT_LANES) * LANE_H, x] = CURSOR
    return upscale(canvas, scale)  # (T, H'·s, W'·s, 3)


def add_titles(video: np.ndarray, titles, scale: int = 2) -> np.ndarray:
    """(T, H, W, 3) uint8 -> (T, TITLE_H·scale + H, W, 3): a strip above the frames naming each panel.

    titles: (x, text) pairs, x the output pixel column where a panel starts (a multiple of `scale`).
    """
    video = np.asarray(video)
    t_len, _, w, _ = video.shape
    strip = np.empty((TITLE_H, -(-w // scale), 3), dtype=np.uint8)
    strip[:] = BACKGROUND
    for x, text in titles:
        draw_text(strip, TITLE_Y, x // scale + 2, text, TEXT)
    strip = upscale(strip, scale)[:, :w]  # (TITLE_H·s, W, 3)
    return np.concatenate([np.broadcast_to(strip, (t_len, *strip.shape)), video], axis=1)


def side_by_side(panels, scale: int = 2) -> np.ndarray:
    """[(title, (T, H, W_i, 3) uint8), ...] -> one video, PANEL_GAP·scale px apart, each panel titled."""
    gap = np.full((len(panels[0][1]), panels[0][1].shape[1], PANEL_GAP * scale, 3), SEPARATOR, dtype=np.uint8)
    parts, titles, x = [], [], 0
    for title, video in panels:
        parts += [gap, video] if parts else [video]
        x += gap.shape[2] if titles else 0
        titles.append((x, title))
        x += video.shape[2]
    return add_titles(np.concatenate(parts, axis=2), titles, scale)


def _masks(values, t_len: int, name: str) -> np.ndarray:
    masks = np.asarray(values if values is not None else np.zeros(t_len), dtype=np.int64)
    if masks.shape != (t_len,):
        raise ValueError(f"{name} must hold one mask per frame ({t_len}), got shape {masks.shape}")
    return masks.astype(np.uint16)


def _flags(values, t_len: int) -> np.ndarray:
    if values is None:
        return np.ones(t_len, dtype=bool)
    flags = np.array([v is None or bool(v) for v in values], dtype=bool)
    if flags.shape != (t_len,):
        raise ValueError(f"effective flags must hold one entry per frame ({t_len}), got {flags.shape}")
    return flags


def _labels(labels, t_len: int) -> dict[int, list]:
    if labels is None:
        return {1: [None] * t_len, 2: [None] * t_len}
    if isinstance(labels, dict):
        labels = (labels.get("p1"), labels.get("p2"))
    out = {}
    for p, values in zip((1, 2), labels):
        values = list(values) if values is not None else [None] * t_len
        if len(values) != t_len:
            raise ValueError(f"labels for p{p} must hold one entry per frame ({t_len}), got {len(values)}")
        out[p] = values
    return out


def _lane_x(t: int, t_len: int, layout: HudLayout) -> int:
    span = layout.width - 2 - LANE_X0
    return min(span - 1, t * span // max(t_len, 1))


def _static_panel(layout: HudLayout, events, start_index: int, t_len: int) -> np.ndarray:
    """Everything that does not change from frame to frame: background, prefixes, unlit cells, lanes."""
    panel = np.empty((layout.height, layout.width, 3), dtype=np.uint8)
    panel[:] = BACKGROUND
    for p in (1, 2):
        y = layout.key_row_y[p]
        draw_text(panel, y + 3, 1, f"P{p}", PLAYER_COLORS[p])
        for slot, label in enumerate(SLOT_LABELS):
            x = KEY_X0 + slot * (CELL_W + CELL_GAP)
            panel[y:y + CELL_H, x:x + CELL_W] = UNLIT
            draw_text(panel, y + 5, x + (CELL_W - text_width(label)) // 2, label, UNLIT_TEXT)
    span = layout.width - 2 - LANE_X0
    for lane, (kind, label) in enumerate(zip(EVENT_LANES, LANE_LABELS)):
        y = layout.timeline_y + lane * LANE_H
        draw_text(panel, y, 1, label, dim(EVENT_COLORS[kind]) if kind in ("idle", "non_gameplay") else EVENT_COLORS[kind])
        panel[y + 2, LANE_X0:LANE_X0 + span] = UNLIT
    for event in events or []:
        kind = event.get("event")
        if kind not in EVENT_LANES:
            continue
        a = max(0, int(event["start_frame"]) - start_index)
        b = min(t_len, int(event["end_frame"]) - start_index)
        if b <= a:
            continue
        lane = EVENT_LANES.index(kind)
        y = layout.timeline_y + lane * LANE_H
        x0 = LANE_X0 + _lane_x(a, t_len, layout)
        x1 = max(x0 + 1, LANE_X0 + _lane_x(b - 1, t_len, layout) + 1)
        color = EVENT_COLORS[kind]
        if kind == "idle" and event.get("players"):
            color = dim(PLAYER_COLORS[int(event["players"][0])])
        panel[y:y + LANE_H - 1, x0:x1] = color
    return panel


def _draw_keys(canvas: np.ndarray, layout: HudLayout, player: int, keys, pressed, effective) -> None:
    """Light held slots, border new presses, dim ineffective new presses (vectorised over frames)."""
    y = layout.key_row_y[player]
    color = PLAYER_COLORS[player]
    for slot, label in enumerate(SLOT_LABELS):
        bit = np.uint16(1 << slot)
        held = (keys & bit) != 0
        new = (pressed & bit) != 0
        if not held.any() and not new.any():
            continue
        x = KEY_X0 + slot * (CELL_W + CELL_GAP)
        lx = x + (CELL_W - text_width(label)) // 2
        weak = new & ~effective
        for mask, fill, border in ((held & ~weak, color, None), (new & effective, color, NEW_BORDER),
                                   (weak, dim(color), DIM_BORDER)):
            if not mask.any():
                continue
            cells = canvas[mask, y:y + CELL_H, x:x + CELL_W]  # (n, CELL_H, CELL_W, 3) copy
            cells[:] = fill
            if border is not None:
                cells[:, 0, :] = cells[:, -1, :] = border
                cells[:, :, 0] = cells[:, :, -1] = border
            draw_text(cells, 5, lx - x, label, LIT_TEXT)
            canvas[mask, y:y + CELL_H, x:x + CELL_W] = cells


def _active_events(events, row: int) -> str:
    """Short text for the interaction events covering `row`, e.g. `HIT 1>2 SWAP`."""
    words = []
    for event in events or []:
        kind = event.get("event")
        if kind in ("idle", "non_gameplay", "round_start") or not event["start_frame"] <= row < event["end_frame"]:
            continue
        word = LANE_LABELS[EVENT_LANES.index(kind)] if kind in EVENT_LANES else str(kind).upper()
        if event.get("attacker") and event.get("victim"):
            word += f" {event['attacker']}>{event['victim']}"
        if word not in words:
            words.append(word)
    return " ".join(words[:4])
