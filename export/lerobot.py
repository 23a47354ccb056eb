"""Write recordings or clips as a LeRobotDataset v3.0 folder (docs/export.md is the mapping).

    summary = export_lerobot(Path("data/run"), Path("data/run-lerobot"))

One LeRobot episode per recorded episode or per clip, each in its own data and video file
(`data/chunk-CCC/file-FFF.parquet`, `videos/observation.image/chunk-CCC/file-FFF.mp4`, file index
= episode index mod 1000): an episode is written whole or not at all, which is what makes an
interrupted export resumable. The whole export is built in the hidden sibling `.OUT.partial`
(wantofight/outputs.py) and swapped in as `--out` only when `meta/` is complete, so `--out` never
holds half a dataset, and an `--overwrite` interrupted midway leaves the old one as it was.

Alignment (the card states it): exported row j holds frame j, `action[j]` = the keys held during
the emulator steps that led from frame j - 1 to frame j, and `observation.state[j]` = the RAM read
with frame j. With `--fps` below the recording's, every k-th row is kept and `action[j]` is the OR of
the k key rows since the previous kept frame, so no press between two kept frames is lost.

Letters: T source rows, N exported rows, S = 32 action values (2 players x 16 slots).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from wantofight.export.sources import (STATE_NAMES, ExportError, SourceEpisode, dataset_shards, parse_tiers,
                                       read_dataset_clips, read_manifest, read_run_episode, run_episode_paths,
                                       source_kind)
from wantofight.outputs import write_atomic, written

CODEBASE_VERSION = "v3.0"
"""The LeRobotDataset format version written (LeRobot 0.4 reads it; docs/export.md says which were checked)."""
CHUNKS_SIZE = 1000
IMAGE_KEY = "observation.image"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-000/file-000.parquet"
JOURNAL = ".wtf-export.jsonl"
SETTINGS = ".wtf-export-settings.json"
IMAGE_STAT_FRAMES = 32
"""Frames per episode sampled for the image statistics (as LeRobot samples them)."""
DECODE_ROWS = 256
"""Rows decoded at once when an export re-encodes (`--fps` below the recording's): bounded memory."""


def slot_names() -> list[str]:
    from wantofight.collect.keys import SLOTS

    return [f"p{p}.{slot}" for p in (1, 2) for slot in SLOTS]


@dataclass
class Settings:
    src: str
    kind: str
    tiers: list[str]
    fps: int | None

    def as_dict(self) -> dict:
        return {"src": self.src, "kind": self.kind, "tiers": self.tiers, "fps": self.fps}


# ------------------------------------------------------------------------------------------------
# The export

def export_lerobot(src: Path, out: Path, tiers: str | None = None, fps: int | None = None,
                   progress: bool = True, warn: Callable[[str], None] = lambda m: None,
                   overwrite: bool = False) -> dict:
    """Export SRC (a recording run or a curriculum dataset) to OUT as a LeRobotDataset v3.0; returns a
    summary (episodes, frames, features, skipped, resumed). OUT must not exist or be empty, unless
    `overwrite` (then it is replaced once the new export is complete). The export is built in
    `staging_dir(OUT)`; an interrupted export of the same settings continues from there, other
    settings are refused."""
    from wantofight.outputs import OutputExists, holds_other, staging_dir, swap_in

    src, out = Path(src), Path(out)
    kind = source_kind(src)
    settings = Settings(str(src.resolve()), kind, parse_tiers(tiers, kind), fps)
    if fps is not None and fps < 1:
        raise ExportError(f"--fps must be a positive frame rate that divides the recording's, got {fps}")
    if holds_other(out) and not overwrite:
        raise OutputExists(out)
    work = staging_dir(out)
    done = _open_work(work, settings)
    sources, total = _sources(src, settings)
    writer = _Writer(work, done)
    try:
        _write_all(writer, sources, done, work, total, fps, progress, warn)
    except ExportError:
        if not done and not writer.episodes and not writer.skipped:
            shutil.rmtree(work)  # nothing was exported: leave nothing behind
        raise
    if not writer.episodes:
        shutil.rmtree(work)
        raise ExportError(f"{src}: nothing to export (no complete episode or clip"
                          f"{' of tiers ' + ', '.join(settings.tiers) if kind == 'dataset' else ''})")
    summary = writer.finish(settings)
    swap_in(work, out)
    summary["resumed"] = len(done)
    return summary


def _write_all(writer, sources, done: list[dict], work: Path, total: int, fps: int | None, progress: bool,
               warn) -> None:
    from wantofight.progress import Progress

    with Progress("export", total=total, unit="episodes", detail="{frames:,} frames", enabled=progress,
                  eta=True, completed=len(done), frames=writer.frames) as bar:
        for position, source in enumerate(sources):
            if position < len(done):
                if done[position]["key"] != _key_of(source):
                    raise ExportError(f"{work}: the interrupted export was of other data (episode {position} "
                                      f"was {done[position]['key']}, now {_key_of(source)}); remove {work}")
                continue
            if isinstance(source, ExportError):
                warn(source.args[0])
                writer.skip(source)
            else:
                writer.write(source, fps)
            bar.update(completed=position + 1, frames=writer.frames)


def _key_of(source) -> str:
    return source.key if isinstance(source, SourceEpisode) else f"skipped:{source.args[1]}"


class _Skipped(ExportError):
    """A broken episode of a run: skipped with a warning, remembered so a resume skips it too."""


def _sources(src: Path, settings: Settings) -> tuple[Iterator, int]:
    if settings.kind == "run":
        from wantofight.annotate.episode import EpisodeError

        paths = run_episode_paths(src)

        def episodes():
            for path in paths:
                try:
                    yield read_run_episode(path)
                except EpisodeError as err:
                    yield _Skipped(f"skipped {err}", path.name)

        return episodes(), len(paths)
    manifest = read_manifest(src)
    shards = dataset_shards(src, manifest, settings.tiers)
    return read_dataset_clips(src, shards), sum(int(s["rows"]) for s in shards)


def _open_work(work: Path, settings: Settings) -> list[dict]:
    """The hidden folder the export is built in, and the episodes an interrupted run already wrote."""
    settings_path = work / SETTINGS
    if work.exists():
        try:
            previous = json.loads(settings_path.read_text())
        except (OSError, json.JSONDecodeError):
            previous = None
        if previous != settings.as_dict():
            raise ExportError(f"{work}: an interrupted export with other settings ({previous}); run it again "
                              "with those, or remove that folder")
        return _read_journal(work / JOURNAL)
    work.mkdir(parents=True)
    _write_atomic(settings_path, json.dumps(settings.as_dict()).encode())
    return []


def _read_journal(path: Path) -> list[dict]:
    """Finished episodes, in order; a line cut short by a crash is the episode to do again."""
    done = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                done.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return done


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data)


