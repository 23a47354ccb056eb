"""The 16-slot key layout (docs/contracts.md) and conversions between its three forms.

- a `uint16` bitmask per player per frame (bit i = slot i), as stored in Parquet;
- an emulator button vector in the core's order (stable-retro's `MultiBinary`), per platform;
- a `(T, P, 16)` float array, as fed to the model.

Platform button tables are data: `collect/platforms/<platform>.json` lists the core's button order
(`buttons`, as stable-retro's core json gives it) and which core button fills each slot (`slots`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from wantofight.key_layout import (LAYOUT_VERSION, SLOT_INDEX, SLOTS, UnknownKey, array_to_masks,  # noqa: F401
                                   mask_of, masks_to_array, names_of)

PLATFORMS_DIR = Path(__file__).parent / "platforms"


@dataclass(frozen=True)
class ButtonTable:
    """One platform's map between core buttons and the 16 slots."""

    platform: str
    buttons: tuple[str | None, ...]
    """The core's button order, as in stable-retro's core json (None = unused index)."""
    slots: dict[str, str]
    """Slot name → core button name; slots the platform lacks are absent and stay 0."""

    def __post_init__(self) -> None:
        for slot, button in self.slots.items():
            if slot not in SLOT_INDEX:
                raise ValueError(f"{self.platform}: unknown slot {slot!r}; valid: {', '.join(SLOTS)}")
            if button not in self.buttons:
                raise ValueError(f"{self.platform}: slot {slot} maps to {button!r}, not a core button")
        # (slot bit, button index) pairs, for vectorised conversion.
        pairs = [(SLOT_INDEX[s], self.buttons.index(b)) for s, b in self.slots.items()]
        object.__setattr__(self, "_pairs", tuple(sorted(pairs)))

    @property
    def num_buttons(self) -> int:
        return len(self.buttons)

    def to_buttons(self, mask: int) -> np.ndarray:
        """One player's uint16 mask → the core's button vector (uint8, length `num_buttons`)."""
        vec = np.zeros(self.num_buttons, dtype=np.uint8)
        for bit, index in self._pairs:
            if mask >> bit & 1:
                vec[index] = 1
        return vec

    def from_buttons(self, buttons: np.ndarray) -> int:
        """One player's core button vector → uint16 mask. Buttons with no slot are dropped."""
        mask = 0
        for bit, index in self._pairs:
            if buttons[index]:
                mask |= 1 << bit
        return mask

    def supported_mask(self) -> int:
        """The mask of every slot this platform can press."""
        return mask_of(list(self.slots))

    def action(self, masks: list[int] | tuple[int, ...], players: int) -> np.ndarray:
        """Per-player masks → the multi-player action vector stable-retro expects (P × buttons)."""
        return np.concatenate([self.to_buttons(masks[p]) for p in range(players)])


@cache
def button_table(platform: str) -> ButtonTable:
    """The table for a stable-retro platform name (`Nes`, `Genesis`, `Snes`, `FBNeo`)."""
    tables = available_platforms()
    key = platform.lower()
    if key not in tables:
        raise ValueError(f"no button table for platform {platform!r}; known: {', '.join(sorted(tables))}")
    data = json.loads(tables[key].read_text())
    return ButtonTable(data["platform"], tuple(data["buttons"]), dict(data["slots"]))


def available_platforms() -> dict[str, Path]:
    """Lower-case platform name → its table file."""
    tables = {}
    for path in sorted(PLATFORMS_DIR.glob("*.json")):
        tables[json.loads(path.read_text())["platform"].lower()] = path
    return tables
