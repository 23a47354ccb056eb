"""The on-disk episode: `video.mp4`, `frames.parquet`, `meta.json`, `start.state`, `inputs.bk2`.

An episode is written into a hidden temporary folder and renamed into place only when every file is
complete, so readers never see half an episode. `docs/recording-format.md` is the contract. The
video is written and read by wantofight/video.py, as every MP4 of the project is.
"""

from __future__ import annotations

import gzip
import json
import errno
import os
import shutil
import socket
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from wantofight.outputs import TMP_PREFIX

FORMAT_VERSION = 1


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
