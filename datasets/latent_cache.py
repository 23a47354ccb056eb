"""`wtf encode`: run the VAE encoder (and the frozen CLIP image encoder) over every clip once.

LATENT_DIR mirrors DS_DIR: `LATENT_DIR/<tier>/<split>-NNNNN.parquet` (one row per window; written
as `.tmp-*.partial` and renamed) and `manifest.json` (written last) recording the VAE's config and a
SHA-256 of its weights, the CLIP encoder's, the window length and the model size. Windows are the
ones `ClipDataset.cache_starts` gives: an action clip's centred window, back-to-back windows of a
full-match clip. Latents are the VAE posterior's mode, normalised with the VAE config's
`latents_mean` / `latents_std` (what the DiT trains on); they are stored as float32 bytes.

Here: the cache's format (schema, shard writer), the plan (units of windows) and the local run.
The encoders and the one call into the model are datasets/encoders.py; the Ray run is
datasets/latent_ray.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import astuple, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from wantofight.datasets.clip_dataset import SPLITS, TIERS, ClipDataset, DatasetError, parse_tiers
from wantofight.datasets.encoders import encode_batch, load_clip, load_vae
from wantofight.devices import resolve_device
from wantofight.interrupts import workers_ignore_ctrl_c
from wantofight.outputs import TMP_PREFIX
from wantofight.progress import Progress

FORMAT = "wantofight-latents"
FORMAT_VERSION = 2
"""2: reference images (and tokens) come from each window's first frame; version 1 cropped them from any
frame of the window, showing the model where the fighters would be later (docs/datasets.md)."""
ROWS_PER_GROUP = 8
UNIT_WINDOWS = 16
"""Windows per unit of work (rounded to whole batches): a Ray actor's task, a part file."""


def latent_schema() -> pa.Schema:
    keys = pa.list_(pa.uint16())
    return pa.schema([
        ("clip_id", pa.string()), ("tier", pa.string()), ("split", pa.string()), ("start", pa.int32()),
        ("frames", pa.int32()),
        ("latents", pa.binary()), ("latent_shape", pa.list_(pa.int32())),
        ("ref_tokens", pa.binary()), ("ref_tokens_shape", pa.list_(pa.int32())),
        ("ref_images", pa.binary()), ("ref_images_shape", pa.list_(pa.int32())),
        ("p1_keys", keys), ("p2_keys", keys),
        ("p1_effective", pa.list_(pa.bool_())), ("p2_effective", pa.list_(pa.bool_())),
        ("p1_action", pa.list_(pa.string())), ("p2_action", pa.list_(pa.string())),
        ("padding", pa.list_(pa.bool_())), ("meta", pa.string()),
    ], metadata={"wantofight.latent_format_version": str(FORMAT_VERSION)})  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Encoding


class Windows:
    """(unit, (clip index, start)) pairs as a map-style dataset for a DataLoader; a corrupt row comes
    back as its error message so the caller can fail or count it."""

    def __init__(self, datasets: dict[str, ClipDataset], windows: list[tuple[Unit, tuple[int, int]]]):
        self.datasets, self.windows = datasets, windows

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, k: int):
        unit, (i, start) = self.windows[k]
        return self.load(self.datasets[unit.split], i, start)

    @staticmethod
    def load(ds: ClipDataset, i: int, start: int):
        try:
            return ds.load(i, start)
        except DatasetError as err:
            return str(err)


