"""`wtf encode`: run the VAE encoder (and the frozen CLIP image encoder) over every clip once.

LATENT_DIR mirrors DS_DIR: `LATENT_DIR/<tier>/<split>-NNNNN.parquet` (one row per window; written
as `.tmp-*.partial` and renamed) and `manifest.json` (written last) recording the VAE's config and a
SHA-256 of its weights, the CLIP encoder's, the window length and the model size. Windows are the
ones `ClipDataset.cache_starts` gives: an action clip's centred window, back-to-back windows of a
full-match clip. Latents are the VAE posterior's mode, normalised with the VAE config's
`latents_mean` / `latents_std` (what the DiT trains on); they are stored as float32 bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from wantofight.datasets.clip_dataset import SPLITS, TIERS, ClipDataset, DatasetError, parse_tiers
from wantofight.interrupts import workers_ignore_ctrl_c
from wantofight.progress import Progress

FORMAT = "wantofight-latents"
FORMAT_VERSION = 2
"""2: reference images (and tokens) come from each window's first frame; version 1 cropped them from any
frame of the window, showing the model where the fighters would be later (docs/datasets.md)."""
ROWS_PER_GROUP = 8
TMP_PREFIX = ".tmp-"


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
# Encoders


def weights_sha256(module) -> str:
    """SHA-256 over the state dict (names, dtypes, shapes, bytes) in name order."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        digest.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def load_vae(spec: str, device: str = "cpu"):
    """`tiny` (the tiny preset's VAE, random weights from seed 0: tests and CI) or a local Wan2.1
    diffusers folder. Returns (WanVAE, description for the manifest)."""
    import torch

    from wantofight_model.presets import get_preset
    from wantofight_model.vae import WanVAE

    if spec == "tiny":
        torch.manual_seed(0)
        vae = WanVAE.from_config(get_preset("tiny").vae, device=device)
    else:
        vae = WanVAE.from_pretrained(spec, device=device)
    vae.eval()
    config = {k: v for k, v in dict(vae.autoencoder.config).items() if not k.startswith("_")}
    info = {"spec": spec if spec == "tiny" else str(Path(spec).resolve()), "class": "AutoencoderKLWan",
            "config": json.loads(json.dumps(config, default=list)), "sha256": weights_sha256(vae.autoencoder),
            "normalised": "(z - latents_mean) / latents_std, posterior mode"}
    return vae, info


def load_clip(spec: str, model: str = "ViT-H-14", device: str = "cpu"):
    """`tiny` (the tiny preset's CLIP tower, random weights from seed 0) or a local open_clip
    checkpoint of architecture `model`. Returns (ReferenceEncoder, description)."""
    import torch

    from wantofight_model.player_association import ReferenceEncoder
    from wantofight_model.presets import get_preset

    if spec == "tiny":
        config = get_preset("tiny")
    else:
        if not Path(spec).is_file():
            raise FileNotFoundError(f"no open_clip checkpoint at {spec}")
        config = get_preset("wan-1.3b", clip_model=model, clip_pretrained=str(Path(spec).resolve()))
    torch.manual_seed(0)
    encoder = ReferenceEncoder.from_config(config, device=device).eval()
    info = {"spec": spec if spec == "tiny" else str(Path(spec).resolve()), "model": config.clip_model,
            "image_size": config.clip_image_size, "sha256": weights_sha256(encoder.visual)}
    return encoder, info


# ---------------------------------------------------------------------------------------------
# Encoding


class _Windows:
    """(clip index, start) pairs of one ClipDataset as a map-style dataset for a DataLoader; a
    corrupt row comes back as its error message so the caller can fail or count it."""

    def __init__(self, ds: ClipDataset, windows: list[tuple[int, int]]):
        self.ds, self.windows = ds, windows

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, k: int):
        i, start = self.windows[k]
        try:
            return self.ds.load(i, start)
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


