"""A benchmark suite on disk: `wtf benchmark build` writes it, `wtf benchmark run` reads it.

    SUITE_DIR/
      suite.json      game, fps, frame size, lag, key layout, sources, options, counts per scenario
      cases.parquet   one row per case: prompt + frames (lossless MP4), both players' keys, RAM, refs

The folder is built under a temporary name and renamed when complete, so a suite on disk is always
whole. Column by column: docs/benchmark.md, "Suite format".
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from wantofight import outputs
from wantofight.benchmark.episodes import GameInfo, LabelledEpisode, open_runs
from wantofight.benchmark.labels import REQUIRED_RAM, Truth, screen_truth
from wantofight.benchmark.scenarios import (IDENTITY, SCENARIOS, CasePlan, EpisodeView, MineOptions, choose, family_of,
                                            mine_episode, single_actions)

SUITE_VERSION = 1
SUITE_FILE, CASES_FILE = "suite.json", "cases.parquet"
CASE_RAM = REQUIRED_RAM + ("phase",)
ROW_GROUP_CASES = 8


class SuiteError(ValueError):
    """A suite that cannot be built or read; the message names the problem."""


def case_schema() -> pa.Schema:
    ints = pa.list_(pa.int32())
    return pa.schema([
        ("case_id", pa.string()), ("scenario", pa.string()), ("family", pa.string()), ("label", pa.string()),
        ("actor", pa.int8()), ("informative", pa.float32()),
        ("episode_uid", pa.string()), ("episode_path", pa.string()), ("start_row", pa.int32()), ("rows", pa.int32()),
        ("p1_keys", pa.list_(pa.uint16())), ("p2_keys", pa.list_(pa.uint16())),
        ("ram_rows_before", pa.int32()), *[(f"ram_{n}", ints) for n in CASE_RAM],
        ("video", pa.binary()), ("refs", pa.binary()), ("ref_size", pa.int32()),
    ])  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------------------------

def episode_views(game: GameInfo, episodes: list[LabelledEpisode], progress=None) -> list[EpisodeView]:
    """Annotate what is not annotated yet (as build-curriculum does) and read annotations and events."""
    from wantofight.annotate.annotate import annotate_path, read_annotation

    views = []
    for i, ep in enumerate(episodes):
        report = annotate_path(ep.path)
        if report["status"] == "skipped":
            raise SuiteError(f"{ep.path}: cannot annotate ({report['reason']})")
        ann = read_annotation(ep.path)
        frames = {n: ann.frames.column(n).to_numpy(zero_copy_only=False) for n in ann.frames.column_names}
        views.append(EpisodeView(i, ep, frames, ann.events.to_pylist(), game))
        if progress is not None:
            progress(i + 1, len(episodes))
    return views


def reference_crops(prompt: np.ndarray, view: EpisodeView, row: int) -> np.ndarray:
    """(2, s, s, 3) uint8: each fighter cropped from the prompt frame of episode row `row`, as
    `ClipDataset` crops a training window's references from its first frame."""
    from wantofight.datasets.frames import crop_fighter

    cols, ep = view.ep.episode.columns, view.ep
    ram = int(np.clip(row - int(ep.meta.get("screen_ram_lag_frames") or 0), 0, ep.rows - 1))  # screen lags RAM
    return np.stack([crop_fighter(prompt, cols[f"p{p}_x"][ram], cols[f"p{p}_y"][ram], view.game.crop_left,
                                  view.game.crop_top) for p in (1, 2)])