# ------------------------------------------------------------------------------------------------
# Resampling: the rows of one exported episode

@dataclass
class Resampled:
    rows: np.ndarray
    """(N,) source rows kept: 0, k, 2k, ..."""
    action: np.ndarray
    """(N, S) float32 0/1: P1's 16 slots, then P2's."""
    effective: np.ndarray
    """(N, 2) bool."""
    events: list[str]
    """(N,) comma-separated event names."""


def resample(source: SourceEpisode, fps: int | None) -> Resampled:
    """Keep every k-th row (k = source fps / fps); a kept row's keys, effective flags and events are
    the union over the k source rows since the previous kept one (row 0 stands for itself)."""
    k = 1 if fps is None else _step(source.fps, fps)
    rows = np.arange(0, source.rows, k)
    masks = [np.zeros(len(rows), dtype=np.uint16) for _ in range(2)]
    effective = np.zeros((len(rows), 2), dtype=bool)
    events: list[set] = [set() for _ in rows]
    for offset in range(k):
        back = np.maximum(rows - offset, 0)
        masks[0] |= source.p1_keys[back]
        masks[1] |= source.p2_keys[back]
        effective |= source.effective[back]
        for j, r in enumerate(back):
            events[j].update(source.events[r])
    bits = np.arange(16, dtype=np.uint16)
    action = np.concatenate([((m[:, None] >> bits) & 1) for m in masks], axis=1).astype(np.float32)  # (N, S)
    return Resampled(rows, action, effective, [",".join(sorted(e)) for e in events])


