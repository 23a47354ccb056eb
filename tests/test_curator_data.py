"""The small dataset the curator tests share (no tests here): the project's own collector records a
drill run and three scripted-vs-random matches (the same settings as test_curriculum.py, so a full
session records them once), and `build_curriculum` cuts them into all three tiers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from wantofight.annotate.curriculum import BuildOptions, build_curriculum

OPTIONS = BuildOptions(val_fraction=0.3, seed=3, balance=False)
_BUILT: dict[str, tuple] = {}


def curator_runs(recorded) -> list[Path]:
    drill = recorded(policy="drill", fps=60, episodes=1, max_frames=2000)
    match = recorded(policy="scripted", p2_policy="random", episodes=3, max_frames=500, fps=30, seed=1)
    return [drill, match]


def curator_dataset(recorded, tmp_path_factory) -> tuple[Path, dict, list[Path]]:
    """(DS_DIR, manifest, runs), built once per test session."""
    key = str(tmp_path_factory.getbasetemp())
    if key not in _BUILT:
        runs = curator_runs(recorded)
        out = tmp_path_factory.mktemp("curator") / "ds"
        manifest = build_curriculum(runs, out, OPTIONS, workers=2, progress=False)
        _BUILT[key] = (out, manifest, runs)
    return _BUILT[key]


def clip_rows(ds: Path, columns: list[str] | None = None) -> list[dict]:
    return [r for f in sorted(ds.glob("*/*.parquet")) for r in pq.read_table(f, columns=columns).to_pylist()]


def busiest_clip(ds: Path, tier: str = "dual-action") -> dict:
    """The clip of `tier` with the most new presses by both players (every HUD state shows up)."""
    rows = [r for r in clip_rows(ds) if r["tier"] == tier]
    return max(rows, key=lambda r: sum(map(bool, r["p1_pressed"])) + sum(map(bool, r["p2_pressed"])))


def popcount(masks) -> np.ndarray:
    """Per-slot counts of set bits over uint16 masks: (16,) int64."""
    masks = np.asarray(masks, dtype=np.uint16)
    return ((masks[:, None] >> np.arange(16, dtype=np.uint16)) & 1).sum(axis=0).astype(np.int64)
