"""A collection run: K worker processes (one emulator each) record episodes into `OUT/episodes/`.

The run's settings live in `OUT/run.json`; `--resume` reads them back and records the episodes
still missing. Episode i always gets the seed derived from (run seed, i), so a resumed run ends up
with the same episodes as an uninterrupted one.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import queue
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from wantofight import __version__
from wantofight.collect import episode_files as files
from wantofight.collect.game_registry import GameError, GameSpec, resolve_game
from wantofight.collect.policies import PlayerContext, PolicyError, identical_episodes_note, make_policy
from wantofight.collect.recorder import RECORD_FPS, EpisodeJob, EpisodeResult, RecordConfig
from wantofight.interrupts import workers_ignore_ctrl_c
from wantofight.progress import Progress

RUN_FILE = "run.json"


class CollectError(RuntimeError):
    """A collection run that cannot start or continue; the message says why and what to do."""


@dataclass(frozen=True)
class RunSettings:
    """Everything that defines a run's episodes (stored in run.json)."""

    game: str = "duel"
    state: str | None = None
    policy: str = "scripted"
    p2_policy: str | None = None
    episodes: int = 2
    max_frames: int = 9000
    fps: int = 30
    seed: int = 0
    deterministic: bool = False

    def __post_init__(self) -> None:
        if self.fps not in RECORD_FPS:
            raise CollectError(f"--fps {self.fps} is not supported; valid: {', '.join(map(str, RECORD_FPS))}")
        if self.episodes < 1:
            raise CollectError(f"--episodes must be at least 1, got {self.episodes}")
        if self.max_frames < 1:
            raise CollectError(f"--max-frames must be at least 1, got {self.max_frames}")

    @property
    def policies(self) -> tuple[str, str]:
        return self.policy, self.p2_policy or self.policy


def episode_seed(run_seed: int, index: int) -> int:
    return int(np.random.SeedSequence([run_seed, index]).generate_state(1)[0])


def episode_id(index: int) -> str:
    return f"ep{index:06d}"


def validate(settings: RunSettings, warn=None) -> tuple[GameSpec, RecordConfig]:
    """Check game, state and policies before anything is written; `warn` hears (one line) when the
    run's episodes cannot differ."""
    try:
        game = resolve_game(settings.game)
        state = game.resolve_state(settings.state)
    except GameError as err:
        raise CollectError(str(err)) from None
    trial = []
    for player, spec in enumerate(settings.policies):
        try:
            # A trial reset checks the policy against the game (key file, RAM names it reads).
            policy = make_policy(spec)
            policy.reset(PlayerContext(player=player, game=game, seed=0, episode_seed=0,
                                       deterministic=settings.deterministic))
            trial.append(policy)
        except (PolicyError, ValueError) as err:
            raise CollectError(str(err)) from None
    note = identical_episodes_note(trial[:game.players], settings.episodes)
    if note is not None and warn is not None:
        warn(note)
    config = RecordConfig(
        game=game.name, state=state, policies=settings.policies, fps=settings.fps, max_frames=settings.max_frames,
        deterministic=settings.deterministic,
    )
    return game, config


def prepare_out(out: Path, settings: RunSettings, resume: bool, given: set[str]) -> RunSettings:
    """Create or reopen the run folder; returns the settings to record with."""
    run_file = out / RUN_FILE
    if run_file.exists():
        if not resume:
            raise CollectError(f"{out} already holds a run; add --resume to top it up, or pick another --out")
        stored = RunSettings(**json.loads(run_file.read_text())["settings"])
        for name in given - {"episodes"}:
            if getattr(stored, name) != getattr(settings, name):
                raise CollectError(
                    f"--resume: {name}={getattr(settings, name)!r} differs from the run's {getattr(stored, name)!r}"
                )
        settings = RunSettings(**{**asdict(stored), "episodes": settings.episodes})
    elif resume:
        raise CollectError(f"--resume: {out} holds no run to resume (no {RUN_FILE})")
    try:
        (out / "episodes").mkdir(parents=True, exist_ok=True)
        probe = out / f"{files.TMP_PREFIX}probe"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as err:
        raise CollectError(f"cannot write to --out {out}: {err.strerror}") from None
    files.remove_leftovers(out / "episodes")
    files.write_json(run_file, {"settings": asdict(settings), "tool_version": __version__})
    return settings


