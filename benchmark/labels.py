"""What the probe reads from one frame, and the truth it is scored against: for each player the x and
y position, facing, a coarse state class, the move id and health, taken from RAM at the moment the
frame shows (docs/benchmark.md, "Fields").

Screen time (docs/recording-format.md, "Alignment"): row t's RAM is read after emulator step k t
(k = frame_skip) and its frame shows the RAM of step k t - lag (lag = screen_ram_lag_frames; 1 for
`duel`). When lag is a multiple of k that is exactly row t - lag / k. Otherwise (duel at 30 fps:
k = 2, lag = 1) the frame shows a step between two recorded rows: positions are interpolated
linearly between them, and discrete fields (facing, state, move, health) are known only where both
rows agree. Rows whose truth is not known are masked out of training and scoring, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wantofight.annotate.rules import GameRules

FIELD_NAMES = ("x", "y", "facing", "state", "move", "health")
REQUIRED_RAM = tuple(f"p{p}_{name}" for p in (1, 2) for name in FIELD_NAMES)
"""RAM names (docs/recording-format.md; duel: docs/duel.md) the probe and the benchmark read."""

STATE_CLASSES = ("idle", "walk", "jump", "crouch", "attack", "block", "hitstun", "knockdown")
COARSE_STATE = {
    "idle": "idle", "victory": "idle",
    "walk_forward": "walk", "walk_back": "walk",
    "jump": "jump",
    "crouch": "crouch",
    "attack": "attack",  # ground and air attacks alike; the move id says which
    "block_high": "block", "block_low": "block", "blockstun": "block",
    "hitstun": "hitstun",
    "knockdown": "knockdown", "wakeup": "knockdown", "ko": "knockdown",
}  # fmt: skip
"""Game state name (game.json `state_ids`) -> coarse class (docs/benchmark.md, "State classes")."""

MAX_SPEED = 8
"""px per emulator frame: a larger jump between two rows is a reset (new round), not motion, so a
position between them is unknown rather than interpolated."""


class LabelError(ValueError):
    """Recordings that cannot be labelled (a game without the RAM names or state ids needed)."""


@dataclass(frozen=True)
class Field:
    """One per-player quantity the probe reads."""

    name: str
    classes: int
    """Output size: classes, or bins for a number."""
    step: float = 0.0
    """Bin width for a number (0 for a class)."""
    tolerance: float = 0.0
    """A number is read correctly within this distance (docs/benchmark.md)."""
    interpolate: bool = False
    """Known between two rows by linear interpolation (positions); else only where both rows agree."""

    @property
    def is_number(self) -> bool:
        return self.step > 0


def fields_for(rules: GameRules, health_max: int) -> tuple[Field, ...]:
    """The probe's fields for a game: x and y in 2-px bins over the 256 x 240 NES picture, health in
    2-point bins, and the classes of its facing, states and moves."""
    moves = 1 + max(rules.moves, default=0)
    return (
        Field("x", 128, step=2.0, tolerance=4.0, interpolate=True),
        Field("y", 120, step=2.0, tolerance=4.0, interpolate=True),
        Field("facing", 2),
        Field("state", len(STATE_CLASSES)),
        Field("move", moves),
        Field("health", health_max // 2 + 1, step=2.0, tolerance=4.0),
    )


def check_game(ram_names, rules: GameRules, what: str) -> None:
    """Raise LabelError naming what `what` (a run, a suite) lacks for the probe's fields."""
    missing = [n for n in REQUIRED_RAM if n not in ram_names]
    if missing:
        raise LabelError(f"{what}: game {rules.game!r} lacks the RAM names {', '.join(missing)}; the benchmark "
                         f"needs {', '.join(REQUIRED_RAM)} (docs/benchmark.md)")
    unknown = sorted(set(rules.states.values()) - set(COARSE_STATE))
    if not rules.states or unknown:
        raise LabelError(f"{what}: game {rules.game!r} has " + (f"state names {unknown} with no coarse class"
                         if unknown else "no state ids (game.json state_ids)") + f"; known: {', '.join(COARSE_STATE)}")


def state_class(state_ids: np.ndarray, rules: GameRules) -> np.ndarray:
    """RAM state ids -> coarse class index (-1 for an id game.json does not name)."""
    lookup = np.full(256, -1, dtype=np.int64)
    for sid, name in rules.states.items():
        lookup[sid] = STATE_CLASSES.index(COARSE_STATE[name])
    return lookup[np.asarray(state_ids, dtype=np.int64)]


def ram_fields(columns: dict[str, np.ndarray], rules: GameRules) -> dict[str, np.ndarray]:
    """Per field, (T, 2) values at the rows' own RAM time (state as coarse class indices)."""
    out = {}
    for name in FIELD_NAMES:
        pair = [np.asarray(columns[f"p{p}_{name}"], dtype=np.float64) for p in (1, 2)]
        if name == "state":
            pair = [state_class(v, rules).astype(np.float64) for v in pair]
        out[name] = np.stack(pair, axis=1)
    return out


@dataclass
class Truth:
    """Per field: values (T, 2) at screen time and valid (T, 2) where they are known."""

    values: dict[str, np.ndarray]
    valid: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.values["x"])

    def rows(self, sl: slice) -> "Truth":
        return Truth({k: v[sl] for k, v in self.values.items()}, {k: v[sl] for k, v in self.valid.items()})


def screen_truth(columns: dict[str, np.ndarray], rules: GameRules, fields: tuple[Field, ...], frame_skip: int,
                 lag: int | None) -> Truth:
    """What each recorded frame shows, per field and player (the module docstring says how)."""
    raw = ram_fields(columns, rules)
    k, lag = max(1, int(frame_skip)), int(lag or 0)
    rows_back, rest = divmod(lag, k)
    T = len(raw["x"])
    later = np.arange(T) - rows_back  # the row at or after screen time
    earlier = later - (1 if rest else 0)  # the row at or before it
    known = earlier >= 0
    a, b = np.clip(earlier, 0, None), np.clip(later, 0, None)
    values, valid = {}, {}
    for f in fields:
        va, vb = raw[f.name][a], raw[f.name][b]
        ok = np.repeat(known[:, None], 2, axis=1)
        if f.interpolate:
            values[f.name] = vb - (rest / k) * (vb - va)  # screen time is rest steps before `later`
            ok &= np.abs(vb - va) <= MAX_SPEED * k
        else:
            values[f.name] = vb
            ok &= va == vb
        if f.name == "state":
            ok &= vb >= 0
        valid[f.name] = ok
    return Truth(values, valid)
