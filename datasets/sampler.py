"""The curriculum schedule and a deterministic, DDP-aware, resumable batch sampler over it.

Per training step s the sampler (on every rank alike) draws one tier from the schedule's weights
at s, using only (seed, s). Each tier is an endless stream of its clips: epoch e of a tier is a
permutation seeded by (seed, tier, e), cut to a whole number of global batches G = batch_size x
world_size (the n mod G clips left over wait for a later pass, where the permutation differs). A
step that picks tier t takes the next G positions of t's stream; rank r gets the r-th block of
batch_size. So the ranks' indices at a step are disjoint (a step never straddles two passes), and
within one pass the ranks together see each clip at most once (exactly once when G divides n).

Everything is a function of (seed, schedule, batch_size x world_size, step): the state is the
step, and resuming at step k replays the tier draws of steps < k (vectorised, ~1 s per 10^7
steps) to find each tier's position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

TIERS = ("single-action", "dual-action", "full-match")
_BLOCK = 4096
"""Steps whose tier draws come from one generator call (replay cost / memory trade-off)."""


# ---------------------------------------------------------------------------------------------
# Schedule


@dataclass(frozen=True)
class Phase:
    """Steps up to `until` (exclusive; None = forever) draw tiers with these relative weights."""

    until: int | None
    weights: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class CurriculumSchedule:
    """Phases in step order, e.g. single-action only, then single + dual, then full matches with
    a replay of the earlier tiers. The last phase has `until: None`."""

    phases: list[Phase]

    def __init__(self, phases):
        object.__setattr__(self, "phases", [p if isinstance(p, Phase) else Phase(p.get("until"), dict(p.get("weights", {})))
                                            for p in phases])
        self._validate()

    def _validate(self) -> None:
        if not self.phases:
            raise ValueError("a curriculum schedule needs at least one phase")
        last = 0
        for i, phase in enumerate(self.phases):
            final = i == len(self.phases) - 1
            if phase.until is None and not final:
                raise ValueError(f"phase {i} has until=None but is not the last phase")
            if final and phase.until is not None:
                raise ValueError(f"the last phase must have until=None (runs forever), got until={phase.until}")
            if phase.until is not None and (not isinstance(phase.until, int) or phase.until <= last):
                raise ValueError(f"phase {i}: until={phase.until!r} must be an int greater than {last}")
            last = phase.until if phase.until is not None else last
            bad = [t for t in phase.weights if t not in TIERS]
            if bad:
                raise ValueError(f"phase {i}: unknown tiers {bad}; valid tiers: {', '.join(TIERS)}")
            if any(not w >= 0 for w in phase.weights.values()) or sum(phase.weights.values()) <= 0:
                raise ValueError(f"phase {i}: weights must be >= 0 with a positive sum, got {phase.weights}")

    @classmethod
    def from_dict(cls, data) -> "CurriculumSchedule":
        """{"phases": [{"until": 100, "weights": {...}}, ...]} (or the list alone)."""
        phases = data["phases"] if isinstance(data, dict) else data
        return cls(phases)

    @classmethod
    def constant(cls, weights: dict[str, float]) -> "CurriculumSchedule":
        return cls([{"until": None, "weights": weights}])

    def to_dict(self) -> dict:
        return {"phases": [{"until": p.until, "weights": dict(p.weights)} for p in self.phases]}

    @property
    def tiers(self) -> list[str]:
        """Tiers with a positive weight in some phase, in curriculum order."""
        used = {t for p in self.phases for t, w in p.weights.items() if w > 0}
        return [t for t in TIERS if t in used]

    def phase_index(self, step: int) -> int:
        for i, phase in enumerate(self.phases):
            if phase.until is None or step < phase.until:
                return i
        raise AssertionError("unreachable: the last phase runs forever")

    def weights_at(self, step: int) -> dict[str, float]:
        """Normalised tier weights at `step` (tiers with weight 0 left out)."""
        weights = self.phases[self.phase_index(step)].weights
        total = sum(weights.values())
        return {t: w / total for t, w in weights.items() if w > 0}


# ---------------------------------------------------------------------------------------------
# Sampler


class CurriculumSampler:
    """Batch sampler: each iteration yields one training step's `batch_size` items for this rank,
    as `(index, step)` pairs (`ClipDataset`/`LatentDataset` accept them and draw the window from
    them); `pairs=False` yields plain indices. Endless unless `max_steps` is given.

    `step` is the next step to be yielded. A DataLoader runs ahead of the trainer by its prefetch,
    so checkpoint `state_dict(step=last_trained_step + 1)` (each item carries its `step`).
    """

    def __init__(self, item_tiers: list[str], schedule: CurriculumSchedule | dict, batch_size: int, seed: int = 0,
                 rank: int = 0, world_size: int = 1, start_step: int = 0, max_steps: int | None = None,
                 pairs: bool = True):
        if isinstance(schedule, dict):
            schedule = CurriculumSchedule.from_dict(schedule)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, world_size), got rank={rank}, world_size={world_size}")
        if start_step < 0:
            raise ValueError(f"start_step must be >= 0, got {start_step}")
        self.schedule, self.batch_size, self.seed = schedule, batch_size, seed
        self.rank, self.world_size, self.max_steps, self.pairs = rank, world_size, max_steps, pairs
        self.by_tier = {t: np.flatnonzero(np.asarray(item_tiers, dtype=object) == t) for t in TIERS}
        missing = [t for t in schedule.tiers if len(self.by_tier[t]) == 0]
        if missing:
            present = sorted({str(t) for t in item_tiers})
            raise ValueError(f"the schedule uses tier(s) {', '.join(missing)} but the data has no clips of them "
                             f"(the data holds: {', '.join(present) or 'nothing'})")
        small = [f"{t} ({len(self.by_tier[t])})" for t in schedule.tiers
                 if len(self.by_tier[t]) < batch_size * world_size]
        if small:
            raise ValueError(f"tier(s) {', '.join(small)} have fewer clips than batch_size x world_size = "
                             f"{batch_size * world_size}: a step could not give every rank distinct clips")
        self._perms: dict[tuple[str, int], np.ndarray] = {}
        self.step = 0
        self.positions = {t: 0 for t in TIERS}
        self.seek(start_step)

    # ---- the tier of each step ---------------------------------------------------------------
    def _uniforms(self, block: int) -> np.ndarray:
        return np.random.default_rng([self.seed, 0x7E5, block]).random(_BLOCK)

    def tiers_for(self, start: int, stop: int) -> np.ndarray:
        """Tier ids (index into TIERS) drawn for steps [start, stop); the same on every rank."""
        steps = np.arange(start, stop)
        u = np.concatenate([self._uniforms(b) for b in range(start // _BLOCK, (max(stop, 1) - 1) // _BLOCK + 1)])
        u = u[steps - (start // _BLOCK) * _BLOCK]
        out = np.empty(len(steps), dtype=np.int64)
        bounds = [0] + [p.until for p in self.schedule.phases[:-1]] + [None]
        for i, phase in enumerate(self.schedule.phases):
            lo, hi = bounds[i], bounds[i + 1]
            mask = (steps >= lo) & (steps < hi if hi is not None else True)
            if mask.any():
                weights = self.schedule.weights_at(lo)
                ids = np.array([TIERS.index(t) for t in weights])
                cdf = np.cumsum(list(weights.values()))
                out[mask] = ids[np.minimum(np.searchsorted(cdf, u[mask], side="right"), len(ids) - 1)]
        return out

    def tier_at(self, step: int) -> str:
        return TIERS[int(self.tiers_for(step, step + 1)[0])]

    def seek(self, step: int) -> None:
        """Jump to `step`: replay the tier draws of steps < step to place every tier's stream."""
        share = self.batch_size * self.world_size
        counts = np.zeros(len(TIERS), dtype=np.int64)
        for lo in range(0, step, 1 << 20):
            counts += np.bincount(self.tiers_for(lo, min(step, lo + (1 << 20))), minlength=len(TIERS))
        self.positions = {t: int(counts[k]) * share for k, t in enumerate(TIERS)}
        self.step = step

    # ---- streams -------------------------------------------------------------------------------
    def _perm(self, tier: str, epoch: int) -> np.ndarray:
        key = (tier, epoch)
        if key not in self._perms:
            if len(self._perms) > 8:
                self._perms.clear()
            rng = np.random.default_rng([self.seed, 0x5A3, TIERS.index(tier), epoch])
            self._perms[key] = self.by_tier[tier][rng.permutation(len(self.by_tier[tier]))]
        return self._perms[key]

    def _take(self, tier: str, position: int, count: int) -> list[int]:
        share = self.batch_size * self.world_size
        usable = len(self.by_tier[tier]) // share * share  # a pass = whole global batches
        return [int(self._perm(tier, p // usable)[p % usable]) for p in range(position, position + count)]

    def batch_at(self, step: int, positions: dict[str, int] | None = None) -> tuple[str, list[int]]:
        """(tier, this rank's indices) of `step`, given the tier positions before it."""
        positions = self.positions if positions is None else positions
        tier = self.tier_at(step)
        start = positions[tier] + self.rank * self.batch_size
        return tier, self._take(tier, start, self.batch_size)

    def __iter__(self) -> Iterator[list]:
        share = self.batch_size * self.world_size
        while self.max_steps is None or self.step < self.max_steps:
            tier, indices = self.batch_at(self.step)
            self.positions[tier] += share
            step = self.step
            self.step += 1
            yield [(i, step) for i in indices] if self.pairs else indices

    def __len__(self) -> int:
        if self.max_steps is None:
            raise TypeError("an endless CurriculumSampler has no length; give max_steps")
        return max(0, self.max_steps - self.step)

    # ---- checkpoint ----------------------------------------------------------------------------
    def state_dict(self, step: int | None = None) -> dict:
        """The data position to resume from: `step` (default: the sampler's own, which a
        DataLoader's prefetch has moved ahead of training) plus what defines the sequence."""
        return {"version": 1, "step": self.step if step is None else int(step), "seed": self.seed,
                "batch_size": self.batch_size, "world_size": self.world_size,
                "schedule": self.schedule.to_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Continue at `state["step"]`. A different seed would be another sequence: refused. A
        changed schedule, batch size or world size is allowed: positions are replayed under the
        sampler's own settings."""
        if state.get("seed") != self.seed:
            raise ValueError(f"sampler state has seed {state.get('seed')}, this sampler {self.seed}: "
                             "a different seed is a different data order")
        self.seek(int(state["step"]))


def eval_indices(n: int, count: int) -> list[int]:
    """`count` clip indices spread evenly over a split of `n` clips (every tier, every episode): the fixed
    windows that measures read (the stage picture and latent, validation PSNR, the game's fighter rows),
    never a training batch."""
    count = min(n, count)
    return sorted({round(i * (n - 1) / max(1, count - 1)) for i in range(count)}) if n else []
