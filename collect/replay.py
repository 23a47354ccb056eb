"""`wtf replay --verify`: re-run an episode's input log from its savestate and compare every row.

The input log is `inputs.bk2` (stable-retro's movie format), independent of `frames.parquet`, so a
tampered key, RAM value or frame in the recording shows up as a mismatch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wantofight.collect import episode_files as files
from wantofight.collect.game_registry import resolve_game


class ReplayError(RuntimeError):
    """An episode folder that cannot be replayed (missing files, unknown game)."""


@dataclass
class Mismatch:
    row: int
    what: str
    recorded: object
    replayed: object

    def __str__(self) -> str:
        return f"row {self.row}: {self.what} recorded {self.recorded!r}, replayed {self.replayed!r}"


@dataclass
class ReplayReport:
    rows: int
    mismatch: Mismatch | None

    @property
    def ok(self) -> bool:
        return self.mismatch is None


REQUIRED = ("meta.json", "frames.parquet", "video.mp4", "inputs.bk2", "start.state")


def verify_episode(episode_dir: Path) -> ReplayReport:
    """Replay `episode_dir` and return the first row whose keys, RAM or frame differ."""
    import stable_retro

    from wantofight.collect.emulator import make_env

    missing = [name for name in REQUIRED if not (episode_dir / name).is_file()]
    if missing:
        raise ReplayError(f"{episode_dir} is not a complete episode: missing {', '.join(missing)}")
    meta = json.loads((episode_dir / "meta.json").read_text())
    game = resolve_game(meta["game"])
    table = game.buttons
    rows = files.read_frames_table(episode_dir / "frames.parquet").to_pydict()
    frames = files.read_video(episode_dir / "video.mp4")
    count = meta["frame_count"]
    for name, length in (("frames.parquet", len(rows["frame_index"])), ("video.mp4", len(frames))):
        if length != count:
            return ReplayReport(0, Mismatch(min(length, count), f"{name} row count", count, length))

    movie = stable_retro.Movie(str(episode_dir / "inputs.bk2"))
    env = make_env(game.retro_game, state=meta["config"]["state"], players=game.players)
    try:
        em, data = env.em, env.data
        em.set_state(files.read_state(episode_dir / "start.state"))
        data.reset()
        ram_names = [n for n in rows if n not in ("frame_index", "p1_keys", "p2_keys")]
        for row in range(count):
            received = [0, 0]
            for _ in range(meta["frame_skip"]):
                if not movie.step():
                    return ReplayReport(row, Mismatch(row, "input log length", count, row))
                for p in range(game.players):
                    buttons = np.array([movie.get_key(i, p) for i in range(table.num_buttons)], dtype=np.uint8)
                    received[p] = table.from_buttons(buttons)
                    em.set_button_mask(buttons, p)
                em.step()
            for p, column in enumerate(("p1_keys", "p2_keys")):
                if rows[column][row] != received[p]:
                    return ReplayReport(row, Mismatch(row, column, rows[column][row], received[p]))
            values = data.lookup_all()
            for name in ram_names:
                if rows[name][row] != int(values[name]):
                    return ReplayReport(row, Mismatch(row, f"RAM {name}", rows[name][row], int(values[name])))
            screen = em.get_screen()
            if not np.array_equal(frames[row], screen):
                diff = int(np.abs(frames[row].astype(int) - screen.astype(int)).max())
                return ReplayReport(row, Mismatch(row, "frame (max pixel difference)", 0, diff))
        return ReplayReport(count, None)
    finally:
        movie.close()
        env.close()