def pending_jobs(out: Path, settings: RunSettings) -> list[EpisodeJob]:
    done = {p.name for p in files.complete_episodes(out / "episodes")}
    return [
        EpisodeJob(episode_id(i), i, episode_seed(settings.seed, i))
        for i in range(settings.episodes)
        if episode_id(i) not in done
    ]


# -------------------------------------------------------------------------------------------------
# Worker processes


def worker_events(events, procs) -> Iterator[tuple[str, object]]:
    """(kind, payload) messages from worker processes until each has sent ("exit", …) or died."""
    alive = len(procs)
    while alive:
        try:
            kind, payload = events.get(timeout=0.5)
        except queue.Empty:
            if not any(p.is_alive() for p in procs):
                return
            continue
        if kind == "exit":
            alive -= 1
        else:
            yield kind, payload


def worker_main(game_name: str, config: RecordConfig, episodes_dir: str, jobs, events, stop) -> None:
    """One emulator: take jobs until the queue is empty or `stop` is set; report frames, episodes and errors."""
    from wantofight.collect.recorder import Recorder

    recorder = None
    try:
        recorder = Recorder(resolve_game(game_name), config)
        while not stop.is_set():
            try:
                job = jobs.get_nowait()
            except queue.Empty:
                break
            tmp = files.episode_tmp_dir(Path(episodes_dir), job.episode_id)
            tmp.mkdir()
            try:
                result = recorder.record(
                    job, tmp, on_frames=lambda n: events.put(("frames", n)), should_stop=stop.is_set
                )
            except KeyboardInterrupt:
                files.discard(tmp)
                break
            except BaseException:
                files.discard(tmp)
                raise
            files.publish(tmp, Path(episodes_dir) / job.episode_id)
            events.put(("episode", result))
    except OSError as err:
        events.put(("error", f"cannot write episodes to {episodes_dir}: {err.strerror or err} (finished episodes are kept)"))
    except Exception as err:  # reported to the parent, which prints one line and exits non-zero
        events.put(("error", f"{type(err).__name__}: {err}"))
    finally:
        if recorder is not None:
            recorder.close()
        events.put(("exit", os.getpid()))


def collect(settings: RunSettings, out: Path, workers: int = 1, resume: bool = False, given: set[str] = frozenset(),
            progress: bool = True, warn=None) -> list[EpisodeResult]:
    """Record a run; returns the episodes recorded by this call. Raises CollectError on bad input;
    `warn` hears one line when the run's episodes cannot differ (key files, idle)."""
    if workers < 1:
        raise CollectError(f"--workers must be at least 1, got {workers}")
    validate(settings)
    settings = prepare_out(out, settings, resume, given)
    game, config = validate(settings, warn)
    jobs_list = pending_jobs(out, settings)
    if not jobs_list:
        return []
    ctx = mp.get_context("spawn")
    jobs, events, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    for job in jobs_list:
        jobs.put(job)
    count = min(workers, len(jobs_list))
    procs = [
        ctx.Process(target=worker_main, args=(game.name, config, str(out / "episodes"), jobs, events, stop))
        for _ in range(count)
    ]
    with workers_ignore_ctrl_c():  # on Ctrl-C the parent sets `stop`: workers discard the unfinished episode
        for proc in procs:
            proc.start()
    results: list[EpisodeResult] = []
    errors: list[str] = []
    frame_count, started = 0, time.perf_counter()
    with Progress("collect", len(jobs_list), "episodes", "{frames:,} frames · {fps:,.0f} frames/s", enabled=progress,
                  frames=0, fps=0.0) as bar:
        try:
            for kind, payload in worker_events(events, procs):
                if kind == "frames":
                    frame_count += payload
                    bar.update(frames=frame_count, fps=frame_count / max(time.perf_counter() - started, 1e-9))
                elif kind == "episode":
                    results.append(payload)
                    bar.advance()
                elif kind == "error":
                    errors.append(payload)
                    stop.set()
        except KeyboardInterrupt:
            stop.set()
            for proc in procs:
                proc.join(timeout=30)
            raise
    for proc in procs:
        proc.join()
    if errors:
        raise CollectError(errors[0])
    return results
