"""Key files: scripted input for both players, one segment a line.

    # FRAMES  P1KEYS   P2KEYS
    30        RIGHT    -
    4         A        DOWN+B

Each line holds its keys for FRAMES recorded frames. The first segment starts at row 1 (row 0 is
the start frame, recorded with no keys: docs/contracts.md); the episode ends when the file does.
Keys are slot names of the 16-slot layout joined with `+`; `-` means no key; `#` starts a comment.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wantofight.collect.game_registry import GameError, resolve_key_file
from wantofight.collect.keys import SLOTS, UnknownKey, mask_of, names_of


class KeyFileError(ValueError):
    """A key file that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class KeyScript:
    """A parsed key file: per-row masks for rows 1..N (row 0 is always no keys)."""

    p1: np.ndarray  # (N,) uint16
    p2: np.ndarray  # (N,) uint16

    def __len__(self) -> int:
        return len(self.p1)

    def masks(self, player: int) -> np.ndarray:
        return self.p1 if player == 0 else self.p2


def parse_keys(token: str) -> int:
    """`RIGHT+A` → mask; `-` → 0."""
    if token == "-":
        return 0
    return mask_of([name for name in token.split("+")])


def read_key_file(path: str | Path) -> KeyScript:
    """Parse a key file, a path or a built-in game's by name (`duel/walk-under-a`); raises KeyFileError
    naming the line of the first bad entry."""
    try:
        path = resolve_key_file(path)
    except GameError as err:
        raise KeyFileError(f"cannot read key file {err}") from None
    try:
        text = path.read_text()
    except OSError as err:
        raise KeyFileError(f"cannot read key file {path}: {err.strerror}") from None
    p1: list[np.ndarray] = []
    p2: list[np.ndarray] = []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        where = f"{path}:{number}"
        if len(fields) != 3:
            raise KeyFileError(f"{where}: expected 'FRAMES P1KEYS P2KEYS', got {line.strip()!r}")
        frames, keys1, keys2 = fields
        if not frames.isdigit() or int(frames) == 0:
            raise KeyFileError(f"{where}: FRAMES must be a positive integer, got {frames!r}")
        try:
            mask1, mask2 = parse_keys(keys1), parse_keys(keys2)
        except UnknownKey as err:
            raise KeyFileError(f"{where}: {err}") from None
        p1.append(np.full(int(frames), mask1, dtype=np.uint16))
        p2.append(np.full(int(frames), mask2, dtype=np.uint16))
    if not p1:
        raise KeyFileError(f"{path}: no segments; each line is 'FRAMES P1KEYS P2KEYS' (keys: {', '.join(SLOTS)} or -)")
    return KeyScript(np.concatenate(p1), np.concatenate(p2))


def format_keys(mask: int) -> str:
    """mask → `RIGHT+A` or `-`."""
    return "+".join(names_of(mask)) or "-"


def write_key_file(path: str | Path, p1: np.ndarray, p2: np.ndarray) -> None:
    """Write per-row masks (rows 1..N) as a run-length key file."""
    lines = []
    start = 0
    for t in range(1, len(p1) + 1):
        if t == len(p1) or p1[t] != p1[start] or p2[t] != p2[start]:
            lines.append(f"{t - start} {format_keys(int(p1[start]))} {format_keys(int(p2[start]))}")
            start = t
    Path(path).write_text("\n".join(lines) + "\n")
