"""One learning fighter in the emulator: observation, action and reward, shared by training and play.

The same `PlayerCodec` turns RAM into an observation and an action into a 16-slot mask in the
training env (`FightEnv`) and in the recorded policy (`ppo_policy.PpoPolicy`), so an agent sees and
presses exactly the same things at collect time as it did while learning. The emulator is driven
like the recorder drives it: each mask goes through the platform's button table to
`em.set_button_mask` and is held for `frame_skip` emulator steps; a decision at row t sees the RAM
of row t − 1.

Observation (`OBS_SIZE` float32, side-invariant): positions are mirrored so that "forward" always
points at the opponent, whichever side of the screen the player stands on and whether it is P1 or
P2. Action: `MultiDiscrete([9, 3])` = a direction relative to the opponent × an attack button.
See docs/agents.md.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from pathlib import Path

import gymnasium as gym
import numpy as np

from wantofight.collect.game_registry import GameSpec, resolve_game
from wantofight.collect.keys import mask_of
from wantofight.collect.policies import DOWN, UP, PlayerContext, PlayerView, make_policy, toward_away

# ---------------------------------------------------------------------------------------------
# Action space: direction relative to the opponent × attack button


DIRECTIONS: tuple[tuple[str, ...], ...] = (
    (), ("toward",), ("away",), ("UP",), ("DOWN",),
    ("UP", "toward"), ("UP", "away"), ("DOWN", "toward"), ("DOWN", "away"),
)  # fmt: skip
"""Index → pad direction, relative: `away` walks back or blocks, `DOWN+away` blocks low."""
BUTTONS: tuple[tuple[str, ...], ...] = ((), ("A",), ("B",))
ACTION_NVEC = (len(DIRECTIONS), len(BUTTONS))


def action_mask(action, toward: int, away: int) -> int:
    """`(direction index, button index)` → 16-slot mask, with toward/away resolved to LEFT/RIGHT."""
    direction, button = int(action[0]), int(action[1])
    mask = 0
    for word in DIRECTIONS[direction]:
        mask |= toward if word == "toward" else away if word == "away" else UP if word == "UP" else DOWN
    if BUTTONS[button]:
        mask |= mask_of(list(BUTTONS[button]))
    return mask


# ---------------------------------------------------------------------------------------------
# Observation: RAM features, mirrored so that the opponent is always "ahead"


OBS_VERSION = 1


@dataclass
class PlayerCodec:
    """RAM → observation and action → mask for one player; keeps the previous row for velocities."""

    player: int
    """0 for P1, 1 for P2."""
    info: dict
    """The game's `game.json` (state ids, moves, stage size, health)."""
    prev: dict | None = field(default=None, init=False)
    prev_action: tuple[int, int] = field(default=(0, 0), init=False)

    def __post_init__(self) -> None:
        view = PlayerView(self.player)
        self.me, self.foe = view.me, view.foe
        self.n_states = max(self.info["state_ids"].values()) + 1
        self.n_moves = max(m["id"] for m in self.info["moves"]) + 1  # move 0 = none
        self.n_phases = max(self.info["phases"].values()) + 1
        self.left, self.right = self.info["stage_x"]
        self.width = self.right - self.left
        self.jump_height = self.info["jump"]["height"]
        self.ground = self.info["ground_y"]
        self.health = self.info["health_max"]
        self.facing_right = self.info["facing"]["right"]

    @property
    def size(self) -> int:
        per_fighter = 6 + 2 + self.n_states + self.n_moves  # scalars, velocities, one-hots
        return 2 * per_fighter + 3 + self.n_phases + sum(ACTION_NVEC)

    def reset(self) -> None:
        self.prev, self.prev_action = None, (0, 0)

    def observe(self, ram: dict[str, int]) -> np.ndarray:
        """The observation for the row whose RAM is `ram` (also remembered for the next velocities)."""
        ahead = ram[f"{self.foe}_x"] >= ram[f"{self.me}_x"]  # the opponent is to my right
        prev = self.prev if self.prev is not None else ram
        parts = [self._fighter(ram, prev, who, ahead) for who in (self.me, self.foe)]
        dx = abs(ram[f"{self.foe}_x"] - ram[f"{self.me}_x"]) / self.width
        dy = (ram[f"{self.foe}_y"] - ram[f"{self.me}_y"]) / self.jump_height
        timer = ram["timer"] / self.info["round_time_seconds"]
        phase = _one_hot(ram["phase"], self.n_phases)
        last = np.concatenate([_one_hot(self.prev_action[0], ACTION_NVEC[0]), _one_hot(self.prev_action[1], ACTION_NVEC[1])])
        self.prev = ram
        obs = np.concatenate(parts + [np.array([dx, dy, timer], np.float32), phase, last])
        return np.clip(obs, -1.0, 1.0, dtype=np.float32)

    def _fighter(self, ram: dict[str, int], prev: dict[str, int], who: str, ahead: bool) -> np.ndarray:
        sign = 1 if ahead else -1  # mirror x so that +x points from me toward the opponent
        x = ram[f"{who}_x"] - self.left if ahead else self.right - ram[f"{who}_x"]
        faces_right = ram[f"{who}_facing"] == self.facing_right
        scalars = [
            x / self.width,
            (self.ground - ram[f"{who}_y"]) / self.jump_height,
            1.0 if faces_right == ahead else 0.0,  # faces "forward" (the mirrored +x)
            ram[f"{who}_health"] / self.health,
            ram[f"{who}_wins"] / self.info["rounds_to_win"],
            min(ram[f"{who}_stun"], 30) / 30,
            float(np.clip(sign * (ram[f"{who}_x"] - prev[f"{who}_x"]) / 4, -1, 1)),
            float(np.clip((prev[f"{who}_y"] - ram[f"{who}_y"]) / 4, -1, 1)),
        ]
        return np.concatenate([
            np.array(scalars, np.float32),
            _one_hot(ram[f"{who}_state"], self.n_states),
            _one_hot(ram[f"{who}_move"], self.n_moves),
        ])

    def mask(self, action, ram: dict[str, int]) -> int:
        """The 16-slot mask for `action` given the RAM the decision was made on."""
        self.prev_action = (int(action[0]), int(action[1]))
        toward, away = toward_away(PlayerView(self.player), ram)
        return action_mask(action, toward, away)


