"""The on-disk episode: `video.mp4`, `frames.parquet`, `meta.json`, `start.state`, `inputs.bk2`.

An episode is written into a hidden temporary folder and renamed into place only when every file is
complete, so readers never see half an episode. `docs/recording-format.md` is the contract.
"""

from __future__ import annotations

import gzip
import io
import json
import errno
import os
import shutil
import socket
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from wantofight.interrupts import ctrl_c_held

FORMAT_VERSION = 1
TMP_PREFIX = ".tmp-"
VIDEO_CODEC = "libx264rgb"
VIDEO_OPTIONS = {"crf": "0", "preset": "ultrafast"}
"""Lossless RGB H.264: every decoded pixel equals the emulator's (checked by `wtf replay --verify`)."""
PREVIEW_CODEC = "libx264"
PREVIEW_OPTIONS = {"preset": "veryfast"}
"""Lossy H.264 for previews people watch (`wtf inspect-clip`, the gallery, the benchmark's videos)."""


class VideoWriter:
    """Streams RGB frames into an MP4: every MP4 the project writes goes through this class.

    The default is the recordings' lossless H.264 in RGB, bit-exact (equal frames give equal bytes)
    and on one encoder thread (workers scale by process). `preview_crf` makes a lossy preview instead
    (H.264 yuv420p at that crf, index first so a browser streams it) for files only people watch.
    `target` is a path or a binary file object (e.g. `io.BytesIO` for clips held in memory).
    """

    def __init__(self, target: Path | BinaryIO, fps: int, width: int, height: int, *,
                 preview_crf: int | None = None):
        import av

        target = str(target) if isinstance(target, Path) else target
        if preview_crf is None:
            # bitexact: no creation time or encoder version in the file, so equal frames give equal bytes.
            self.container = av.open(target, "w", format="mp4", options={"fflags": "+bitexact"})
            self.stream = self.container.add_stream(VIDEO_CODEC, rate=fps)
            self.stream.pix_fmt = "rgb24"
            self.stream.options = dict(VIDEO_OPTIONS)
            self.stream.codec_context.thread_count = 1
        else:  # yuv420p: the pixel format browsers and phones play; faststart: the index before the data
            self.container = av.open(target, "w", format="mp4", options={"movflags": "+faststart"})
            self.stream = self.container.add_stream(PREVIEW_CODEC, rate=fps)
            self.stream.pix_fmt = "yuv420p"
            self.stream.options = {"crf": str(preview_crf), **PREVIEW_OPTIONS}
        self.stream.width, self.stream.height = width, height
        self._frame_type = av.VideoFrame

    def write(self, rgb: np.ndarray) -> None:
        """rgb: (H, W, 3) uint8."""
        # Zero-copy: the encoder copies the picture during encode(), before `rgb` can change.
        frame = self._frame_type.from_numpy_buffer(np.ascontiguousarray(rgb), format="rgb24")
        for packet in self.stream.encode(frame):
            self.container.mux(packet)

    def close(self) -> None:
        for packet in self.stream.encode():
            self.container.mux(packet)
        self.container.close()


class VideoError(ValueError):
    """A video.mp4 that is missing, empty, truncated or not a video; the message names its episode."""


def video_frame_count(video: Path) -> int:
    """Frames in an MP4 from its index: the one check every reader of a recording makes before decoding
    (a truncated or empty file has no index and fails here, in one line, not in the decoder)."""
    import av

    if not video.is_file():
        raise VideoError(f"{video.parent}: missing video.mp4")
    try:
        with av.open(str(video)) as container:
            return int(container.streams.video[0].frames)
    except (av.error.FFmpegError, IndexError) as err:
        raise VideoError(f"{video.parent}: unreadable video.mp4 ({err})") from None


@contextmanager
def open_video(source: Path | bytes, num_threads: int = 0) -> Iterator:
    """`with open_video(src) as reader:` a decord VideoReader on an MP4 file or MP4 bytes, freed when
    the block ends. decord frees its C objects (the reader, each batch) in `__del__`, where a Ctrl-C
    would be printed as a traceback and dropped, so the block runs with Ctrl-C held until it ends
    (`interrupts.ctrl_c_held`); keep it to the decoding. The reader's `_handle` is set before its
    `__init__` runs, so a reader that failed to open frees nothing."""
    import decord

    with ctrl_c_held():
        reader = decord.VideoReader.__new__(decord.VideoReader)
        reader._handle = None
        try:
            reader.__init__(str(source) if isinstance(source, Path) else io.BytesIO(source), ctx=decord.cpu(0),
                            num_threads=num_threads)
            yield reader
        finally:
            reader.__del__()  # here, not whenever the last reference goes
            reader._handle = None


