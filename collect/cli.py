"""`wtf collect`, `wtf replay`, `wtf games`: the command-line face of `collect/`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from wantofight.cli_util import (MAX_RETRIES_OPTION, RAY_OPTION, console, fail, ray_cluster, stopped, typed_options,
                                 warn, wrote)
from wantofight.cluster import ClusterError


def collect_command(
    ctx: typer.Context,
    policy: str = typer.Option(
        "scripted", help="Policy for both players: idle, random, mash, scripted, drill, keys:PATH (a key file, or "
                         "a built-in one by name: keys:duel/walk-under-a), ppo:CHECKPOINT, ppo-ladder:DIR."
    ),
    p2_policy: Optional[str] = typer.Option(None, help="Policy for player 2 (default: the same as --policy)."),
    game: str = typer.Option("duel", help="Game: the built-in `duel` or an imported stable-retro game (see `wtf games`)."),
    state: Optional[str] = typer.Option(None, help="Start savestate of the integration (default: the game's start)."),
    episodes: int = typer.Option(2, help="Episodes to record (with --resume: the total to reach)."),
    max_frames: int = typer.Option(9000, help="Upper bound on recorded frames per episode."),
    fps: int = typer.Option(30, help="Recorded frames per second: 60 keeps every emulator frame, 30 every 2nd."),
    workers: int = typer.Option(1, help="Worker processes, one emulator each (with --ray: actors; default one per "
                                        "CPU of the cluster)."),
    seed: int = typer.Option(0, help="Run seed; episode i gets a seed derived from (seed, i)."),
    deterministic: bool = typer.Option(False, help="Learned (ppo) policies take their most likely action."),
    out: Path = typer.Option(Path("data"), help="Output folder (episodes go to OUT/episodes/<id>/)."),
    resume: bool = typer.Option(False, help="Top an existing run in OUT up to --episodes, with its settings."),
    ray: Optional[str] = RAY_OPTION,
    max_retries: int = MAX_RETRIES_OPTION,
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Record both players' keys, frames and RAM from the emulator, frame-exactly."""
    from wantofight.collect.run import CollectError, RunSettings, collect

    given = typed_options(ctx, RUN_OPTIONS)
    try:
        settings = RunSettings(
            game=game, state=state, policy=policy, p2_policy=p2_policy, episodes=episodes,
            max_frames=max_frames, fps=fps, seed=seed, deterministic=deterministic,
        )
        cluster = ray_cluster(ctx, ray, workers, max_retries)
        results = collect(settings, out, workers=workers, resume=resume, given=given, progress=progress, warn=warn,
                          cluster=cluster)
    except (CollectError, ClusterError) as err:
        fail(str(err))
    except KeyboardInterrupt:
        stopped(f"finished episodes are kept in {out / 'episodes'}; add --resume to complete the run")
    frames = sum(r.frames for r in results)
    wrote((out / "episodes").resolve(), f"{len(results)} episode(s), {frames:,} frames")


RUN_OPTIONS = ("game", "state", "policy", "p2_policy", "max_frames", "fps", "seed", "episodes", "deterministic")


def replay_command(
    episode_dir: Path = typer.Argument(..., help="An episode folder: OUT/episodes/<id>."),
    verify: bool = typer.Option(True, help="Compare every replayed row with the recording."),
) -> None:
    """Re-run an episode's input log from its savestate and check every frame, key and RAM row."""
    from wantofight.collect.game_registry import GameError
    from wantofight.collect.replay import ReplayError, verify_episode

    if not verify:
        fail("only --verify is supported: replay checks a recording against the emulator")
    try:
        report = verify_episode(episode_dir)
    except (ReplayError, GameError) as err:
        fail(str(err))
    if not report.ok:
        fail(f"{episode_dir}: mismatch at {report.mismatch}")
    console.print(f"[green]ok[/]: {report.rows} rows of {episode_dir} replay identically (keys, RAM, frames)")


def games_command(
    all_players: bool = typer.Option(False, "--all", help="Also list imported one-player games."),
) -> None:
    """List the built-in game and the imported stable-retro games with a two-player integration."""
    from rich.table import Table

    from wantofight.collect.game_registry import builtin_games, imported_games

    table = Table("game", "platform", "players", "source", "default state")
    for spec in builtin_games().values():
        table.add_row(spec.name, spec.platform, str(spec.players), "built-in", spec.default_state)
    for spec in imported_games(include_one_player=all_players):
        table.add_row(spec.name, spec.platform, str(spec.players), "imported", spec.default_state)
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("collect")(collect_command)
    app.command("replay")(replay_command)
    app.command("games")(games_command)
