"""Who presses the buttons: one registry of per-player policies, all seeded.

A policy sees the RAM of the last recorded row (names of docs/contracts.md) and returns the 16-slot mask it
wants held for the next row. The recorder sends that mask through the platform's button table and
records what the emulator received, so a slot the platform lacks never reaches the data.

Specs: `idle`, `random`, `mash`, `scripted` (collect/scripted.py), `drill`, `keys:PATH`;
`ppo:CHECKPOINT` and `ppo-ladder:DIR` come with the learned-agents extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from wantofight.collect.game_registry import GameSpec
from wantofight.collect.keyfile import KeyScript, read_key_file
from wantofight.collect.keys import SLOT_INDEX, mask_of

UP, DOWN, LEFT, RIGHT = (1 << SLOT_INDEX[k] for k in ("UP", "DOWN", "LEFT", "RIGHT"))
SYSTEM_KEYS = mask_of(["START", "SELECT", "MODE"])


class PolicyError(ValueError):
    """An unknown policy spec, or one the game cannot support."""


@dataclass
class PlayerContext:
    """What a policy knows about its episode."""

    player: int
    """0 for P1, 1 for P2."""
    game: GameSpec
    seed: int
    """This player's seed for this episode."""
    episode_seed: int
    """Shared by both players (drills derive one joint schedule from it)."""
    deterministic: bool = False
    """Learned policies: take the most likely action instead of sampling."""
    rng: np.random.Generator = field(init=False)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    @property
    def me(self) -> str:
        return PlayerView(self.player).me

    @property
    def foe(self) -> str:
        return PlayerView(self.player).foe


class Policy(Protocol):
    spec: str
    variation: str
    """How its episodes differ (read after `reset`): `seed` (its own seeded choices), `start` (it plays
    the same way from the same situation; it takes a seeded start delay, `with_start_delays`), `none`
    (the same input every episode: idle, a key file replayed as written)."""

    def reset(self, ctx: PlayerContext) -> None: ...

    def act(self, ram: dict[str, int], t: int) -> int:
        """The mask to hold for row `t` (t ≥ 1), given the RAM of row t − 1."""

    def finished(self, t: int) -> bool:
        """True when the policy has no input for row `t` and the episode should end."""


@dataclass(frozen=True)
class PlayerView:
    """Names a player's RAM prefixes (`p1`/`p2`) and its opponent's."""

    player: int

    @property
    def me(self) -> str:
        return f"p{self.player + 1}"

    @property
    def foe(self) -> str:
        return f"p{2 - self.player}"


def toward_away(ctx: PlayerView, ram: dict[str, int]) -> tuple[int, int]:
    """(toward, away) direction bits for a player, from both fighters' x positions."""
    if ram[f"{ctx.foe}_x"] >= ram[f"{ctx.me}_x"]:
        return RIGHT, LEFT
    return LEFT, RIGHT


def relative_mask(words: list[str], toward: int, away: int) -> int:
    """`["toward", "A"]` → mask, with toward/away resolved to LEFT/RIGHT."""
    mask = 0
    for word in words:
        if word == "toward":
            mask |= toward
        elif word == "away":
            mask |= away
        else:
            mask |= mask_of([word])
    return mask


def require_ram(ctx: PlayerContext, spec: str, names: tuple[str, ...]) -> None:
    """Fail before recording when a policy needs RAM variables the game does not expose."""
    if not ctx.game.builtin:
        raise PolicyError(
            f"policy {spec!r} reads the RAM variables {', '.join(names)}, which {ctx.game.name} does not "
            "map; use idle, random or keys:PATH"
        )


# ---------------------------------------------------------------------------------------------
# Simple policies


class Idle:
    spec = "idle"
    variation = "none"

    def reset(self, ctx: PlayerContext) -> None:
        pass

    def act(self, ram: dict[str, int], t: int) -> int:
        return 0

    def finished(self, t: int) -> bool:
        return False


