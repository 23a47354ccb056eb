"""Where a built-in game's recorded picture sits in its own coordinates, and which of its rows the fighters
can be drawn in, read from the game's game.json (docs/contracts.md, "Screen and fighter rows"):

    crop_top, crop_left = screen_offsets("duel")  # (8, 8): fceumm cuts 8 lines and 8 columns
    top, bottom = fighter_rows("duel")            # (0.47, 0.83): fractions of the picture's height

The fighters stand on `ground_y` and rise at most `jump.height` above it; the tallest `boxes.sprite`
stands that much higher again. Rows outside that band hold the HUD (health bars, timer) and the sky:
what changes there is never a fighter, so the losses that weight the fighters' pixels or latent cells
(train/fighter_cells.py, train/vae/losses.py `fighter_mask`) leave them out. A game without those fields
(an imported game) gets None: the whole picture.
"""

from __future__ import annotations

import math
from functools import lru_cache


def game_info(game: str | None) -> dict:
    """The built-in game's game.json as a dict; {} for any other game."""
    try:
        from wantofight.collect.game_registry import builtin_games

        spec = builtin_games().get(game)
    except Exception:  # an imported game without game.json
        return {}
    return (spec.info or {}) if spec is not None else {}


@lru_cache(maxsize=None)
def screen_offsets(game: str | None) -> tuple[int, int]:
    """(crop_top, crop_left): how far the recorded picture is cut into the game's coordinate
    system (game.json `screen`; duel: 8, 8); (0, 0) for a game without one."""
    screen = game_info(game).get("screen", {})
    return int(screen.get("crop_top", 0)), int(screen.get("crop_left", 0))


@lru_cache(maxsize=None)
def fighter_rows(game: str | None) -> tuple[float, float] | None:
    """[top, bottom) of the rows any fighter can be drawn in, as fractions of the recorded picture's
    height (any resize of the whole picture keeps them); None where game.json lacks `ground_y`,
    `jump.height`, `boxes.sprite` or `screen.height`."""
    info = game_info(game)
    sprites = info.get("boxes", {}).get("sprite")
    height = info.get("screen", {}).get("height")
    if info.get("ground_y") is None or not info.get("jump", {}).get("height") or not sprites or not height:
        return None
    crop_top = screen_offsets(game)[0]
    top = info["ground_y"] - info["jump"]["height"] - max(-box[1] for box in sprites.values()) - crop_top
    bottom = info["ground_y"] + max(box[1] + box[3] for box in sprites.values()) - crop_top
    return max(0.0, top / height), min(1.0, bottom / height)


def band_mask(rows: tuple[float, float] | None, height: int):
    """(height,) float tensor: 1 on the rows of a `height`-row grid (pixels or latent cells) that overlap
    the band `rows` (fractions), 0 elsewhere; all ones for None."""
    import torch

    mask = torch.ones(height)
    if rows is not None:
        mask[:] = 0
        mask[max(0, math.floor(rows[0] * height)):min(height, math.ceil(rows[1] * height))] = 1
    return mask


def fighter_rows_of(dataset, count: int = 8) -> tuple[float, float] | None:
    """`fighter_rows` of the games of `count` items spread over a ClipDataset or LatentDataset (their
    `meta["game"]`); the band that covers them all, None if any game has none or the dataset is empty."""
    from wantofight.datasets.sampler import eval_indices

    games = {dataset[(i, 0)].get("meta", {}).get("game") for i in eval_indices(len(dataset), count)}
    bands = [fighter_rows(g) for g in games]
    if not bands or any(b is None for b in bands):
        return None
    return min(b[0] for b in bands), max(b[1] for b in bands)
