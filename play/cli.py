"""`wtf play`: the command-line face of `play/`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from wantofight.cli_util import console, fail, stopped

PLAYERS = "human (the keyboard: docs/play.md), or a `wtf collect --policy` player: idle, random, mash, scripted, " \
          "drill, keys:PATH, ppo:CHECKPOINT, ppo-ladder:DIR"


def play_command(
    game: str = typer.Option("duel", help="Game: the built-in `duel` or an imported stable-retro game "
                                          "(see `wtf games`)."),
    p1: str = typer.Option("human", help=f"Player 1: {PLAYERS}."),
    p2: str = typer.Option("scripted", help="Player 2: the same choices as --p1 (human: both on one keyboard)."),
    record: Optional[Path] = typer.Option(None, help="Write the session as a recording run, DIR/episodes/ep000000 "
                                                     "(DIR new or empty), as `wtf collect` does."),
    scale: int = typer.Option(3, help="Window pixels per game pixel (1-8)."),
    fps: int = typer.Option(60, help="Rows per second: 60 reads input and shows every emulator frame, 30 every 2nd."),
    state: Optional[str] = typer.Option(None, help="Start savestate of the integration (default: the game's start)."),
    seed: Optional[int] = typer.Option(None, help="Episode seed for the non-human players (default: a random one)."),
    max_frames: int = typer.Option(108_000, help="Rows at most (the match usually ends first)."),
    deterministic: bool = typer.Option(False, help="Learned (ppo) players take their most likely action."),
) -> None:
    """Play the game in a window: keys or controllers for people, the collector's policies for the rest."""
    from wantofight.play.session import PlayError, PlaySettings, play
    from wantofight.play.window import DisplayError

    try:
        settings = PlaySettings(game=game, state=state, p1=p1, p2=p2, record=record, scale=scale, fps=fps, seed=seed,
                                max_frames=max_frames, deterministic=deterministic)
        result = play(settings)
    except (PlayError, DisplayError) as err:
        fail(str(err))
    except KeyboardInterrupt:
        stopped("nothing was recorded")
    where = f" → {result.episode.resolve()}" if result.episode is not None else ""
    if result.interrupted:
        stopped(f"the session's {result.frames:,} rows are kept{where}")
    console.print(f"played {result.frames:,} rows ({result.ended_by}) at {result.timing.rate():.1f} rows/s{where}",
                  soft_wrap=True, highlight=False)


def register(app: typer.Typer) -> None:
    app.command("play")(play_command)
