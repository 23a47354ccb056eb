"""What an export reads: a recording run (whole episodes) or a curriculum dataset (one clip each).

Both come out as the same `SourceEpisode`: the rows of one continuous stretch of play, their MP4,
both players' key masks, the RAM fields the benchmark reads, our labels and events, and where the
rows came from. Sources are streamed one episode at a time, so memory does not grow with the run or
the dataset (a curriculum shard is read one row group of 8 clips at a time).

Letters: T source rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow.parquet as pq

STATE_FIELDS = ("x", "y", "facing", "state", "health")
"""Per player, the RAM fields of `observation.state` (the ones the benchmark's probe reads)."""
STATE_NAMES = tuple(f"p{p}_{f}" for p in (1, 2) for f in STATE_FIELDS)
TIERS = {"single": "single-action", "dual": "dual-action", "full": "full-match"}
SPLITS = ("train", "val")


class ExportError(ValueError):
    """A source or a setting that cannot be exported; the message names it and what would be valid."""


@dataclass
class SourceEpisode:
    """One exported episode before resampling: T recorded rows."""

    key: str
    """Unique within the source: the episode folder's name, or the clip id (resume keys on it)."""
    video: Path | bytes
    """Lossless MP4 of exactly these T rows (`libx264rgb`, docs/recording-format.md)."""
    fps: int
    width: int
    height: int
    p1_keys: np.ndarray
    p2_keys: np.ndarray
    """(T,) uint16 masks, bit i = slot i of the 16-slot layout."""
    state: np.ndarray
    """(T, 10) float32: STATE_NAMES; NaN where the game's RAM lacks a field."""
    actions: tuple[list, list]
    """Per player, T action labels (None where not computable)."""
    effective: np.ndarray
    """(T, 2) bool: whether each player's new presses could act (False where not computable)."""
    events: list[list[str]]
    """Per row, the names of the events whose span holds it."""
    task: str
    tier: str
    split: str
    source_episode: str
    source_start: int
    """Episode row of the first of the T rows."""
    info: dict = field(default_factory=dict)
    """Episode-level extras: run, clip_id, policies, moves (written to the episodes table and card)."""

    @property
    def rows(self) -> int:
        return len(self.p1_keys)


# ------------------------------------------------------------------------------------------------
# Which kind of folder

def source_kind(src: Path) -> str:
    """`run` (the --out of `wtf collect`) or `dataset` (the --out of `wtf build-curriculum`)."""
    src = Path(src)
    if not src.is_dir():
        raise ExportError(f"{src}: no such folder; give a recording run (wtf collect --out) or a curriculum "
                          "dataset (wtf build-curriculum --out)")
    is_run = (src / "episodes").is_dir()
    is_dataset = (src / "manifest.json").is_file()
    if is_run and is_dataset:
        raise ExportError(f"{src}: holds both a recording run (episodes/) and a curriculum dataset "
                          "(manifest.json); export one of them from a folder of its own")
    if is_run:
        return "run"
    if is_dataset:
        return "dataset"
    raise ExportError(f"{src}: neither a recording run (no episodes/ folder) nor a curriculum dataset "
                      "(no manifest.json)")


def parse_tiers(text: str | None, kind: str) -> list[str]:
    """`single,dual` -> the tier names; None -> every tier. Only a dataset has tiers."""
    if text is None:
        return list(TIERS.values())
    if kind == "run":
        raise ExportError("--tier applies to a curriculum dataset; a recording run is exported as whole "
                          "episodes (full-match)")
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in names if t not in TIERS]
    if bad or not names:
        raise ExportError(f"--tier {text!r}: expected one or more of {', '.join(TIERS)}")
    return [TIERS[t] for t in names]


# ------------------------------------------------------------------------------------------------
# Recording runs

def run_episode_paths(run: Path) -> list[Path]:
    from wantofight.annotate.episode import episode_dirs

    return episode_dirs(run)


def read_run_episode(path: Path) -> SourceEpisode:
    """One recorded episode with its labels: the annotation next to it when current, else computed in
    memory (the source run is never written to). Raises `EpisodeError` for a broken episode."""
    from wantofight.annotate.annotate import annotate_episode, is_annotated, read_annotation
    from wantofight.annotate.episode import load_episode

    episode = load_episode(path)
    annotation = read_annotation(path) if is_annotated(path, episode) else annotate_episode(episode)
    frames = annotation.frames
    rows = episode.rows
    events = _row_events(annotation.events.to_pylist(), 0, rows)
    meta = episode.meta
    policies = {p: _policy_name(meta.get("policies", {}).get(p, {})) for p in ("p1", "p2")}
    return SourceEpisode(
        key=path.name, video=path / "video.mp4", fps=int(meta["fps"]),
        width=int(meta.get("width") or 0), height=int(meta.get("height") or 0),
        p1_keys=episode.columns["p1_keys"].astype(np.uint16), p2_keys=episode.columns["p2_keys"].astype(np.uint16),
        state=_state(lambda name: episode.columns.get(name), rows),
        actions=(frames.column("p1_action").to_pylist(), frames.column("p2_action").to_pylist()),
        effective=_effective(frames.column("p1_effective").to_pylist(), frames.column("p2_effective").to_pylist()),
        events=events, task=f"{meta['game']} match: P1 {policies['p1']} vs P2 {policies['p2']}",
        tier="full-match", split="train", source_episode=f"{path.parent.parent.name}/{path.name}", source_start=0,
        info={"run": path.parent.parent.name, "episode_id": meta["episode_id"], "game": meta["game"],
              "p1_policy": policies["p1"], "p2_policy": policies["p2"], "clip_id": None,
              "p1_move": None, "p2_move": None})


