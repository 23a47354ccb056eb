"""Test cases mined from recordings by their RAM (docs/benchmark.md, "Scenarios").

A case is a window of an episode: its first row is the prompt frame, the rest are the rows a model
generates from the prompt and both players' keys. Every case lies inside one fighting segment of a
round (annotations' `segment`), except `long` cases, which run on across rounds.

- single-action: the curriculum's single-action instances (annotate/clips.py: one player performs
  one move or movement from neutral to recovery while the other gives no input), one bucket per
  (player, action);
- dual-action: the curriculum's dual-action instances (both players give input);
- static: windows in which the fighters keep their sides and never overlap;
- jump_over: the left-right order flips while the fighter that crossed is airborne;
- chase_cross: the order flips while the fighter that crossed is on the ground (it walked or was
  pushed under an airborne opponent);
- overlap: the fighters' drawn sprites (game.json `boxes.sprite`, reaching `sprite_reach` forward
  while attacking) intersect by at least OVERLAP_PX for at least `overlap_rows` rows: close-range
  exchanges where one fighter is drawn over the other, and cross-ups;
- long: at least `long_seconds` of fighting-phase rows in one window.

Identity cases (the last five) must be informative (scoring.informative >= INFORMATIVE_MARGIN): on
the truth, the players behave differently enough for the binding rule to tell them apart. Nothing is
padded: a scenario the recordings hold too few of is reported with its count.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

import numpy as np

from wantofight.annotate.labels import PlayerTimeline
from wantofight.benchmark.episodes import GameInfo, LabelledEpisode
from wantofight.benchmark.labels import STATE_CLASSES
from wantofight.benchmark.scoring import INFORMATIVE_MARGIN, informative

OVERLAP_PX = 4
"""Sprites intersecting by fewer px merely touch (two idle fighters at the closest distance the game
allows overlap by 2 px)."""

MIN_ACTION_ROWS = 9
"""An action case is at least the prompt and one chunk of 8 rows: shorter instances are key pulses
(a press of a row or two), not actions."""
MOVEMENTS = ("walk_forward", "walk_back", "crouch", "jump_up", "jump_forward", "jump_back")


def single_actions(rules) -> list[str]:
    """Every action a single-action case can show: the movements and the game's moves."""
    return list(MOVEMENTS) + rules.move_names


FAMILIES = {"single-action": ("single-action",), "dual-action": ("dual-action",),
            "identity": ("static", "jump_over", "chase_cross", "overlap", "long")}
SCENARIOS = tuple(s for names in FAMILIES.values() for s in names)
IDENTITY = FAMILIES["identity"]


def family_of(scenario: str) -> str:
    return next(f for f, names in FAMILIES.items() if scenario in names)


@dataclass(frozen=True)
class MineOptions:
    per_scenario: int = 20
    """Cases kept per scenario (per player and action for single-action), chosen by a seeded hash."""
    identity_rows: int = 48
    """Rows after the prompt in static, swap and overlap cases."""
    lead_rows: int = 8
    """Rows between the prompt and a swap or overlap."""
    overlap_rows: int = 4
    long_seconds: float = 60.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.per_scenario < 1:
            raise ValueError(f"--per-scenario must be >= 1, got {self.per_scenario}")
        if self.identity_rows < 8 or self.lead_rows < 1 or self.lead_rows >= self.identity_rows:
            raise ValueError(f"identity_rows ({self.identity_rows}) must be >= 8 and lead_rows ({self.lead_rows}) "
                             "between 1 and identity_rows - 1")
        if self.overlap_rows < 1 or self.long_seconds <= 0:
            raise ValueError(f"overlap_rows ({self.overlap_rows}) must be >= 1 and long_seconds "
                             f"({self.long_seconds}) > 0")


