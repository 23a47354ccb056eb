"""Events with frame spans: hits, blocks, trades, knockdowns, KOs, rounds, side swaps, overlaps.

Every span is `[start_frame, end_frame)` in episode rows. Players are 1 and 2. Each detector reads
only the RAM names of docs/contracts.md (plus `pN_move`, `pN_stun`) and game.json; a detector whose inputs are
missing is listed in `not_computed` with the reason instead of being guessed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa

from wantofight.annotate.labels import PlayerTimeline, runs
from wantofight.annotate.rules import CROUCH_STATES, DOWN_STATES, STUN_STATES, GameRules

EVENT_TYPES = (
    "hit", "block", "trade", "knockdown", "ko", "round_start", "round_end", "time_out",
    "side_swap", "overlap", "idle", "non_gameplay",
)  # fmt: skip
LOCK_CHAIN = ("hitstun", "blockstun", "knockdown", "wakeup")
"""States a contact holds its victim in; a hit or block span lasts while they do."""

EVENT_SCHEMA = pa.schema([
    ("event", pa.string()),
    ("start_frame", pa.int32()),
    ("end_frame", pa.int32()),
    ("players", pa.list_(pa.int8())),
    ("attacker", pa.int8()),
    ("victim", pa.int8()),
    ("move", pa.string()),
    ("damage", pa.int16()),
    ("detail", pa.string()),
])  # fmt: skip


@dataclass(frozen=True)
class Event:
    event: str
    start_frame: int
    end_frame: int
    players: tuple[int, ...]
    attacker: int | None = None
    victim: int | None = None
    move: str | None = None
    damage: int | None = None
    detail: str | None = None

    def row(self) -> dict:
        row = asdict(self)
        row["players"] = list(self.players)
        return row


def events_table(events: list[Event]) -> pa.Table:
    ordered = sorted(events, key=lambda e: (e.start_frame, EVENT_TYPES.index(e.event), e.players, e.end_frame))
    return pa.Table.from_pylist([e.row() for e in ordered], schema=EVENT_SCHEMA)


@dataclass
class Context:
    """Everything the detectors read: RAM columns, both timelines, derived per-row flags."""

    columns: dict[str, np.ndarray]
    rules: GameRules
    frame_skip: int
    players: dict[int, PlayerTimeline] = field(default_factory=dict)
    fighting: np.ndarray | None = None
    """Per row: the fighting phase (None when the game has no `phase`)."""
    labels: dict[int, np.ndarray] = field(default_factory=dict)
    not_computed: dict[str, str] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return len(self.columns["frame_index"])

    def has(self, *names: str) -> bool:
        return all(n in self.columns for n in names)

    def col(self, name: str) -> np.ndarray:
        return self.columns[name].astype(np.int64)

    def skip(self, what: str, reason: str) -> list[Event]:
        self.not_computed[what] = reason
        return []


def detect_events(ctx: Context) -> list[Event]:
    events: list[Event] = []
    for detector in (contacts, knockdowns, kos, rounds, side_swaps, overlaps, idles, non_gameplay):
        events += detector(ctx)
    return events


def needs(ctx: Context, what: str, names: tuple[str, ...], states: bool = True) -> bool:
    """True when a detector can run; otherwise records what is missing."""
    missing = [n for n in names if n not in ctx.columns]
    if missing:
        ctx.not_computed[what] = f"RAM lacks {', '.join(missing)}"
        return False
    if states and not ctx.players:
        ctx.not_computed[what] = "no state ids for this game (game.json)"
        return False
    return True


def other(player: int) -> int:
    return 3 - player


# ---------------------------------------------------------------------------------------------
# Contacts: hit, block, trade


def contacts(ctx: Context) -> list[Event]:
    """A contact on victim v at row t: v's health drops, or v enters (or re-enters) hit/blockstun.

    Re-entry shows as the stun counter not having fallen by a full row's frames.
    """
    if not needs(ctx, "hit/block/trade", ("p1_health", "p2_health", "p1_move", "p2_move")):
        return []
    events: list[Event] = []
    hits_at: dict[int, dict[int, Event]] = {}
    starts = {v: contact_rows(ctx, v) for v in (1, 2)}
    for victim in (1, 2):
        tl, atk = ctx.players[victim], ctx.players[other(victim)]
        health = ctx.col(f"p{victim}_health")
        rows = starts[victim]
        for i, t in enumerate(rows):
            kind = "block" if tl.names[t] == "blockstun" else "hit"
            move_id = atk.move[t] if atk.move[t] else atk.move[t - 1]
            move = ctx.rules.moves.get(int(move_id))
            limit = rows[i + 1] if i + 1 < len(rows) else ctx.rows
            end = t + 1
            while end < limit and tl.names[end] in LOCK_CHAIN:
                end += 1
            event = Event(kind, t, end, (other(victim), victim), attacker=other(victim), victim=victim,
                          move=move.name if move else None, damage=int(max(health[t - 1] - health[t], 0)))
            events.append(event)
            if kind == "hit":
                hits_at.setdefault(t, {})[victim] = event
    for t, by_victim in sorted(hits_at.items()):
        if len(by_victim) == 2:
            p1_move, p2_move = by_victim[2].move, by_victim[1].move
            end = max(e.end_frame for e in by_victim.values())
            events.append(Event("trade", t, end, (1, 2), detail=f"p1:{p1_move},p2:{p2_move}"))
    return events


def contact_rows(ctx: Context, victim: int) -> list[int]:
    tl = ctx.players[victim]
    health = ctx.col(f"p{victim}_health")
    rows = []
    for t in range(1, ctx.rows):
        if health[t] < health[t - 1]:
            rows.append(t)
        elif tl.names[t] in STUN_STATES:
            entered = tl.names[t - 1] != tl.names[t]
            reset = tl.stun is not None and tl.stun[t] > tl.stun[t - 1] - ctx.frame_skip
            if entered or reset:
                rows.append(t)
    return rows


# ---------------------------------------------------------------------------------------------
# Knockdowns and KOs


def knockdowns(ctx: Context) -> list[Event]:
    if not needs(ctx, "knockdown", ()):
        return []
    return [
        Event("knockdown", a, b, (p,), victim=p)
        for p, tl in ctx.players.items()
        for a, b in runs(tl.is_state("knockdown"))
    ]


def kos(ctx: Context) -> list[Event]:
    """One event per KO'd fighter per round; a double KO is one event with both players."""
    if not needs(ctx, "ko", ()):
        return []
    spans = {p: runs(tl.is_state("ko")) for p, tl in ctx.players.items()}
    events = []
    both = {a: b for a, b in spans[1]} if spans[1] else {}
    for a, b in spans[2]:
        if a in both:
            events.append(Event("ko", a, max(b, both.pop(a)), (1, 2), detail="double_ko"))
        else:
            events.append(Event("ko", a, b, (2,), victim=2, attacker=1))
    events += [Event("ko", a, b, (1,), victim=1, attacker=2) for a, b in both.items()]
    return events


