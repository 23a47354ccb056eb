"""What annotation knows about a game: its `game.json` (state ids, moves, phases, boxes), as data.

Built-in games carry a `game.json`; imported stable-retro games carry none, so every rule that
needs it reports itself as not computable instead of guessing (`GameRules.missing`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

FREE_STATES = ("idle", "walk_forward", "walk_back", "crouch", "block_high", "block_low", "jump")
"""States in which the game reads new presses (a jump still takes one air attack)."""
STUN_STATES = ("hitstun", "blockstun")
DOWN_STATES = ("knockdown", "wakeup", "ko")
"""States without a hurtbox (game.json `boxes.hurtbox.down` is null)."""
CROUCH_STATES = ("crouch", "block_low")


@dataclass(frozen=True)
class Move:
    id: int
    name: str
    stance: str
    total: int
    """startup + active + recovery, in emulator frames (air moves end on landing instead)."""

    @property
    def air(self) -> bool:
        return self.stance == "air"


@dataclass(frozen=True)
class GameRules:
    """A game's annotation knowledge; empty for imported games."""

    game: str
    states: dict[int, str] = field(default_factory=dict)
    """State id → name (game.json `state_ids`)."""
    phases: dict[int, str] = field(default_factory=dict)
    """Phase id → name (`intro`, `fighting`, `round_over`, `match_over`)."""
    moves: dict[int, Move] = field(default_factory=dict)
    facing_right: int | None = None
    ground_y: int | None = None
    hurtboxes: dict[str, list[int] | None] = field(default_factory=dict)
    sprites: dict[str, list[int]] = field(default_factory=dict)
    """Drawn extent per stance (game.json `boxes.sprite`), facing right; for visual overlap."""
    sprite_reach: int | None = None
    """How far forward an attacking pose is drawn (game.json `boxes.sprite_reach`)."""
    ko_pause_frames: int | None = None

    @classmethod
    def from_info(cls, game: str, info: dict) -> "GameRules":
        if not info:
            return cls(game)
        moves = {
            m["id"]: Move(m["id"], m["name"], m["stance"], m["startup"] + m["active"] + m["recovery"])
            for m in info.get("moves", [])
        }
        return cls(
            game=game,
            states={v: k for k, v in info.get("state_ids", {}).items()},
            phases={v: k for k, v in info.get("phases", {}).items()},
            moves=moves,
            facing_right=info.get("facing", {}).get("right"),
            ground_y=info.get("ground_y"),
            hurtboxes=dict(info.get("boxes", {}).get("hurtbox", {})),
            sprites=dict(info.get("boxes", {}).get("sprite", {})),
            sprite_reach=info.get("boxes", {}).get("sprite_reach"),
            ko_pause_frames=info.get("ko_pause_frames"),
        )

    def state_id(self, name: str) -> int | None:
        return next((i for i, n in self.states.items() if n == name), None)

    def phase_id(self, name: str) -> int | None:
        return next((i for i, n in self.phases.items() if n == name), None)

    def rows(self, emulator_frames: int, frame_skip: int) -> int:
        """Recorded rows spanned by `emulator_frames` (a press acts on a row's first step)."""
        return math.ceil(emulator_frames / frame_skip)

    @property
    def move_names(self) -> list[str]:
        return [m.name for m in sorted(self.moves.values(), key=lambda m: m.id)]


def rules_for(game: str) -> GameRules:
    """The rules of a built-in game by CLI name; empty rules for any other game."""
    from wantofight.collect.game_registry import builtin_games

    spec = builtin_games().get(game)
    return GameRules.from_info(game, spec.info if spec else {})
