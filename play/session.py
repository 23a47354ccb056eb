"""`wtf play` on the emulator: people at the keyboard, and the collector's policies, in one window.

A session is one `wtf collect` episode played live: the collector's own `Recorder` steps the
emulator and writes the five episode files, with the window as its row hook (show, pace, read the
input) and `human` added to its players. So a session recorded with `--record DIR` keeps the
recording format and alignment of docs/recording-format.md and replays, annotates and cuts like any
episode; without `--record` it is written to a temporary folder and thrown away (the same loop, so
the same timing). The session ends when the match does, when a player quits (Esc, the window's
close button, Ctrl-C: `ended_by` "quit"), or after `max_frames` rows.
"""

from __future__ import annotations

import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from wantofight.collect import episode_files as files
from wantofight.collect.game_registry import GameError, GameSpec, resolve_game
from wantofight.collect.policies import PREFIXED, SIMPLE, PlayerContext, PolicyError, make_policy, valid_specs
from wantofight.collect.recorder import RECORD_FPS, EpisodeJob, RecordConfig
from wantofight.interrupts import SafeStop
from wantofight.play.window import Timing, Window, import_pygame

HUMAN = "human"
EPISODE_ID = "ep000000"


class PlayError(RuntimeError):
    """A session that cannot start; the message names the bad input and what is valid."""


@dataclass(frozen=True)
class PlaySettings:
    """One `wtf play` session on the emulator."""

    game: str = "duel"
    state: str | None = None
    """Start savestate (default: the game's start)."""
    p1: str = HUMAN
    """P1's player: `human` or a `wtf collect --policy` spec."""
    p2: str = "scripted"
    record: Path | None = None
    """Folder to write the session to as a recording run (DIR/episodes/ep000000); new or empty."""
    scale: int = 3
    """Window pixels per game pixel."""
    fps: int = 60
    """Rows per second: 60 reads input and shows every emulator frame, 30 every second one."""
    seed: int | None = None
    """Episode seed (the non-human players' choices); None draws one (meta.json keeps it)."""
    max_frames: int = 108_000
    """Rows at most (30 minutes at 60 fps); a duel match ends long before."""
    deterministic: bool = False
    """Learned (ppo) players take their most likely action."""

    def __post_init__(self) -> None:
        if self.fps not in RECORD_FPS:
            raise PlayError(f"--fps {self.fps} is not supported; valid: {', '.join(map(str, RECORD_FPS))}")
        if not 1 <= self.scale <= 8:
            raise PlayError(f"--scale must be 1 to 8, got {self.scale}")
        if self.max_frames < 1:
            raise PlayError(f"--max-frames must be at least 1, got {self.max_frames}")

    @property
    def players(self) -> tuple[str, str]:
        return self.p1, self.p2


@dataclass
class PlayResult:
    frames: int
    ended_by: str
    seconds: float
    episode: Path | None
    """The published episode folder, or None without --record."""
    timing: Timing = field(repr=False)
    interrupted: bool = False
    """Ctrl-C ended the session (the recording is kept all the same)."""


class Human:
    """A person at the keyboard or a controller: holds for row t what the window read before it."""

    spec = HUMAN
    variation = "seed"  # varies by itself: a deterministic agent facing a person needs no start delay

    def __init__(self, window: Window):
        self.window = window

    def reset(self, ctx: PlayerContext) -> None:
        self.player = ctx.player

    def act(self, ram: dict[str, int], t: int) -> int:
        return self.window.masks[self.player]

    def finished(self, t: int) -> bool:
        return False

    def describe(self) -> dict:
        return {"input": "keyboard and controllers (wtf play)"}


