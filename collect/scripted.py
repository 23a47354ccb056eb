"""The scripted match AI (`--policy scripted`, the default): a fighter that plays by the game's rules.

Plays by the game's own rules, read from game.json: it guards a move that will reach, at the height
the move needs; punishes a fighter that is recovering, stunned or in the air with a move that lands
in time; and spaces itself around the foe's reach, poking when a move reaches. The Temperament drawn
per episode sets how fast and how often it does each, so that matches differ.

Everything game-specific comes from game.json (through `ctx.game.info`): frame data, hit and hurt
boxes, `blocked_by`, walk speed, knockdown times; only generic state names are named here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from wantofight.collect.keys import mask_of
from wantofight.collect.policies import DOWN, LEFT, RIGHT, UP, PlayerContext, relative_mask, require_ram

ATTACK_KEYS = mask_of(["A", "B"])
FREE_STATES = ("idle", "walk_forward", "walk_back", "crouch", "block_high", "block_low")
"""States that act on the coming frame's input (game.json `state_ids` names)."""
STUN_STATES = ("hitstun", "blockstun")
NO_HURTBOX = ("knockdown", "wakeup", "ko", "victory")
"""States that cannot be hit (game.json `boxes_note`)."""
CROUCHING = ("crouch", "block_low")


@dataclass
class Temperament:
    """One episode's character, drawn from the episode rng so that matches differ."""

    reaction: int
    """Frames after the foe presses a move before this fighter reacts to it."""
    guard_chance: float
    """Chance to guard a move it sees coming (drawn once per move)."""
    low_guard: float
    """Chance to guard crouching (rather than standing) a move that either guard stops."""
    punish_chance: float
    """Chance to punish an opening: a foe recovering, stunned or in the air (once per opening)."""
    poke_chance: float
    """Per row in neutral: chance to attack a foe that one of its moves will meet."""
    approach_chance: float
    """Per neutral decision: chance to step in when no move reaches."""
    daring: float
    """Chance to poke with a move slower than the foe's fastest (drawn once per move and situation)."""
    spacing: int
    """Pixels kept beyond the foe's longest reach before stepping in only by `approach_chance`."""
    patience: int
    """Rows between neutral decisions."""
    jump_chance: float
    """Per neutral decision: chance to jump in."""
    retreat_chance: float
    """Per neutral decision: chance to walk back."""
    taste: dict[int, float]
    """Move id → liking (sums to 1): how it chooses among the moves that fit."""

    @classmethod
    def draw(cls, rng: np.random.Generator, moves: list[dict]) -> "Temperament":
        return cls(
            reaction=int(rng.integers(0, 5)),
            guard_chance=float(rng.uniform(0.6, 1.0)),
            low_guard=float(rng.uniform(0.0, 1.0)),
            punish_chance=float(rng.uniform(0.6, 1.0)),
            poke_chance=float(rng.uniform(0.1, 0.5)),
            approach_chance=float(rng.uniform(0.3, 0.9)),
            daring=float(rng.uniform(0.1, 1.0)),
            spacing=int(rng.integers(0, 16)),
            patience=int(rng.integers(2, 7)),
            jump_chance=float(rng.uniform(0.0, 0.08)),
            retreat_chance=float(rng.uniform(0.02, 0.15)),
            taste={m["id"]: float(w) for m, w in zip(moves, rng.dirichlet(np.ones(len(moves))))},
        )


class Rules:
    """What the scripted AI knows of a game: states, moves, boxes and speeds, all from game.json."""

    def __init__(self, info: dict):
        self.state_names = {number: name for name, number in info["state_ids"].items()}
        self.fighting = info["phases"]["fighting"]
        self.moves = {m["id"]: m for m in info["moves"]}
        self.ground_moves = [m for m in info["moves"] if m["stance"] != "air"]
        self.air_moves = [m for m in info["moves"] if m["stance"] == "air"]
        self.hurtboxes = info["boxes"]["hurtbox"]
        self.facing_right = info["facing"]["right"]
        self.walk_speed = info["walk_speed"]["forward"]
        self.knockdown_frames = info["knockdown_frames"]
        self.wakeup_frames = info["wakeup_frames"]
        self.longest_reach = max(self.reach(m) for m in self.ground_moves)
        self.fastest_startup = min(m["startup"] for m in self.ground_moves)

    @staticmethod
    def length(move: dict) -> int:
        """Frames from the press to the frame a ground move takes new input (0 for air moves)."""
        return 0 if move["stance"] == "air" else move["startup"] + move["active"] + move["recovery"]

    def reach(self, move: dict) -> int:
        """Distances between the fighters' x below which `move`'s hitbox meets the foe's hurtbox."""
        dx, _, width, _ = move["hitbox"]
        return dx + width - self.hurtboxes["stand"][0]  # every hurtbox spans the same x

    def meets(self, move: dict, attacker: tuple[float, float], defender: tuple[float, float], stance: str) -> bool:
        """Whether `move`'s hitbox, aimed at the defender, overlaps the defender's `stance` hurtbox."""
        dx, dy, width, height = move["hitbox"]
        hx, hy, hw, hh = self.hurtboxes[stance]
        gap = abs(defender[0] - attacker[0])
        across = gap + hx < dx + width and gap + hx + hw > dx
        up = defender[1] + hy < attacker[1] + dy + height and defender[1] + hy + hh > attacker[1] + dy
        return across and up


