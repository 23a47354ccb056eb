"""`ClipDataset`: training windows decoded from the curriculum shards (docs/datasets.md).

An index is built once from the manifest's shard list and a few small columns (clip id, tier,
lengths). Items read one Parquet row group (8 clips) through a memory map, decode only the
window's frames from the MP4 bytes with decord, and resize them to the model size.

`ds[i]` and `ds[(i, step)]` both work: the window inside clip i is drawn from (seed, i, step), so
the sampler's (index, step) pairs give a fresh, reproducible window each time a clip comes back,
and `ds[i]` = `ds[(i, 0)]`.
"""

from __future__ import annotations

import json
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from wantofight.datasets import frames as fr
from wantofight.datasets.exclude import load_excludes
from wantofight.datasets.screen import screen_offsets
from wantofight.key_layout import masks_to_array

TIERS = ("single-action", "dual-action", "full-match")
PADDED_TIERS = ("single-action", "dual-action")
"""Tiers whose clips are shorter than the window and padded with their neutral first/last frame."""
SPLITS = ("train", "val")
INDEX_COLUMNS = ["clip_id", "tier", "num_frames", "pad_before", "pad_after"]
ITEM_COLUMNS = [
    "clip_id", "tier", "split", "run", "episode_id", "game", "start_frame", "num_frames", "fps", "width", "height",
    "screen_ram_lag_frames", "actor", "side", "p1_move", "p2_move", "event_types", "video",
    "p1_keys", "p2_keys", "p1_action", "p2_action", "p1_effective", "p2_effective",
]  # fmt: skip
POSITION_COLUMNS = ["ram_p1_x", "ram_p2_x", "ram_p1_y", "ram_p2_y"]
META_COLUMNS = ["split", "run", "episode_id", "game", "start_frame", "num_frames", "fps", "width", "height",
                "actor", "side", "p1_move", "p2_move", "event_types"]
PIXEL_MODES = ("float", "uint8")
"""`float`: frames at the model size in [-1, 1] (the API); `uint8`: native frames (T, 3, h, w), 14x
fewer bytes between processes, brought to the model size on the GPU by `loader.frames_to_model`."""
ROW_GROUP_CACHE = 2
"""Row groups (8 clips each) kept decoded per process: consecutive indices often share one."""


class DatasetError(RuntimeError):
    """A shard or row that cannot be read; the message names the file and the row."""


def check_frames(frames: int) -> None:
    if frames < 1 or (frames - 1) % 8:
        raise ValueError(f"frames must be 1 + 8k (the prompt frame + whole 8-frame chunks, e.g. 33 or 161), "
                         f"got {frames}")


def parse_tiers(tiers) -> tuple[str, ...] | None:
    """None (all), a list of tier names, or `single,dual,full` text -> tier names, validated."""
    if tiers is None:
        return None
    if isinstance(tiers, str):
        tiers = [t.strip() for t in tiers.split(",") if t.strip()]
    short = {"single": "single-action", "dual": "dual-action", "full": "full-match"}
    names = [short.get(t, t) for t in tiers]
    bad = [t for t in names if t not in TIERS]
    if bad or not names:
        raise ValueError(f"unknown tiers {bad or tiers}; valid tiers: {', '.join(TIERS)}")
    return tuple(t for t in TIERS if t in names)


@dataclass(frozen=True)
class ClipRef:
    """Where one clip lives and how long it is."""

    shard: int
    row_group: int
    row: int
    """Row inside its row group."""
    shard_row: int
    """Row inside its shard (for error messages)."""
    clip_id: str
    tier: str
    num_frames: int
    pad: fr.Padding


def read_shard_index(root: Path, manifest: dict, split: str, tiers: tuple[str, ...] | None) -> list[tuple[str, str]]:
    """[(tier, relative shard path)] for the split, in the manifest's (tier, file) order."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    shards = [(s["tier"], s["file"]) for s in manifest.get("shards", []) if s["split"] == split]
    if tiers is not None:
        shards = [s for s in shards if s[0] in tiers]
    return sorted(shards, key=lambda s: (TIERS.index(s[0]) if s[0] in TIERS else len(TIERS), s[1]))


class RowGroupReader:
    """Rows of Parquet shards by (shard, row group, row), through memory maps, with the last few
    row groups kept; files are opened lazily so a DataLoader worker opens its own."""

    def __init__(self, paths: list[Path], columns: list[str], optional: list[str] = ()):
        self.paths, self.columns, self.optional = paths, columns, list(optional)
        self._files: dict[int, pq.ParquetFile] = {}
        self._groups: OrderedDict = OrderedDict()

    def row(self, shard: int, group: int, row: int) -> dict:
        key = (shard, group)
        table = self._groups.get(key)
        if table is None:
            file = self._files.get(shard)
            if file is None:
                file = self._files[shard] = pq.ParquetFile(self.paths[shard], memory_map=True)
            names = file.schema_arrow.names
            table = file.read_row_group(group, columns=self.columns + [c for c in self.optional if c in names])
            self._groups[key] = table
            while len(self._groups) > ROW_GROUP_CACHE:
                self._groups.popitem(last=False)
        else:
            self._groups.move_to_end(key)
        return table.slice(row, 1).to_pylist()[0]

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_files": {}, "_groups": OrderedDict()}


def row_groups(path: Path, columns: list[str]) -> tuple[dict[str, list], list[tuple[int, int, int]]]:
    """A shard's small `columns` as lists, and (row group, row in group, row in file) per row."""
    try:
        meta = pq.ParquetFile(path, memory_map=True).metadata
        table = pq.read_table(path, columns=columns, memory_map=True)
    except (OSError, pa.ArrowException) as err:
        raise DatasetError(f"{path}: unreadable shard ({err})") from None
    where, row = [], 0
    for g in range(meta.num_row_groups):
        for r in range(meta.row_group(g).num_rows):
            where.append((g, r, row))
            row += 1
    return {name: table.column(name).to_pylist() for name in columns}, where


