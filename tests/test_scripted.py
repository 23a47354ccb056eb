"""The scripted match AI on the real emulator: it beats button-mashing and random play from both sides,
and guards what it sees coming at the height each move needs.

The `mash` policy stands in for an untrained agent (docs/agents.md: an untrained PPO network beat the earlier
scripted AI in 96% of matches). `python bench/scripted.py` plays the same matchups over more matches,
before and after a change to the AI.
"""

from __future__ import annotations

import dataclasses

import pytest

from wantofight.collect.agents import match_seed
from wantofight.collect.fight_env import Match, Tally
from wantofight.collect.game_registry import resolve_game
from wantofight.collect.policies import (
    UP, Idle, Mash, PlayerContext, Policy, RandomButtons, relative_mask, toward_away,
)
from wantofight.collect.scripted import ATTACK_KEYS, Scripted, Temperament
from wantofight.collect.recorder import player_seeds


class Attacker:
    """A drill partner that attacks again and again: walks in until `move` reaches and presses it; an
    air move it presses from a jump straight up, on the way down."""

    spec = "attacker"

    def __init__(self, move: str):
        self.name = move

    def reset(self, ctx: PlayerContext) -> None:
        self.ctx, info = ctx, ctx.game.info
        self.move = next(m for m in info["moves"] if m["name"] == self.name)
        dx, dy, width, height = self.move["hitbox"]
        hurt_dx, hurt_dy, _, _ = info["boxes"]["hurtbox"]["stand"]
        self.reach = dx + width - hurt_dx - 2
        # pressed this high on the way down, an air move is active by the time it reaches a standing head
        self.low_enough = info["ground_y"] + hurt_dy - dy - height - 24
        states = info["state_ids"]
        self.free = {states[name] for name in ("idle", "walk_forward", "walk_back", "crouch")}
        self.jump = states["jump"]
        self.pressed, self.y = False, 0

    def act(self, ram: dict[str, int], t: int) -> int:
        mask = 0 if self.pressed else self.choose(ram)  # a row without keys after each press
        self.pressed, self.y = mask & ATTACK_KEYS != 0, ram[f"{self.ctx.me}_y"]
        return mask

    def choose(self, ram: dict[str, int]) -> int:
        toward, away = toward_away(self.ctx, ram)
        me, foe = self.ctx.me, self.ctx.foe
        in_reach = abs(ram[f"{foe}_x"] - ram[f"{me}_x"]) < self.reach
        press = relative_mask(self.move["input"], toward, away)
        if ram[f"{me}_state"] == self.jump:
            falling = ram[f"{me}_y"] > self.y
            return press if falling and ram[f"{me}_y"] >= self.low_enough else 0
        if ram[f"{me}_state"] in self.free and in_reach:
            return UP if self.move["stance"] == "air" else press
        return toward

    def finished(self, t: int) -> bool:
        return False


class Guarder(Scripted):
    """The scripted AI with its own attacks, approaches, jumps and retreats switched off: it can only guard."""

    def reset(self, ctx: PlayerContext) -> None:
        super().reset(ctx)
        self.mood = dataclasses.replace(self.mood, guard_chance=1.0, punish_chance=0.0, poke_chance=0.0,
                                        approach_chance=0.0, jump_chance=0.0, retreat_chance=0.0)


@pytest.fixture(scope="module")
def match():
    match = Match(resolve_game("duel"), frame_skip=2, states=("Start", "Fight"))
    yield match
    match.close()


def play(match: Match, policies: tuple[Policy, Policy], seed: int, state: str = "Start",
         max_frames: int = 20_000) -> list[dict[str, int]]:
    """One match (or its first `max_frames` emulator frames) at --fps 30, driven the way `wtf agents eval`
    drives it; returns the RAM of every row."""
    seeds = player_seeds(seed)
    for p, policy in enumerate(policies):
        policy.reset(PlayerContext(player=p, game=match.game, seed=seeds[p], episode_seed=seed))
    rows = [match.start(state)]
    t = 0
    while not match.done() and (t + 1) * match.frame_skip < max_frames:
        t += 1
        rows.append(match.advance(tuple(int(policy.act(rows[-1], t)) for policy in policies)))
    return rows


@pytest.mark.parametrize("opponent", [Mash, RandomButtons])
def test_scripted_wins_from_both_sides(match, opponent):
    results = []
    for index in range(6):
        side = index % 2
        policies = (Scripted(), opponent()) if side == 0 else (opponent(), Scripted())
        rows = play(match, policies, match_seed(0, index))
        assert match.done(), "a match must end by KO or time-out"
        results.append(Tally(side).result(rows[-1]))
    assert results.count("win") >= 5, results


def guard_record(rows: list[dict[str, int]], defender: str, info: dict) -> dict[str, int]:
    """How often the defender entered blockstun, and hitstun or knockdown."""
    states = info["state_ids"]
    counts = {"blocked": 0, "hit": 0}
    for before, now in zip(rows, rows[1:]):
        state = now[f"{defender}_state"]
        if state == before[f"{defender}_state"] and now[f"{defender}_stun"] <= before[f"{defender}_stun"]:
            continue  # nothing new landed
        if state == states["blockstun"]:
            counts["blocked"] += 1
        elif state in (states["hitstun"], states["knockdown"]):
            counts["hit"] += 1
    return counts


@pytest.mark.parametrize("move", ["light_punch", "heavy_kick", "sweep", "jump_kick"])
def test_scripted_guards_a_drilled_attack(match, move):
    """Every drilled attack is guarded, at the move's height: crouching for the sweep (low only), standing
    for the jump kick (high only; its crouching stance in neutral would not stop it)."""
    info = match.game.info
    undefended = guard_record(play(match, (Idle(), Attacker(move)), 1, "Fight", max_frames=1200), "p1", info)
    assert undefended["hit"] >= 10, f"the {move} drill must land on a fighter that does nothing: {undefended}"
    for index in range(2):  # two temperaments: different reaction times and guard heights
        record = guard_record(play(match, (Guarder(), Attacker(move)), match_seed(1, index), "Fight",
                                   max_frames=1200), "p1", info)
        assert record["hit"] == 0 and record["blocked"] >= 10, record


def test_temperaments_differ_between_episodes():
    game = resolve_game("duel")
    moods = [Temperament.draw(PlayerContext(player=0, game=game, seed=seed, episode_seed=seed).rng,
                              [m for m in game.info["moves"] if m["stance"] != "air"]) for seed in range(20)]
    for field in dataclasses.fields(Temperament):
        values = {repr(getattr(mood, field.name)) for mood in moods}
        assert len(values) >= 4, f"{field.name} barely varies: {sorted(values)}"