@dataclass
class Since:
    """Bounds on the frame a fighter entered its current state and move (it changed between two rows)."""

    key: tuple[int, int] = (-1, -1)
    first: int = 0
    last: int = 0

    def update(self, key: tuple[int, int], before: int, now: int, length: int) -> None:
        if key != self.key:
            self.key, self.first, self.last = key, min(before + 1, now), now
        elif length:
            while now - self.first >= length:  # the same ground move pressed again on the frame it ended
                self.first, self.last = self.first + length, now


@dataclass(slots=True)
class Fighter:
    """One fighter in the last row, as the scripted AI reads it."""

    x: int
    y: int
    facing_right: bool
    state: str
    move: dict | None
    stun: int
    velocity: tuple[float, float]
    """Pixels per frame since the row before (x rightward, y downward)."""
    timer: tuple[int, int]
    """Frames since it entered this state or move, fewest and most (a move's press frame is 0)."""

    @property
    def airborne(self) -> bool:
        return self.state == "jump" or (self.move is not None and self.move["stance"] == "air")

    @property
    def stance(self) -> str:
        """Which hurtbox it has."""
        if self.airborne:
            return "air"
        crouching = self.state in CROUCHING or (self.move is not None and self.move["stance"] == "crouch")
        return "crouch" if crouching else "stand"

    def at(self, frames: int) -> tuple[float, float]:
        """Where it will be in `frames` frames if it keeps its velocity."""
        return self.x + self.velocity[0] * frames, self.y + self.velocity[1] * frames


