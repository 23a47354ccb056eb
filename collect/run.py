"""A collection run: K workers (one emulator each) record episodes into `OUT/episodes/`.

The run's settings live in `OUT/run.json`; `--resume` reads them back and records the episodes
still missing. Episode i always gets the seed derived from (run seed, i), so a resumed run ends up
with the same episodes as an uninterrupted one. Workers are local processes, or with `--ray` the
actors of a Ray cluster writing to a shared folder; both record through `record_episode`, which
publishes an episode once however often it is attempted.
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
from wantofight.cluster import Cluster
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


def settings_for(out: Path, settings: RunSettings, resume: bool, given: set[str]) -> RunSettings:
    """The settings to record with: the given ones for a new run, the stored ones (and the given
    --episodes) for a resumed run. Reads only."""
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
    return settings


def open_out(out: Path, settings: RunSettings) -> None:
    """Create the run folder (or check a resumed one is writable), remove unfinished episodes, write run.json."""
    run_file = out / RUN_FILE
    try:
        (out / "episodes").mkdir(parents=True, exist_ok=True)
        probe = out / f"{files.TMP_PREFIX}probe"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as err:
        raise CollectError(f"cannot write to --out {out}: {err.strerror}") from None
    files.remove_leftovers(out / "episodes")
    files.write_json(run_file, {"settings": asdict(settings), "tool_version": __version__})


def pending_jobs(out: Path, settings: RunSettings) -> list[EpisodeJob]:
    done = {p.name for p in files.complete_episodes(out / "episodes")}
    return [
        EpisodeJob(episode_id(i), i, episode_seed(settings.seed, i))
        for i in range(settings.episodes)
        if episode_id(i) not in done
    ]


# -------------------------------------------------------------------------------------------------
# One episode: the unit of work of local workers and Ray actors alike


def record_episode(recorder, job: EpisodeJob, episodes_dir: Path, on_frames=None, should_stop=None) -> EpisodeResult:
    """Record `job` under a temporary name and publish it as `episodes_dir/<id>`. Idempotent: an
    episode already published (by an earlier attempt of a retried task) is left as it is and
    described from its meta.json, and a copy that loses the race to publish is discarded."""
    final = episodes_dir / job.episode_id
    if final.is_dir():
        return published_result(final)
    tmp = files.episode_tmp_dir(episodes_dir, job.episode_id)
    tmp.mkdir()
    try:
        result = recorder.record(job, tmp, on_frames=on_frames, should_stop=should_stop)
    except BaseException:
        files.discard(tmp)
        raise
    return result if files.publish(tmp, final) else published_result(final)


def published_result(episode: Path) -> EpisodeResult:
    meta = json.loads((episode / "meta.json").read_text())
    return EpisodeResult(episode.name, meta["frame_count"], 0.0, meta["ended_by"], {"already_published": True})


# -------------------------------------------------------------------------------------------------
# Local worker processes


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
            try:
                result = record_episode(recorder, job, Path(episodes_dir),
                                        on_frames=lambda n: events.put(("frames", n)), should_stop=stop.is_set)
            except KeyboardInterrupt:
                break
            events.put(("episode", result))
    except OSError as err:
        events.put(("error", unwritable(episodes_dir, err)))
    except Exception as err:  # reported to the parent, which prints one line and exits non-zero
        events.put(("error", f"{type(err).__name__}: {err}"))
    finally:
        if recorder is not None:
            recorder.close()
        events.put(("exit", os.getpid()))


def unwritable(episodes_dir, err: OSError) -> str:
    return f"cannot write episodes to {episodes_dir}: {err.strerror or err} (finished episodes are kept)"


def collect(settings: RunSettings, out: Path, workers: int = 1, resume: bool = False, given: set[str] = frozenset(),
            progress: bool = True, warn=None, cluster: Cluster | None = None) -> list[EpisodeResult]:
    """Record a run; returns the episodes recorded by this call. Raises CollectError on bad input;
    `warn` hears one line when the run's episodes cannot differ (key files, idle), and with a
    `cluster` each retry and the closing summary."""
    if workers < 1:
        raise CollectError(f"--workers must be at least 1, got {workers}")
    validate(settings)
    settings = settings_for(out, settings, resume, given)
    game, config = validate(settings, warn)
    if cluster is not None:
        return collect_on_ray(cluster, settings, game, config, out, progress, warn)
    open_out(out, settings)
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
    with progress_bar(len(jobs_list), progress) as bar:
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


def progress_bar(episodes: int, enabled: bool) -> Progress:
    return Progress("collect", episodes, "episodes", "{frames:,} frames · {fps:,.0f} frames/s", enabled=enabled,
                    frames=0, fps=0.0)


# -------------------------------------------------------------------------------------------------
# Ray actors


def open_recorder(game_name: str, config: RecordConfig, rom_sha1: str, integration: str):
    """A Ray actor's emulator, refused when the node's copy of the game differs from the driver's (the
    episodes would not be the ones the run's seed promises)."""
    from wantofight.collect.recorder import Recorder

    game = resolve_game(game_name)
    if (game.rom_sha1(), game.integration_version()) != (rom_sha1, integration):
        raise GameError(f"its {game_name} differs from this machine's (ROM sha1 {game.rom_sha1()[:12]}, integration "
                        f"{game.integration_version()}; here {rom_sha1[:12]}, {integration})")
    return Recorder(game, config)


def collect_on_ray(cluster: Cluster, settings: RunSettings, game: GameSpec, config: RecordConfig, out: Path,
                   progress: bool, warn) -> list[EpisodeResult]:
    """Record the missing episodes on a Ray cluster's actors, into `out` on a shared filesystem. Every
    actor is set up (its emulator opened) before anything is written."""
    from wantofight.cluster import ClusterError, RayPool, say

    warn = warn or say
    jobs = pending_jobs(out, settings)  # the same list open_out would leave: it only removes temporary folders
    identity = (game.rom_sha1(), game.integration_version())
    results: list[EpisodeResult] = []
    episodes_dir = out / "episodes"
    started_run = False
    try:
        with RayPool(cluster, setup=open_recorder, setup_args=(game.name, config, *identity), warn=warn) as pool:
            pool.start(len(jobs))
            open_out(out, settings)
            started_run = True
            frame_count, started = 0, time.perf_counter()
            with progress_bar(len(jobs), progress) as bar:
                units = [(job, episodes_dir) for job in jobs]
                for _, result in pool.imap(record_episode, units, [job.episode_id for job in jobs]):
                    results.append(result)
                    frame_count += result.frames
                    bar.advance(frames=frame_count, fps=frame_count / max(time.perf_counter() - started, 1e-9))
            say(pool.summary("collect", len(jobs), "episodes"))
    except ClusterError as err:
        raise CollectError(f"{err}{'; add --resume to record the rest' if started_run else ''}") from None
    except OSError as err:
        raise CollectError(unwritable(episodes_dir, err)) from None
    finally:  # the pool has ended its actors: what dead or interrupted ones left unfinished goes
        if started_run:
            files.remove_leftovers(episodes_dir)
    return results