def read_video(source: Path | bytes) -> np.ndarray:
    """All frames of an MP4 file or of MP4 bytes: (T, H, W, 3) uint8."""
    with open_video(source) as reader:
        return reader.get_batch(list(range(len(reader)))).asnumpy()


def ram_column_type(values: list[int]) -> pa.DataType:
    """The narrowest Arrow integer type that holds a RAM variable's recorded values."""
    low, high = (min(values), max(values)) if values else (0, 0)
    for dtype, lo, hi in ((pa.uint8(), 0, 255), (pa.int16(), -(2**15), 2**15 - 1), (pa.int32(), -(2**31), 2**31 - 1)):
        if lo <= low and high <= hi:
            return dtype
    return pa.int64()


def write_frames_table(path: Path, p1_keys: list[int], p2_keys: list[int], ram: dict[str, list[int]]) -> None:
    """One row per recorded frame: frame_index, p1_keys, p2_keys (uint16), one column per RAM name."""
    columns = {
        "frame_index": pa.array(np.arange(len(p1_keys), dtype=np.int32)),
        "p1_keys": pa.array(np.asarray(p1_keys, dtype=np.uint16)),
        "p2_keys": pa.array(np.asarray(p2_keys, dtype=np.uint16)),
    }
    for name, values in ram.items():
        columns[name] = pa.array(values, type=ram_column_type(values))
    pq.write_table(pa.table(columns), path, compression="zstd")


def read_frames_table(path: Path) -> pa.Table:
    return pq.read_table(path)


def write_json(path: Path, data: dict) -> None:
    """Write JSON atomically (temp name, then rename)."""
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def write_state(path: Path, state: bytes) -> None:
    """A savestate, gzipped as stable-retro stores them (`mtime=0` keeps the bytes reproducible)."""
    path.write_bytes(gzip.compress(state, mtime=0))


def read_state(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes())


def fix_zip_times(path: Path) -> None:
    """Rewrite a zip file (stable-retro's `.bk2` movie) with every entry dated 1980-01-01, so equal
    contents give equal bytes whenever and wherever they were recorded."""
    with zipfile.ZipFile(path) as source:
        entries = [(info, source.read(info)) for info in source.infolist()]
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}")
    with zipfile.ZipFile(tmp, "w") as target:
        for info, data in entries:
            fixed = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            fixed.compress_type, fixed.external_attr, fixed.create_system = (
                info.compress_type, info.external_attr, info.create_system)
            target.writestr(fixed, data)
    os.replace(tmp, path)


def episode_tmp_dir(episodes_dir: Path, episode_id: str) -> Path:
    """`.tmp-<id>-<host>-<pid>`: unique across the machines of a cluster writing to one shared folder."""
    return episodes_dir / f"{TMP_PREFIX}{episode_id}-{socket.gethostname()}-{os.getpid()}"


def publish(tmp_dir: Path, final_dir: Path) -> bool:
    """Make a finished episode visible in one rename. An episode is published once: when another
    attempt at the same episode (a retried task) got there first, this copy is discarded and False
    returned (renaming onto a folder that holds files fails; the first rename wins)."""
    try:
        os.rename(tmp_dir, final_dir)
    except OSError as err:
        if err.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not final_dir.is_dir():
            raise
        discard(tmp_dir)
        return False
    return True


def discard(tmp_dir: Path) -> None:
    """Remove an unfinished episode."""
    shutil.rmtree(tmp_dir, ignore_errors=True)


def remove_leftovers(episodes_dir: Path) -> list[Path]:
    """Delete temporary folders a killed run left behind; returns what was removed."""
    removed = []
    if episodes_dir.is_dir():
        for path in episodes_dir.glob(f"{TMP_PREFIX}*"):
            discard(path)
            removed.append(path)
    return removed


def complete_episodes(episodes_dir: Path) -> list[Path]:
    """Published episode folders, sorted by id."""
    if not episodes_dir.is_dir():
        return []
    return sorted(p for p in episodes_dir.iterdir() if p.is_dir() and not p.name.startswith(TMP_PREFIX))
