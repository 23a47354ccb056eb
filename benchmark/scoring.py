"""The scoring rules (docs/benchmark.md, "Scoring"): action following, identity binding, position
error, fidelity. Every function takes what the probe read from a case's frames and the emulator's
truth for the same rows, and both the miner (is a case informative?) and the scorer use them.

A case has rows 0..N: row 0 is the prompt frame (given, never scored), rows 1..N are generated.
`read` holds the probe's readings per field, (N + 1, 2); `truth` a `labels.Truth` of the same rows.

- State class agrees at row r when the read class equals the true class of some row within
  TOLERANCE_ROWS of r (a frame early or late is not a wrong action).
- Movement direction (left / still / right) comes from x over a window of DIRECTION_FRAMES emulator
  frames each side; the read direction agrees at row r when it equals the true direction of some row
  within TOLERANCE_ROWS. The truth has a dead band: a true change between MOVE_PX / 2 and 1.5 MOVE_PX
  accepts both "still" and the direction, so a probe error of a few pixels is not a wrong move.
- Action following at row r: class and direction both agree. A case's score for a player is the
  share of its scored rows (rows whose own true class and direction are known) that follow.
- Extra fighters: pixels of a generated frame that differ from the stage picture (the per-pixel
  median of the case's recorded frames) inside the band of rows the fighters are drawn in, farther
  than FAR_PX from both fighters' true x: a model that grows a third fighter paints them.
- Identity binding: each fighter the probe sees (P1's look, P2's look) must behave like the player
  whose keys it was given, not like the other: bound when
      follow(P1 read, P1 truth) + follow(P2 read, P2 truth) > follow(P1 read, P2 truth) + follow(P2 read, P1 truth);
  a tie is not bound. Mined cases are informative: on the truth itself the two players' behaviour
  differs enough that the rule can tell (`binding_margin`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from wantofight.benchmark.labels import Truth

TOLERANCE_ROWS = 2
DIRECTION_FRAMES = 4
"""Emulator frames each side of a row over which its direction of movement is measured."""
MOVE_PX_PER_FRAME = 0.75
"""A fighter moving at least this fast (px per emulator frame) is moving; walking is 2."""
INFORMATIVE_MARGIN = 0.5
"""A mined identity case needs 2 - (follow(t1, t2) + follow(t2, t1)) >= this on the truth."""


def direction_window(frame_skip: int) -> int:
    return max(1, round(DIRECTION_FRAMES / max(1, frame_skip)))


def move_px(frame_skip: int) -> float:
    return MOVE_PX_PER_FRAME * 2 * direction_window(frame_skip) * max(1, frame_skip)


def displacement(x: np.ndarray, w: int) -> np.ndarray:
    """(T,) x -> (T,) x[r + w] - x[r - w], indices clamped to the case."""
    T = len(x)
    idx = np.arange(T)
    return x[np.clip(idx + w, 0, T - 1)] - x[np.clip(idx - w, 0, T - 1)]


def read_direction(x: np.ndarray, frame_skip: int) -> np.ndarray:
    """(T,) read x -> (T,) -1 / 0 / +1."""
    d = displacement(x, direction_window(frame_skip))
    return np.where(np.abs(d) >= move_px(frame_skip), np.sign(d), 0).astype(np.int64)


def true_directions(x: np.ndarray, valid: np.ndarray, frame_skip: int) -> np.ndarray:
    """(T,) true x -> (T, 3) bool: which of (-1, 0, +1) count as right at each row (none where x is
    unknown within the window)."""
    w = direction_window(frame_skip)
    d = displacement(np.nan_to_num(x), w)
    ok = windowed_all(valid, w)
    m = move_px(frame_skip)
    still = np.abs(d) < 1.5 * m
    moving = np.abs(d) >= m / 2
    out = np.zeros((len(x), 3), dtype=bool)
    out[:, 0] = moving & (d < 0) & ok
    out[:, 1] = still & ok
    out[:, 2] = moving & (d > 0) & ok
    return out


def windowed_all(flags: np.ndarray, w: int) -> np.ndarray:
    T = len(flags)
    idx = np.arange(T)
    return flags[np.clip(idx - w, 0, T - 1)] & flags[np.clip(idx + w, 0, T - 1)]


def near(table: np.ndarray, tol: int) -> np.ndarray:
    """(T, K) bool -> (T, K): True where any row within `tol` has it."""
    out = table.copy()
    for s in range(1, tol + 1):
        out[s:] |= table[:-s]
        out[:-s] |= table[s:]
    return out


@dataclass
class Signals:
    """One player's scored behaviour over a case: what counts as right per row."""

    classes: np.ndarray
    """(T, C) bool: classes accepted at each row (true classes within the tolerance)."""
    directions: np.ndarray
    """(T, 3) bool: directions accepted at each row."""
    scored: np.ndarray
    """(T,) bool: rows whose own class and direction are known (row 0 never)."""