def _step(source_fps: int, fps: int) -> int:
    if fps > source_fps or source_fps % fps:
        valid = [source_fps // k for k in range(1, source_fps + 1) if source_fps % k == 0][:4]
        raise ExportError(f"--fps {fps}: a recording at {source_fps} fps exports at a rate that divides it, "
                          f"e.g. {', '.join(map(str, valid))}")
    return source_fps // fps


# ------------------------------------------------------------------------------------------------
# Writing episodes

class _Writer:
    def __init__(self, work: Path, done: list[dict]):
        self.work = work
        self.episodes = [d for d in done if not d.get("skipped")]
        self.skipped = [d for d in done if d.get("skipped")]
        self.frames = sum(e["length"] for e in self.episodes)
        self.stats = _Stats.merge([e["stats"] for e in self.episodes])
        self.tasks: dict[str, int] = {}
        """Task text -> task_index, numbered as tasks first appear (a resume rebuilds the same numbers)."""
        for entry in self.episodes:
            self.tasks.setdefault(entry["tasks"][0], len(self.tasks))

    def skip(self, error: "_Skipped") -> None:
        entry = {"key": _key_of(error), "skipped": str(error.args[0])}
        self.skipped.append(entry)
        self._journal(entry)

    def write(self, source: SourceEpisode, fps: int | None) -> None:
        index = len(self.episodes)
        sampled = resample(source, fps)
        out_fps = fps or source.fps
        if self.episodes:
            first = self.episodes[0]
            if (out_fps, source.width, source.height) != (first["fps"], first["width"], first["height"]):
                raise ExportError(
                    f"{source.source_episode}: {source.width}x{source.height} at {out_fps} fps, but the export "
                    f"so far is {first['width']}x{first['height']} at {first['fps']} fps; a LeRobot dataset has one "
                    "frame size and rate (export such sources apart, or pass --fps)")
        task_index = self.tasks.setdefault(source.task, len(self.tasks))
        n = len(sampled.rows)
        chunk, file = divmod(index, CHUNKS_SIZE)
        video_rel = VIDEO_PATH.format(video_key=IMAGE_KEY, chunk_index=chunk, file_index=file)
        image_stats = _write_video(source, sampled.rows, self.work / video_rel, out_fps)
        table = self._table(source, sampled, index, task_index, out_fps)
        data_path = self.work / DATA_PATH.format(chunk_index=chunk, file_index=file)
        data_path.parent.mkdir(parents=True, exist_ok=True)
        with written(data_path) as tmp:
            pq.write_table(table, tmp, compression="zstd")
        stats = _Stats.of(table, image_stats)
        entry = {
            "key": source.key, "episode_index": index, "tasks": [source.task], "length": n,
            "data/chunk_index": chunk, "data/file_index": file,
            "dataset_from_index": self.frames, "dataset_to_index": self.frames + n,
            f"videos/{IMAGE_KEY}/chunk_index": chunk, f"videos/{IMAGE_KEY}/file_index": file,
            f"videos/{IMAGE_KEY}/from_timestamp": 0.0, f"videos/{IMAGE_KEY}/to_timestamp": n / out_fps,
            "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0,
            "tier": source.tier, "split": source.split, "source_episode": source.source_episode,
            "source_start_row": source.source_start, "source_rows": source.rows, "fps": out_fps,
            "width": source.width, "height": source.height, **source.info, "stats": stats.as_json(),
        }
        self._journal(entry)
        self.episodes.append(entry)
        self.frames += n
        self.stats = _Stats.merge([self.stats.as_json(), entry["stats"]])

    def _table(self, source: SourceEpisode, sampled: Resampled, index: int, task_index: int, fps: int) -> pa.Table:
        n = len(sampled.rows)
        frame_index = np.arange(n, dtype=np.int64)
        rows = sampled.rows
        return pa.table({
            "observation.state": _fixed(source.state[rows], pa.float32()),
            "action": _fixed(sampled.action, pa.float32()),
            "timestamp": pa.array((frame_index / fps).astype(np.float32)),
            "frame_index": pa.array(frame_index),
            "episode_index": pa.array(np.full(n, index, dtype=np.int64)),
            "index": pa.array(self.frames + frame_index),
            "task_index": pa.array(np.full(n, task_index, dtype=np.int64)),
            "wtf.effective": _fixed(sampled.effective, pa.bool_()),
            "wtf.p1_action": pa.array([source.actions[0][r] for r in rows], type=pa.string()),
            "wtf.p2_action": pa.array([source.actions[1][r] for r in rows], type=pa.string()),
            "wtf.events": pa.array(sampled.events, type=pa.string()),
            "wtf.tier": pa.array([source.tier] * n, type=pa.string()),
            "wtf.source_episode": pa.array([source.source_episode] * n, type=pa.string()),
            "wtf.source_row": pa.array(source.source_start + rows.astype(np.int64)),
        })

    def _journal(self, entry: dict) -> None:
        with open(self.work / JOURNAL, "a") as journal:
            journal.write(json.dumps(entry) + "\n")

    # --------------------------------------------------------------------------------------------

    def finish(self, settings: Settings) -> dict:
        """Write meta/ (tasks, episodes, stats, info) and the card."""
        from wantofight.export.card import dataset_card

        tasks = list(self.tasks)
        _write_tasks(self.work / "meta/tasks.parquet", tasks)
        _write_episodes(self.work / EPISODES_PATH, self.episodes)
        fps = self.episodes[0]["fps"]
        info = _info(self.episodes, fps, len(tasks), _video_info(self.work / VIDEO_PATH.format(
            video_key=IMAGE_KEY, chunk_index=0, file_index=0)), self.episodes[0]["height"],
            self.episodes[0]["width"])
        _write_atomic(self.work / "meta/info.json", json.dumps(info, indent=4).encode())
        _write_atomic(self.work / "meta/stats.json", json.dumps(self.stats.lerobot(), indent=4).encode())
        _write_atomic(self.work / "README.md", dataset_card(info, self.episodes, self.skipped, settings).encode())
        (self.work / JOURNAL).unlink()
        (self.work / SETTINGS).unlink()
        return {"episodes": len(self.episodes), "frames": self.frames, "fps": fps,
                "features": list(info["features"]), "skipped": len(self.skipped), "tasks": len(tasks),
                "splits": info["splits"]}


def _fixed(values: np.ndarray, dtype: pa.DataType) -> pa.Array:
    """(N, D) -> a fixed-size list column (what `datasets.Sequence(length=D)` reads)."""
    values = np.ascontiguousarray(values)
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1), type=dtype), values.shape[1])