def encode_dataset(ds_dir: Path, out: Path, vae: str = "tiny", clip: str | None = None, frames: int = 161,
                   size: tuple[int, int] = (384, 512), ref_size: int = 224, tiers=None, batch_size: int = 1,
                   workers: int = 0, device: str = "cpu", exclude=None, skip_corrupt: bool = False,
                   shard_size_mb: float = 256.0, clip_model: str = "ViT-H-14", resize: str = "stretch",
                   progress: bool = True, warn=None) -> dict:
    """Encode every window of DS_DIR's clips (both splits) into LATENT_DIR; returns the manifest."""
    import torch

    from wantofight.datasets.loader import seed_worker

    if size[0] % 8 or size[1] % 8:
        raise ValueError(f"size {size[0]}x{size[1]} must be a multiple of 8 (the VAE downsamples 8x)")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    warn = warn or (lambda message: None)
    tiers = parse_tiers(tiers)
    datasets = {split: ClipDataset(ds_dir, split, tiers, frames, size, ref_size, exclude, skip_corrupt,
                                   resize=resize) for split in SPLITS}
    vae_model, vae_info = load_vae(vae, device)
    clip_model_, clip_info = load_clip(clip, clip_model, device) if clip else (None, None)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)  # the directory is incomplete until the new one lands
    shard_bytes = int(shard_size_mb * 2**20)
    writers: dict[tuple[str, str], _ShardWriter] = {}
    counts = {t: {s: 0 for s in SPLITS} for t in TIERS}
    corrupt: list[str] = []
    latent_shape = None
    total = sum(len(ds.cache_starts(i)) for ds in datasets.values() for i in range(len(ds)))
    with Progress("encode", total, "windows", enabled=progress, transient=True) as bar:
        try:
            for split, ds in datasets.items():
                windows = [(i, s) for i in range(len(ds)) for s in ds.cache_starts(i)]
                loader = torch.utils.data.DataLoader(_Windows(ds, windows), batch_size=None, num_workers=workers,
                                                     worker_init_fn=seed_worker)
                with workers_ignore_ctrl_c():  # decoding workers start here; Ctrl-C reaches this process only
                    items = iter(loader)
                batch: list[dict] = []
                for item in items:
                    if isinstance(item, str):
                        if not skip_corrupt:
                            raise DatasetError(item)
                        corrupt.append(item)
                        warn(f"skipping corrupt clip: {item}")
                        bar.advance()
                        continue
                    batch.append(item)
                    if len(batch) == batch_size:
                        latent_shape = _encode_batch(batch, split, vae_model, clip_model_, device, writers, counts,
                                                     out, shard_bytes)
                        bar.advance(len(batch))
                        batch = []
                if batch:
                    latent_shape = _encode_batch(batch, split, vae_model, clip_model_, device, writers, counts, out,
                                                 shard_bytes)
                    bar.advance(len(batch))
            shards = [s for w in writers.values() for s in w.close()]
        except BaseException:
            for w in writers.values():
                w.abort()
            raise
    written = {s["file"] for s in shards}
    for stale in out.glob("*/*.parquet"):
        if str(stale.relative_to(out)) not in written:
            stale.unlink()
    source_manifest = (Path(ds_dir) / "manifest.json").read_bytes()
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "source": {"ds_dir": str(Path(ds_dir).resolve()), "manifest_sha1": hashlib.sha1(source_manifest).hexdigest(),
                   "build_options": json.loads(source_manifest).get("build_options")},
        "frames": frames, "latent_frames": 1 + (frames - 1) // 4, "size": list(size), "resize": resize,
        "ref_size": ref_size, "latent_shape": latent_shape, "windows": "action clips: the centred window; "
        "full-match clips: back-to-back windows from row 0",
        "vae": vae_info, "clip": clip_info,
        "counts": {t: c for t, c in counts.items() if sum(c.values())},
        "excluded": sum(ds.stats["excluded"] for ds in datasets.values()),
        "corrupt_skipped": corrupt, "shards": sorted(shards, key=lambda s: (TIERS.index(s["tier"]), s["file"])),
    }  # fmt: skip
    tmp = out / f"{TMP_PREFIX}manifest.json"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, out / "manifest.json")
    return manifest


def _encode_batch(batch, split, vae, clip, device, writers, counts, out, shard_bytes) -> list[int]:
    import torch

    frames = torch.stack([item["frames"] for item in batch]).to(device)  # (B, T, 3, H, W)
    latents = vae.encode(frames.permute(0, 2, 1, 3, 4)).float().cpu()  # (B, 16, F, h, w)
    refs = torch.stack([item["ref_images"] for item in batch])  # (B, 2, 3, r, r)
    tokens = clip(refs.to(device)).float().cpu() if clip is not None else None  # (B, 2, N, C)
    for b, item in enumerate(batch):
        keys = item["keys"].numpy()  # (T, 2, 16) back to masks
        masks = (keys.astype(np.uint16) << np.arange(16, dtype=np.uint16)).sum(-1).astype(np.uint16)  # (T, 2)
        ref_u8 = ((item["ref_images"].numpy() + 1.0) * 127.5).round().astype(np.uint8)
        row = {
            "clip_id": item["clip_id"], "tier": item["tier"], "split": split, "start": item["start"],
            "frames": int(frames.shape[1]),
            "latents": latents[b].numpy().tobytes(), "latent_shape": list(latents.shape[1:]),
            "ref_tokens": tokens[b].numpy().tobytes() if tokens is not None else None,
            "ref_tokens_shape": list(tokens.shape[1:]) if tokens is not None else None,
            "ref_images": ref_u8.tobytes(), "ref_images_shape": list(ref_u8.shape),
            "p1_keys": masks[:, 0].tolist(), "p2_keys": masks[:, 1].tolist(),
            "p1_effective": item["effective"][:, 0].tolist(), "p2_effective": item["effective"][:, 1].tolist(),
            "p1_action": [a[0] for a in item["actions"]], "p2_action": [a[1] for a in item["actions"]],
            "padding": item["padding"].tolist(), "meta": json.dumps(item["meta"], sort_keys=True),
        }  # fmt: skip
        key = (item["tier"], split)
        if key not in writers:
            writers[key] = _ShardWriter(out, item["tier"], split, shard_bytes)
        writers[key].add(row)
        counts[item["tier"]][split] += 1
    return list(latents.shape[1:])
