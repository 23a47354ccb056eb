"""`wtf agents ...`: train and evaluate PPO fighters (the `[ppo]` extra)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from wantofight.cli_util import OVERWRITE_OPTION, console, fail, stopped, typed_options, wrote

app = typer.Typer(help="Train and evaluate learned (PPO) fighters.", no_args_is_help=True)


@app.command("train")
def train_command(
    ctx: typer.Context,
    out: Path = typer.Option(..., help="Run folder: OUT/checkpoints/step_XXXXXXX.zip, OUT/final.zip, OUT/log.jsonl."),
    game: str = typer.Option("duel", help="Game (needs the RAM names of docs/contracts.md: the built-in duel)."),
    player: int = typer.Option(1, help="The side the learner plays: 1 or 2."),
    opponent: str = typer.Option("scripted", help="scripted, random, self (frozen snapshots of itself) or any "
                                                  "policy spec such as ppo:PATH."),
    steps: int = typer.Option(1_000_000, help="Total environment steps (decisions, all envs together)."),
    envs: int = typer.Option(2, help="Environment subprocesses, one emulator each."),
    seed: int = typer.Option(0, help="Seed of the network and the environments."),
    checkpoint_every: int = typer.Option(50_000, help="Steps between checkpoints and self-play snapshot refreshes."),
    frame_skip: int = typer.Option(2, help="Emulator steps per decision: 2 for `wtf collect --fps 30`, 1 for --fps 60."),
    n_steps: int = typer.Option(1024, help="PPO rollout length per env between updates."),
    batch_size: int = typer.Option(256, help="PPO minibatch size."),
    resume: bool = typer.Option(False, help="Continue OUT from its newest save (checkpoint or final.zip) up to --steps."),
    minutes: float = typer.Option(0, help="Stop after this many minutes of training (0: no limit); final.zip is "
                                            "still written and --resume continues."),
    overwrite: bool = OVERWRITE_OPTION,
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Train a PPO fighter (stable-baselines3) against a policy or against itself."""
    from wantofight.collect.agents import AgentError, TrainConfig, train

    given = typed_options(ctx, TRAIN_OPTIONS)
    try:
        config = TrainConfig(game=game, player=player, opponent=opponent, steps=steps, envs=envs, seed=seed,
                             checkpoint_every=checkpoint_every, frame_skip=frame_skip, n_steps=n_steps,
                             batch_size=batch_size)
        result = train(config, out, resume=resume, given=given, progress=progress,
                       time_limit_s=minutes * 60 if minutes > 0 else None, overwrite=overwrite)
    except AgentError as err:
        fail(str(err))
    except KeyboardInterrupt:
        from wantofight.outputs import claim

        stopped(f"the newest save in {claim(out, overwrite, resume=True)} holds the training so far; add --resume "
                "to continue from it")
    win = "–" if result.win_rate is None else f"{result.win_rate:.0%}"
    wrote(result.final, f"trained to {result.steps:,} steps ({result.steps_per_second:,.0f} steps/s, "
                        f"{result.matches} matches, recent win rate {win})")


TRAIN_OPTIONS = ("game", "player", "opponent", "envs", "seed", "checkpoint_every", "frame_skip", "n_steps",
                 "batch_size", "steps")


@app.command("eval")
def eval_command(
    policy: str = typer.Option(..., help="The policy to score: ppo:PATH, or any collect policy (random, scripted…)."),
    opponent: str = typer.Option("scripted", help="Its opponent: any collect policy spec."),
    game: str = typer.Option("duel", help="Game (the built-in duel)."),
    matches: int = typer.Option(50, help="Matches to play."),
    player: int = typer.Option(1, help="The side --policy plays: 1 or 2."),
    seed: int = typer.Option(0, help="Match i gets a seed derived from (seed, i)."),
    deterministic: bool = typer.Option(False, help="Learned policies take their most likely action."),
    state: str = typer.Option("Start", help="Start savestate (default: a whole match from the round-1 intro)."),
    frame_skip: int = typer.Option(2, help="Emulator steps per decision (2 = the agents' and `--fps 30`'s default)."),
    max_frames: int = typer.Option(20_000, help="Emulator frames after which an unfinished match counts as a draw."),
    workers: int = typer.Option(1, help="Worker processes, one emulator each."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Play matches and print wins / losses / draws, mean damage dealt and taken, and move usage."""
    from wantofight.collect.agents import AgentError, EvalConfig, evaluate

    try:
        config = EvalConfig(game=game, policy=policy, opponent=opponent, matches=matches, player=player, seed=seed,
                            deterministic=deterministic, state=state, frame_skip=frame_skip, max_frames=max_frames,
                            workers=workers)
        report = evaluate(config, progress=progress)
    except AgentError as err:
        fail(str(err))
    except KeyboardInterrupt:
        stopped("nothing was kept: an evaluation reports once all its matches are played; run it again")
    summary = report.summary()
    if as_json:
        console.print_json(json.dumps(summary))
        return
    from rich.table import Table

    console.print(f"[bold]{policy}[/] (P{player}) vs [bold]{opponent}[/]: {summary['matches']} matches")
    console.print(f"wins {summary['wins']} / losses {summary['losses']} / draws {summary['draws']} "
                  f"(win rate {summary['win_rate']:.0%})")
    console.print(f"mean damage dealt {summary['mean_damage_dealt']:.1f}, taken {summary['mean_damage_taken']:.1f}")
    table = Table("move", "uses", "share")
    total = sum(summary["move_usage"].values()) or 1
    for name, uses in sorted(summary["move_usage"].items(), key=lambda kv: -kv[1]):
        table.add_row(name, str(uses), f"{uses / total:.0%}")
    console.print(table)