def true_signals(truth: Truth, player: int, frame_skip: int, num_classes: int) -> Signals:
    """Accepted classes and directions per row for player index 0 / 1 from the emulator's truth."""
    T = len(truth)
    state, ok = truth.values["state"][:, player], truth.valid["state"][:, player]
    onehot = np.zeros((T, num_classes), dtype=bool)
    onehot[np.flatnonzero(ok), state[ok].astype(np.int64)] = True
    own_dirs = true_directions(truth.values["x"][:, player], truth.valid["x"][:, player], frame_skip)
    classes, directions = near(onehot, TOLERANCE_ROWS), near(own_dirs, TOLERANCE_ROWS)
    scored = onehot.any(1) & own_dirs.any(1)
    scored[0] = False
    return Signals(classes, directions, scored)


def follows(read: dict[str, np.ndarray], player: int, signals: Signals, frame_skip: int) -> tuple[np.ndarray, ...]:
    """Per row (T,): class agrees, direction agrees, both (action following) for the read player."""
    cls = read["state"][:, player].astype(np.int64)
    dirs = read_direction(read["x"][:, player], frame_skip) + 1
    rows = np.arange(len(cls))
    class_ok = signals.classes[rows, np.clip(cls, 0, signals.classes.shape[1] - 1)]
    dir_ok = signals.directions[rows, dirs]
    return class_ok, dir_ok, class_ok & dir_ok


def follow_share(read: dict[str, np.ndarray], player: int, signals: Signals, frame_skip: int) -> float:
    _, _, both = follows(read, player, signals, frame_skip)
    return float(both[signals.scored].mean()) if signals.scored.any() else float("nan")


def binding(read: dict[str, np.ndarray], signals: list[Signals], frame_skip: int) -> dict:
    """The identity-binding rule of the module docstring; returns both sums and the verdict."""
    f = [[follow_share(read, p, signals[q], frame_skip) for q in (0, 1)] for p in (0, 1)]
    own, swapped = f[0][0] + f[1][1], f[0][1] + f[1][0]
    return {"own": own, "swapped": swapped, "bound": bool(own > swapped)}


def truth_as_read(truth: Truth) -> dict[str, np.ndarray]:
    """The truth in the shape of probe readings (for judging how informative a case is)."""
    return {name: np.nan_to_num(v) for name, v in truth.values.items()}


def informative(truth: Truth, frame_skip: int, num_classes: int) -> float:
    """2 - (follow(t1 as read, t2) + follow(t2 as read, t1)): how well the binding rule can tell
    the players apart on this case's truth (0: they behave alike; 2: always differently)."""
    signals = [true_signals(truth, p, frame_skip, num_classes) for p in (0, 1)]
    as_read = truth_as_read(truth)
    cross = follow_share(as_read, 0, signals[1], frame_skip) + follow_share(as_read, 1, signals[0], frame_skip)
    return 2.0 - cross if np.isfinite(cross) else 0.0


# ---------------------------------------------------------------------------------------------
# Positions and fidelity
# ---------------------------------------------------------------------------------------------

def position_error(read: dict[str, np.ndarray], truth: Truth) -> np.ndarray:
    """(T, 2) |read x - true x| in native px (nan where x is unknown)."""
    err = np.abs(read["x"] - truth.values["x"])
    return np.where(truth.valid["x"], err, np.nan)


