"""Read the key HUD's words back from pixels, so tests check what a person sees in a video or sheet
(a panel title, the frame counter) rather than which function drew it."""

from __future__ import annotations

import numpy as np

from wantofight import hud

_BY_INK = {glyph.tobytes(): char for char, glyph in hud.FONT.items()}


def read_text(image: np.ndarray, y: int, x: int, scale: int = 1, threshold: int = 100) -> str:
    """The 3×5 glyphs of the line whose top-left corner is (y, x) in base pixels (× `scale` in the
    image), up to the image's right edge, trailing blanks dropped; '¿' marks a cell that is no glyph.
    Ink is any channel above `threshold` (light text on the HUD's dark background; survives H.264)."""
    ink = np.asarray(image).max(axis=-1) > threshold  # (H, W)
    centre = scale // 2
    chars = []
    for x0 in range(x, ink.shape[1] // scale - hud.GLYPH_W + 1, hud.ADVANCE):
        cell = ink[(y + np.arange(hud.GLYPH_H))[:, None] * scale + centre,
                   (x0 + np.arange(hud.GLYPH_W))[None, :] * scale + centre]  # (5, 3)
        chars.append(_BY_INK.get(cell.tobytes(), "¿"))
    return "".join(chars).rstrip()


def index_line(image: np.ndarray, layout: hud.HudLayout) -> str:
    """The counter line under the key rows of one HUD frame."""
    return read_text(image, layout.index_y, 2, layout.scale)


def title(image: np.ndarray, panel_x: int = 0, scale: int = 2) -> str:
    """The title over the panel starting at output pixel `panel_x` (`hud.add_titles`), up to the next
    panel's (two blanks)."""
    return read_text(image, hud.TITLE_Y, panel_x // scale + 2, scale).split("  ")[0]
