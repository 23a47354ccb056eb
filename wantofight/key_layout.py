"""The key layout (docs/contracts.md, "Key layout"): 16 slots, one bit each in a uint16 mask per player
and row. Every room reads keys through these names; how a platform's buttons map to the slots lives in
collect/keys.py (`button_table`).

    mask_of(["RIGHT", "A"])      # -> 0b10001000
    names_of(0b10001000)         # -> ["RIGHT", "A"]
    masks_to_array(masks)        # uint16 (T, P) -> float32 (T, P, 16)
"""

from __future__ import annotations

import numpy as np

LAYOUT_VERSION = 1
SLOTS: tuple[str, ...] = (
    "UP", "DOWN", "LEFT", "RIGHT", "A", "B", "C", "D",
    "X", "Y", "Z", "L", "R", "START", "SELECT", "MODE",
)  # fmt: skip
SLOT_INDEX = {name: i for i, name in enumerate(SLOTS)}


class UnknownKey(ValueError):
    """A key name or mask that the layout does not know."""


def mask_of(names: list[str] | tuple[str, ...]) -> int:
    """`["RIGHT", "A"]` → the uint16 mask with those slots set."""
    mask = 0
    for name in names:
        slot = SLOT_INDEX.get(name.upper())
        if slot is None:
            raise UnknownKey(f"unknown key {name!r}; valid keys: {', '.join(SLOTS)}")
        mask |= 1 << slot
    return mask


def names_of(mask: int) -> list[str]:
    """The slot names set in `mask`, in slot order."""
    return [name for i, name in enumerate(SLOTS) if mask >> i & 1]


def masks_to_array(masks: np.ndarray) -> np.ndarray:
    """uint16 masks of shape `(T, P)` → float32 `(T, P, 16)` with 1.0 where a slot is pressed."""
    masks = np.asarray(masks, dtype=np.uint16)
    bits = (masks[..., None] >> np.arange(16, dtype=np.uint16)) & 1
    return bits.astype(np.float32)


def array_to_masks(keys: np.ndarray) -> np.ndarray:
    """float or bool `(..., 16)` → uint16 masks `(...)` (a slot counts as pressed above 0.5)."""
    bits = (np.asarray(keys) > 0.5).astype(np.uint16)
    return (bits << np.arange(16, dtype=np.uint16)).sum(axis=-1).astype(np.uint16)