class RandomButtons:
    """Random button combinations held for random durations (not per-frame coin flips)."""

    spec = "random"
    variation = "seed"
    max_hold = 30
    """Longest hold, in recorded frames."""

    def reset(self, ctx: PlayerContext) -> None:
        self.rng = ctx.rng
        # START/SELECT/MODE pause or leave the game; random play keeps to the fighting buttons.
        supported = ctx.game.buttons.supported_mask() & ~SYSTEM_KEYS
        self.slots = [1 << i for i in range(16) if supported >> i & 1]
        self.mask, self.until = 0, 0

    def act(self, ram: dict[str, int], t: int) -> int:
        if t >= self.until:
            count = self.rng.choice([0, 1, 1, 2, 2, 3])
            chosen = self.rng.choice(len(self.slots), size=count, replace=False)
            self.mask = int(sum(self.slots[i] for i in chosen))
            self.until = t + int(self.rng.integers(1, self.max_hold + 1))
        return self.mask

    def finished(self, t: int) -> bool:
        return False


class Mash:
    """Button-mashing at the foe: walks toward it on most rows and presses A or B on most rows,
    jumping or crouching now and then. Aggressive, unskilled play (what an untrained agent does)."""

    spec = "mash"
    variation = "seed"
    needs = ("p1_x", "p2_x")

    def reset(self, ctx: PlayerContext) -> None:
        require_ram(ctx, self.spec, self.needs)
        self.ctx, self.rng = ctx, ctx.rng

    def act(self, ram: dict[str, int], t: int) -> int:
        toward, _ = toward_away(self.ctx, ram)
        rng = self.rng
        mask = toward if rng.random() < 0.6 else 0
        mask |= UP if rng.random() < 0.15 else 0
        mask |= DOWN if rng.random() < 0.15 else 0
        if rng.random() < 0.6:
            mask |= mask_of([("A", "B")[int(rng.integers(2))]])
        return mask

    def finished(self, t: int) -> bool:
        return False


class KeysFromFile:
    """Plays one player's column of a key file; the episode ends with the file."""

    variation = "none"  # replayed exactly as written, in every episode

    def __init__(self, path: str):
        self.spec = f"keys:{path}"
        self.script: KeyScript = read_key_file(path)

    def reset(self, ctx: PlayerContext) -> None:
        self.masks = self.script.masks(ctx.player)

    def act(self, ram: dict[str, int], t: int) -> int:
        return int(self.masks[t - 1])

    def finished(self, t: int) -> bool:
        return t > len(self.masks)


# ---------------------------------------------------------------------------------------------
# Drills: single-action and dual-action


MOVEMENTS: dict[str, tuple[list[str], int]] = {
    # name: (relative input, frames held) — generic fighting-game movement, drilled like moves.
    "walk_forward": (["toward"], 20),
    "walk_back": (["away"], 20),
    "crouch": (["DOWN"], 16),
    "jump_up": (["UP"], 2),
    "jump_forward": (["UP", "toward"], 2),
    "jump_back": (["UP", "away"], 2),
    "block_high": (["away"], 16),
    "block_low": (["DOWN", "away"], 16),
}
JUMP_ATTACK_DELAY = 8
"""Recorded frames after take-off at which an air move's button is pressed."""


@dataclass(frozen=True)
class DrillItem:
    """One drill: each acting player's action, and its start offset in recorded frames."""

    actions: tuple[str | None, str | None]
    offsets: tuple[int, int] = (0, 0)

    @property
    def dual(self) -> bool:
        return all(a is not None for a in self.actions)


def drill_schedule(game: GameSpec, episode_seed: int, dual_count: int = 12) -> list[DrillItem]:
    """Every move and movement for P1 then P2 (shuffled), then dual drills with timing offsets."""
    rng = np.random.default_rng(episode_seed)
    actions = [m["name"] for m in game.info["moves"]] + list(MOVEMENTS)
    items: list[DrillItem] = []
    for player in (0, 1):
        for name in rng.permutation(actions):
            pair = (str(name), None) if player == 0 else (None, str(name))
            items.append(DrillItem(pair))
    for _ in range(dual_count):
        first, second = rng.choice(actions, size=2)
        delay = int(rng.integers(-6, 7))
        items.append(DrillItem((str(first), str(second)), (max(0, -delay), max(0, delay))))
    return items