def case_row(plan: CasePlan, view: EpisodeView) -> dict:
    from wantofight.annotate.video import ClipEncoder

    ep, cols = view.ep, view.ep.episode.columns
    a, b = plan.start, plan.start + plan.rows
    before = min(a, -(-int(ep.meta.get("screen_ram_lag_frames") or 0) // ep.episode.frame_skip))
    frames = ep.frames(np.arange(a, b))
    refs = reference_crops(frames[0], view, a)
    encoder = ClipEncoder(int(ep.meta["fps"]), frames.shape[2], frames.shape[1])
    for frame in frames:
        encoder.write(frame)
    return {
        "case_id": plan.case_id(ep.uid), "scenario": plan.scenario, "family": family_of(plan.scenario),
        "label": plan.label, "actor": plan.actor, "informative": plan.informative,
        "episode_uid": ep.uid, "episode_path": str(ep.path), "start_row": a, "rows": plan.rows,
        "p1_keys": cols["p1_keys"][a:b].astype(np.uint16), "p2_keys": cols["p2_keys"][a:b].astype(np.uint16),
        "ram_rows_before": before,
        **{f"ram_{n}": cols[n][a - before:b].astype(np.int32) for n in CASE_RAM},
        "video": encoder.finish(), "refs": np.ascontiguousarray(refs).tobytes(), "ref_size": refs.shape[1],
    }


def build_suite(run_dirs: list[Path], out: Path, options: MineOptions, log=None, progress=None,
                overwrite: bool = False) -> dict:
    """Mine the runs and write SUITE_DIR; returns suite.json's content. An existing SUITE_DIR is refused,
    or with `overwrite` replaced once the new suite is complete."""
    log = log or (lambda m: None)
    out = Path(out)
    outputs.claim(out, overwrite)  # refuses now, before the mining; the suite is written beside `out`
    game, episodes = open_runs(run_dirs)
    views = episode_views(game, episodes, progress=lambda i, n: progress("annotate", i, n) if progress else None)
    plans = [plan for view in views for plan in mine_episode(view, options)]
    kept, counts = choose(plans, [ep.uid for ep in episodes], options)
    tmp = out.parent / f".tmp-{out.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        write_cases(tmp / CASES_FILE, kept, views, progress)
        meta = suite_meta(game, episodes, options, counts, kept)
        meta["digest"] = hashlib.sha1((tmp / CASES_FILE).read_bytes()).hexdigest()[:16]
        (tmp / SUITE_FILE).write_text(json.dumps(meta, indent=1) + "\n")
        outputs.swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return meta


def write_cases(path: Path, kept: list[CasePlan], views: list[EpisodeView], progress=None) -> None:
    with pq.ParquetWriter(path, case_schema(), compression="zstd") as writer:
        batch = []
        for i, plan in enumerate(kept):
            batch.append(case_row(plan, views[plan.episode]))
            if len(batch) == ROW_GROUP_CASES or i == len(kept) - 1:
                writer.write_table(pa.Table.from_pylist(batch, schema=case_schema()))
                batch = []
            if progress is not None:
                progress("cases", i + 1, len(kept))


def suite_meta(game: GameInfo, episodes: list[LabelledEpisode], options: MineOptions, counts: dict,
               kept: list[CasePlan]) -> dict:
    meta0 = episodes[0].meta
    scenarios = {}
    for scenario in SCENARIOS:
        buckets = {k: v for k, v in counts.items() if k == scenario or k.startswith(f"{scenario}/")}
        scenarios[scenario] = {"cases": sum(v["kept"] for v in buckets.values()),
                               "found": sum(v["found"] for v in buckets.values())}
    rare = [name for name, c in counts.items() if c["kept"] < options.per_scenario and name in IDENTITY]
    missing = [f"P{p} {a}" for p in (1, 2) for a in single_actions(game.rules)
               if f"single-action/P{p} {a}" not in counts]
    return {
        "suite_version": SUITE_VERSION, "game": game.name, "fps": meta0["fps"],
        "frame_skip": int(meta0.get("frame_skip") or 1), "screen_ram_lag_frames": meta0.get("screen_ram_lag_frames"),
        "native_size": [int(meta0["height"]), int(meta0["width"])],
        "key_layout_version": meta0.get("key_layout_version"), "ram_names": list(CASE_RAM),
        "options": asdict(options), "cases": len(kept), "scenarios": scenarios, "buckets": counts,
        "below_per_scenario": rare, "single_actions_missing": missing,
        "sources": [{"path": str(ep.path), "uid": ep.uid, "rows": ep.rows} for ep in episodes],
    }


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------

@dataclass
class Case:
    """One case as the scorer uses it (rows 0..N; row 0 is the prompt)."""

    case_id: str
    scenario: str
    family: str
    label: str | None
    actor: int | None
    keys: np.ndarray
    """(N + 1, 2) uint16 key masks of both players, row 0 = the keys that led to the prompt frame."""
    truth: Truth
    video: bytes
    refs: np.ndarray
    """(2, s, s, 3) uint8 reference crops."""
    episode_path: str | None = None
    """The recorded episode folder the case was cut from (the emulator replays it with other keys)."""
    start_row: int | None = None
    """The episode row of the prompt frame."""

    @property
    def rows(self) -> int:
        return len(self.keys)

    def frames(self) -> np.ndarray:
        """(N + 1, h, w, 3) uint8 emulator frames."""
        from wantofight.annotate.video import decode_mp4

        return decode_mp4(self.video)

    def frame_pieces(self, rows: int | None, start: int = 0):
        """The emulator frames from row `start` on, in order, (n, h, w, 3) uint8 pieces of at most `rows`
        (None: one piece), decoded as they are asked for, so a long case is never whole in memory."""
        from itertools import islice

        from wantofight.video import iter_frames

        if rows is None:
            yield self.frames()[start:]
            return
        piece = []
        for frame in islice(iter_frames(self.video), start, None):
            piece.append(frame)
            if len(piece) == rows:
                yield np.stack(piece)
                piece = []
        if piece:
            yield np.stack(piece)

    def frames_at(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), h, w, 3) uint8 emulator frames of the given rows."""
        from wantofight.video import open_video

        with open_video(self.video) as reader:
            return reader.get_batch([int(r) for r in rows]).asnumpy()


class Suite:
    """A suite folder: its meta and its cases, read one row group at a time."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        meta_path = self.path / SUITE_FILE
        if not meta_path.is_file() or not (self.path / CASES_FILE).is_file():
            raise SuiteError(f"{self.path} is not a benchmark suite (no {SUITE_FILE} / {CASES_FILE}; build one with "
                             "`wtf benchmark build`)")
        self.meta = json.loads(meta_path.read_text())
        if self.meta.get("suite_version") != SUITE_VERSION:
            raise SuiteError(f"{self.path}: suite version {self.meta.get('suite_version')}, this wtf reads "
                             f"{SUITE_VERSION}")
        missing = [n for n in CASE_RAM if n not in self.meta.get("ram_names", [])]
        if missing:
            raise SuiteError(f"{self.path}: the suite lacks the RAM names {', '.join(missing)} the benchmark scores with")
        self.game = GameInfo.of(self.meta["game"])

    @property
    def digest(self) -> str:
        return self.meta["digest"]

    @property
    def frame_skip(self) -> int:
        return int(self.meta["frame_skip"])

    def __len__(self) -> int:
        return int(self.meta["cases"])

    def cases(self):
        """Yield every case in suite order."""
        file = pq.ParquetFile(self.path / CASES_FILE)
        for g in range(file.num_row_groups):
            for row in file.read_row_group(g).to_pylist():
                yield self.case(row)

    def case(self, row: dict) -> Case:
        before = row["ram_rows_before"]
        ram = {n: np.asarray(row[f"ram_{n}"]) for n in CASE_RAM}
        truth = screen_truth(ram, self.game.rules, self.game.fields, self.frame_skip,
                             self.meta["screen_ram_lag_frames"]).rows(slice(before, None))
        keys = np.stack([np.asarray(row["p1_keys"], np.uint16), np.asarray(row["p2_keys"], np.uint16)], axis=1)
        s = row["ref_size"]
        refs = np.frombuffer(row["refs"], np.uint8).reshape(2, s, s, 3)
        return Case(row["case_id"], row["scenario"], row["family"], row["label"], row["actor"], keys, truth,
                    row["video"], refs, row["episode_path"], row["start_row"])
