"""`LatentDataset`: the windows `wtf encode` stored, for training without the VAE in memory.

Items mirror `ClipDataset`'s, with `latents` float32 (16, F, h, w) (F = 1 + (frames - 1) / 4 for the Wan VAE, F = frames per frame,
normalised with the VAE's latents_mean / latents_std) in place of `frames`, and `ref_tokens`
float32 (2, N, C) (the frozen CLIP encoder's output, as `WanToFight.encode_references` gives for
one sample) in place of `ref_images` when the cache was built with `--clip` (otherwise
`ref_images`, for the trainer to encode). One index = one stored window; `ds[(i, step)]` is
accepted like ClipDataset's (the window is fixed, so `step` is only passed through).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from wantofight.datasets.clip_dataset import (SPLITS, TIERS, DatasetError, RowGroupReader, parse_tiers,
                                              row_groups)
from wantofight.datasets.exclude import load_excludes
from wantofight.datasets.latent_cache import FORMAT, FORMAT_VERSION
from wantofight.key_layout import masks_to_array

ITEM_COLUMNS = ["clip_id", "tier", "start", "latents", "latent_shape", "ref_tokens", "ref_tokens_shape",
                "ref_images", "ref_images_shape", "p1_keys", "p2_keys", "p1_effective", "p2_effective",
                "p1_action", "p2_action", "padding", "meta"]


class LatentDataset:
    """Stored latent windows of `split` and `tiers` in LATENT_DIR (see the module docstring)."""

    def __init__(self, latent_dir, split: str = "train", tiers=None, frames: int | None = None, exclude=None,
                 seed: int = 0):
        self.root = Path(latent_dir)
        path = self.root / "manifest.json"
        if not path.is_file():
            raise FileNotFoundError(f"{self.root} is not a latent cache: no manifest.json (make one with `wtf encode`)")
        self.manifest = json.loads(path.read_text())
        if self.manifest.get("format") != FORMAT:
            raise ValueError(f"{path}: not a {FORMAT} manifest")
        if self.manifest.get("format_version", 1) < FORMAT_VERSION:
            raise ValueError(f"{path}: format version {self.manifest.get('format_version', 1)} stores reference "
                             f"images cropped from any frame of the window (version {FORMAT_VERSION} takes them "
                             "from the first frame only); re-run `wtf encode`")
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
        cached = self.manifest["frames"]
        if frames is not None and frames != cached:
            raise ValueError(f"{self.root} holds {cached}-frame windows, asked for frames={frames}; "
                             f"re-run `wtf encode --frames {frames}`")
        self.frames, self.split, self.tiers, self.seed = cached, split, parse_tiers(tiers), seed
        self.excluded = load_excludes(self.root, exclude)
        shards = [s for s in self.manifest["shards"] if s["split"] == split
                  and (self.tiers is None or s["tier"] in self.tiers)]
        shards.sort(key=lambda s: (TIERS.index(s["tier"]), s["file"]))
        self.paths = [self.root / s["file"] for s in shards]
        self.refs: list[tuple[int, int, int, str]] = []
        self.item_tiers: list[str] = []
        self.stats = {"excluded": 0, "rows": 0}
        for k, shard in enumerate(self.paths):
            cols, where = row_groups(shard, ["clip_id", "tier"])
            for g, r, row in where:
                self.stats["rows"] += 1
                if cols["clip_id"][row] in self.excluded:
                    self.stats["excluded"] += 1
                    continue
                self.refs.append((k, g, r, cols["clip_id"][row]))
                self.item_tiers.append(cols["tier"][row])
        self.reader = RowGroupReader(self.paths, ITEM_COLUMNS)

    def __len__(self) -> int:
        return len(self.refs)

    def __getitem__(self, key) -> dict:
        import torch

        i, step = key if isinstance(key, tuple) else (key, 0)
        if not 0 <= i < len(self.refs):
            raise IndexError(f"index {i} out of range for {len(self.refs)} windows")
        shard, group, row_in_group, clip_id = self.refs[i]
        try:
            row = self.reader.row(shard, group, row_in_group)
            latents = np.frombuffer(row["latents"], np.float32).reshape(row["latent_shape"])
            keys = np.stack([np.asarray(row["p1_keys"], np.uint16), np.asarray(row["p2_keys"], np.uint16)], 1)
            effective = np.stack([np.asarray(row["p1_effective"], bool), np.asarray(row["p2_effective"], bool)], 1)
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise DatasetError(f"{self.paths[shard]} row group {group} row {row_in_group} (clip {clip_id}): {err}") from None
        item = {
            "latents": torch.from_numpy(latents.copy()),
            "keys": torch.from_numpy(masks_to_array(keys)),
            "effective": torch.from_numpy(effective),
            "actions": list(zip(row["p1_action"], row["p2_action"])),
            "padding": torch.tensor(row["padding"], dtype=torch.bool),
            "tier": row["tier"],
            "clip_id": row["clip_id"],
            "start": int(row["start"]),
            "step": step,
            "meta": json.loads(row["meta"]),
        }
        if row["ref_tokens"] is not None:
            item["ref_tokens"] = torch.from_numpy(np.frombuffer(row["ref_tokens"], np.float32)
                                                  .reshape(row["ref_tokens_shape"]).copy())
        else:
            images = np.frombuffer(row["ref_images"], np.uint8).reshape(row["ref_images_shape"])
            item["ref_images"] = torch.from_numpy(images.astype(np.float32) * (2.0 / 255.0) - 1.0)
        return item