class Drill:
    """Both players follow one schedule derived from the episode seed; each plays its own part.

    An item starts once both fighters have stood idle for `settle` rows during fighting; dual items
    first walk the fighters in from farther than `close` pixels to `close - approach`, holding the
    walk until they are there (a walk pressed only on neutral rows flickers on and off every row, and
    each flicker would become a clip). Both players' instances read the same RAM, so they agree on
    when each item starts without talking to each other.
    """

    spec = "drill"
    variation = "seed"
    settle = 6
    close = 40
    approach = 8
    """A walk-in goes this far inside `close`, so it lasts at least two rows at either fps."""

    def reset(self, ctx: PlayerContext) -> None:
        require_ram(ctx, self.spec, ("p1_x", "p2_x", "p1_state", "p2_state", "phase"))
        self.ctx = ctx
        self.schedule = drill_schedule(ctx.game, ctx.episode_seed)
        self.moves = {m["name"]: m for m in ctx.game.info["moves"]}
        self.idle = ctx.game.info["state_ids"]["idle"]
        self.walk = ctx.game.info["state_ids"]["walk_forward"]
        self.item_index, self.calm, self.started_at, self.ends_at = 0, 0, None, 0
        self.walking_in = False
        self.plan: dict[int, int] = {}

    def act(self, ram: dict[str, int], t: int) -> int:
        neutral = ram["phase"] == 1 and ram["p1_state"] == self.idle and ram["p2_state"] == self.idle
        if self.started_at is not None and t > self.ends_at and neutral:
            self.started_at, self.item_index = None, (self.item_index + 1) % len(self.schedule)
        if self.started_at is None:
            self.calm = self.calm + 1 if neutral else 0
            item = self.schedule[self.item_index]
            if item.dual and self.walk_in(ram, neutral):
                self.calm = 0
                return toward_away(self.ctx, ram)[0]
            if self.calm < self.settle:
                return 0
            self.started_at, self.calm = t, 0
            parts = [self.plan_part(item, player, ram, t) for player in (0, 1)]
            self.plan = parts[self.ctx.player]
            self.ends_at = max(max(part, default=t) for part in parts)
        return self.plan.get(t, 0)

    def walk_in(self, ram: dict[str, int], neutral: bool) -> bool:
        """Whether both fighters walk toward each other on this row: from neutral when farther apart than
        `close`, then held (both still walking in the fighting phase) until `close - approach`."""
        distance = abs(ram["p1_x"] - ram["p2_x"])
        walking = ram["phase"] == 1 and ram["p1_state"] == self.walk and ram["p2_state"] == self.walk
        if self.walking_in and walking:
            self.walking_in = distance > self.close - self.approach
        else:
            self.walking_in = neutral and distance > self.close
        return self.walking_in

    def plan_part(self, item: DrillItem, player: int, ram: dict[str, int], t: int) -> dict[int, int]:
        """Row → mask for one player's part of `item` (empty when that player only watches)."""
        name = item.actions[player]
        if name is None:
            return {}
        toward, away = toward_away(PlayerView(player), ram)
        start = t + item.offsets[player]
        if name in MOVEMENTS:
            words, hold = MOVEMENTS[name]
            return {start + i: relative_mask(words, toward, away) for i in range(hold)}
        move = self.moves[name]
        press = relative_mask(move["input"], toward, away)
        if move["stance"] == "air":
            jump = {start: UP, start + 1: UP}
            return jump | {start + JUMP_ATTACK_DELAY: press, start + JUMP_ATTACK_DELAY + 1: press}
        return {start: press, start + 1: press}

    def finished(self, t: int) -> bool:
        return False


# ---------------------------------------------------------------------------------------------
# Start variation: episodes of deterministic players differ


START_DELAY_ROWS = 15
"""A delayed player waits 0..START_DELAY_ROWS fighting rows (half a second at 30 fps), drawn per player."""


