"""Recorded episodes as the benchmark reads them: checked, with the screen-time truth of every row.

    episodes = open_runs([Path("data/match")])           # every complete episode of the runs
    ep = episodes[0]; ep.truth.values["x"][t, 0]           # P1's x as frame t shows it
    pixels = ep.frames(np.array([0, 5, 9]))                 # (3, 224, 240, 3) uint8

All episodes of one call must come from the same game, frame size and fps (a probe or a suite is
for one game at one rate); the error names the first episode that differs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wantofight.annotate.episode import Episode, EpisodeError, episode_dirs, load_episode
from wantofight.annotate.rules import GameRules, rules_for
from wantofight.benchmark.labels import Field, LabelError, Truth, check_game, fields_for, screen_truth


@dataclass
class GameInfo:
    """What the benchmark knows of a game: its rules, the probe's fields and the screen geometry."""

    name: str
    rules: GameRules
    fields: tuple[Field, ...]
    crop_left: int
    crop_top: int

    @classmethod
    def of(cls, game: str) -> "GameInfo":
        from wantofight.collect.game_registry import builtin_games

        spec = builtin_games().get(game)
        info = spec.info if spec else {}
        rules = rules_for(game)
        screen = info.get("screen", {})
        return cls(game, rules, fields_for(rules, int(info.get("health_max", 0))), int(screen.get("crop_left", 0)),
                   int(screen.get("crop_top", 0)))


@dataclass
class LabelledEpisode:
    episode: Episode
    truth: Truth

    @property
    def path(self) -> Path:
        return self.episode.path

    @property
    def meta(self) -> dict:
        return self.episode.meta

    @property
    def rows(self) -> int:
        return self.episode.rows

    @property
    def uid(self) -> str:
        """The episode's identity hash (the same for a copy stored elsewhere)."""
        return hashlib.sha1(json.dumps(self.episode.identity(), sort_keys=True).encode()).hexdigest()[:16]

    def frames(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), h, w, 3) uint8 native frames of these rows."""
        from wantofight.datasets.frames import decode_rows

        video = (self.path / "video.mp4").read_bytes()
        return decode_rows(video, np.asarray(rows), self.rows, int(self.meta["height"]), int(self.meta["width"]))


def open_runs(run_dirs: list[Path], what: str = "RUN_DIR") -> tuple[GameInfo, list[LabelledEpisode]]:
    """Every complete episode of the runs, with its truth; raises LabelError / EpisodeError."""
    paths = []
    for run in run_dirs:
        found = episode_dirs(Path(run))
        if not found:
            raise EpisodeError(f"{what} {run}: no complete episodes under {Path(run) / 'episodes'}")
        paths += found
    episodes: list[LabelledEpisode] = []
    game = first = None
    for path in paths:
        ep = load_episode(path)
        sig = (ep.meta["game"], ep.meta.get("height"), ep.meta.get("width"), ep.meta["fps"])
        if first is None:
            first, game = (path, sig), GameInfo.of(ep.meta["game"])
            check_game(ep.columns, game.rules, f"{what} {path.parent.parent}")
        elif sig != first[1]:
            raise LabelError(f"{path} is {describe(sig)} but {first[0]} is {describe(first[1])}: give recordings of "
                             "one game, frame size and fps")
        truth = screen_truth(ep.columns, game.rules, game.fields, ep.frame_skip, ep.meta.get("screen_ram_lag_frames"))
        episodes.append(LabelledEpisode(ep, truth))
    return game, episodes


def describe(sig: tuple) -> str:
    game, h, w, fps = sig
    return f"{game} {w}x{h} at {fps} fps"