# ---------------------------------------------------------------------------------------------
# Rounds and non-gameplay spans


def rounds(ctx: Context) -> list[Event]:
    """round_start at the first fighting row; round_end over the round-over phase; time_out."""
    if ctx.fighting is None:
        ctx.not_computed["round_start/round_end/time_out"] = "RAM lacks phase (or game.json lacks phases)"
        return []
    over = ctx.rules.phase_id("round_over")
    phase = ctx.col("phase")
    events = []
    round_no = ctx.col("round") if ctx.has("round") else None
    for a, b in runs(ctx.fighting):
        if a > 0:
            detail = f"round {round_no[a]}" if round_no is not None else None
            events.append(Event("round_start", a, a + 1, (1, 2), detail=detail))
        if b < ctx.rows and phase[b] == over:
            end = b
            while end < ctx.rows and phase[end] == over:
                end += 1
            events += round_end(ctx, b, end)
    return events


def round_end(ctx: Context, t: int, end: int) -> list[Event]:
    winners: tuple[int, ...] = ()
    if ctx.has("p1_wins", "p2_wins"):
        winners = tuple(p for p in (1, 2) if ctx.col(f"p{p}_wins")[t] > ctx.col(f"p{p}_wins")[t - 1])
    by_ko = any(tl.names[t] == "ko" for tl in ctx.players.values())
    events = [Event("round_end", t, end, winners, detail="ko" if by_ko else "time_out")]
    if not by_ko:
        if ctx.has("timer") and ctx.col("timer")[t] == 0:
            events.append(Event("time_out", t, t + 1, winners))
    return events


