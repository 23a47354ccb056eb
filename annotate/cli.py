"""`wtf annotate`, `wtf build-curriculum`: the command-line face of `annotate/`."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from wantofight.cli_util import (MAX_RETRIES_OPTION, OVERWRITE_OPTION, RAY_OPTION, console, fail, ray_cluster, stopped,
                                 warn, wrote)
from wantofight.cluster import ClusterError


WORKERS_HELP = "Worker processes, one episode each at a time (with --ray: actors; default one per CPU of the cluster)."


def annotate_command(
    ctx: typer.Context,
    run_dir: Path = typer.Argument(..., help="A recording run (the --out of `wtf collect`)."),
    workers: int = typer.Option(1, help=WORKERS_HELP),
    force: bool = typer.Option(False, "--overwrite", "--force",
                               help="Annotate again, replacing annotations that are up to date or of another "
                                    "version (without it, another version's are refused)."),
    ray: Optional[str] = RAY_OPTION,
    max_retries: int = MAX_RETRIES_OPTION,
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Label every episode from its RAM and keys: annotations.parquet, events.parquet, annotation.json."""
    from wantofight.annotate.annotate import annotate_runs
    from wantofight.annotate.episode import EpisodeError

    if workers < 1:
        fail(f"--workers must be at least 1, got {workers}")
    try:
        cluster = ray_cluster(ctx, ray, workers, max_retries)
        reports = annotate_runs([run_dir], workers=workers, force=force, progress=progress, cluster=cluster,
                                warn=warn)
    except (EpisodeError, ClusterError) as err:
        fail(str(err))
    except KeyboardInterrupt:
        stopped(f"the episodes annotated so far are kept in {run_dir}; run the same command again to annotate "
                "the rest")
    skipped = [r["reason"] for r in reports if r["status"] == "skipped"]
    done = len(reports) - len(skipped)
    if done == 0:  # one line naming each bad episode, not a warning for each and then an error
        fail(f"no episode of {run_dir} could be annotated: {'; '.join(skipped) or 'it holds none'}")
    for reason in skipped:
        warn(f"skipped {reason}")
    missing = sorted({item["what"] for r in reports for item in r.get("not_computed", [])})
    note = f" (not computable for this game: {', '.join(missing)})" if missing else ""
    wrote(run_dir, f"annotations of {done} of {len(reports)} episode(s){note}")


def build_curriculum_command(
    ctx: typer.Context,
    run_dirs: List[Path] = typer.Argument(..., help="Recording runs to cut clips from."),
    out: Path = typer.Option(..., help="Dataset folder (shards + manifest.json)."),
    clip_frames: int = typer.Option(161, help="Training window in frames (the paper's 161)."),
    stride: Optional[int] = typer.Option(None, help="Step between full-match windows (default: --clip-frames)."),
    tiers: str = typer.Option("single,dual,full", help="Tiers to cut: single, dual, full."),
    val_fraction: float = typer.Option(0.1, help="Share of episodes that go to val."),
    shard_size_mb: float = typer.Option(256.0, help="Approximate shard size in MB."),
    exclude: Optional[Path] = typer.Option(None, help="Curators' exclude file (docs/curriculum.md)."),
    workers: int = typer.Option(1, help=WORKERS_HELP),
    seed: int = typer.Option(0, help="Seed for the split and the single-action balancing."),
    context: int = typer.Option(4, help="Neutral frames kept at most on each side of an action clip."),
    balance: bool = typer.Option(True, help="Same single-action count per (move, side)."),
    strict: bool = typer.Option(False, help="Fail on a bad episode instead of skipping it."),
    overwrite: bool = OVERWRITE_OPTION,
    ray: Optional[str] = RAY_OPTION,
    max_retries: int = MAX_RETRIES_OPTION,
    progress: bool = typer.Option(True, help="Show progress bars."),
) -> None:
    """Cut single-action, dual-action and full-match clips into self-contained Parquet shards."""
    from wantofight.annotate.clips import parse_tiers
    from wantofight.annotate.curriculum import BuildError, BuildOptions, build_curriculum

    if workers < 1:
        fail(f"--workers must be at least 1, got {workers}")
    try:
        options = BuildOptions(
            clip_frames=clip_frames, stride=stride, tiers=parse_tiers(tiers), val_fraction=val_fraction,
            shard_size_mb=shard_size_mb, exclude=str(exclude) if exclude else None, seed=seed, context=context,
            balance=balance, strict=strict,
        )
        cluster = ray_cluster(ctx, ray, workers, max_retries)
        manifest = build_curriculum(run_dirs, out, options, workers=workers, progress=progress, warn=warn,
                                    cluster=cluster, overwrite=overwrite)
    except (BuildError, ClusterError, ValueError) as err:
        fail(str(err))
    except KeyboardInterrupt:
        from wantofight.outputs import claim

        parts = claim(out, overwrite, resume=True)  # where the build was writing
        stopped(f"annotations and the clips of finished episodes are kept (in the runs and {parts}/.parts-*); "
                "run the same command again to continue from them")
    if exclude is not None:  # also in manifest.json: dropped.excluded, dropped.exclude_ids_not_found
        n, missing = manifest["dropped"]["excluded"], manifest["dropped"]["exclude_ids_not_found"]
        console.print(f"excluded {n} clip{'' if n == 1 else 's'} listed in {exclude} ({missing} listed "
                      f"id{'' if missing == 1 else 's'} not among this build's clips)", soft_wrap=True, highlight=False)
    counts = ", ".join(f"{tier} {c['train']}/{c['val']}" for tier, c in manifest["counts"].items())
    skipped = len(manifest["episodes"]["skipped"])
    wrote(out.resolve(), f"{manifest['clips']} clips (train/val: {counts}) from {manifest['episodes']['used']} "
                         f"episode(s), {skipped} skipped")


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root `wtf` app."""
    app.command("annotate")(annotate_command)
    app.command("build-curriculum")(build_curriculum_command)
