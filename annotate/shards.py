"""Clip rows and Parquet shards (schema version 1; docs/curriculum.md lists every column).

One row per clip, self-contained: the clip's MP4 bytes, keys, labels, effective flags, RAM,
events, and where it came from. Building happens in two steps that each publish by rename:

1. per episode and tier, a worker streams the episode's video once and writes a *part* file
   (`DS_DIR/.parts-<options>/<tier>/<episode uid>.parquet`);
2. parts are concatenated, in episode order, into `DS_DIR/<tier>/<split>-NNNNN.parquet` of about
   `shard_size_mb` each, small row groups at a time (memory stays bounded).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from wantofight.annotate.clips import ClipPlan
from wantofight.annotate.events import EVENT_SCHEMA
from wantofight.annotate.video import ClipEncoder
from wantofight.outputs import TMP_PREFIX
from wantofight.video import iter_frames

SCHEMA_VERSION = 1
ROW_GROUP_ROWS = 8
"""Clips per Parquet row group: a reader (or the merge) holds at most this many videos at once."""


def shard_schema(ram_names: list[str]) -> pa.Schema:
    keys = pa.list_(pa.uint16())
    fields = [
        ("clip_id", pa.string()), ("tier", pa.string()), ("split", pa.string()),
        ("episode_id", pa.string()), ("episode_uid", pa.string()), ("run", pa.string()),
        ("game", pa.string()), ("retro_game", pa.string()), ("platform", pa.string()), ("rom_sha1", pa.string()),
        ("p1_policy", pa.string()), ("p2_policy", pa.string()),
        ("start_frame", pa.int32()), ("num_frames", pa.int32()),
        ("padded_frames", pa.int32()), ("pad_before", pa.int32()), ("pad_after", pa.int32()),
        ("fps", pa.int16()), ("frame_skip", pa.int16()), ("width", pa.int16()), ("height", pa.int16()),
        ("screen_ram_lag_frames", pa.int16()), ("key_layout_version", pa.int16()), ("schema_version", pa.int16()),
        ("actor", pa.int8()), ("side", pa.string()), ("p1_move", pa.string()), ("p2_move", pa.string()),
        ("video", pa.binary()), ("video_codec", pa.string()),
        ("p1_keys", keys), ("p2_keys", keys),
        ("p1_pressed", keys), ("p1_released", keys), ("p2_pressed", keys), ("p2_released", keys),
        ("p1_action", pa.list_(pa.string())), ("p2_action", pa.list_(pa.string())),
        ("p1_effective", pa.list_(pa.bool_())), ("p2_effective", pa.list_(pa.bool_())),
        ("gameplay", pa.list_(pa.bool_())),
    ]  # fmt: skip
    fields += [(f"ram_{name}", pa.list_(pa.int32())) for name in ram_names]
    fields += [
        ("events", pa.list_(pa.struct(list(EVENT_SCHEMA)))),
        ("event_types", pa.list_(pa.string())),
        ("source_meta", pa.string()),
    ]
    metadata = {"wantofight.schema_version": str(SCHEMA_VERSION), "wantofight.key_layout_version": "1"}
    return pa.schema(fields, metadata=metadata)


# ---------------------------------------------------------------------------------------------
# Step 1: one episode's clips → part files


def write_parts(episode_path: Path, plans: list[dict], info: dict, ram_names: list[str], parts_dir: Path) -> dict:
    """Encode one episode's planned clips (all tiers) in one pass over its video.

    `plans`: ClipPlan dicts with their `split`; `info`: what every row of the episode shares.
    Returns {tier: rows written}. Raises EpisodeError if the video ends early.
    """
    from wantofight.annotate.annotate import read_annotation
    from wantofight.annotate.episode import EpisodeError, load_episode

    episode = load_episode(episode_path)
    annotation = read_annotation(episode_path)
    frames = {name: annotation.frames.column(name).to_pylist() for name in annotation.frames.column_names}
    events = annotation.events.to_pylist()
    schema = shard_schema(ram_names)
    pending = [(ClipPlan(**{k: v for k, v in p.items() if k != "split"}), p["split"]) for p in plans]
    pending.sort(key=lambda item: (item[0].start_frame, item[0].tier, item[0].num_frames))
    by_tier: dict[str, list[tuple[ClipPlan, str]]] = {}
    for item in pending:
        by_tier.setdefault(item[0].tier, []).append(item)
    writers = {tier: PartWriter(parts_dir / tier / f"{info['episode_uid']}.parquet", schema) for tier in by_tier}
    meta = episode.meta
    open_clips: list[tuple[ClipPlan, str, ClipEncoder]] = []
    queue = list(pending)
    rows = 0
    try:
        for t, rgb in enumerate(iter_frames(episode_path / "video.mp4")):
            while queue and queue[0][0].start_frame == t:
                plan, split = queue.pop(0)
                open_clips.append((plan, split, ClipEncoder(meta["fps"], meta["width"], meta["height"])))
            still_open = []
            for plan, split, encoder in open_clips:
                encoder.write(rgb)
                if t + 1 == plan.end_frame:
                    row = clip_row(plan, split, encoder.finish(), episode, frames, events, info, ram_names)
                    writers[plan.tier].add(row)
                else:
                    still_open.append((plan, split, encoder))
            open_clips = still_open
            rows = t + 1
        if open_clips or queue or rows != episode.rows:
            raise EpisodeError(f"{episode_path}: video.mp4 ended after {rows} frames, expected {episode.rows}")
    except BaseException:
        for writer in writers.values():
            writer.abort()
        raise
    return {tier: writer.close() for tier, writer in writers.items()}


def clip_row(plan: ClipPlan, split: str, video: bytes, episode, frames: dict, events: list[dict], info: dict,
             ram_names: list[str]) -> dict:
    a, b = plan.start_frame, plan.end_frame
    meta = episode.meta
    clip_events = [e for e in events if e["start_frame"] < b and e["end_frame"] > a]
    row = {
        **{k: info[k] for k in ("episode_uid", "run", "p1_policy", "p2_policy", "padded_frames")},
        "clip_id": plan.clip_id, "tier": plan.tier, "split": split,
        "episode_id": meta["episode_id"], "game": meta["game"], "retro_game": meta.get("retro_game"),
        "platform": meta.get("platform"), "rom_sha1": meta.get("rom_sha1"),
        "start_frame": a, "num_frames": plan.num_frames, "pad_before": plan.pad_before, "pad_after": plan.pad_after,
        "fps": meta["fps"], "frame_skip": episode.frame_skip, "width": meta["width"], "height": meta["height"],
        "screen_ram_lag_frames": meta.get("screen_ram_lag_frames"),
        "key_layout_version": meta.get("key_layout_version", 1), "schema_version": SCHEMA_VERSION,
        "actor": plan.actor, "side": plan.side, "p1_move": plan.p1_move, "p2_move": plan.p2_move,
        "video": video, "video_codec": meta.get("video", {}).get("codec", "libx264rgb"),
        "events": clip_events, "event_types": sorted({e["event"] for e in clip_events}),
        "source_meta": json.dumps(meta, sort_keys=True),
    }  # fmt: skip
    for name in ("p1_keys", "p2_keys", "p1_pressed", "p1_released", "p2_pressed", "p2_released",
                 "p1_action", "p2_action", "p1_effective", "p2_effective", "gameplay"):
        row[name] = frames[name][a:b]
    for name in ram_names:
        column = episode.columns.get(name)
        row[f"ram_{name}"] = column[a:b].astype(np.int64).tolist() if column is not None else None
    return row


def temp_name(path: Path) -> Path:
    """`.tmp-<name>.partial`: hidden, and not a `*.parquet` that a glob or reader would pick up."""
    return path.with_name(f"{TMP_PREFIX}{path.name}.partial")


class PartWriter:
    """Rows → a Parquet file under a temporary name, renamed when closed."""

    def __init__(self, path: Path, schema: pa.Schema):
        self.path, self.schema = path, schema
        self.tmp = temp_name(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.writer = pq.ParquetWriter(self.tmp, schema, compression="zstd")
        self.rows: list[dict] = []
        self.count = 0

    def add(self, row: dict) -> None:
        self.rows.append(row)
        if len(self.rows) >= ROW_GROUP_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.writer.write_table(pa.Table.from_pylist(self.rows, schema=self.schema))
            self.count += len(self.rows)
            self.rows = []

    def close(self) -> int:
        self.flush()
        self.writer.close()
        os.replace(self.tmp, self.path)
        return self.count

    def abort(self) -> None:
        self.writer.close()
        self.tmp.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# Step 2: parts → shards


def merge_parts(parts: list[Path], out_dir: Path, prefix: str, schema: pa.Schema, shard_bytes: int) -> list[dict]:
    """Concatenate part files in order into `out_dir/<prefix>-NNNNN.parquet` shards of about
    `shard_bytes` (counted as the clips' video bytes plus their other columns, uncompressed).
    Each shard is written under a temporary name and renamed. Returns [{file, rows}]."""
    out_dir.mkdir(parents=True, exist_ok=True)
    shards: list[dict] = []
    writer, tmp, size, rows = None, None, 0, 0

    def finish() -> None:
        nonlocal writer, size, rows
        writer.close()
        final = out_dir / f"{prefix}-{len(shards):05d}.parquet"
        os.replace(tmp, final)
        shards.append({"file": final.name, "rows": rows})
        writer, size, rows = None, 0, 0

    for part in parts:
        for batch in pq.ParquetFile(part).iter_batches(batch_size=ROW_GROUP_ROWS):
            if writer is None:
                tmp = temp_name(out_dir / f"{prefix}-{len(shards):05d}.parquet")
                writer = pq.ParquetWriter(tmp, schema, compression="zstd")
            writer.write_table(pa.Table.from_batches([batch], schema=schema))
            size += batch.nbytes
            rows += batch.num_rows
            if size >= shard_bytes:
                finish()
    if writer is not None:
        finish()
    return shards
