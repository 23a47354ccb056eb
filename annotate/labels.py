"""Per-frame, per-player labels: the action, whether new presses could act, and key edges.

Alignment (docs/contracts.md): the keys of row t act during the emulator steps that lead from row t − 1 to
row t. So whether a press in row t *could act* depends on the fighter as row t − 1 left it: the
game reads input before it moves fighters or resolves hits. Row 0 has no predecessor and is
judged from itself (its keys are always 0).

The rules follow `duel`'s frame loop, expressed over game.json names:
- free states (idle, walks, crouch, guards, jump) take new presses;
- an attack locks its fighter for `startup + active + recovery` emulator frames from the press,
  and a new press on the frame it ends acts (game.json `move_notes`); an air attack locks until
  landing;
- hitstun / blockstun end when the stun counter (`pN_stun`) runs out, and a press on that frame acts;
- knockdown locks; wakeup locks until the fighter is back on its feet; KO and victory lock;
- outside the fighting phase nobody acts.
"""

from __future__ import annotations

import numpy as np

from wantofight.annotate.rules import FREE_STATES, STUN_STATES, GameRules
from wantofight.collect.keys import SLOT_INDEX

LEFT, RIGHT = 1 << SLOT_INDEX["LEFT"], 1 << SLOT_INDEX["RIGHT"]

PLAIN_LABELS = (
    "idle", "walk_forward", "walk_back", "crouch", "block_high", "block_low",
    "hitstun", "blockstun", "knockdown", "wakeup", "ko", "victory",
)  # fmt: skip
JUMP_LABELS = ("jump_up", "jump_forward", "jump_back")


def label_vocabulary(rules: GameRules) -> list[str]:
    """Every action label annotation can give for this game."""
    return list(PLAIN_LABELS) + list(JUMP_LABELS) + [f"attack:{name}" for name in rules.move_names] + ["attack:unknown"]


def key_edges(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pressed, released) uint16 masks per row; row 0 compares against no keys."""
    keys = keys.astype(np.uint16)
    prev = np.concatenate([[np.uint16(0)], keys[:-1]]).astype(np.uint16)
    return keys & ~prev, prev & ~keys


def runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of every run of True in a boolean array."""
    padded = np.concatenate([[False], np.asarray(flags, dtype=bool), [False]])
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2])]


class PlayerTimeline:
    """One player's RAM as arrays, with the derived per-row facts labels and events share."""

    def __init__(self, columns: dict[str, np.ndarray], player: int, rules: GameRules, frame_skip: int):
        p = f"p{player}"
        self.player, self.rules, self.frame_skip = player, rules, frame_skip
        self.keys = columns[f"{p}_keys"].astype(np.int64)
        self.state = columns[f"{p}_state"].astype(np.int64)
        self.move = columns.get(f"{p}_move", np.zeros_like(self.state)).astype(np.int64)
        self.stun = columns[f"{p}_stun"].astype(np.int64) if f"{p}_stun" in columns else None
        self.facing = columns[f"{p}_facing"].astype(np.int64) if f"{p}_facing" in columns else None
        self.y = columns[f"{p}_y"].astype(np.int64) if f"{p}_y" in columns else None
        self.names = np.array([rules.states.get(int(s), "unknown") for s in self.state], dtype=object)
        self.move_start = self._move_starts()

    def is_state(self, *names: str) -> np.ndarray:
        return np.isin(self.names, names)

    def air_attack(self) -> np.ndarray:
        air_ids = [m.id for m in self.rules.moves.values() if m.air]
        return self.is_state("attack") & np.isin(self.move, air_ids)

    def airborne(self) -> np.ndarray:
        """Off the ground: above the floor line, or in a jump (take-off row included)."""
        up = self.is_state("jump") | self.air_attack()
        if self.y is not None and self.rules.ground_y is not None:
            up |= self.y < self.rules.ground_y
        return up

    def _move_starts(self) -> np.ndarray:
        """For each attack row, the row its move started on (-1 elsewhere).

        A new move starts when the attack state begins, the move id changes, or the previous move's
        length ran out while the fighter is still attacking (a press on the frame a move ends).
        """
        start = np.full(len(self.state), -1, dtype=np.int64)
        attacking = self.is_state("attack")
        current = -1
        for t in np.flatnonzero(attacking):
            move = self.rules.moves.get(int(self.move[t]))
            if current < 0 or not attacking[t - 1] or t == 0 or self.move[t] != self.move[t - 1]:
                current = t
            elif move is not None and not move.air and t - current >= self.rules.rows(move.total, self.frame_skip):
                current = t
            start[t] = current
        return start


# ---------------------------------------------------------------------------------------------
# Actions


def action_labels(tl: PlayerTimeline) -> np.ndarray:
    """One label per row (object array of str)."""
    labels = tl.names.copy()
    moves = tl.rules.moves
    for t in np.flatnonzero(tl.is_state("attack")):
        move = moves.get(int(tl.move[t]))
        labels[t] = f"attack:{move.name}" if move else "attack:unknown"
    for start, end in runs(tl.is_state("jump")):
        labels[start:end] = jump_label(tl, start)
    return labels


def jump_label(tl: PlayerTimeline, start: int) -> str:
    """jump_forward / jump_back / jump_up from the keys held at take-off and the facing before it.

    A jump that began before the episode (or whose take-off row is missing) is judged from its
    first recorded row.
    """
    if tl.facing is None or tl.rules.facing_right is None:
        return "jump_up" if not tl.keys[start] & (LEFT | RIGHT) else "jump_unknown"
    facing = tl.facing[max(start - 1, 0)]
    toward, away = (RIGHT, LEFT) if facing == tl.rules.facing_right else (LEFT, RIGHT)
    if tl.keys[start] & toward:
        return "jump_forward"
    if tl.keys[start] & away:
        return "jump_back"
    return "jump_up"


# ---------------------------------------------------------------------------------------------
# Effective presses


def effective_flags(tl: PlayerTimeline, fighting: np.ndarray) -> np.ndarray:
    """True where the row's new presses could act (see the module docstring for the rules)."""
    n = len(tl.state)
    prev = np.concatenate([[0], np.arange(n - 1)])
    names, k = tl.names, tl.frame_skip
    out = np.zeros(n, dtype=bool)
    for t in range(n):
        p = prev[t]
        if not fighting[p]:
            continue
        name = names[p]
        if name in FREE_STATES:
            out[t] = True
        elif name == "attack":
            move = tl.rules.moves.get(int(tl.move[p]))
            if move is not None and not move.air:
                out[t] = t - tl.move_start[p] >= tl.rules.rows(move.total, k)
        elif name in STUN_STATES:
            # The counter drops by one per emulator frame; a press acts if it runs out on the
            # row's first step (the only step on which a press is new).
            out[t] = tl.stun[p] <= 1 if tl.stun is not None else names[t] != name
        elif name == "wakeup":
            out[t] = names[t] != "wakeup"
    return out
