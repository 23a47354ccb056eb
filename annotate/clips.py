"""Cutting the three tiers (docs/contracts.md, docs/curriculum.md) from an annotated episode, as clip plans (no video yet).

Every clip lies inside one gameplay *segment* (annotations' `segment`: one fighting span of one
round), so it never crosses an episode, a round boundary or non-gameplay rows.

- single-action: a run of non-neutral rows (neutral = both fighters `idle`, no key held) in which
  exactly one player gives input and performs exactly one action (one attack, possibly from a
  jump, or one movement), with 1..`context` neutral rows on each side taken from the recording.
- dual-action: such a run in which both players give input; labelled with each player's first
  attack (else first non-idle action).
- Both action tiers skip runs shorter than `MIN_ACTION_FRAMES` emulator frames: a tap or a walk
  that flickers on and off is no action to learn from.
- full-match: windows of `clip_frames` rows every `stride` rows in each segment of match-play
  episodes (any policy but `drill`).

Single- and dual-action clips are shorter than the training window; each says how many copies of
its first and last (neutral) frame a loader adds to reach `padded_frames` (docs/curriculum.md).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

import numpy as np

from wantofight.annotate.labels import JUMP_LABELS, runs

TIERS = ("single-action", "dual-action", "full-match")
TIER_NAMES = {"single": "single-action", "dual": "dual-action", "full": "full-match"}
MATCH_PLAY_EXCLUDED = ("drill",)
"""Policies whose episodes are drills, not match play (they give no full-match clips)."""
MIN_ACTION_FRAMES = {"single-action": 8, "dual-action": 8}
"""Shortest run of non-neutral rows an action clip may hold, in emulator frames (rows x frame_skip, so
the same at 30 and 60 fps). duel's shortest attack lasts 11 frames and a jump 32; a one-row tap is 1-2."""


@dataclass(frozen=True)
class ClipPlan:
    """One clip: where it lies in its episode and what it is labelled with."""

    clip_id: str
    tier: str
    start_frame: int
    num_frames: int
    pad_before: int = 0
    pad_after: int = 0
    actor: int | None = None
    side: str | None = None
    p1_move: str | None = None
    p2_move: str | None = None

    @property
    def end_frame(self) -> int:
        return self.start_frame + self.num_frames

    def to_dict(self) -> dict:
        return asdict(self)


def parse_tiers(text: str) -> tuple[str, ...]:
    """`single,dual,full` (short or full names) → tier names in curriculum order."""
    chosen = set()
    for word in (w.strip() for w in text.split(",") if w.strip()):
        name = TIER_NAMES.get(word, word)
        if name not in TIERS:
            valid = ", ".join(list(TIER_NAMES) + list(TIERS))
            raise ValueError(f"unknown tier {word!r}; valid tiers: {valid}")
        chosen.add(name)
    if not chosen:
        raise ValueError("--tiers is empty; valid tiers: single, dual, full")
    return tuple(t for t in TIERS if t in chosen)


def clip_id(identity: dict, tier: str, start_frame: int, num_frames: int) -> str:
    """Deterministic from the episode's identity (rom, game, state, policies, seed, episode id,
    fps, length and a digest of its keys), the tier and the frame range."""
    text = json.dumps({"episode": identity, "tier": tier, "start": start_frame, "frames": num_frames}, sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:20]


# ---------------------------------------------------------------------------------------------
# Cutting


@dataclass(frozen=True)
class CutOptions:
    clip_frames: int = 161
    stride: int = 161
    context: int = 4
    """Neutral rows kept on each side of a single- or dual-action instance (at most)."""


def cut_episode(frames: dict[str, np.ndarray], identity: dict, tiers: tuple[str, ...], options: CutOptions,
                match_play: bool, p1_x: np.ndarray | None = None, p2_x: np.ndarray | None = None,
                frame_skip: int = 1) -> list[ClipPlan]:
    """Clip plans of the requested tiers for one episode's annotation columns (`frame_skip`: emulator
    frames per row, for the action tiers' minimum length)."""
    plans: list[ClipPlan] = []
    segment = frames["segment"]
    labelled = frames["p1_action"][0] is not None if len(segment) else False
    for seg in np.unique(segment[segment >= 0]):
        rows = np.flatnonzero(segment == seg)
        lo, hi = int(rows[0]), int(rows[-1]) + 1
        if labelled and {"single-action", "dual-action"} & set(tiers):
            plans += instances(frames, lo, hi, identity, tiers, options, p1_x, p2_x, frame_skip)
        if "full-match" in tiers and match_play:
            for start in range(lo, hi - options.clip_frames + 1, options.stride):
                plans.append(ClipPlan(clip_id(identity, "full-match", start, options.clip_frames), "full-match",
                                      start, options.clip_frames))
    return sorted(plans, key=lambda p: (TIERS.index(p.tier), p.start_frame, p.num_frames))


