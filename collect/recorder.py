"""Record one episode: drive the emulator with both policies and write rows frame-exactly.

Alignment (docs/contracts.md): row t holds frame[t], keys[t], ram[t]; keys[t] is the mask the emulator
received during the `frame_skip` steps that produced frame[t]. Row 0 is the screen after
`frame_skip` steps with no keys from the start state. The emulator is stepped directly
(`em.set_button_mask`, `em.step`) so the recorded mask is exactly what it was given: no action
filter stands between the policy and the core.

`wtf play` records through the same loop: it makes its human players with `make` and shows, paces
and ends the episode from `on_row`.
"""

from __future__ import annotations

import importlib.metadata
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Protocol

import numpy as np

from wantofight import __version__
from wantofight.collect import episode_files as files
from wantofight.collect.game_registry import GameSpec
from wantofight.collect.keys import LAYOUT_VERSION
from wantofight.collect.policies import PlayerContext, Policy, make_policy, with_start_delays
from wantofight.collect.scenario import DoneCondition
from wantofight.video import VIDEO_CODEC, VIDEO_OPTIONS, VideoWriter

EMULATOR_FPS = 60
RECORD_FPS = (60, 30)


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to record."""

    episode_id: str
    index: int
    seed: int
    """The episode seed; each player's seed is derived from it."""


@dataclass(frozen=True)
class RecordConfig:
    """What every episode of a run shares."""

    game: str
    state: str
    policies: tuple[str, str]
    fps: int
    max_frames: int
    """Upper bound on recorded frames per episode (a match usually ends first)."""
    deterministic: bool = False
    """Learned policies take their most likely action instead of sampling."""

    @property
    def frame_skip(self) -> int:
        return EMULATOR_FPS // self.fps


class RowHook(Protocol):
    def __call__(self, row: int, screen: np.ndarray, ram: dict[str, int], keys: tuple[int, int]) -> bool:
        """Sees each row once it is stored: its frame, RAM and received keys. True ends the episode
        after this row (`ended_by` "quit": the player stopped it)."""


@dataclass
class EpisodeResult:
    episode_id: str
    frames: int
    seconds: float
    ended_by: str
    extra: dict = field(default_factory=dict)


def player_seeds(seed: int) -> tuple[int, int]:
    """Two independent seeds, one per player, from the episode seed."""
    first, second = np.random.SeedSequence(seed).generate_state(2)
    return int(first), int(second)


