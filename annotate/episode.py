"""Reading one recorded episode (docs/recording-format.md) and refusing a broken one.

A broken episode — missing or unreadable meta, a frames table whose row count is not the meta's
`frame_count`, a video that is missing, truncated or holds a different number of frames — raises
`EpisodeError` naming the folder and the fault, so callers can skip it loudly and never cut a clip
from shifted rows.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

KEY_COLUMNS = ("frame_index", "p1_keys", "p2_keys")


class EpisodeError(ValueError):
    """An episode that cannot be annotated or cut; the message names it and says why."""


@dataclass
class Episode:
    """One episode's meta and per-row columns (keys and RAM), loaded and checked."""

    path: Path
    meta: dict
    columns: dict[str, np.ndarray]
    """Every column of frames.parquet as a NumPy array, one entry per row."""

    @property
    def episode_id(self) -> str:
        return self.meta["episode_id"]

    @property
    def rows(self) -> int:
        return len(self.columns["frame_index"])

    @property
    def frame_skip(self) -> int:
        return int(self.meta.get("frame_skip") or 1)

    @property
    def ram_names(self) -> list[str]:
        return [n for n in self.columns if n not in KEY_COLUMNS]

    def has(self, *names: str) -> bool:
        return all(n in self.columns for n in names)

    def identity(self) -> dict:
        """What makes this episode itself, independent of where it is stored (feeds clip ids)."""
        keys = hashlib.sha1(self.columns["p1_keys"].tobytes() + self.columns["p2_keys"].tobytes()).hexdigest()
        meta = self.meta
        return {
            "game": meta.get("game"),
            "rom_sha1": meta.get("rom_sha1"),
            "start_state": meta.get("start_state"),
            # The policy's kind, not its spec: `keys:/abs/path` would tie ids to where a key file lay
            # (the keys themselves are in keys_sha1; a learned policy adds its checkpoint's sha1).
            "policies": {p: [str(v.get("spec", "")).split(":", 1)[0], v.get("checkpoint_sha1")]
                         for p, v in sorted(meta.get("policies", {}).items())},
            "seed": meta.get("seed"),
            "episode_id": meta.get("episode_id"),
            "fps": meta.get("fps"),
            "frame_count": meta.get("frame_count"),
            "keys_sha1": keys,
        }


def read_meta(path: Path) -> dict:
    meta_path = path / "meta.json"
    if not meta_path.is_file():
        raise EpisodeError(f"{path}: missing meta.json")
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise EpisodeError(f"{path}: unreadable meta.json ({err})") from None
    for name in ("episode_id", "frame_count", "fps", "game"):
        if name not in meta:
            raise EpisodeError(f"{path}: meta.json lacks {name!r}")
    return meta


def load_episode(path: Path, check_video: bool = True) -> Episode:
    """Load and check an episode folder; raises EpisodeError on any inconsistency."""
    path = Path(path)
    meta = read_meta(path)
    try:
        table = pq.read_table(path / "frames.parquet")
    except (OSError, ValueError) as err:
        raise EpisodeError(f"{path}: unreadable frames.parquet ({err})") from None
    missing = [c for c in KEY_COLUMNS if c not in table.column_names]
    if missing:
        raise EpisodeError(f"{path}: frames.parquet lacks {', '.join(missing)}")
    columns = {name: table.column(name).to_numpy() for name in table.column_names}
    rows = table.num_rows
    if rows != meta["frame_count"]:
        raise EpisodeError(f"{path}: frames.parquet has {rows} rows but meta.json frame_count is {meta['frame_count']}")
    if not np.array_equal(columns["frame_index"], np.arange(rows)):
        raise EpisodeError(f"{path}: frame_index is not 0..{rows - 1}")
    if check_video:
        frames = video_frame_count(path / "video.mp4")
        if frames != rows:
            raise EpisodeError(f"{path}: video.mp4 holds {frames} frames but frames.parquet has {rows} rows")
    return Episode(path, meta, columns)


def video_frame_count(video: Path) -> int:
    """Frames in an MP4 from its index (wantofight/video.py), a bad file as EpisodeError."""
    from wantofight.video import VideoError
    from wantofight.video import video_frame_count as count

    try:
        return count(video)
    except VideoError as err:
        raise EpisodeError(str(err)) from None


def episode_dirs(run_dir: Path) -> list[Path]:
    """A run's published episode folders, sorted (temporary `.tmp-*` folders are never read)."""
    from wantofight.collect.episode_files import complete_episodes

    episodes = Path(run_dir) / "episodes"
    if not episodes.is_dir():
        raise EpisodeError(f"{run_dir}: not a recording run (no episodes/ folder)")
    return complete_episodes(episodes)