def _one_hot(index: int, size: int) -> np.ndarray:
    vec = np.zeros(size, np.float32)
    if 0 <= index < size:
        vec[index] = 1.0
    return vec


# ---------------------------------------------------------------------------------------------
# The emulator, driven like the recorder drives it


class Match:
    """Owns this process's emulator (stable-retro allows one) and steps it with two masks."""

    def __init__(self, game: GameSpec, frame_skip: int, states: tuple[str, ...]):
        from wantofight.collect.emulator import make_env

        self.game, self.frame_skip = game, frame_skip
        resolved = [game.resolve_state(s) for s in states]
        self.env = make_env(game.retro_game, state=resolved[0], players=2)
        self.env.reset()
        self.states = {name: self._state_bytes(name) for name in resolved}
        self.table = game.buttons

    def _state_bytes(self, state: str) -> bytes:
        path = Path(state) if Path(state).is_absolute() else self.game.integration_dir() / f"{state}.state"
        with gzip.open(path, "rb") as f:
            return f.read()

    def close(self) -> None:
        self.env.close()

    def start(self, state: str) -> dict[str, int]:
        """Load `state` and return the RAM of row 0 (after `frame_skip` steps with no keys)."""
        em, data = self.env.em, self.env.data
        em.set_state(self.states[self.game.resolve_state(state)])
        data.reset()
        return self.advance((0, 0))

    def advance(self, masks: tuple[int, int]) -> dict[str, int]:
        """Hold both masks for `frame_skip` emulator steps; returns the RAM of the new row."""
        em, data = self.env.em, self.env.data
        for p in range(2):
            em.set_button_mask(self.table.to_buttons(masks[p]), p)
        for _ in range(self.frame_skip):
            em.step()
        data.update_ram()
        return {name: int(value) for name, value in data.lookup_all().items()}

    def done(self) -> bool:
        return bool(self.env.data.is_done())


# ---------------------------------------------------------------------------------------------
# Scoring one player's match from consecutive RAM rows


@dataclass
class Tally:
    """Damage, round wins and move starts of one player, from consecutive RAM rows."""

    player: int
    dealt: int = 0
    taken: int = 0
    moves: dict[int, int] = field(default_factory=dict)
    """Move id → times this player started it."""

    def __post_init__(self) -> None:
        view = PlayerView(self.player)
        self.me, self.foe = view.me, view.foe

    def update(self, prev: dict[str, int], ram: dict[str, int]) -> tuple[int, int, int]:
        """(damage dealt, damage taken, round-win balance) between two rows; health refills are not damage."""
        dealt = max(0, prev[f"{self.foe}_health"] - ram[f"{self.foe}_health"])
        taken = max(0, prev[f"{self.me}_health"] - ram[f"{self.me}_health"])
        rounds = max(0, ram[f"{self.me}_wins"] - prev[f"{self.me}_wins"]) - max(
            0, ram[f"{self.foe}_wins"] - prev[f"{self.foe}_wins"]
        )
        move = ram[f"{self.me}_move"]
        if move and move != prev[f"{self.me}_move"]:
            self.moves[move] = self.moves.get(move, 0) + 1
        self.dealt += dealt
        self.taken += taken
        return dealt, taken, rounds

    def result(self, ram: dict[str, int]) -> str:
        """`win`, `loss` or `draw` from the round wins in `ram` (equal wins, e.g. a double KO, draw)."""
        mine, theirs = ram[f"{self.me}_wins"], ram[f"{self.foe}_wins"]
        return "win" if mine > theirs else "loss" if mine < theirs else "draw"