class Recorder:
    """Owns the emulator of one process and records episodes with it."""

    def __init__(self, game: GameSpec, config: RecordConfig, make: Callable[[str], Policy] = make_policy):
        """`make` builds a player from its spec (`wtf play` adds `human` to the registry's)."""
        from wantofight.collect.emulator import make_env

        self.game, self.config, self.make = game, config, make
        self.env = make_env(game.retro_game, state=config.state, players=game.players)
        self.start_state: bytes = self.env.initial_state
        self.table = game.buttons
        self.done = DoneCondition.load(game.scenario_path())
        self._presses: dict[int, tuple[np.ndarray, int, tuple[int, ...]]] = {}

    def close(self) -> None:
        self.env.close()

    # ------------------------------------------------------------------------------------------

    def _press(self, mask: int) -> tuple[np.ndarray, int, tuple[int, ...]]:
        """A wish → (core buttons, the mask they mean, the movie keys held down); cached per mask."""
        pressed = self._presses.get(mask)
        if pressed is None:
            buttons = self.table.to_buttons(mask)
            held = tuple(i for i, b in enumerate(buttons) if b)
            pressed = self._presses[mask] = (buttons, self.table.from_buttons(buttons), held)
        return pressed

    def _step(self, masks: tuple[int, int], movie) -> tuple[int, int]:
        """Hold `masks` for `frame_skip` emulator steps; returns the masks the core received."""
        em = self.env.em
        presses = [self._press(masks[p]) for p in range(self.game.players)]
        for p, (buttons, _, _) in enumerate(presses):
            em.set_button_mask(buttons, p)
        for _ in range(self.config.frame_skip):
            # the movie clears its keys at every step(): setting the held ones writes the same log
            for p, (_, _, held) in enumerate(presses):
                for i in held:
                    movie.set_key(i, True, p)
            movie.step()
            em.step()
        received = [received for _, received, _ in presses] + [0] * (2 - self.game.players)
        return received[0], received[1]

    def record(self, job: EpisodeJob, out_dir: Path, on_frames: Callable[[int], None] | None = None,
               should_stop: Callable[[], bool] | None = None, on_row: RowHook | None = None) -> EpisodeResult:
        """Record `job` into `out_dir` (a temporary folder the caller publishes)."""
        import stable_retro

        started = time.perf_counter()
        policies = [self.make(spec) for spec in self.config.policies]
        seeds = player_seeds(job.seed)
        for p, policy in enumerate(policies):
            policy.reset(PlayerContext(player=p, game=self.game, seed=seeds[p], episode_seed=job.seed,
                                       deterministic=self.config.deterministic))
        policies = with_start_delays(policies, seeds[:self.game.players], self.game) + policies[self.game.players:]

        em, data = self.env.em, self.env.data
        em.set_state(self.start_state)
        data.reset()
        files.write_state(out_dir / "start.state", self.start_state)
        movie = stable_retro.Movie(str(out_dir / "inputs.bk2"), True, self.game.players)
        movie.configure(self.game.retro_game, em)
        movie.set_state(self.start_state)

        height, width = em.get_screen().shape[:2]
        video = VideoWriter(out_dir / "video.mp4", self.config.fps, width, height)
        p1_keys: list[int] = []
        p2_keys: list[int] = []
        ram_rows: list[dict[str, int]] = []
        ended_by = "max_frames"
        t = 0
        masks = (0, 0)
        try:
            while True:
                received = self._step(masks, movie)
                values = data.lookup_all()  # reads live memory; update_ram() only feeds stable-retro's done
                screen = em.get_screen()
                video.write(screen)
                p1_keys.append(received[0])
                p2_keys.append(received[1])
                ram_rows.append(values)
                quit_here = on_row is not None and on_row(t, screen, values, received)
                t += 1
                if on_frames is not None and t % 64 == 0:
                    on_frames(64)
                if self.is_done(values):
                    ended_by = "done"
                    break
                if t >= self.config.max_frames:
                    break
                if any(policy.finished(t) for policy in policies):
                    ended_by = "policy_finished"
                    break
                if quit_here:
                    ended_by = "quit"
                    break
                if should_stop is not None and t % 64 == 0 and should_stop():
                    raise KeyboardInterrupt
                masks = tuple(int(policy.act(values, t)) for policy in policies)
        finally:
            video.close()
            movie.close()
        files.fix_zip_times(out_dir / "inputs.bk2")  # reproducible bytes: its entries carry no clock
        if on_frames is not None:
            on_frames(t % 64)
        ram = {name: [int(row[name]) for row in ram_rows] for name in ram_rows[0]}
        files.write_frames_table(out_dir / "frames.parquet", p1_keys, p2_keys, ram)
        seconds = time.perf_counter() - started
        files.write_json(out_dir / "meta.json", self.meta(job, seeds, policies, t, width, height, ended_by))
        return EpisodeResult(job.episode_id, t, seconds, ended_by)

    def is_done(self, values: dict[str, int]) -> bool:
        if self.done is not None:
            return self.done(values)
        self.env.data.update_ram()
        return self.env.data.is_done()

    def meta(self, job: EpisodeJob, seeds, policies: list[Policy], frames: int, width: int, height: int,
             ended_by: str) -> dict:
        game = self.game
        return {
            "format_version": files.FORMAT_VERSION,
            "episode_id": job.episode_id,
            "episode_index": job.index,
            "game": game.name,
            "retro_game": game.retro_game,
            "platform": game.platform,
            "rom_sha1": game.rom_sha1(),
            "integration_version": game.integration_version(),
            "stable_retro_version": importlib.metadata.version("stable-retro"),
            "start_state": self.config.state,
            "seed": job.seed,
            "player_seeds": list(seeds),
            "policies": {f"p{p + 1}": describe(policy) for p, policy in enumerate(policies)},
            "players": game.players,
            "fps": self.config.fps,
            "emulator_fps": EMULATOR_FPS,
            "frame_skip": self.config.frame_skip,
            "key_layout_version": LAYOUT_VERSION,
            "screen_ram_lag_frames": game.screen_ram_lag,
            "tool": "wantofight",
            "tool_version": __version__,
            "frame_count": frames,
            "width": width,
            "height": height,
            "video": {"codec": VIDEO_CODEC, "options": VIDEO_OPTIONS, "lossless": True},
            "ended_by": ended_by,
            "config": asdict(self.config),
        }


def describe(policy: Policy) -> dict:
    """What meta.json says about a player's policy (learned policies add their checkpoint)."""
    described = {"spec": policy.spec}
    if hasattr(policy, "describe"):
        described.update(policy.describe())
    return described
