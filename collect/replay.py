"""`wtf replay --verify`: re-run an episode's input log from its savestate and compare every row.

The input log is `inputs.bk2` (stable-retro's movie format), independent of `frames.parquet`, so a
tampered key, RAM value or frame in the recording shows up as a mismatch.

`replay_frames` re-runs the log up to a row and then presses other keys: what the game would have shown
had the players pressed those instead (the benchmark's reference for an ablated key stream).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wantofight.collect import episode_files as files
from wantofight.collect.game_registry import resolve_game
from wantofight.video import VideoError, read_video, video_frame_count


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


def open_episode(episode_dir: Path):
    """(meta, game, movie, env) of a complete episode folder, the emulator at its start state; the caller
    closes the movie and the env."""
    import stable_retro

    from wantofight.collect.emulator import make_env

    missing = [name for name in REQUIRED if not (episode_dir / name).is_file()]
    if missing:
        raise ReplayError(f"{episode_dir} is not a complete episode: missing {', '.join(missing)}")
    meta = json.loads((episode_dir / "meta.json").read_text())
    game = resolve_game(meta["game"])
    movie = stable_retro.Movie(str(episode_dir / "inputs.bk2"))
    env = make_env(game.retro_game, state=meta["config"]["state"], players=game.players)
    env.em.set_state(files.read_state(episode_dir / "start.state"))
    env.data.reset()
    return meta, game, movie, env


def movie_row(movie, game, em, frame_skip: int) -> list[int] | None:
    """Step one row (frame_skip emulator frames) with the input log's buttons; the masks received, or
    None where the log ends."""
    table, received = game.buttons, [0, 0]  # a one-player game's P2 column holds zeros
    for _ in range(frame_skip):
        if not movie.step():
            return None
        for p in range(game.players):
            buttons = np.array([movie.get_key(i, p) for i in range(table.num_buttons)], dtype=np.uint8)
            received[p] = table.from_buttons(buttons)
            em.set_button_mask(buttons, p)
        em.step()
    return received


def verify_episode(episode_dir: Path) -> ReplayReport:
    """Replay `episode_dir` and return the first row whose keys, RAM or frame differ."""
    meta, game, movie, env = open_episode(episode_dir)
    try:
        rows = files.read_frames_table(episode_dir / "frames.parquet").to_pydict()
        try:
            video_frame_count(episode_dir / "video.mp4")  # an unreadable file in one line, before decoding
        except VideoError as err:
            raise ReplayError(str(err)) from None
        frames = read_video(episode_dir / "video.mp4")
        count = meta["frame_count"]
        for name, length in (("frames.parquet", len(rows["frame_index"])), ("video.mp4", len(frames))):
            if length != count:
                return ReplayReport(0, Mismatch(min(length, count), f"{name} row count", count, length))
        em, data = env.em, env.data
        ram_names = [n for n in rows if n not in ("frame_index", "p1_keys", "p2_keys")]
        for row in range(count):
            received = movie_row(movie, game, em, meta["frame_skip"])
            if received is None:
                return ReplayReport(row, Mismatch(row, "input log length", count, row))
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


def replay_frames(episode_dir: Path, start_row: int, masks: np.ndarray) -> np.ndarray:
    """(N, h, w, 3) uint8 screens of rows start_row .. start_row + N - 1 when the input log is replayed up
    to row `start_row` and the (N, players) key masks `masks[1:]` are held from the next row on (row 0,
    the keys that led into frame `start_row`, is the log's). With the recorded keys this is the recording."""
    meta, game, movie, env = open_episode(episode_dir)
    try:
        if not 0 <= start_row < meta["frame_count"]:
            raise ReplayError(f"{episode_dir}: row {start_row} is outside its {meta['frame_count']} rows")
        em = env.em
        for row in range(start_row + 1):
            if movie_row(movie, game, em, meta["frame_skip"]) is None:
                raise ReplayError(f"{episode_dir}: the input log ends at row {row}, before row {start_row}")
        out = [em.get_screen().copy()]
        for keys in np.asarray(masks)[1:]:
            buttons = [game.buttons.to_buttons(int(keys[p])) for p in range(game.players)]
            for _ in range(meta["frame_skip"]):
                for p in range(game.players):
                    em.set_button_mask(buttons[p], p)
                em.step()
            out.append(em.get_screen().copy())
        return np.stack(out)
    finally:
        movie.close()
        env.close()
