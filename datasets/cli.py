"""`wtf encode`: the command-line face of `datasets/` (the latent cache)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from wantofight.cli_util import MAX_RETRIES_OPTION, OVERWRITE_OPTION, RAY_OPTION, fail, ray_cluster, stopped, warn, wrote
from wantofight.cluster import ClusterError


def parse_size(text: str) -> tuple[int, int]:
    """`384x512` (height x width) -> (384, 512)."""
    try:
        height, width = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--size {text!r}: expected HEIGHTxWIDTH, e.g. 384x512") from None
    if height < 1 or width < 1:
        raise ValueError(f"--size {text!r}: height and width must be positive")
    return height, width


def encode_command(
    ctx: typer.Context,
    ds_dir: Path = typer.Argument(..., help="A curriculum dataset (the --out of `wtf build-curriculum`)."),
    out: Path = typer.Option(..., help="Latent cache folder (shards + manifest.json)."),
    vae: str = typer.Option(..., help="`tiny` (random tiny VAE, for tests) or a local Wan2.1 diffusers folder."),
    clip: Optional[str] = typer.Option(None, help="`tiny` or a local open_clip checkpoint: store reference tokens."),
    clip_model: str = typer.Option("ViT-H-14", help="open_clip architecture of a --clip checkpoint."),
    frames: int = typer.Option(161, help="Window length in frames (1 + 8k)."),
    size: str = typer.Option("384x512", help="Model size HEIGHTxWIDTH (multiples of 8)."),
    ref_size: int = typer.Option(224, help="Reference image side before the CLIP encoder."),
    tiers: str = typer.Option("single,dual,full", help="Tiers to encode: single, dual, full."),
    resize: str = typer.Option("stretch", help="stretch (whole picture, default) or letterbox."),
    batch_size: int = typer.Option(1, help="Windows per VAE call."),
    workers: int = typer.Option(0, help="Decoding worker processes (with --ray: actors, one VAE each; default one "
                                        "per CPU of the cluster)."),
    device: str = typer.Option("auto", help="cpu, cuda, cuda:N, or auto (cuda when available). With --ray: cuda "
                                            "gives each worker one GPU of its node; auto, when the cluster has GPUs."),
    exclude: Optional[Path] = typer.Option(None, help="Curators' exclude file (docs/curriculum.md)."),
    skip_corrupt: bool = typer.Option(False, help="Skip and count corrupt clips instead of failing."),
    shard_size_mb: float = typer.Option(256.0, help="Approximate shard size in MB."),
    overwrite: bool = OVERWRITE_OPTION,
    ray: Optional[str] = RAY_OPTION,
    max_retries: int = MAX_RETRIES_OPTION,
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Encode every clip window once with the VAE (and CLIP on the reference images) into Parquet shards."""
    from wantofight.datasets.clip_dataset import DatasetError
    from wantofight.datasets.latent_cache import encode_dataset

    if workers < 0:
        fail(f"--workers must be >= 0, got {workers}")
    try:
        hw = parse_size(size)
        cluster = ray_cluster(ctx, ray, workers, max_retries)
        manifest = encode_dataset(ds_dir, out, vae=vae, clip=clip, frames=frames, size=hw, ref_size=ref_size,
                                  tiers=tiers, batch_size=batch_size, workers=workers, device=device,
                                  exclude=exclude, skip_corrupt=skip_corrupt, shard_size_mb=shard_size_mb,
                                  clip_model=clip_model, resize=resize, progress=progress, warn=warn,
                                  cluster=cluster, overwrite=overwrite)
    except (ValueError, FileNotFoundError, DatasetError, OSError, ClusterError) as err:
        fail(str(err))
    except KeyboardInterrupt:
        from wantofight.outputs import claim

        work = claim(out, overwrite, resume=True)  # where the cache was being written (--overwrite: beside --out)
        if cluster is not None:
            stopped(f"the windows encoded so far are kept in {work}/.parts-* (the cache itself is written whole, "
                    "manifest.json last); run the same command again to continue from them")
        stopped(f"nothing was kept in {work} (a latent cache is written whole, manifest.json last); "
                "run the same command again")
    counts = ", ".join(f"{tier} {c['train']}/{c['val']}" for tier, c in manifest["counts"].items())
    wrote(out.resolve(), f"{sum(sum(c.values()) for c in manifest['counts'].values())} windows of {frames} frames "
                         f"(train/val: {counts}), latents {manifest['latent_shape']}")


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root `wtf` app."""
    app.command("encode")(encode_command)