class StartDelay:
    """Holds no keys for the first `rows` decisions of the fighting phase (from row 1 where the game
    has no `phase`), then plays `policy`. Row 0 keeps no keys and the policy's own decisions start
    later, so the recording's alignment is untouched and replay verifies it like any other."""

    def __init__(self, policy: Policy, rows: int, fighting_phase: int | None):
        self.policy, self.rows, self.fighting = policy, rows, fighting_phase
        self.spec, self.variation = policy.spec, "seed"
        self.left = rows

    def reset(self, ctx: PlayerContext) -> None:
        self.policy.reset(ctx)
        self.left = self.rows

    def act(self, ram: dict[str, int], t: int) -> int:
        if self.left > 0:
            if self.fighting is None or ram.get("phase") == self.fighting:
                self.left -= 1
            return 0
        return self.policy.act(ram, t)

    def finished(self, t: int) -> bool:
        return self.policy.finished(t)

    def describe(self) -> dict:
        inner = self.policy.describe() if hasattr(self.policy, "describe") else {}
        return {**inner, "start_delay_rows": self.rows}


def variation(policy: Policy) -> str:
    return getattr(policy, "variation", "seed")


def with_start_delays(policies: list[Policy], seeds: tuple[int, ...], game: GameSpec) -> list[Policy]:
    """When no player varies by its seed, each that plays the same from the same situation (a
    deterministic learned agent) waits a seeded number of rows first, so a run's episodes differ.
    Players that vary already, and key files (replayed as written), are left alone."""
    if any(variation(p) == "seed" for p in policies):
        return policies
    fighting = game.info.get("phases", {}).get("fighting") if game.info else None
    delayed = []
    for policy, seed in zip(policies, seeds):
        if variation(policy) == "start":
            rows = int(np.random.default_rng([seed, 0x5747]).integers(0, START_DELAY_ROWS + 1))
            policy = StartDelay(policy, rows, fighting)
        delayed.append(policy)
    return delayed


def identical_episodes_note(policies: list[Policy], episodes: int) -> str | None:
    """One line when every episode of a run will be the same (no player varies, none can be delayed)."""
    if episodes < 2 or any(variation(p) != "none" for p in policies):
        return None
    names = " and ".join(dict.fromkeys(p.spec for p in policies))
    return (f"the {episodes} episodes of this run will be identical: {names} give the same input in every "
            "episode (a key file is replayed as written); record --episodes 1, or give a player a policy that "
            "varies (random, mash, scripted, drill, ppo)")


# ---------------------------------------------------------------------------------------------
# Registry


def _scripted() -> Policy:
    from wantofight.collect.scripted import Scripted  # it builds on this module's helpers

    return Scripted()


SIMPLE: dict[str, Callable[[], Policy]] = {
    "idle": Idle,
    "random": RandomButtons,
    "mash": Mash,
    "scripted": _scripted,
    "drill": Drill,
}
def _learned(kind: str) -> Callable[[str], Policy]:
    """Learned agents import stable-baselines3 only when used (the `[ppo]` extra)."""

    def build(argument: str) -> Policy:
        from wantofight.collect import ppo_policy

        return ppo_policy.make(kind, argument)

    return build


PREFIXED: dict[str, Callable[[str], Policy]] = {
    "keys": KeysFromFile,
    "ppo": _learned("ppo"),
    "ppo-ladder": _learned("ppo-ladder"),
}
"""`name:argument` policies."""


def valid_specs() -> list[str]:
    return list(SIMPLE) + ["keys:PATH", "ppo:CHECKPOINT", "ppo-ladder:DIR"]


def make_policy(spec: str) -> Policy:
    """Build a policy from its spec; raises PolicyError listing the valid ones."""
    if spec in SIMPLE:
        return SIMPLE[spec]()
    name, sep, argument = spec.partition(":")
    if sep and name in PREFIXED and argument:
        return PREFIXED[name](argument)
    raise PolicyError(f"unknown policy {spec!r}; valid policies: {', '.join(valid_specs())}")
