"""Train PPO fighters (stable-baselines3) and evaluate any policy against another.

`train()` runs K `FightEnv`s in spawned subprocesses (stable-retro allows one emulator per process),
writes `OUT/checkpoints/step_XXXXXXX.zip` every `checkpoint_every` steps and `OUT/final.zip`, and
continues from the newest of them with `resume=True`. `evaluate()` plays matches between two
`wtf collect` policies on the same emulator path the recorder uses and scores them from RAM.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import time
import zipfile
from collections import Counter, deque
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from wantofight.collect.fight_env import OBS_VERSION, EnvConfig, FightEnv, Match, Tally
from wantofight.collect.game_registry import GameError, resolve_game
from wantofight.collect.policies import PlayerContext, PolicyError, make_policy
from wantofight.interrupts import SafeStop, workers_ignore_ctrl_c
from wantofight.outputs import write_atomic, written
from wantofight.progress import Progress

TRAIN_FILE = "train.json"
LOG_FILE = "log.jsonl"


class AgentError(RuntimeError):
    """Bad training or evaluation input; the message says what is wrong and what is valid."""


# ---------------------------------------------------------------------------------------------
# Training


@dataclass(frozen=True)
class TrainConfig:
    """What defines a training run (stored in OUT/train.json; `--resume` reads it back)."""

    game: str = "duel"
    player: int = 1
    """The side the learner plays: 1 or 2 (the observation is side-invariant either way)."""
    opponent: str = "scripted"
    """`scripted`, `random`, `self` (frozen snapshots of the learner) or any policy spec (`ppo:PATH`)."""
    steps: int = 1_000_000
    """Total environment steps (decisions, summed over envs)."""
    envs: int = 2
    """Environment subprocesses, one emulator each."""
    seed: int = 0
    checkpoint_every: int = 50_000
    """Steps between checkpoints (and self-play snapshot refreshes)."""
    frame_skip: int = 2
    """Emulator steps per decision: 2 matches `wtf collect --fps 30`, 1 matches `--fps 60`."""
    states: tuple[str, ...] = ("Fight", "Swapped")
    """Start savestates, one drawn per episode."""
    n_steps: int = 1024
    """PPO rollout length per env between updates."""
    batch_size: int = 256
    n_epochs: int = 4
    learning_rate: float = 3e-4
    gamma: float = 0.99
    ent_coef: float = 0.01
    net: tuple[int, ...] = (128, 128)
    """Hidden layer widths of the policy and value MLPs."""

    def __post_init__(self) -> None:
        if self.player not in (1, 2):
            raise AgentError(f"--player must be 1 or 2, got {self.player}")
        for name in ("steps", "envs", "checkpoint_every", "n_steps", "batch_size", "n_epochs"):
            if getattr(self, name) < 1:
                raise AgentError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.frame_skip not in (1, 2):
            raise AgentError(f"--frame-skip must be 1 or 2 (wtf collect --fps 60 or 30), got {self.frame_skip}")

    def env_config(self, opponent: str | None = None) -> EnvConfig:
        return EnvConfig(game=self.game, player=self.player - 1, opponent=opponent or self.opponent,
                         states=tuple(self.states), frame_skip=self.frame_skip)

    @classmethod
    def from_json(cls, data: dict) -> "TrainConfig":
        known = {f.name for f in fields(cls)}
        data = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in known}
        return cls(**data)


@dataclass
class TrainResult:
    final: Path
    steps: int
    seconds: float
    steps_per_second: float
    """Environment steps per second of this call (rollouts and updates together)."""
    matches: int
    win_rate: float | None
    """Over the last 100 finished training matches."""


def validate_train(config: TrainConfig) -> None:
    """Check game, states and opponent before anything is written."""
    try:
        game = resolve_game(config.game)
        if not game.builtin:
            raise AgentError(f"agents train needs the RAM names of docs/contracts.md; {game.name} does not map them (use duel)")
        for state in config.states:
            game.resolve_state(state)
    except GameError as err:
        raise AgentError(str(err)) from None
    if config.opponent != "self":
        try:
            make_policy(config.opponent).reset(
                PlayerContext(player=2 - config.player, game=game, seed=0, episode_seed=0)
            )
        except (PolicyError, ValueError) as err:
            raise AgentError(f"--opponent: {err}") from None


def prepare_run(out: Path, config: TrainConfig, resume: bool, given: set[str]) -> TrainConfig:
    """Create or reopen the run folder; returns the config to train with."""
    run_file = out / TRAIN_FILE
    if run_file.exists():
        if not resume:
            raise AgentError(f"{out} already holds a training run; add --resume to continue it, or pick another --out")
        stored = TrainConfig.from_json(json.loads(run_file.read_text())["config"])
        for name in given - {"steps"}:
            if getattr(stored, name) != getattr(config, name):
                raise AgentError(f"--resume: {name}={getattr(config, name)!r} differs from the run's {getattr(stored, name)!r}")
        config = TrainConfig(**{**asdict(stored), "steps": config.steps})
    elif resume:
        raise AgentError(f"--resume: {out} holds no training run (no {TRAIN_FILE})")
    try:
        (out / "checkpoints").mkdir(parents=True, exist_ok=True)
        _write_json(run_file, {"config": asdict(config)})
    except OSError as err:
        raise AgentError(f"cannot write to --out {out}: {err.strerror}") from None
    return config


def saved_steps(path: Path) -> int:
    """The step count stored in a stable-baselines3 .zip (its `data` JSON; no torch needed)."""
    with zipfile.ZipFile(path) as archive:
        return int(json.loads(archive.read("data"))["num_timesteps"])


def newest_save(out: Path) -> Path | None:
    """The save `--resume` continues from: the one with the most steps among the checkpoints and
    final.zip (a `--minutes` limit or Ctrl-C stops between checkpoints)."""
    found = sorted((out / "checkpoints").glob("step_*.zip"))
    if (out / "final.zip").is_file():
        found.append(out / "final.zip")
    return max(found, key=saved_steps, default=None)


def checkpoint_path(out: Path, step: int) -> Path:
    return out / "checkpoints" / f"step_{step:07d}.zip"


def _build_env(env_config: EnvConfig, seed: int):
    """Runs in each spawned subprocess: its own emulator, torch on one thread."""
    import torch
    from stable_baselines3.common.monitor import Monitor

    torch.set_num_threads(1)
    env = FightEnv(env_config, seed=seed)
    return Monitor(env)


def make_vec_env(config: TrainConfig, opponent: str):
    from functools import partial

    from stable_baselines3.common.vec_env import SubprocVecEnv

    seeds = np.random.SeedSequence(config.seed).generate_state(config.envs)
    builders = [partial(_build_env, config.env_config(opponent), int(s)) for s in seeds]
    with workers_ignore_ctrl_c():  # on Ctrl-C `train` saves, then closes the envs itself
        return SubprocVecEnv(builders, start_method="spawn")


def save_model(model, path: Path, config: TrainConfig) -> Path:
    """Write a checkpoint atomically, with what `ppo:` needs to play it the way it learned."""
    model.wantofight = {
        "obs_version": OBS_VERSION, "game": config.game, "player": config.player,
        "opponent": config.opponent, "frame_skip": config.frame_skip,
    }
    with written(path) as tmp:
        model.save(str(tmp))
    return path


def train(config: TrainConfig, out: Path, resume: bool = False, given: set[str] = frozenset(),
          progress: bool = True, time_limit_s: float | None = None, overwrite: bool = False) -> TrainResult:
    """Train (or continue) a PPO fighter into `out`; raises AgentError on bad input.

    `time_limit_s` stops early (after the current step) and still writes `final.zip`; the run can be
    continued with `resume=True`. Ctrl-C stops after the current step too, writes
    `checkpoints/step_N.zip` and raises KeyboardInterrupt; a second Ctrl-C stops at once. With
    `overwrite` an existing `out` is replaced once the new run has written final.zip (until then the
    run lives in `.OUT.partial`, which `resume=True, overwrite=True` continues).
    """
    require_sb3()
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger

    from wantofight import outputs

    validate_train(config)
    final_out = Path(out)
    out = outputs.claim(final_out, overwrite, resume=resume, resumable=(final_out / TRAIN_FILE).exists())
    config = prepare_run(out, config, resume, given)
    torch.set_num_threads(1)  # the envs own the other cores; a small MLP gains nothing from threads
    start = newest_save(out) if resume else None
    # Self-play starts the envs on `random`; the first frozen snapshot replaces it before any episode.
    venv = make_vec_env(config, "random" if config.opponent == "self" else config.opponent)
    stop = SafeStop()  # Ctrl-C ends the rollout after the current env step, never mid-message to an env
    try:
        if start is not None:
            model = PPO.load(str(start), env=venv, device="cpu")
        else:
            model = PPO(
                "MlpPolicy", venv, n_steps=config.n_steps, batch_size=config.batch_size, n_epochs=config.n_epochs,
                learning_rate=config.learning_rate, gamma=config.gamma, ent_coef=config.ent_coef, seed=config.seed,
                policy_kwargs={"net_arch": list(config.net)}, device="cpu", verbose=0,
            )
        # without a logger of its own, every learn() makes an empty /tmp/SB3-<date> folder and never removes it
        model.set_logger(Logger(folder=None, output_formats=[]))
        done_steps = model.num_timesteps
        if start is None:
            save_model(model, checkpoint_path(out, 0), config)  # the untrained end of the ladder
        callback = make_callback(config, out, progress, time_limit_s, stop)
        if config.opponent == "self":
            callback.refresh_self_play(model)
        started = time.perf_counter()
        if done_steps < config.steps:
            with stop:
                try:
                    model.learn(total_timesteps=config.steps - done_steps, reset_num_timesteps=False,
                                callback=callback, progress_bar=False)
                finally:
                    callback.close_bar(stopped=stop.requested)
        seconds = time.perf_counter() - started
        if stop.requested:
            save_model(model, checkpoint_path(out, model.num_timesteps), config)
        else:
            final = save_model(model, out / "final.zip", config)
    except BaseException:
        for proc in venv.processes:  # an env may be mid-message, where close() would wait for ever
            proc.terminate()
        raise
    venv.close()
    if stop.requested:
        raise KeyboardInterrupt
    outputs.swap_in(out, final_out)
    final = final_out / final.name
    steps = model.num_timesteps - done_steps
    return TrainResult(final, model.num_timesteps, seconds, steps / max(seconds, 1e-9), callback.matches,
                       callback.win_rate())


def _write_json(path: Path, data: dict) -> None:
    write_atomic(path, json.dumps(data, indent=2) + "\n")


def require_sb3() -> None:
    try:
        import stable_baselines3  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        raise AgentError("wtf agents train needs stable-baselines3; install the [ppo] extra: pip install -e '.[ppo]'") from None


def make_callback(config: TrainConfig, out: Path, progress: bool, time_limit_s: float | None = None,
                  stop: SafeStop | None = None):
    """Checkpoints, self-play refreshes, the log, the progress bar and the stops, as an SB3 callback."""
    from stable_baselines3.common.callbacks import BaseCallback

    class TrainCallback(_TrainCallbackMixin, BaseCallback):
        pass

    return TrainCallback(config, out, progress, time_limit_s, stop or SafeStop())


class _TrainCallbackMixin:
    """The body of the training callback (mixed into SB3's BaseCallback by `make_callback`)."""

    def __init__(self, config: TrainConfig, out: Path, progress: bool, time_limit_s: float | None, stop: SafeStop):
        super().__init__(verbose=0)
        self.config, self.out, self.show, self.time_limit_s, self.stop = config, out, progress, time_limit_s, stop
        self.results: deque[str] = deque(maxlen=100)
        self.matches = 0
        self.bar = None

    def win_rate(self) -> float | None:
        return sum(r == "win" for r in self.results) / len(self.results) if self.results else None

    def refresh_self_play(self, model) -> None:
        """Freeze the learner as the opponent of the next episodes in every env."""
        snapshot = self.out / "selfplay" / f"opponent_{model.num_timesteps:07d}.zip"
        snapshot.parent.mkdir(exist_ok=True)
        save_model(model, snapshot, self.config)
        model.get_env().env_method("set_opponent", f"ppo:{snapshot}")

    def _on_training_start(self) -> None:
        self.started, self.start_steps = time.perf_counter(), self.num_timesteps
        self.last_mark = self.num_timesteps // self.config.checkpoint_every
        self.bar = Progress("train", self.config.steps, "steps",
                            "{rate:,.0f} steps/s · {matches} matches · win rate {win}", enabled=self.show,
                            completed=self.num_timesteps, rate=0.0, matches=0, win="–").__enter__()

    def close_bar(self, stopped: bool = False) -> None:
        if self.bar is not None:
            self.bar.__exit__(KeyboardInterrupt if stopped else None, None, None)
            self.bar = None

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", []):
            if "match" in info:
                self.results.append(info["match"])
                self.matches += 1
        mark = self.num_timesteps // self.config.checkpoint_every
        if mark > self.last_mark:
            self.last_mark = mark
            save_model(self.model, checkpoint_path(self.out, self.num_timesteps), self.config)
            self.log()
            if self.config.opponent == "self":
                self.refresh_self_play(self.model)
        if self.bar is not None and self.n_calls % 16 == 0:
            win = self.win_rate()
            self.bar.update(completed=self.num_timesteps, rate=self.rate(), matches=self.matches,
                            win="–" if win is None else f"{win:.0%}")
        if self.stop.requested:
            return False
        return self.time_limit_s is None or time.perf_counter() - self.started < self.time_limit_s

    def rate(self) -> float:
        return (self.num_timesteps - self.start_steps) / max(time.perf_counter() - self.started, 1e-9)

    def log(self) -> None:
        line = {"step": self.num_timesteps, "elapsed_s": round(time.perf_counter() - self.started, 1),
                "steps_per_s": round(self.rate(), 1), "matches": self.matches, "win_rate_last_100": self.win_rate()}
        with open(self.out / LOG_FILE, "a") as f:
            f.write(json.dumps(line) + "\n")

    def _on_training_end(self) -> None:
        self.log()
        if self.bar is not None:
            self.bar.update(completed=self.num_timesteps)


# ---------------------------------------------------------------------------------------------
# Evaluation


@dataclass(frozen=True)
class EvalConfig:
    """Matches between `policy` (scored) and `opponent`."""

    game: str = "duel"
    policy: str = "ppo:final.zip"
    opponent: str = "scripted"
    matches: int = 50
    player: int = 1
    """The side `policy` plays: 1 or 2."""
    seed: int = 0
    deterministic: bool = False
    """Learned policies take their most likely action."""
    state: str = "Start"
    """Start savestate: a whole match from power-on by default."""
    frame_skip: int = 2
    """Emulator steps per decision (2 = `wtf collect --fps 30`)."""
    max_frames: int = 20_000
    """Emulator frames after which an unfinished match counts as a draw."""
    workers: int = 1

    def __post_init__(self) -> None:
        if self.player not in (1, 2):
            raise AgentError(f"--player must be 1 or 2, got {self.player}")
        if self.matches < 1:
            raise AgentError(f"--matches must be at least 1, got {self.matches}")
        if self.workers < 1:
            raise AgentError(f"--workers must be at least 1, got {self.workers}")
        if self.frame_skip not in (1, 2):
            raise AgentError(f"--frame-skip must be 1 or 2, got {self.frame_skip}")


@dataclass
class MatchResult:
    index: int
    result: str
    """`win`, `loss` or `draw` for the evaluated policy."""
    dealt: int
    taken: int
    frames: int
    moves: dict[int, int] = field(default_factory=dict)


@dataclass
class EvalReport:
    config: EvalConfig
    matches: list[MatchResult]
    move_names: dict[int, str]
    seconds: float

    def count(self, result: str) -> int:
        return sum(m.result == result for m in self.matches)

    @property
    def win_rate(self) -> float:
        return self.count("win") / len(self.matches)

    @property
    def mean_dealt(self) -> float:
        return float(np.mean([m.dealt for m in self.matches]))

    @property
    def mean_taken(self) -> float:
        return float(np.mean([m.taken for m in self.matches]))

    def move_usage(self) -> dict[str, int]:
        """Move name → times the evaluated player started it, over all matches."""
        total: Counter = Counter()
        for m in self.matches:
            total.update(m.moves)
        return {self.move_names.get(i, f"move_{i}"): total[i] for i in sorted(self.move_names) if total[i]} | {
            f"move_{i}": n for i, n in total.items() if i not in self.move_names
        }

    def summary(self) -> dict:
        return {
            "policy": self.config.policy, "opponent": self.config.opponent, "matches": len(self.matches),
            "wins": self.count("win"), "losses": self.count("loss"), "draws": self.count("draw"),
            "win_rate": self.win_rate, "mean_damage_dealt": self.mean_dealt, "mean_damage_taken": self.mean_taken,
            "move_usage": self.move_usage(), "seconds": round(self.seconds, 1),
        }


def match_seed(seed: int, index: int) -> int:
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


def play_match(match: Match, config: EvalConfig, index: int) -> MatchResult:
    """One match, both policies deciding on the last row's RAM, like the recorder drives them."""
    from wantofight.collect.recorder import player_seeds

    me = config.player - 1
    specs = (config.policy, config.opponent) if me == 0 else (config.opponent, config.policy)
    policies = [make_policy(spec) for spec in specs]
    seed = match_seed(config.seed, index)
    seeds = player_seeds(seed)
    for p, policy in enumerate(policies):
        policy.reset(PlayerContext(player=p, game=match.game, seed=seeds[p], episode_seed=seed,
                                   deterministic=config.deterministic))
    tally = Tally(me)
    ram, t, frames = match.start(config.state), 0, config.frame_skip
    while not match.done() and frames < config.max_frames:
        t += 1
        masks = tuple(int(policy.act(ram, t)) for policy in policies)
        prev, ram = ram, match.advance(masks)
        frames += config.frame_skip
        tally.update(prev, ram)
    return MatchResult(index, tally.result(ram) if match.done() else "draw", tally.dealt, tally.taken, frames,
                       dict(tally.moves))


def _eval_worker(config: EvalConfig, indices: list[int], results) -> None:
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    match = Match(resolve_game(config.game), config.frame_skip, (config.state,))
    try:
        for index in indices:
            results.put(("match", play_match(match, config, index)))
    except Exception as err:
        results.put(("error", f"{type(err).__name__}: {err}"))
    finally:
        match.close()
        results.put(("exit", None))


def validate_eval(config: EvalConfig):
    try:
        game = resolve_game(config.game)
        game.resolve_state(config.state)
    except GameError as err:
        raise AgentError(str(err)) from None
    for flag, spec, player in (("--policy", config.policy, config.player - 1), ("--opponent", config.opponent, 2 - config.player)):
        try:
            make_policy(spec).reset(PlayerContext(player=player, game=game, seed=0, episode_seed=0))
        except (PolicyError, ValueError) as err:
            raise AgentError(f"{flag}: {err}") from None
    return game


def evaluate(config: EvalConfig, progress: bool = True) -> EvalReport:
    """Play `config.matches` matches in `workers` processes (one emulator each) and score them."""
    from wantofight.collect.run import worker_events

    game = validate_eval(config)
    started = time.perf_counter()
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    workers = min(config.workers, config.matches)
    chunks = [list(range(config.matches))[w::workers] for w in range(workers)]
    procs = [ctx.Process(target=_eval_worker, args=(config, chunk, results)) for chunk in chunks]
    with workers_ignore_ctrl_c():  # on Ctrl-C the matches in play are abandoned: the workers are ended here
        for proc in procs:
            proc.start()
    matches: list[MatchResult] = []
    errors: list[str] = []
    with Progress("eval", config.matches, "matches", "win rate {win}", enabled=progress, win="–") as bar:
        try:
            for kind, payload in worker_events(results, procs):
                if kind == "match":
                    matches.append(payload)
                    bar.advance(win=f"{sum(m.result == 'win' for m in matches) / len(matches):.0%}")
                elif kind == "error":
                    errors.append(payload)
        except BaseException:
            for proc in procs:
                proc.terminate()
            raise
        finally:
            for proc in procs:
                proc.join(timeout=5)
                if proc.is_alive():
                    proc.terminate()
    if errors:
        raise AgentError(errors[0])
    matches.sort(key=lambda m: m.index)
    names = {m["id"]: m["name"] for m in game.info["moves"]}
    return EvalReport(config, matches, names, time.perf_counter() - started)
