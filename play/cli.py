"""`wtf play`: the command-line face of `play/`: the emulator (play/session.py) or, with --checkpoint, a
model's streaming generation (play/model.py), in one window with the same keys."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from wantofight.cli_util import DEVICE_HELP, console, fail, stopped, typed_options

PLAYERS = "human (the keyboard: docs/play.md), or a `wtf collect --policy` player: idle, random, mash, scripted, " \
          "drill, keys:PATH, ppo:CHECKPOINT, ppo-ladder:DIR"
EMULATOR_ONLY = ("record", "seed", "max_frames", "deterministic")
MODEL_ONLY = ("first_frames", "refs", "side_by_side", "steps", "sampler", "device")


def play_command(
    ctx: typer.Context,
    game: str = typer.Option("duel", help="Game: the built-in `duel` or an imported stable-retro game "
                                          "(see `wtf games`)."),
    p1: str = typer.Option("human", help=f"Player 1: {PLAYERS}."),
    p2: str = typer.Option("scripted", help="Player 2: the same choices as --p1 (human: both on one keyboard)."),
    record: Optional[Path] = typer.Option(None, help="Write the session as a recording run, DIR/episodes/ep000000 "
                                                     "(DIR new or empty), as `wtf collect` does."),
    scale: int = typer.Option(3, help="Window pixels per game pixel (1-8)."),
    fps: Optional[int] = typer.Option(None, help="Rows per second: 60 reads input and shows every emulator frame, 30 "
                                                 "every 2nd (default 60; with --checkpoint 30, the rate of "
                                                 "`wtf collect`'s default data)."),
    state: Optional[str] = typer.Option(None, help="Start savestate of the integration (default: the game's start)."),
    seed: Optional[int] = typer.Option(None, help="Episode seed for the non-human players (default: a random one)."),
    max_frames: int = typer.Option(108_000, help="Rows at most (the match usually ends first)."),
    deterministic: bool = typer.Option(False, help="Learned (ppo) players take their most likely action."),
    checkpoint: Optional[str] = typer.Option(None, help="Play a model instead of the emulator: a trainer run or "
                                                        "checkpoint folder, or a shipped model's name (duel-tiny)."),
    first_frames: Optional[Path] = typer.Option(None, help="With --checkpoint: the prompt frame, an episode folder "
                                                           "(its row 0), an image or a video (default: the "
                                                           "emulator's row 0 from --state)."),
    refs: Optional[str] = typer.Option(None, help="With --checkpoint: reference images P1.png,P2.png, or built-in "
                                                  "ones by name: duel/kai,duel/gor (default: the game's own pair)."),
    side_by_side: bool = typer.Option(False, help="With --checkpoint: the emulator on the same keys beside it."),
    steps: int = typer.Option(4, help="With --checkpoint: denoising steps per chunk."),
    sampler: Optional[str] = typer.Option(None, help="With --checkpoint: euler or x0_renoise (default: the "
                                                     "checkpoint stage's)."),
    device: str = typer.Option("auto", help=f"With --checkpoint: {DEVICE_HELP}"),
) -> None:
    """Play the game in a window: keys or controllers for people, the collector's policies for the rest; with
    --checkpoint, the same keys drive a model's generation."""
    typed = typed_options(ctx, EMULATOR_ONLY + MODEL_ONLY + ("p1", "p2"))
    if checkpoint is not None:
        _play_model(typed, checkpoint, game, state, p1, p2, first_frames, refs, side_by_side, steps, sampler, device,
                    fps or 30, scale)
        return
    stray = sorted(typed & set(MODEL_ONLY))
    if stray:
        fail(f"--{stray[0].replace('_', '-')} applies to --checkpoint sessions only")
    from wantofight.play.session import PlayError, PlaySettings, play
    from wantofight.play.window import DisplayError

    try:
        settings = PlaySettings(game=game, state=state, p1=p1, p2=p2, record=record, scale=scale, fps=fps or 60,
                                seed=seed, max_frames=max_frames, deterministic=deterministic)
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


def _play_model(typed, checkpoint, game, state, p1, p2, first_frames, refs, side_by_side, steps, sampler, device, fps,
                scale) -> None:
    stray = sorted(typed & set(EMULATOR_ONLY))
    if stray:
        fail(f"--{stray[0].replace('_', '-')} applies to emulator sessions only (without --checkpoint)")
    for option, spec in (("p1", p1), ("p2", p2)):
        if option in typed and spec != "human":
            fail(f"--{option} {spec}: a --checkpoint session has two human players (the model has no RAM for a policy "
                 "to read)")
    from wantofight.collect.game_registry import resolve_refs
    from wantofight.devices import resolve_device
    from wantofight.play.model import ModelPlayError, ModelPlaySettings, play_model
    from wantofight.play.window import DisplayError
    from wantofight.inference.generation import GenerationError

    try:
        settings = ModelPlaySettings(
            checkpoint=checkpoint, first_frames=first_frames, refs=tuple(map(str, resolve_refs(refs))) if refs else None,
            game=game, state=state, side_by_side=side_by_side, steps=steps, sampler=sampler, device=resolve_device(device), fps=fps,
            scale=scale)
        result = play_model(settings)
    except (ModelPlayError, DisplayError, GenerationError, FileNotFoundError, ValueError) as err:
        fail(str(err))
    except KeyboardInterrupt:
        stopped("interrupted (a --checkpoint session records nothing)")
    ms = 1000 * sum(result.chunk_seconds) / max(len(result.chunk_seconds), 1)
    rate = result.rows / result.seconds if result.seconds > 0 else 0.0
    line = (f"played {result.rows:,} generated rows ({len(result.chunk_seconds)} chunks, {ms:.0f} ms per chunk on "
            f"{device}) at {rate:.1f} rows/s")
    if result.interrupted:
        stopped(line)
    console.print(line, soft_wrap=True, highlight=False)


def register(app: typer.Typer) -> None:
    app.command("play")(play_command)
