"""`wtf encode --ray`: the latent cache's units encoded on a Ray cluster's actors (one VAE each), each
into a part file that a rerun reuses; datasets/latent_cache.py turns the parts into the same shards as
a local run.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from wantofight.datasets.encoders import load_clip, load_vae
from wantofight.datasets.latent_cache import TMP_PREFIX, Unit, Windows, encode_items, latent_schema


def ray_device(cluster, device: str) -> str:  # the cluster's twin of wantofight.devices.resolve_device
    """`cpu` or `cuda` for the actors: each holds one GPU of its node when `cuda`; `auto` is `cuda` when
    the cluster offers GPUs. `cuda:N` names a GPU of this machine, which a cluster's actors cannot."""
    if device == "auto":
        from wantofight.cluster import cluster_gpus, connect

        connect(cluster)
        return "cuda" if cluster_gpus() >= 1 else "cpu"
    if device not in ("cpu", "cuda"):
        raise ValueError(f"--device {device} with --ray: use cuda (one GPU per worker, as Ray assigns them), cpu or "
                         "auto")
    return device


def open_encoders(windowing, models: tuple, device: str = "cpu"):
    """An actor's state: the datasets, the encoders (on `device`: its own GPU for `cuda`) and the device."""
    vae, clip, clip_model = models
    return (windowing.open(), load_vae(vae, device)[0],
            load_clip(clip, clip_model, device)[0] if clip else None, device)


def encode_part(state, unit: Unit, batch_size: int, skip_corrupt: bool, parts_dir: Path) -> int:
    """Encode one unit into `parts_dir/<tier>/<split>-NNNNN.parquet` (temporary name, then renamed; the
    corrupt windows skipped go in its metadata). A part already there is kept. Returns the windows done."""
    datasets, vae, clip, device = state
    path = parts_dir / f"{unit.name}.parquet"
    if path.is_file():
        return len(unit.windows)
    corrupt: list[str] = []
    ds = datasets[unit.split]
    items = (Windows.load(ds, i, start) for i, start in unit.windows)
    rows = [row for batch in encode_items(items, unit.split, vae, clip, device, batch_size, skip_corrupt,
                                          corrupt.append) for row in batch]
    schema = latent_schema()
    schema = schema.with_metadata({**schema.metadata, b"wantofight.corrupt": json.dumps(corrupt).encode()})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}-{socket.gethostname()}-{os.getpid()}.partial")
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp, compression="zstd")
    os.replace(tmp, path)  # a retried unit writes the same bytes: either rename may win
    return len(unit.windows)


def missing_parts(units: list[Unit], parts_dir: Path) -> list[Unit]:
    return [u for u in units if not (parts_dir / f"{u.name}.parquet").is_file()]


def encode_on_ray(pool, units: list[Unit], skip_corrupt: bool, batch_size: int, parts_dir: Path, bar) -> None:
    """Encode the units whose part is missing on the pool's actors (Ray Data, one VAE each). A run that
    stops early keeps the parts finished; it leaves no folder that it made and left empty."""
    from wantofight.cluster import say

    todo = missing_parts(units, parts_dir)
    bar.update(completed=sum(len(u.windows) for u in units) - sum(len(u.windows) for u in todo))
    made = [d for d in (parts_dir.parent, parts_dir) if not d.exists()]
    jobs = [(unit, batch_size, skip_corrupt, parts_dir) for unit in todo]
    try:
        for _, windows in pool.imap(encode_part, jobs, [u.name for u in todo]):
            bar.advance(windows)
    except BaseException:
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:  # not empty (a part was finished) or already gone
                pass
        raise
    say(pool.summary("encode", len(todo), "units"))