def non_gameplay(ctx: Context) -> list[Event]:
    """Spans outside the fighting phase, named by phase; a round-over span starts with its KO pause."""
    if ctx.fighting is None:
        return ctx.skip("non_gameplay", "RAM lacks phase (or game.json lacks phases): every row counts as gameplay")
    phase = ctx.col("phase")
    events = []
    for a, b in runs(~ctx.fighting):
        for c, d in runs_of_values(phase[a:b]):
            name = ctx.rules.phases.get(int(phase[a + c]), "unknown")
            start, end = a + c, a + d
            if name == "round_over" and ctx.rules.ko_pause_frames:
                pause_end = min(start + ctx.rules.rows(ctx.rules.ko_pause_frames, ctx.frame_skip), end)
                events.append(Event("non_gameplay", start, pause_end, (), detail="ko_pause"))
                start = pause_end
            if start < end:
                events.append(Event("non_gameplay", start, end, (), detail=name))
    return events


def runs_of_values(values: np.ndarray) -> list[tuple[int, int]]:
    if len(values) == 0:
        return []
    cuts = np.flatnonzero(values[1:] != values[:-1]) + 1
    bounds = np.concatenate([[0], cuts, [len(values)]])
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


# ---------------------------------------------------------------------------------------------
# Side swaps and overlaps


def side_swaps(ctx: Context) -> list[Event]:
    """The fighters' left-right order flips during one fighting span.

    The span runs from the first row after the last row in the old order to the first row in the
    new order (inclusive), so it covers rows where both stand at the same x. `detail` says how:
    `jump_over` when a fighter is airborne during it (players = who was airborne), else
    `cross_through`.
    """
    if not needs(ctx, "side_swap", ("p1_x", "p2_x"), states=False):
        return []
    order = np.sign(ctx.col("p1_x") - ctx.col("p2_x"))
    gameplay = ctx.fighting if ctx.fighting is not None else np.ones(ctx.rows, dtype=bool)
    airborne = {p: tl.airborne() for p, tl in ctx.players.items()}
    if not airborne:
        ctx.not_computed["side_swap.how"] = "no state ids or y for this game: swaps are reported as 'unknown'"
    events = []
    for a, b in runs(gameplay):
        last, last_row = 0, None
        for t in range(a, b):
            if order[t] == 0:
                continue
            if last and order[t] != last:
                start = last_row + 1
                flyers = tuple(p for p, up in airborne.items() if up[last_row:t + 1].any())
                how = ("jump_over" if flyers else "cross_through") if airborne else "unknown"
                events.append(Event("side_swap", start, t + 1, flyers or (1, 2), detail=how))
            last, last_row = order[t], t
    return events


def overlaps(ctx: Context) -> list[Event]:
    """Rows where both fighters' hurtboxes (game.json `boxes.hurtbox`) intersect."""
    if not ctx.rules.hurtboxes:
        return ctx.skip("overlap", "no box sizes for this game (game.json boxes)")
    if not needs(ctx, "overlap", ("p1_x", "p2_x", "p1_y", "p2_y")):
        return []
    hit = box_overlap(hurtboxes(ctx, 1), hurtboxes(ctx, 2)) > 0
    if ctx.fighting is not None:
        hit &= ctx.fighting
    return [Event("overlap", a, b, (1, 2)) for a, b in runs(hit)]