class _ShardWriter:
    """Rows of one (tier, split) into shards of about `shard_bytes`, each under a temporary name
    until complete."""

    def __init__(self, out: Path, tier: str, split: str, shard_bytes: int):
        self.dir, self.tier, self.split, self.shard_bytes = out / tier, tier, split, shard_bytes
        self.schema = latent_schema()
        self.shards: list[dict] = []
        self.rows: list[dict] = []
        self.writer = self.tmp = None
        self.size = self.count = 0

    def add(self, row: dict) -> None:
        self.rows.append(row)
        self.size += len(row["latents"]) + len(row["ref_tokens"] or b"") + len(row["ref_images"])
        if len(self.rows) >= ROWS_PER_GROUP:
            self._flush()
        if self.size >= self.shard_bytes:
            self._finish()

    def _flush(self) -> None:
        if not self.rows:
            return
        if self.writer is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            self.tmp = self.dir / f"{TMP_PREFIX}{self._name()}.partial"
            self.writer = pq.ParquetWriter(self.tmp, self.schema, compression="zstd")
        self.writer.write_table(pa.Table.from_pylist(self.rows, schema=self.schema))
        self.count += len(self.rows)
        self.rows = []

    def _name(self) -> str:
        return f"{self.split}-{len(self.shards):05d}.parquet"

    def _finish(self) -> None:
        self._flush()
        if self.writer is None:
            return
        self.writer.close()
        os.replace(self.tmp, self.dir / self._name())
        self.shards.append({"tier": self.tier, "split": self.split, "file": f"{self.tier}/{self._name()}",
                            "rows": self.count})
        self.writer, self.size, self.count = None, 0, 0

    def close(self) -> list[dict]:
        self._finish()
        return self.shards

    def abort(self) -> None:
        """Remove what this writer wrote (a cache without its manifest is not one) and its folder if empty."""
        if self.writer is not None:
            self.writer.close()
            self.tmp.unlink(missing_ok=True)
        for shard in self.shards:
            (self.dir.parent / shard["file"]).unlink(missing_ok=True)
        if self.dir.is_dir() and not any(self.dir.iterdir()):
            self.dir.rmdir()


@dataclass(frozen=True)
class Unit:
    """Windows of one (tier, split), in dataset order: the unit a Ray actor encodes into a part file.
    The local run batches within the same units, so both give the VAE the same batches."""

    split: str
    tier: str
    index: int
    windows: tuple[tuple[int, int], ...]
    """(clip index in the split's ClipDataset, window start)."""

    @property
    def name(self) -> str:
        return f"{self.tier}/{self.split}-{self.index:05d}"