# ---------------------------------------------------------------------------------------------
# The gymnasium env


@dataclass(frozen=True)
class EnvConfig:
    """One learning player against an opponent policy (see docs/agents.md)."""

    game: str = "duel"
    player: int = 0
    """The learner: 0 for P1, 1 for P2."""
    opponent: str = "scripted"
    """Any `wtf collect` policy spec (`scripted`, `random`, `ppo:PATH`, …)."""
    states: tuple[str, ...] = ("Fight", "Swapped")
    """Start savestates, one drawn per episode (both sides of the screen)."""
    frame_skip: int = 2
    """Emulator steps per decision; 2 matches `wtf collect --fps 30`."""
    round_win_bonus: float = 1.0
    """Reward for a round won (−bonus for one lost); a full health bar of damage is worth 1."""
    max_frames: int = 20_000
    """Emulator frames after which an episode is truncated (a match ends long before)."""
    skip_idle_phases: bool = True
    """Step through round intros and KO pauses without asking the learner (its keys do nothing there)."""


class FightEnv(gym.Env):
    """A gymnasium env: one match per episode, the learner vs `config.opponent`.

    The emulator is created at the first reset, so the env can be built in a parent process to read
    its spaces; stable-retro allows one emulator per process, so run several in subprocesses.
    """

    metadata = {"render_modes": []}

    def __init__(self, config: EnvConfig = EnvConfig(), seed: int | None = None):
        self.config = config
        self.game = resolve_game(config.game)
        self.codec = PlayerCodec(config.player, self.game.info)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=(self.codec.size,), dtype=np.float32)
        self.action_space = gym.spaces.MultiDiscrete(list(ACTION_NVEC))
        self.opponent_spec = config.opponent
        self.match: Match | None = None
        self.rng = np.random.default_rng(seed)

    def set_opponent(self, spec: str) -> None:
        """Play the next episodes against `spec` (self-play swaps in fresh snapshots this way)."""
        make_policy(spec)  # fail now, not at the next reset
        self.opponent_spec = spec

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        if self.match is None:
            self.match = Match(self.game, self.config.frame_skip, self.config.states)
        episode_seed = int(self.rng.integers(2**63))
        foe = 1 - self.config.player
        self.opponent = make_policy(self.opponent_spec)
        self.opponent.reset(PlayerContext(player=foe, game=self.game, seed=int(self.rng.integers(2**63)),
                                          episode_seed=episode_seed))
        state = self.config.states[int(self.rng.integers(len(self.config.states)))]
        self.tally = Tally(self.config.player)
        self.codec.reset()
        self.ram = self.match.start(state)
        self.t, self.frames = 0, self.config.frame_skip
        self._skip_idle()
        return self.codec.observe(self.ram), {"state": state}

    def _advance(self, mine: int) -> tuple[float, bool]:
        """One row: the opponent decides on the last row's RAM, both masks are held frame_skip steps."""
        self.t += 1
        theirs = int(self.opponent.act(self.ram, self.t))
        masks = (mine, theirs) if self.config.player == 0 else (theirs, mine)
        prev, self.ram = self.ram, self.match.advance(masks)
        self.frames += self.config.frame_skip
        dealt, taken, rounds = self.tally.update(prev, self.ram)
        health = self.game.info["health_max"]
        return (dealt - taken) / health + self.config.round_win_bonus * rounds, self.match.done()

    def _skip_idle(self) -> tuple[float, bool]:
        reward, done = 0.0, False
        while self.config.skip_idle_phases and self.ram["phase"] != self.game.info["phases"]["fighting"]:
            if done or self.frames >= self.config.max_frames:
                break
            self.codec.observe(self.ram)
            step_reward, done = self._advance(0)
            reward += step_reward
        return reward, done

    def step(self, action):
        reward, done = self._advance(self.codec.mask(action, self.ram))
        if not done:
            more, done = self._skip_idle()
            reward += more
        truncated = not done and self.frames >= self.config.max_frames
        info = {}
        if done or truncated:
            info = {
                "match": self.tally.result(self.ram),
                "damage_dealt": self.tally.dealt,
                "damage_taken": self.tally.taken,
                "moves": dict(self.tally.moves),
            }
        return self.codec.observe(self.ram), float(reward), done, truncated, info

    def close(self) -> None:
        if self.match is not None:
            self.match.close()
            self.match = None