def stances(ctx: Context, player: int) -> np.ndarray:
    """Per row `stand`, `crouch`, `air` or `down` (knocked down, waking up, KO'd), from the state."""
    tl = ctx.players[player]
    crouch_moves = [m.id for m in ctx.rules.moves.values() if m.stance == "crouch"]
    crouching = tl.is_state(*CROUCH_STATES) | (tl.is_state("attack") & np.isin(tl.move, crouch_moves))
    stance = np.where(tl.airborne(), "air", np.where(crouching, "crouch", "stand")).astype(object)
    stance[tl.is_state(*DOWN_STATES)] = "down"
    return stance


def place_boxes(ctx: Context, player: int, table: dict, stance: np.ndarray) -> tuple[np.ndarray, ...]:
    """(x0, y0, x1, y1, valid) per row: the `table` box of each row's stance around the fighter;
    a box's dx is mirrored for a fighter facing left (hurtboxes are symmetric, sprites are not)."""
    x, y = ctx.col(f"p{player}_x"), ctx.col(f"p{player}_y")
    left = ctx.col(f"p{player}_facing") != ctx.rules.facing_right if ctx.has(f"p{player}_facing") else \
        np.zeros(len(x), dtype=bool)
    out = [np.zeros(len(x), dtype=np.int64) for _ in range(4)] + [np.zeros(len(x), dtype=bool)]
    for name, box in table.items():
        rows = stance == name
        if box is None:
            continue
        dx, dy, w, h = box
        x0 = np.where(left[rows], x[rows] - dx - w, x[rows] + dx)
        out[0][rows], out[1][rows] = x0, y[rows] + dy
        out[2][rows], out[3][rows] = x0 + w, y[rows] + dy + h
        out[4][rows] = True
    return tuple(out)


def hurtboxes(ctx: Context, player: int) -> tuple[np.ndarray, ...]:
    """(x0, y0, x1, y1, valid) per row; stance from the state: down (no box), air, crouch, stand."""
    return place_boxes(ctx, player, {k: ctx.rules.hurtboxes.get(k) for k in ("stand", "crouch", "air")},
                       stances(ctx, player))


def sprite_boxes(ctx: Context, player: int) -> tuple[np.ndarray, ...]:
    """(x0, y0, x1, y1, valid) per row: where the fighter is drawn (game.json `boxes.sprite`), reaching
    `sprite_reach` forward while attacking."""
    stance = stances(ctx, player)
    boxes = list(place_boxes(ctx, player, ctx.rules.sprites, stance))
    reach = ctx.rules.sprite_reach
    if reach is not None:
        attacking = ctx.players[player].is_state("attack")
        left = ctx.col(f"p{player}_facing") != ctx.rules.facing_right
        x = ctx.col(f"p{player}_x")
        boxes[0] = np.where(attacking & left, np.minimum(boxes[0], x - reach), boxes[0])
        boxes[2] = np.where(attacking & ~left, np.maximum(boxes[2], x + reach + 1), boxes[2])
    return tuple(boxes)


def box_overlap(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> np.ndarray:
    """Per row, the width in px by which two boxes (x0, y0, x1, y1, valid) intersect (0 if not)."""
    (ax0, ay0, ax1, ay1, av), (bx0, by0, bx1, by1, bv) = a, b
    width = np.minimum(ax1, bx1) - np.maximum(ax0, bx0)
    meet = av & bv & (ay0 < by1) & (by0 < ay1)
    return np.where(meet, np.maximum(width, 0), 0)


# ---------------------------------------------------------------------------------------------
# Idle spans


def idles(ctx: Context) -> list[Event]:
    """Per player: runs of the `idle` action with no key held, during fighting."""
    if not ctx.labels:
        return ctx.skip("idle", "no state ids for this game (game.json)")
    events = []
    for p, labels in ctx.labels.items():
        quiet = (labels == "idle") & (ctx.col(f"p{p}_keys") == 0)
        if ctx.fighting is not None:
            quiet &= ctx.fighting
        events += [Event("idle", a, b, (p,)) for a, b in runs(quiet)]
    return events