def plan_units(datasets: dict[str, ClipDataset], batch_size: int) -> list[Unit]:
    """Every window to encode, cut into units of whole batches (about UNIT_WINDOWS windows each)."""
    size = max(batch_size, UNIT_WINDOWS // batch_size * batch_size)
    units = []
    for split, ds in datasets.items():
        for tier in TIERS:
            windows = [(i, s) for i in range(len(ds)) if ds.item_tiers[i] == tier for s in ds.cache_starts(i)]
            for k in range(0, len(windows), size):
                units.append(Unit(split, tier, k // size, tuple(windows[k:k + size])))
    return units


def encode_items(items, split: str, vae, clip, device: str, batch_size: int, skip_corrupt: bool, on_corrupt=None):
    """Rows of the latent cache for a unit's items (a corrupt one comes as its error message: raised,
    or skipped and passed to `on_corrupt`), encoded `batch_size` at a time; yields lists of rows."""
    batch: list[dict] = []
    for item in items:
        if isinstance(item, str):
            if not skip_corrupt:
                raise DatasetError(item)
            if on_corrupt is not None:
                on_corrupt(item)
            continue
        batch.append(item)
        if len(batch) == batch_size:
            yield encode_batch(batch, split, vae, clip, device)
            batch = []
    if batch:
        yield encode_batch(batch, split, vae, clip, device)


@dataclass(frozen=True)
class Windowing:
    """Which windows of DS_DIR are encoded and how they are cut: what a worker needs to open the same
    datasets, and what names the part folder (with the weights)."""

    ds_dir: Path
    tiers: tuple[str, ...] | None
    frames: int
    size: tuple[int, int]
    ref_size: int
    exclude: object
    skip_corrupt: bool
    resize: str

    def open(self) -> dict[str, ClipDataset]:
        return {split: ClipDataset(self.ds_dir, split, self.tiers, self.frames, self.size, self.ref_size, self.exclude,
                                   self.skip_corrupt, resize=self.resize) for split in SPLITS}


@dataclass
class EncodeRun:
    """One `wtf encode` as `encode_dataset` set it up: the windows, the loaded encoders (and their
    manifest entries), the units, where the parts go and the Ray pool (None: the local run)."""

    windowing: Windowing
    datasets: dict[str, ClipDataset]
    models: tuple
    """(vae, clip or None, device)."""
    infos: tuple[dict, dict | None]
    """The VAE's and CLIP's manifest entries."""
    units: list[Unit]
    parts_dir: Path
    pool: object
    batch_size: int
    shard_size_mb: float
    workers: int
    progress: bool
    warn: object


def encode_dataset(ds_dir: Path, out: Path, *, vae: str = "tiny", clip: str | None = None, frames: int = 161,
                   size: tuple[int, int] = (384, 512), ref_size: int = 224, tiers=None, batch_size: int = 1,
                   workers: int = 0, device: str = "cpu", exclude=None, skip_corrupt: bool = False,
                   shard_size_mb: float = 256.0, clip_model: str = "ViT-H-14", resize: str = "stretch",
                   progress: bool = True, warn=None, cluster=None, overwrite: bool = False) -> dict:
    """Encode every window of DS_DIR's clips (both splits) into LATENT_DIR; returns the manifest. With
    a Ray `cluster`, units are encoded by its actors (one VAE each, on a CPU or, with `device` cuda or
    auto on a cluster with GPUs, on a GPU each) into part files that a rerun reuses; on CPUs the cache
    is the same, byte for byte, as the local run's. An existing LATENT_DIR is refused, or with
    `overwrite` replaced once the new cache is complete."""
    from wantofight import outputs
    from wantofight.datasets.latent_ray import missing_parts, open_encoders, ray_device

    final = Path(out)
    out = outputs.claim(final, overwrite, ours=lambda entry: entry.name.startswith(".parts-"))
    if size[0] % 8 or size[1] % 8:
        raise ValueError(f"size {size[0]}x{size[1]} must be a multiple of 8 (the VAE downsamples 8x)")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    device = ray_device(cluster, device) if cluster is not None else resolve_device(device)
    warn = warn or (lambda message: None)
    tiers = parse_tiers(tiers)
    windowing = Windowing(ds_dir, tiers, frames, size, ref_size, exclude, skip_corrupt, resize)
    datasets = windowing.open()
    here = "cpu" if cluster is not None else device  # on a cluster the driver's copies only name the weights
    vae_model, vae_info = load_vae(vae, here)
    clip_model_, clip_info = load_clip(clip, clip_model, here) if clip else (None, None)
    units = plan_units(datasets, batch_size)
    parts_dir = out / f".parts-{encode_digest(vae_info, clip_info, windowing, batch_size)}"
    pool = None
    if cluster is not None:  # Ray Data's actors, one VAE each; see wantofight.cluster_data
        from wantofight.cluster_data import DataPool

        pool = DataPool(cluster, setup=open_encoders, setup_args=(windowing, (vae, clip, clip_model), device),
                        attempts_dir=parts_dir / ".attempts", warn=warn, gpus=1 if device == "cuda" else 0)
        pool.actors(len(missing_parts(units, parts_dir)))  # joins the cluster; no GPU there is an error now
    run = EncodeRun(windowing, datasets, (vae_model, clip_model_, device), (vae_info, clip_info), units, parts_dir,
                    pool, batch_size, shard_size_mb, workers, progress, warn)
    manifest = _encode(run, out)
    outputs.swap_in(out, final)
    return manifest


def _encode(run: EncodeRun, out: Path) -> dict:
    """Encode `run` into `out` (the parts first on a Ray pool) and write its manifest last."""
    import torch

    from wantofight.datasets.latent_ray import encode_on_ray
    from wantofight.datasets.loader import seed_worker

    win = run.windowing
    datasets, units, parts_dir, pool, warn = run.datasets, run.units, run.parts_dir, run.pool, run.warn
    vae_model, clip_model_, device = run.models
    shard_bytes = int(run.shard_size_mb * 2**20)
    writers: dict[tuple[str, str], _ShardWriter] = {}
    counts = {t: {s: 0 for s in SPLITS} for t in TIERS}
    corrupt: list[str] = []
    latent_shape = None

    def add(rows: list[dict]) -> None:
        nonlocal latent_shape
        for row in rows:
            key = (row["tier"], row["split"])
            if key not in writers:
                writers[key] = _ShardWriter(out, row["tier"], row["split"], shard_bytes)
            writers[key].add(row)
            counts[row["tier"]][row["split"]] += 1
            latent_shape = list(row["latent_shape"])

    def skipped(message: str) -> None:
        corrupt.append(message)
        warn(f"skipping corrupt clip: {message}")

    total = sum(len(u.windows) for u in units)
    with Progress("encode", total, "windows", enabled=run.progress, transient=True) as bar:
        if pool is not None:  # every part first: the cache in `out` is untouched until the last is there
            encode_on_ray(pool, units, win.skip_corrupt, run.batch_size, parts_dir, bar)
        out.mkdir(parents=True, exist_ok=True)
        (out / "manifest.json").unlink(missing_ok=True)  # the directory is incomplete until the new one lands
        try:
            if pool is not None:
                for unit in units:  # parts → shards, in the order the local run writes them
                    part = pq.ParquetFile(parts_dir / f"{unit.name}.parquet")
                    for message in json.loads(part.schema_arrow.metadata[b"wantofight.corrupt"]):
                        skipped(message)
                    add(part.read().to_pylist())
            else:
                windows = [(unit, w) for unit in units for w in unit.windows]
                loader = torch.utils.data.DataLoader(Windows(datasets, windows), batch_size=None,
                                                     num_workers=run.workers, worker_init_fn=seed_worker)
                with workers_ignore_ctrl_c():  # decoding workers start here; Ctrl-C reaches this process only
                    items = iter(loader)
                done = 0
                for unit in units:
                    mine = (next(items) for _ in unit.windows)
                    for rows in encode_items(mine, unit.split, vae_model, clip_model_, device, run.batch_size,
                                             win.skip_corrupt, skipped):
                        add(rows)
                        bar.advance(len(rows))
                    done += len(unit.windows)
                    bar.update(completed=done)  # the corrupt windows skipped count as done
            shards = [s for w in writers.values() for s in w.close()]
        except BaseException:
            for w in writers.values():
                w.abort()
            raise
    written = {s["file"] for s in shards}
    for stale in out.glob("*/*.parquet"):
        if str(stale.relative_to(out)) not in written:
            stale.unlink()
    source_manifest = (Path(win.ds_dir) / "manifest.json").read_bytes()
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "source": {"ds_dir": str(Path(win.ds_dir).resolve()),
                   "manifest_sha1": hashlib.sha1(source_manifest).hexdigest(),
                   "build_options": json.loads(source_manifest).get("build_options")},
        "frames": win.frames, "latent_frames": latent_shape[1] if latent_shape else None, "size": list(win.size), "resize": win.resize,
        "ref_size": win.ref_size, "latent_shape": latent_shape, "windows": "action clips: the centred window; "
        "full-match clips: back-to-back windows from row 0",
        "vae": run.infos[0], "clip": run.infos[1],
        "counts": {t: c for t, c in counts.items() if sum(c.values())},
        "excluded": sum(ds.stats["excluded"] for ds in datasets.values()),
        "corrupt_skipped": corrupt, "shards": sorted(shards, key=lambda s: (TIERS.index(s["tier"]), s["file"])),
    }  # fmt: skip
    tmp = out / f"{TMP_PREFIX}manifest.json"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, out / "manifest.json")
    shutil.rmtree(parts_dir, ignore_errors=True)
    return manifest


def encode_digest(vae_info: dict, clip_info: dict | None, windowing: Windowing, batch_size: int) -> str:
    """Names the part folder: parts of a run with other weights, data or windows are never reused."""
    source = hashlib.sha1((Path(windowing.ds_dir) / "manifest.json").read_bytes()).hexdigest()
    settings = [vae_info["sha256"], clip_info and clip_info["sha256"], [str(a) for a in astuple(windowing)[1:]],
                batch_size, source]
    return hashlib.sha1(json.dumps(settings).encode()).hexdigest()[:12]