def _write_video(source: SourceEpisode, rows: np.ndarray, path: Path, fps: int) -> dict:
    """The episode's MP4: the source bytes as they are when every row is kept (lossless already),
    else the kept rows re-encoded losslessly in pieces of DECODE_ROWS. Returns the image statistics."""
    from wantofight.video import VideoWriter, open_video

    path.parent.mkdir(parents=True, exist_ok=True)
    sample = np.unique(np.linspace(0, len(rows) - 1, min(IMAGE_STAT_FRAMES, len(rows))).round().astype(int))
    with open_video(source.video) as reader, written(path) as tmp:
        if len(reader) != source.rows:
            raise ExportError(f"{source.source_episode}: video holds {len(reader)} frames for {source.rows} rows")
        if len(rows) == source.rows:
            if isinstance(source.video, bytes):
                tmp.write_bytes(source.video)
            else:
                shutil.copyfile(source.video, tmp)
        else:
            writer = VideoWriter(tmp, fps, source.width, source.height)
            for lo in range(0, len(rows), DECODE_ROWS):
                for frame in reader.get_batch(rows[lo:lo + DECODE_ROWS].tolist()).asnumpy():
                    writer.write(frame)
            writer.close()
        pixels = reader.get_batch(rows[sample].tolist()).asnumpy()  # (n, H, W, 3) uint8
    return _image_sums(pixels)