class ClipDataset:
    """Windows of `frames` frames from the clips of `split` and `tiers` in DS_DIR.

    Item (a dict): `frames` float32 (T, 3, H, W) in [-1, 1] (uint8 (T, 3, h, w) at the native
    size with `pixels="uint8"`); `keys` float32 (T, 2, 16);
    `effective` bool (T, 2); `actions` list of T (p1, p2) label pairs (strings; None where the
    game's labels are not computable); `padding` bool (T,) (frames copied from the neutral first /
    last row, keys 0); `ref_images` float32 (2, 3, ref_size, ref_size) in [-1, 1]; `tier`,
    `clip_id`, `start` (clip row of frame 0; negative inside leading padding), `step`, `skipped`
    (corrupt rows skipped to produce this item) and `meta` (the clip's scalar columns).
    """

    def __init__(self, ds_dir, split: str = "train", tiers=None, frames: int = 161,
                 size: tuple[int, int] = (384, 512), ref_size: int = 224, exclude=None,
                 skip_corrupt: bool = False, seed: int = 0, resize: str = "stretch", pixels: str = "float"):
        check_frames(frames)
        if pixels not in PIXEL_MODES:
            raise ValueError(f"unknown pixels mode {pixels!r}; valid: {', '.join(PIXEL_MODES)}")
        if len(size) != 2 or min(size) < 1:
            raise ValueError(f"size must be (height, width) > 0, got {size}")
        if ref_size < 1:
            raise ValueError(f"ref_size must be > 0, got {ref_size}")
        fr.letterbox_box((8, 8), (8, 8), resize)  # validates the mode
        self.root = Path(ds_dir)
        manifest_path = self.root / "manifest.json"
        if not manifest_path.is_file():
            raise FileNotFoundError(f"{self.root} is not a curriculum dataset: no manifest.json "
                                    "(build one with `wtf build-curriculum`)")
        self.manifest = json.loads(manifest_path.read_text())
        self.split, self.tiers = split, parse_tiers(tiers)
        self.frames, self.size, self.ref_size = frames, tuple(size), ref_size
        self.resize, self.skip_corrupt, self.seed, self.pixels = resize, skip_corrupt, seed, pixels
        self.excluded = load_excludes(self.root, exclude)
        self.shards = read_shard_index(self.root, self.manifest, split, self.tiers)
        self.refs = self._index()
        self.item_tiers = [r.tier for r in self.refs]
        self.skipped: list[str] = []
        """Corrupt rows this process skipped (skip_corrupt=True), as 'shard row N: why'."""
        self.reader = RowGroupReader([self.root / rel for _, rel in self.shards], ITEM_COLUMNS, POSITION_COLUMNS)

    # ---- index -----------------------------------------------------------------------------
    def _index(self) -> list[ClipRef]:
        refs = []
        self.stats = {"excluded": 0, "rows": 0}
        short = []
        for s, (tier, rel) in enumerate(self.shards):
            cols, where = row_groups(self.root / rel, INDEX_COLUMNS)
            for g, r, row in where:
                self.stats["rows"] += 1
                clip_id, num = cols["clip_id"][row], cols["num_frames"][row]
                if clip_id in self.excluded:
                    self.stats["excluded"] += 1
                    continue
                padded = cols["tier"][row] in PADDED_TIERS
                pad = fr.padding_for(num, cols["pad_before"][row] or 0, cols["pad_after"][row] or 0,
                                     self.frames, padded)
                if pad.before + num + pad.after < self.frames:
                    short.append(clip_id)
                refs.append(ClipRef(s, g, r, row, clip_id, cols["tier"][row], num, pad))
        if short:
            raise ValueError(f"{len(short)} full-match clip(s) (e.g. {short[0]}) are shorter than frames="
                             f"{self.frames}; rebuild with `wtf build-curriculum --clip-frames {self.frames}` or "
                             "ask for fewer frames (full-match windows are never padded)")
        return refs

    def __len__(self) -> int:
        return len(self.refs)

    def start_range(self, i: int) -> tuple[int, int]:
        """Inclusive range of window starts of clip i (clip rows; negative = leading padding)."""
        ref = self.refs[i]
        return fr.start_range(ref.num_frames, ref.pad, self.frames)

    def cache_starts(self, i: int) -> list[int]:
        """The windows `wtf encode` stores for clip i: the middle one for an action clip (the
        action centred), back-to-back windows from row 0 for a full-match clip."""
        lo, hi = self.start_range(i)
        if self.refs[i].tier in PADDED_TIERS:
            return [(lo + hi) // 2]
        return list(range(lo, hi + 1, self.frames))

    # ---- items -----------------------------------------------------------------------------
    def __getitem__(self, key) -> dict:
        i, step = key if isinstance(key, tuple) else (key, 0)
        if not 0 <= i < len(self.refs):
            raise IndexError(f"index {i} out of range for {len(self.refs)} clips")
        skipped = 0
        for attempt in range(len(self.refs)):
            j = self._next_in_tier(i, attempt)
            lo, hi = self.start_range(j)
            start = lo + int(np.random.default_rng([self.seed, j, step]).integers(hi - lo + 1))
            try:
                item = self.load(j, start)
            except DatasetError as err:
                if not self.skip_corrupt:
                    raise
                self.skipped.append(str(err))
                warnings.warn(f"skipping corrupt clip: {err}", stacklevel=2)
                skipped += 1
                continue
            item["step"], item["skipped"] = step, skipped
            return item
        raise DatasetError(f"every clip of tier {self.refs[i].tier} is corrupt")

    def _next_in_tier(self, i: int, attempt: int) -> int:
        """The `attempt`-th clip of i's tier after i, wrapping around (attempt 0 = i)."""
        if attempt == 0:
            return i
        tier = self.refs[i].tier
        same = [k for k, t in enumerate(self.item_tiers) if t == tier]
        return same[(same.index(i) + attempt) % len(same)]

    def load(self, i: int, start: int) -> dict:
        """The window of clip i that starts at clip row `start`. Raises DatasetError naming the
        shard and row when the row is unusable."""
        ref = self.refs[i]
        path = self.root / self.shards[ref.shard][1]
        try:
            row = self._row(ref)
            return self._sample(ref, row, start)
        except (fr.ClipError, pa.ArrowException, OSError, KeyError, ValueError, TypeError) as err:
            raise DatasetError(f"{path} row {ref.shard_row} (clip {ref.clip_id}): {err}") from None

    def _row(self, ref: ClipRef) -> dict:
        row = self.reader.row(ref.shard, ref.row_group, ref.row)
        if row["clip_id"] != ref.clip_id:
            raise fr.ClipError(f"holds clip {row['clip_id']}, the index says {ref.clip_id} (shard changed?)")
        return row

    def _sample(self, ref: ClipRef, row: dict, start: int) -> dict:
        import torch

        n, T = row["num_frames"], self.frames
        for name in ("p1_keys", "p2_keys", "p1_action", "p2_action", "p1_effective", "p2_effective"):
            if row[name] is None or len(row[name]) != n:
                raise fr.ClipError(f"{name} has {len(row[name] or [])} entries, num_frames is {n}")
        rows = fr.window_rows(start, T, n)
        padding = fr.window_padding(start, T, n)
        pixels = fr.decode_rows(row["video"], rows, n, row["height"], row["width"])  # (T, h, w, 3) uint8
        keys = np.stack([np.asarray(row["p1_keys"], np.uint16)[rows], np.asarray(row["p2_keys"], np.uint16)[rows]], 1)
        keys[padding] = 0
        effective = np.stack([np.asarray(row["p1_effective"], bool)[rows], np.asarray(row["p2_effective"], bool)[rows]], 1)
        return {
            "frames": fr.resize_to_model(pixels, self.size, self.resize) if self.pixels == "float" else fr.planar(pixels),
            "keys": torch.from_numpy(masks_to_array(keys)),
            "effective": torch.from_numpy(effective),
            "actions": [(row["p1_action"][r], row["p2_action"][r]) for r in rows],
            "padding": torch.from_numpy(padding),
            "ref_images": self._references(row, pixels, rows),
            "tier": ref.tier,
            "clip_id": ref.clip_id,
            "start": int(start),
            "meta": {name: row[name] for name in META_COLUMNS},
        }

    def _references(self, row: dict, pixels: np.ndarray, rows: np.ndarray):
        """(2, 3, ref_size, ref_size): each fighter cropped from the window's first frame, the prompt
        (docs/datasets.md): a later frame would tell the model where the fighters will be in the frames
        it is asked to generate, which inference, given only the prompt, cannot know. The whole first
        frame where the game has no positions."""
        import torch

        if any(row.get(c) is None for c in POSITION_COLUMNS):
            whole = fr.square_resize(pixels[0], self.ref_size)
            return torch.stack([whole, whole])
        lag = row["screen_ram_lag_frames"] or 0
        ram_row = int(np.clip(rows[0] - lag, 0, row["num_frames"] - 1))  # the NES shows RAM one frame late
        crop_top, crop_left = screen_offsets(row["game"])
        crops = [fr.crop_fighter(pixels[0], row[f"ram_p{p}_x"][ram_row], row[f"ram_p{p}_y"][ram_row], crop_left,
                                 crop_top) for p in (1, 2)]
        return torch.stack([fr.square_resize(c, self.ref_size) for c in crops])