def mse_rows(generated: np.ndarray, real: np.ndarray) -> np.ndarray:
    """(T, H, W, 3) uint8 each -> (T,) mean squared error on [0, 1] pixels."""
    diff = (generated.astype(np.float32) - real.astype(np.float32)) / 255.0
    return (diff * diff).reshape(len(diff), -1).mean(1).astype(np.float64)


def spread(count: int, most: int) -> np.ndarray:
    """At most `most` indices spread evenly over range(count), first and last included."""
    return np.unique(np.linspace(0, count - 1, min(count, most)).round().astype(np.int64))


# ---------------------------------------------------------------------------------------------
# Extra fighters
# ---------------------------------------------------------------------------------------------

CHUNK_ROWS = 8
"""Rows per chunk of the per-chunk curves: the model's default `chunk_frames`."""
STAGE_FRAMES = 64
"""The stage picture is the per-pixel median of at most this many of the case's frames, spread evenly."""
DIFF_LEVEL = 60
"""A pixel differs from the stage when its largest channel difference exceeds this (of 255)."""
FAR_PX = 10
"""Model px: a differing pixel at least this far from both fighters' true x belongs to neither."""


def stage_picture(frames: np.ndarray) -> np.ndarray:
    """(T, H, W, 3) uint8 -> (H, W, 3) uint8: the per-pixel median, where fighters that move vanish."""
    return np.median(frames, axis=0).round().astype(np.uint8)


def fighter_band(truth: Truth, sprites: dict[str, list[int]], screen, size: tuple[int, int]) -> tuple[int, int]:
    """Model rows [top, bottom) the fighters are drawn in over the case: from the highest head (the
    tallest stance of game.json `boxes.sprite` above the feet) to the lowest feet. `screen` is the
    probe's `Screen` (native size, crop offsets); the whole frame for a game without sprite boxes."""
    y = truth.values["y"][truth.valid["y"]]
    if not sprites or not len(y):
        return 0, size[0]
    tallest = max(-box[1] for box in sprites.values())
    scale = size[0] / screen.native[0]
    top = math.floor((y.min() - tallest - screen.crop_top) * scale)
    bottom = math.ceil((y.max() + 1 - screen.crop_top) * scale)
    return max(0, top), min(size[0], max(bottom, 0))


def model_x(truth: Truth, screen, width: int) -> np.ndarray:
    """(T, 2) the fighters' true x as model columns (nan where unknown)."""
    x = np.where(truth.valid["x"], truth.values["x"], np.nan)
    return (x - screen.crop_left) * width / screen.native[1]


def extra_fighter_pixels(frames: np.ndarray, stage: np.ndarray, x: np.ndarray, band: tuple[int, int]) -> np.ndarray:
    """(T, H, W, 3) uint8 frames, the (H, W, 3) stage, (T, 2) true model x -> (T,) pixels that differ
    from the stage in the band and lie farther than FAR_PX from both fighters (nan where an x is unknown)."""
    top, bottom = band
    diff = np.abs(frames[:, top:bottom].astype(np.int16) - stage[top:bottom].astype(np.int16)).max(-1) > DIFF_LEVEL
    cols = np.arange(frames.shape[2], dtype=np.float64)
    far = (np.abs(cols[None, :, None] - np.nan_to_num(x)[:, None, :]) > FAR_PX).all(-1)  # (T, W)
    counts = (diff & far[:, None, :]).sum(axis=(1, 2)).astype(np.float64)
    counts[np.isnan(x).any(axis=1)] = np.nan
    return counts


def per_chunk(values: np.ndarray) -> list[float | None]:
    """(N,) per generated row (nan: unknown) -> the mean of each CHUNK_ROWS rows (None: none known)."""
    out = []
    for a in range(0, len(values), CHUNK_ROWS):
        known = values[a:a + CHUNK_ROWS]
        known = known[np.isfinite(known)]
        out.append(round(float(known.mean()), 2) if len(known) else None)
    return out