def _image_sums(pixels: np.ndarray) -> dict:
    """Per channel count, sum, sum of squares, min and max of uint8 pixels in [0, 1] units, from a
    256-bin histogram per channel (exact, and far cheaper than float arithmetic over every pixel)."""
    levels = np.arange(256, dtype=np.float64) / 255.0
    hist = np.stack([np.bincount(pixels[..., c].ravel(), minlength=256) for c in range(3)])  # (3, 256)
    present = [np.flatnonzero(h) for h in hist]
    return {"count": int(hist[0].sum()), "sum": (hist @ levels).tolist(), "sumsq": (hist @ levels ** 2).tolist(),
            "min": [levels[p[0]] for p in present], "max": [levels[p[-1]] for p in present],
            "frames": len(pixels)}


def _write_tasks(path: Path, tasks: list[str]) -> None:
    """meta/tasks.parquet as pandas writes a frame indexed by the task text (what LeRobot reads back)."""
    pandas_meta = {
        "index_columns": ["task"], "column_indexes": [],
        "columns": [{"name": "task_index", "field_name": "task_index", "pandas_type": "int64",
                     "numpy_type": "int64", "metadata": None},
                    {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object",
                     "metadata": None}],
        "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": "2.2.0",
    }
    table = pa.table({"task_index": pa.array(range(len(tasks)), type=pa.int64()),
                      "task": pa.array(tasks, type=pa.string())})
    table = table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


EPISODE_COLUMNS = {
    "episode_index": pa.int64(), "tasks": pa.list_(pa.string()), "length": pa.int64(),
    "data/chunk_index": pa.int64(), "data/file_index": pa.int64(),
    "dataset_from_index": pa.int64(), "dataset_to_index": pa.int64(),
    f"videos/{IMAGE_KEY}/chunk_index": pa.int64(), f"videos/{IMAGE_KEY}/file_index": pa.int64(),
    f"videos/{IMAGE_KEY}/from_timestamp": pa.float64(), f"videos/{IMAGE_KEY}/to_timestamp": pa.float64(),
    "meta/episodes/chunk_index": pa.int64(), "meta/episodes/file_index": pa.int64(),
    # ours, per episode
    "wtf/tier": pa.string(), "wtf/split": pa.string(), "wtf/run": pa.string(), "wtf/episode_id": pa.string(),
    "wtf/clip_id": pa.string(), "wtf/source_start_row": pa.int64(), "wtf/source_rows": pa.int64(),
    "wtf/p1_policy": pa.string(), "wtf/p2_policy": pa.string(), "wtf/p1_move": pa.string(),
    "wtf/p2_move": pa.string(),
}


def _write_episodes(path: Path, episodes: list[dict]) -> None:
    ours = {"tier", "split", "run", "episode_id", "clip_id", "source_start_row", "source_rows", "p1_policy",
            "p2_policy", "p1_move", "p2_move"}
    columns = {}
    for name, dtype in EPISODE_COLUMNS.items():
        key = name[len("wtf/"):] if name.startswith("wtf/") and name[len("wtf/"):] in ours else name
        columns[name] = pa.array([e.get(key) for e in episodes], type=dtype)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)


def _video_info(path: Path) -> dict:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return {"video.height": stream.height, "video.width": stream.width,
                "video.codec": stream.codec_context.codec.canonical_name, "video.pix_fmt": stream.pix_fmt,
                "video.is_depth_map": False, "video.fps": int(stream.base_rate), "video.channels": 3,
                "has_audio": False}