class Scripted:
    """A match AI that plays by the move table: guards, punishes, anti-airs, spaces and pokes."""

    spec = "scripted"
    needs = ("p1_x", "p2_x", "p1_y", "p2_y", "p1_facing", "p2_facing", "p1_state", "p2_state", "p1_move",
             "p2_move", "p1_stun", "p2_stun", "phase", "frame")

    def reset(self, ctx: PlayerContext) -> None:
        require_ram(ctx, self.spec, self.needs)
        self.rng = ctx.rng
        self.rules = Rules(ctx.game.info)
        self.mood = Temperament.draw(ctx.rng, self.rules.ground_moves)
        self.me, self.foe = ctx.me, ctx.foe
        self.since = {self.me: Since(), self.foe: Since()}
        self.ram_names = {who: tuple(f"{who}_{name}" for name in ("x", "y", "facing", "state", "move", "stun"))
                          for who in (self.me, self.foe)}
        self.before: dict[str, int] | None = None
        self.step = 1
        """Emulator frames per row, measured from the `frame` counter."""
        self.mask, self.next_decision = 0, 0
        self.plan = "hold"
        """The neutral plan: approach, step in, hold, retreat or jump."""
        self.rolls: dict[tuple, bool] = {}

    def finished(self, t: int) -> bool:
        return False

    def act(self, ram: dict[str, int], t: int) -> int:
        me, foe = self.observe(ram)
        mask = self.decide(me, foe, t) if ram["phase"] == self.rules.fighting else 0
        if mask & self.mask & ATTACK_KEYS:
            mask &= ~ATTACK_KEYS  # a held button starts nothing: release it now, press it next row
        self.mask = mask
        return mask

    # -- reading the row -------------------------------------------------------------------------

    def observe(self, ram: dict[str, int]) -> tuple[Fighter, Fighter]:
        # runs for both players on every recorded row: names are built once (reset), not per row
        before = self.before or ram
        now = ram["frame"]
        step = self.step = (now - before["frame"]) % 65536 or self.step
        rules = self.rules
        fighters = []
        for who in (self.me, self.foe):
            x_name, y_name, facing, state, move_id, stun = self.ram_names[who]
            move = rules.moves.get(ram[move_id])
            since = self.since[who]
            since.update((ram[state], ram[move_id]), before["frame"], now, rules.length(move) if move else 0)
            fighters.append(Fighter(
                x=ram[x_name], y=ram[y_name], facing_right=ram[facing] == rules.facing_right,
                state=rules.state_names.get(ram[state], "unknown"), move=move, stun=ram[stun],
                velocity=((ram[x_name] - before[x_name]) / step, (ram[y_name] - before[y_name]) / step),
                timer=(now - since.last, now - since.first),
            ))
        self.before = ram
        return fighters[0], fighters[1]

    def free_in(self, f: Fighter) -> int:
        """Frames until `f` can next start something (1: on the coming frame); the earliest estimate."""
        rules = self.rules
        if f.state in FREE_STATES or f.state == "jump":
            return 1
        if f.state in STUN_STATES:
            return max(1, f.stun)
        if f.move is not None and not f.airborne:
            return max(1, rules.length(f.move) - f.timer[1])
        if f.state == "knockdown":
            return max(1, rules.knockdown_frames - f.timer[1]) + rules.wakeup_frames
        if f.state == "wakeup":
            return max(1, rules.wakeup_frames - f.timer[1])
        return 1_000  # KO, victory, or an air move that stays until landing

    def opening_key(self, foe: Fighter) -> tuple:
        return (self.since[self.foe].first, foe.state, foe.move["id"] if foe.move else 0)

    def roll(self, key: tuple, chance: float) -> bool:
        """One coin flip per situation (a foe's move, an opening), kept while the situation lasts."""
        if key not in self.rolls:
            self.rolls[key] = bool(self.rng.random() < chance)
        return self.rolls[key]

    # -- deciding ----------------------------------------------------------------------------------

    def decide(self, me: Fighter, foe: Fighter, t: int) -> int:
        toward = RIGHT if foe.x >= me.x else LEFT
        away = toward ^ (LEFT | RIGHT)
        if me.airborne:
            return self.air_attack(me, foe)
        seen = foe.move is None or foe.timer[0] >= self.mood.reaction
        if not seen:  # it has not reacted to the foe's new move yet: carries on as it was
            return self.mask & ~ATTACK_KEYS
        threat, hits_in = self.threat(me, foe)
        guards = threat is not None and self.roll(("guard", *self.opening_key(foe)), self.mood.guard_chance)
        if self.free_in(me) > 1:  # what it holds now only counts as a guard (in blockstun) or once it recovers
            return self.guard(threat if guards else None, me, foe)
        opening = self.punish(me, foe, toward, away)
        if opening is not None and (threat is None or opening[1] < hits_in):
            return opening[0]
        if threat is not None:
            return self.guard(threat, me, foe) if guards else self.mask & ~ATTACK_KEYS
        return self.neutral(me, foe, t, toward, away)

    def threat(self, me: Fighter, foe: Fighter) -> tuple[dict | None, int]:
        """The foe's move that will reach this fighter, and the frames until it can first hit."""
        if foe.state == "jump":  # may press an air move on any coming frame
            windows = [(m, 1 + m["startup"], 1 + m["startup"] + m["active"]) for m in self.rules.air_moves]
        elif foe.move is not None:
            m, (early, late) = foe.move, foe.timer
            windows = [(m, max(0, m["startup"] - late), m["startup"] + m["active"] - early)]
        else:
            return None, 0
        for move, start, end in windows:
            for frame in range(start, end):
                spot = foe.at(frame) if foe.airborne else (foe.x, foe.y)
                near = (spot[0] - np.sign(spot[0] - me.x) * 2, spot[1])  # 2 px of slack for pushes
                if self.rules.meets(move, near, (me.x, me.y), "crouch" if move["blocked_by"] == "low" else "stand"):
                    return move, start
        return None, 0

    def guard(self, move: dict | None, me: Fighter, foe: Fighter) -> int:
        """Hold away from the foe (crouching when the move must be guarded low, or by temperament)."""
        if self.free_in(me) <= 1:  # a free fighter turns to face the foe before the hit is checked
            away = LEFT if foe.x >= me.x else RIGHT
        else:
            away = LEFT if me.facing_right else RIGHT
        height = move["blocked_by"] if move is not None else "any"
        if height == "any":
            low = self.roll(("low", *self.opening_key(foe)), self.mood.low_guard)
        else:
            low = height == "low"
        return away | (DOWN if low else 0)

    def punish(self, me: Fighter, foe: Fighter, toward: int, away: int) -> tuple[int, int] | None:
        """(mask, frames until it hits) for a move that lands before the foe can act, or None."""
        if foe.state in NO_HURTBOX or foe.state in FREE_STATES or foe.state == "blockstun":
            return None
        busy = self.free_in(foe) - 1  # frames in which the foe surely can neither guard nor attack
        recovering = foe.move is None or foe.timer[0] >= foe.move["startup"] + foe.move["active"]
        distance = abs(foe.x - me.x)
        options = []
        for move in self.rules.ground_moves:
            if foe.airborne:
                hits = [1 + move["startup"] + i for i in range(move["active"])
                        if self.rules.meets(move, (me.x, me.y), foe.at(1 + move["startup"] + i), "air")]
                if hits:
                    options.append((move, 0, hits[0]))
                continue
            gap = distance - self.rules.reach(move) + 1
            rows = -(-max(0, gap) // (self.rules.walk_speed * self.step))
            lands = rows * self.step + 1 + move["startup"]
            if lands <= busy and (rows == 0 or recovering):
                options.append((move, rows, lands))
        if not options or not self.roll(("punish", *self.opening_key(foe)), self.mood.punish_chance):
            return None
        move, rows, lands = self.choose(options, lambda o: o[0]["damage"] * self.mood.taste[o[0]["id"]])
        return (toward if rows else relative_mask(move["input"], toward, away)), lands

    def air_attack(self, me: Fighter, foe: Fighter) -> int:
        """In a jump: press the air move whose hitbox will meet the foe."""
        if me.state != "jump" or foe.state in NO_HURTBOX:
            return 0
        for move in self.rules.air_moves:
            frame = 1 + move["startup"]
            if self.rules.meets(move, me.at(frame), foe.at(frame), foe.stance):
                return mask_of(move["input"])
        return 0

    def neutral(self, me: Fighter, foe: Fighter, t: int, toward: int, away: int) -> int:
        """Spacing and pokes: a plan every `patience` rows (approach, step in, hold, retreat, jump), and a
        poke on any row one fits."""
        mood, rng = self.mood, self.rng
        outside = abs(foe.x - me.x) >= self.rules.longest_reach + mood.spacing
        if t >= self.next_decision:
            self.next_decision = t + mood.patience
            roll = rng.random()
            if roll < mood.retreat_chance:
                self.plan = "retreat"
            elif roll < mood.retreat_chance + mood.jump_chance:
                self.plan = "jump"
            elif outside:
                self.plan = "approach"
            else:
                self.plan = "step in" if rng.random() < mood.approach_chance else "hold"
        guard = DOWN | away  # a crouching guard stands its ground and stops every ground move
        pokes = self.pokes(me, foe)
        if pokes and (self.plan == "step in" or rng.random() < mood.poke_chance):
            self.plan = "hold"
            move = self.choose(pokes, lambda m: mood.taste[m["id"]] / m["startup"])
            return relative_mask(move["input"], toward, away)
        if foe.move is not None and not foe.airborne:
            return guard  # never walk into a move
        if self.plan == "approach" and not outside:
            self.plan = "hold"  # at the edge of the foe's reach: wait, or step in at the next decision
        if self.plan == "jump":
            self.plan = "hold"
            return UP | toward  # a forward jump from close range crosses over
        return {"approach": toward, "step in": toward, "retreat": away}.get(self.plan, guard)

    def pokes(self, me: Fighter, foe: Fighter) -> list[dict]:
        """Ground moves that will meet the foe where it is heading, and are not beaten by a move it could
        press now (unless this fighter dares)."""
        if foe.state in NO_HURTBOX or foe.airborne:
            return []
        foe_hits_at = self.free_in(foe) + self.rules.fastest_startup
        found = []
        for move in self.rules.ground_moves:
            lands = 1 + move["startup"]
            if not self.rules.meets(move, (me.x, me.y), foe.at(lands), foe.stance):
                continue
            if lands <= foe_hits_at or self.roll(("dare", *self.opening_key(foe), move["id"]), self.mood.daring):
                found.append(move)
        return found

    def choose(self, options: list, weight: Callable) -> object:
        """One of `options`, drawn in proportion to `weight`."""
        weights = np.array([weight(o) for o in options], dtype=float) + 1e-9
        return options[int(self.rng.choice(len(options), p=weights / weights.sum()))]