@dataclass(frozen=True)
class CasePlan:
    scenario: str
    episode: int
    """Index into the episode list the miner was given."""
    start: int
    """Episode row of the prompt frame."""
    rows: int
    """Rows in the case, prompt included (the model generates rows - 1)."""
    label: str | None = None
    """single-action: the action; dual-action: `p1 action + p2 action`; identity: what happened."""
    actor: int | None = None
    informative: float | None = None

    def case_id(self, episode_uid: str) -> str:
        text = json.dumps({"episode": episode_uid, "scenario": self.scenario, "start": self.start,
                           "rows": self.rows}, sort_keys=True)
        return hashlib.sha1(text.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# One episode
# ---------------------------------------------------------------------------------------------

@dataclass
class EpisodeView:
    """What mining reads of one episode: truth, annotations, events."""

    index: int
    ep: LabelledEpisode
    frames: dict[str, np.ndarray]
    """Annotation columns (annotations.parquet)."""
    events: list[dict]
    game: GameInfo

    @property
    def segment(self) -> np.ndarray:
        return self.frames["segment"]

    def in_segment(self, a: int, b: int) -> bool:
        """Rows [a, b) lie in one fighting segment."""
        if a < 0 or b > len(self.segment):
            return False
        seg = self.segment[a:b]
        return bool(seg[0] >= 0 and (seg == seg[0]).all())

    def sprite_overlap(self) -> np.ndarray:
        """(T,) bool: the fighters' sprites intersect by at least OVERLAP_PX."""
        from wantofight.annotate import events as ev

        cols, rules = self.ep.episode.columns, self.game.rules
        ctx = ev.Context(cols, rules, self.ep.episode.frame_skip)
        ctx.players = {p: PlayerTimeline(cols, p, rules, ctx.frame_skip) for p in (1, 2)}
        return ev.box_overlap(ev.sprite_boxes(ctx, 1), ev.sprite_boxes(ctx, 2)) >= OVERLAP_PX

    def informative(self, a: int, b: int) -> float:
        return informative(self.ep.truth.rows(slice(a, b)), self.ep.episode.frame_skip, len(STATE_CLASSES))


def mine_episode(view: EpisodeView, options: MineOptions) -> list[CasePlan]:
    """Every case the episode holds, before the per-scenario cap."""
    overlap = view.sprite_overlap()
    found = action_cases(view) + static_cases(view, options, overlap) + swap_cases(view, options)
    found += overlap_cases(view, options, overlap) + long_cases(view, options)
    return found


def action_cases(view: EpisodeView) -> list[CasePlan]:
    """The curriculum's single- and dual-action instances, each a case from its first neutral row to
    its last (the model generates whole chunks; rows past the case are dropped)."""
    from wantofight.annotate.clips import CutOptions, cut_episode

    cols = view.ep.episode.columns
    plans = cut_episode(view.frames, view.ep.episode.identity(), ("single-action", "dual-action"),
                        CutOptions(clip_frames=10**6, stride=10**6), False, cols.get("p1_x"), cols.get("p2_x"))
    out = []
    for plan in plans:
        if plan.num_frames < MIN_ACTION_ROWS:
            continue
        if plan.tier == "single-action":
            label, actor = plan.p1_move or plan.p2_move, plan.actor
        else:
            label, actor = f"{plan.p1_move} + {plan.p2_move}", None
        out.append(CasePlan(plan.tier, view.index, plan.start_frame, plan.num_frames, label, actor))
    return out


def windows_ok(view: EpisodeView, a: int, rows: int) -> float | None:
    """The informativeness of rows [a, a + rows) when they lie in one segment and are informative."""
    if not view.in_segment(a, a + rows):
        return None
    score = view.informative(a, a + rows)
    return score if score >= INFORMATIVE_MARGIN else None


def static_cases(view: EpisodeView, options: MineOptions, overlap: np.ndarray) -> list[CasePlan]:
    """Windows tiled over each segment in which the order never flips and the sprites never overlap."""
    n = options.identity_rows + 1
    x = view.ep.episode.columns
    order = np.sign(x["p1_x"].astype(np.int64) - x["p2_x"].astype(np.int64))
    out = []
    for seg in np.unique(view.segment[view.segment >= 0]):
        rows = np.flatnonzero(view.segment == seg)
        for a in range(int(rows[0]), int(rows[-1]) + 2 - n, n):
            w = order[a:a + n]
            if (w == 0).any() or (w != w[0]).any() or overlap[a:a + n].any():
                continue
            score = windows_ok(view, a, n)
            if score is not None:
                out.append(CasePlan("static", view.index, a, n, "no swap, no overlap", informative=score))
    return out


def event_window(view: EpisodeView, start: int, end: int, options: MineOptions) -> tuple[int, float] | None:
    """A window of identity_rows + 1 rows whose prompt is lead_rows before `start` and which covers
    [start, end) with room after it."""
    n = options.identity_rows + 1
    a = start - options.lead_rows
    if end + options.lead_rows // 2 > a + n:
        return None
    score = windows_ok(view, a, n)
    return None if score is None else (a, score)


def swap_cases(view: EpisodeView, options: MineOptions) -> list[CasePlan]:
    """Side swaps (annotate's `side_swap` events), split by whether the fighter that crossed was in
    the air (jump_over) or on the ground (chase_cross)."""
    cols, rules, skip = view.ep.episode.columns, view.game.rules, view.ep.episode.frame_skip
    airborne = {p: PlayerTimeline(cols, p, rules, skip).airborne() for p in (1, 2)}
    out = []
    for e in view.events:
        if e["event"] != "side_swap":
            continue
        a, b = int(e["start_frame"]), int(e["end_frame"])
        before, after = max(a - 1, 0), b - 1
        moved = {p: abs(int(cols[f"p{p}_x"][after]) - int(cols[f"p{p}_x"][before])) for p in (1, 2)}
        crosser = max((1, 2), key=lambda p: (moved[p], -p))
        flying = bool(airborne[crosser][before:after + 1].any())
        window = event_window(view, a, b, options)
        if window is not None:
            scenario = "jump_over" if flying else "chase_cross"
            how = "jumped over" if flying else "went under"
            out.append(CasePlan(scenario, view.index, window[0], options.identity_rows + 1,
                                f"P{crosser} {how} at rows {a - window[0]}-{b - window[0]}", crosser, window[1]))
    return out


def overlap_cases(view: EpisodeView, options: MineOptions, overlap: np.ndarray) -> list[CasePlan]:
    from wantofight.annotate.labels import runs

    out = []
    for a, b in runs(overlap & (view.segment >= 0)):
        if b - a < options.overlap_rows:
            continue
        window = event_window(view, a, min(b, a + options.identity_rows - options.lead_rows), options)
        if window is not None:
            out.append(CasePlan("overlap", view.index, window[0], options.identity_rows + 1,
                                f"overlap for {b - a} rows from row {a - window[0]}", informative=window[1]))
    return out


def long_cases(view: EpisodeView, options: MineOptions) -> list[CasePlan]:
    """Back-to-back windows, each from a fighting row to the row where `long_seconds` of fighting rows
    are reached (rounds' intros and KO pauses in between are part of the case)."""
    need = int(np.ceil(options.long_seconds * float(view.ep.meta["fps"])))
    fighting = np.flatnonzero(view.frames["gameplay"])
    out = []
    i = 0
    while i + need <= len(fighting):
        a, last = int(fighting[i]), int(fighting[i + need - 1])
        score = view.informative(a, last + 1)
        if score >= INFORMATIVE_MARGIN:
            out.append(CasePlan("long", view.index, a, last + 1 - a, f"{options.long_seconds:g} s of fighting",
                                informative=score))
        i += need
    return out


# ---------------------------------------------------------------------------------------------
# Choosing
# ---------------------------------------------------------------------------------------------

def bucket_of(plan: CasePlan) -> str:
    if plan.scenario == "single-action":
        return f"single-action/P{plan.actor} {plan.label}"
    return plan.scenario


def non_overlapping(plans: list[CasePlan]) -> list[CasePlan]:
    """Within one identity scenario and episode, drop a case that overlaps an earlier one (action
    instances never overlap: each runs from neutral to neutral)."""
    kept, end = [], {}
    for plan in sorted(plans, key=lambda p: (p.scenario, p.episode, p.start)):
        key = (plan.scenario, plan.episode)
        if plan.scenario not in IDENTITY or plan.start >= end.get(key, -1):
            kept.append(plan)
            end[key] = plan.start + plan.rows
    return kept


def choose(plans: list[CasePlan], uids: list[str], options: MineOptions) -> tuple[list[CasePlan], dict]:
    """At most `per_scenario` cases per bucket, by a seeded hash of the case id; returns the kept
    cases (in a deterministic order) and per bucket how many were found and kept."""
    buckets: dict[str, list[CasePlan]] = {}
    for plan in non_overlapping(plans):
        buckets.setdefault(bucket_of(plan), []).append(plan)
    kept, counts = [], {}
    for name, items in sorted(buckets.items()):
        rank = sorted(items, key=lambda p: hashlib.sha1(f"{options.seed}:{p.case_id(uids[p.episode])}".encode())
                      .hexdigest())
        chosen = rank[:options.per_scenario]
        kept += chosen
        counts[name] = {"found": len(items), "kept": len(chosen)}
    for scenario in SCENARIOS:
        if scenario != "single-action" and scenario not in counts:
            counts[scenario] = {"found": 0, "kept": 0}
    order = {s: i for i, s in enumerate(SCENARIOS)}
    kept.sort(key=lambda p: (order[p.scenario], p.label or "", p.actor or 0, p.episode, p.start))
    return kept, counts