def _info(episodes: list[dict], fps: int, tasks: int, video: dict, height: int, width: int) -> dict:
    train = sum(e["split"] == "train" for e in episodes)
    splits = {"train": f"0:{train}"}
    if train < len(episodes):
        splits["val"] = f"{train}:{len(episodes)}"
    scalar = lambda dtype: {"dtype": dtype, "shape": [1], "names": None}  # noqa: E731
    features = {
        IMAGE_KEY: {"dtype": "video", "shape": [height, width, 3], "names": ["height", "width", "channels"],
                    "info": video},
        "observation.state": {"dtype": "float32", "shape": [len(STATE_NAMES)], "names": list(STATE_NAMES)},
        "action": {"dtype": "float32", "shape": [32], "names": slot_names()},
        "timestamp": scalar("float32"), "frame_index": scalar("int64"), "episode_index": scalar("int64"),
        "index": scalar("int64"), "task_index": scalar("int64"),
        "wtf.effective": {"dtype": "bool", "shape": [2], "names": ["p1", "p2"]},
        "wtf.p1_action": scalar("string"), "wtf.p2_action": scalar("string"), "wtf.events": scalar("string"),
        "wtf.tier": scalar("string"), "wtf.source_episode": scalar("string"), "wtf.source_row": scalar("int64"),
    }
    return {
        "codebase_version": CODEBASE_VERSION, "robot_type": "two-player fighting game",
        "total_episodes": len(episodes), "total_frames": sum(e["length"] for e in episodes),
        "total_tasks": tasks, "chunks_size": CHUNKS_SIZE, "data_files_size_in_mb": 100,
        "video_files_size_in_mb": 200, "fps": fps, "splits": splits, "data_path": DATA_PATH,
        "video_path": VIDEO_PATH, "features": features,
    }


# ------------------------------------------------------------------------------------------------
# Statistics (meta/stats.json): min, max, mean, std, count per value, merged over episodes

NUMERIC = ("observation.state", "action", "timestamp", "frame_index", "episode_index", "index", "task_index")


@dataclass
class _Stats:
    sums: dict[str, dict]
    """feature -> {count, sum, sumsq, min, max} (lists over the feature's values)."""

    @classmethod
    def of(cls, table: pa.Table, image: dict) -> "_Stats":
        sums = {}
        for name in NUMERIC:
            column = table.column(name).combine_chunks()
            values = (column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), -1)
                      if pa.types.is_fixed_size_list(column.type) else column.to_numpy()[:, None]).astype(np.float64)
            sums[name] = {"count": len(values), "sum": np.nansum(values, 0).tolist(),
                          "sumsq": np.nansum(values ** 2, 0).tolist(), "min": np.nanmin(values, 0).tolist(),
                          "max": np.nanmax(values, 0).tolist()}
        sums[IMAGE_KEY] = {k: image[k] for k in ("count", "sum", "sumsq", "min", "max")}
        return cls(sums)

    @classmethod
    def merge(cls, parts: list[dict]) -> "_Stats":
        out: dict[str, dict] = {}
        for part in parts:
            for name, s in part.items():
                if name not in out:
                    out[name] = {k: (list(v) if isinstance(v, list) else v) for k, v in s.items()}
                    continue
                o = out[name]
                o["count"] += s["count"]
                o["sum"] = [a + b for a, b in zip(o["sum"], s["sum"])]
                o["sumsq"] = [a + b for a, b in zip(o["sumsq"], s["sumsq"])]
                o["min"] = [min(a, b) for a, b in zip(o["min"], s["min"])]
                o["max"] = [max(a, b) for a, b in zip(o["max"], s["max"])]
        return cls(out)

    def as_json(self) -> dict:
        return self.sums

    def lerobot(self) -> dict:
        """LeRobot's stats.json: per feature min/max/mean/std/count; images per channel as (3, 1, 1)."""
        out = {}
        for name, s in self.sums.items():
            mean = np.asarray(s["sum"]) / s["count"]
            std = np.sqrt(np.maximum(np.asarray(s["sumsq"]) / s["count"] - mean ** 2, 0.0))
            stats = {"min": np.asarray(s["min"]), "max": np.asarray(s["max"]), "mean": mean, "std": std}
            shape = (3, 1, 1) if name == IMAGE_KEY else (-1,)
            out[name] = {k: v.reshape(shape).tolist() for k, v in stats.items()}
            out[name]["count"] = [int(s["count"])]
        return out
