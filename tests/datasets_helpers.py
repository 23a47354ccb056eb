"""Helpers for the `datasets/` tests: one small curriculum built with the project's own collector
and `build_curriculum` (drills, two scripted-vs-random matches and a key file for dual actions),
shared by every test module of the session."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from annotate_helpers import keys_run
from wantofight.annotate.curriculum import BuildOptions, build_curriculum

CLIP_FRAMES = 33
DUAL_KEYS = ["8 - -", "1 A A", "25 - -", "2 LEFT RIGHT", "10 - -", "1 B B", "30 - -", "1 DOWN+A A", "30 - -"]
_BUILT: dict[str, Path] = {}


def small_dataset(recorded, tmp_path_factory) -> Path:
    """DS_DIR with all three tiers, 33-frame windows, 0.2 MB shards (several per tier), all in train
    (the split hashes episode identities, which hold the key file's path: a val share would move
    the dual-action episode between train and val from one temp folder to the next)."""
    key = str(tmp_path_factory.getbasetemp())
    if key not in _BUILT:
        drill = recorded(policy="drill", fps=30, episodes=1, max_frames=600)
        match = recorded(policy="scripted", p2_policy="random", episodes=2, max_frames=400, fps=30, seed=1)
        dual = keys_run(recorded, tmp_path_factory.mktemp("keys"), "dual", DUAL_KEYS, state="Close", fps=30)
        out = tmp_path_factory.mktemp("ds") / "ds"
        options = BuildOptions(clip_frames=CLIP_FRAMES, val_fraction=0.0, shard_size_mb=0.2, seed=0, balance=False)
        build_curriculum([drill, match, dual], out, options, workers=2, progress=False)
        _BUILT[key] = out
    return _BUILT[key]


def shard_rows(ds_dir: Path) -> dict[str, dict]:
    """clip_id -> the shard row (all columns but the video), read with plain pyarrow."""
    rows = {}
    for path in sorted(Path(ds_dir).glob("*/*.parquet")):
        table = pq.read_table(path)
        for row in table.drop_columns(["video"]).to_pylist():
            rows[row["clip_id"]] = row
    return rows


def masks(bits) -> np.ndarray:
    """(..., 16) key bits -> uint16 masks."""
    bits = np.asarray(bits).astype(np.uint16)
    return (bits << np.arange(16, dtype=np.uint16)).sum(-1).astype(np.uint16)