def instances(frames, lo, hi, identity, tiers, options, p1_x, p2_x, frame_skip=1) -> list[ClipPlan]:
    keys = {p: frames[f"p{p}_keys"][lo:hi] for p in (1, 2)}
    acts = {p: np.asarray(frames[f"p{p}_action"][lo:hi], dtype=object) for p in (1, 2)}
    neutral = (acts[1] == "idle") & (acts[2] == "idle") & (keys[1] == 0) & (keys[2] == 0)
    plans = []
    for a, b in runs(~neutral):
        before = neutral_count(neutral[:a][::-1], options.context)
        after = neutral_count(neutral[b:], options.context)
        num = before + (b - a) + after
        if before == 0 or after == 0 or num > options.clip_frames:
            continue  # not seen from neutral to recovery, or longer than the window
        start = lo + a - before
        active = [p for p in (1, 2) if keys[p][a:b].any()]
        tier = "single-action" if len(active) == 1 else "dual-action"
        if (b - a) * frame_skip < MIN_ACTION_FRAMES[tier]:
            continue  # a tap or a flicker, not an action
        pad = options.clip_frames - num
        common = dict(start_frame=start, num_frames=num, pad_before=pad // 2, pad_after=pad - pad // 2)
        if len(active) == 1 and "single-action" in tiers:
            actor = active[0]
            move = single_action(acts[actor][a:b])
            if move is None:
                continue
            side = None
            if p1_x is not None and p2_x is not None:
                mine, theirs = (p1_x, p2_x) if actor == 1 else (p2_x, p1_x)
                side = "left" if mine[lo + a] < theirs[lo + a] else "right"
            moves = {"p1_move": move if actor == 1 else None, "p2_move": move if actor == 2 else None}
            plans.append(ClipPlan(clip_id(identity, "single-action", start, num), "single-action", actor=actor,
                                  side=side, **moves, **common))
        elif len(active) == 2 and "dual-action" in tiers:
            plans.append(ClipPlan(clip_id(identity, "dual-action", start, num), "dual-action",
                                  p1_move=primary_action(acts[1][a:b]), p2_move=primary_action(acts[2][a:b]), **common))
    return plans


def neutral_count(flags: np.ndarray, cap: int) -> int:
    """Leading True values of `flags`, at most `cap`."""
    count = 0
    for flag in flags[:cap]:
        if not flag:
            break
        count += 1
    return count


def single_action(labels: np.ndarray) -> str | None:
    """The one action a run shows: its attack (a jump before an air attack is part of it), or its
    one movement; None for a mixed run (two attacks, a walk then an attack, …)."""
    seen = [label for label in dict.fromkeys(labels) if label != "idle"]
    attacks = [label for label in seen if label.startswith("attack:")]
    if len(attacks) == 1 and all(label in JUMP_LABELS or label == attacks[0] for label in seen):
        return attacks[0].removeprefix("attack:")
    if len(seen) == 1 and not attacks:
        return seen[0]
    return None


def primary_action(labels: np.ndarray) -> str | None:
    seen = [label for label in dict.fromkeys(labels) if label != "idle"]
    attacks = [label for label in seen if label.startswith("attack:")]
    if attacks:
        return attacks[0].removeprefix("attack:")
    return seen[0] if seen else "idle"


# ---------------------------------------------------------------------------------------------
# Balancing and splitting


def rank(seed: int, key: str) -> str:
    return hashlib.sha1(f"{seed}:{key}".encode()).hexdigest()


def balance_singles(plans: list[tuple[str, ClipPlan]], seed: int) -> tuple[list[tuple[str, ClipPlan]], dict]:
    """Keep the same number of single-action clips for every (move, side) present: the smallest
    bucket's count, chosen by a seeded hash of the clip id. Returns kept plans and the coverage."""
    buckets: dict[tuple[str, str], list[tuple[str, ClipPlan]]] = {}
    for item in plans:
        plan = item[1]
        buckets.setdefault((plan.p1_move or plan.p2_move, plan.side or "unknown"), []).append(item)
    cap = min((len(v) for v in buckets.values()), default=0)
    kept = []
    coverage = {}
    for (move, side), items in sorted(buckets.items()):
        chosen = sorted(items, key=lambda it: rank(seed, it[1].clip_id))[:cap]
        kept += chosen
        coverage[f"{move}/{side}"] = {"found": len(items), "kept": len(chosen)}
    return kept, coverage


def split_episodes(uids: list[str], val_fraction: float, seed: int) -> dict[str, str]:
    """Episode uid → `train` / `val`: a seeded order of the uids, the first share goes to val
    (at least one episode when val_fraction > 0 and there are two or more)."""
    order = sorted(uids, key=lambda uid: rank(seed, uid))
    count = round(len(order) * val_fraction)
    if val_fraction > 0 and len(order) >= 2:
        count = max(count, 1)
    count = min(count, len(order) - 1) if len(order) >= 2 else 0
    return {uid: ("val" if i < count else "train") for i, uid in enumerate(order)}