def validate(settings: PlaySettings) -> tuple[GameSpec, RecordConfig]:
    """Check the game, state and players before a window opens or a file is written."""
    try:
        game = resolve_game(settings.game)
        state = game.resolve_state(settings.state)
    except GameError as err:
        raise PlayError(str(err)) from None
    for player, spec in enumerate(settings.players[:game.players]):
        if spec == HUMAN:
            continue
        option = f"--p{player + 1}"
        name, sep, argument = spec.partition(":")
        if spec not in SIMPLE and not (sep and name in PREFIXED and argument):
            raise PlayError(f"{option}: unknown player {spec!r}; valid: {HUMAN}, {', '.join(valid_specs())}")
        try:  # a trial reset checks the policy against the game (key file, RAM names it reads)
            make_policy(spec).reset(PlayerContext(player=player, game=game, seed=0, episode_seed=0,
                                                  deterministic=settings.deterministic))
        except (PolicyError, ValueError) as err:
            raise PlayError(f"{option}: {err}") from None
    config = RecordConfig(game=game.name, state=state, policies=settings.players, fps=settings.fps,
                          max_frames=settings.max_frames, deterministic=settings.deterministic)
    return game, config


def check_record_dir(record: Path) -> None:
    """The --record folder must be new or empty: a session is a run of its own."""
    if record.exists() and not record.is_dir():
        raise PlayError(f"--record {record} is a file; give a new or empty folder")
    if record.is_dir() and any(record.iterdir()):
        raise PlayError(f"--record {record} exists and is not empty; give a new or empty folder "
                        "(one session per folder: wtf annotate and build-curriculum take several)")


def make_record_dir(record: Path) -> list[Path]:
    """Create DIR/episodes; returns the folders created (to remove if the session fails)."""
    created = [p for p in (record, record / "episodes") if not p.exists()]
    try:
        (record / "episodes").mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PlayError(f"cannot write to --record {record}: {err.strerror or err}") from None
    return created


def play(settings: PlaySettings, title: str | None = None) -> PlayResult:
    """Play a session in a window; raises PlayError on bad input, DisplayError without a display."""
    from wantofight.collect.recorder import Recorder
    from wantofight.play.controls import KeyMap
    from wantofight.play.window import state_labels

    import_pygame()  # a missing [play] extra is reported before anything starts
    game, config = validate(settings)
    if settings.record is not None:
        check_record_dir(settings.record)
    keymap = KeyMap.load()
    humans = tuple(p for p, spec in enumerate(settings.players[:game.players]) if spec == HUMAN)
    window: Window | None = None
    recorder = Recorder(game, config, make=lambda spec: Human(window) if spec == HUMAN else make_policy(spec))
    try:
        shape = recorder.env.em.get_screen().shape[:2]
        window = Window(title or f"wtf play - {game.name}", shape, keymap, humans, settings.fps, settings.scale,
                        labels=state_labels(game.info))
        window.recording = settings.record is not None
        job = EpisodeJob(EPISODE_ID, 0, settings.seed if settings.seed is not None else secrets.randbits(32))
        if settings.record is None:
            with tempfile.TemporaryDirectory(prefix="wtf-play-") as scratch:
                return _run(recorder, window, job, Path(scratch), None)
        created = make_record_dir(settings.record)
        try:
            return _run(recorder, window, job, settings.record / "episodes", created)
        except BaseException:
            for path in reversed(created):  # nothing half-written: only folders this session made, if empty
                if path.is_dir() and not any(path.iterdir()):
                    path.rmdir()
            raise
    finally:
        if window is not None:
            window.close()
        recorder.close()


def _run(recorder, window: Window, job: EpisodeJob, episodes_dir: Path, created) -> PlayResult:
    tmp = files.episode_tmp_dir(episodes_dir, job.episode_id)
    tmp.mkdir()
    with SafeStop() as stop:
        window.stop_requested = lambda: stop.requested
        try:
            result = recorder.record(job, tmp, on_row=window.on_row)
        except BaseException:
            files.discard(tmp)
            raise
    episode = None
    if created is not None:
        episode = episodes_dir / job.episode_id
        files.publish(tmp, episode)
    return PlayResult(result.frames, result.ended_by, result.seconds, episode, window.timing, stop.requested)