def _policy_name(entry: dict) -> str:
    """`keys:/abs/walk.keys` -> `keys:walk` (no machine's paths in a dataset); others as written."""
    spec = str(entry.get("spec", "unknown"))
    kind, _, rest = spec.partition(":")
    if kind == "keys" and rest:
        return f"keys:{Path(rest).stem}"
    return spec


# ------------------------------------------------------------------------------------------------
# Curriculum datasets

def read_manifest(ds_dir: Path) -> dict:
    try:
        manifest = json.loads((ds_dir / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ExportError(f"{ds_dir}/manifest.json: unreadable ({err})") from None
    if "shards" not in manifest:
        raise ExportError(f"{ds_dir}/manifest.json: no shard list; not written by wtf build-curriculum")
    return manifest


def dataset_shards(ds_dir: Path, manifest: dict, tiers: list[str]) -> list[dict]:
    """The shards to read, train before val, then in the manifest's order (which is the tiers' order)."""
    shards = [s for s in manifest["shards"] if s["tier"] in tiers]
    return sorted(shards, key=lambda s: SPLITS.index(s["split"]) if s["split"] in SPLITS else len(SPLITS))


def read_dataset_clips(ds_dir: Path, shards: list[dict]) -> Iterator[SourceEpisode]:
    """Every clip of the given shards, one row group (8 clips) in memory at a time."""
    for shard in shards:
        path = ds_dir / shard["file"]
        try:
            reader = pq.ParquetFile(path)
        except (OSError, ValueError) as err:
            raise ExportError(f"{path}: unreadable shard ({err})") from None
        ram = [c for c in reader.schema_arrow.names if c.startswith("ram_")]
        for batch in reader.iter_batches(batch_size=8):
            for row in batch.to_pylist():
                yield _clip(row, ram)


def _clip(row: dict, ram_columns: list[str]) -> SourceEpisode:
    rows = int(row["num_frames"])
    start = int(row["start_frame"])
    lists = {c[len("ram_"):]: row[c] for c in ram_columns if row[c] is not None}
    moves = {p: row.get(f"{p}_move") for p in ("p1", "p2")}
    return SourceEpisode(
        key=row["clip_id"], video=row["video"], fps=int(row["fps"]), width=int(row["width"]),
        height=int(row["height"]),
        p1_keys=np.asarray(row["p1_keys"], dtype=np.uint16), p2_keys=np.asarray(row["p2_keys"], dtype=np.uint16),
        state=_state(lists.get, rows),
        actions=(list(row["p1_action"]), list(row["p2_action"])),
        effective=_effective(row["p1_effective"], row["p2_effective"]),
        events=_row_events(row["events"] or [], start, rows), task=clip_task(row),
        tier=row["tier"], split=row["split"], source_episode=f"{row['run']}/{row['episode_id']}",
        source_start=start,
        info={"run": row["run"], "episode_id": row["episode_id"], "game": row["game"],
              "p1_policy": row["p1_policy"], "p2_policy": row["p2_policy"], "clip_id": row["clip_id"],
              "p1_move": moves["p1"], "p2_move": moves["p2"]})


def clip_task(row: dict) -> str:
    """The task text of a clip, from its labels: what each player does in it."""
    p1, p2 = row.get("p1_move"), row.get("p2_move")
    if row["tier"] == "single-action":
        actor = int(row.get("actor") or 1)
        move = p1 if actor == 1 else p2
        return f"P{actor} {move or 'acts'} while P{3 - actor} stands still"
    if row["tier"] == "dual-action":
        return f"P1 {p1 or 'acts'} and P2 {p2 or 'acts'} at once"
    return f"{row['game']} match: P1 {row['p1_policy']} vs P2 {row['p2_policy']}"


# ------------------------------------------------------------------------------------------------
# Column helpers shared by both sources

def _state(column, rows: int) -> np.ndarray:
    """(T, 10) float32 of STATE_NAMES from a name -> values lookup; NaN for a field the game lacks."""
    state = np.full((rows, len(STATE_NAMES)), np.nan, dtype=np.float32)
    for i, name in enumerate(STATE_NAMES):
        values = column(name)
        if values is not None:
            state[:, i] = np.asarray(values, dtype=np.float32)
    return state


def _effective(p1: list, p2: list) -> np.ndarray:
    return np.array([[bool(a), bool(b)] for a, b in zip(p1, p2)], dtype=bool).reshape(-1, 2)


def _row_events(events: list[dict], start: int, rows: int) -> list[list[str]]:
    """Per row of [start, start + rows), the event names whose [start_frame, end_frame) holds it."""
    out: list[list[str]] = [[] for _ in range(rows)]
    for event in events:
        lo = max(int(event["start_frame"]) - start, 0)
        hi = min(int(event["end_frame"]) - start, rows)
        for t in range(lo, hi):
            if event["event"] not in out[t]:
                out[t].append(event["event"])
    return out
