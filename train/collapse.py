"""DMD collapse detection (FastVideo's DMD students collapsed to black or flat frames).

After every generator step the student's outputs of that batch are compared with the real latents
of the same batch:

    flat   std(student) < min_std_ratio * std(real)                (the outputs lost their variation)
    drift  |mean(student) - mean(real)| > max_mean_shift * std(real)   (e.g. all black: the mean ran away)
    broken any non-finite value                                     (fires at once)

Statistics are over the whole batch (every sample, channel, frame and position). A flat or drifting
batch that persists for `patience` consecutive steps stops training with `CollapseError`, whose
message names the last checkpoint written before the first bad step: nothing is saved once a
collapse is detected, so that checkpoint is the one to resume from (with a lower generator learning
rate or more critic steps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from wantofight.train.trainer import TrainError


class CollapseError(TrainError):
    """The student collapsed; the message names the last good checkpoint."""


@dataclass
class CollapseConfig:
    """Thresholds of the per-batch collapse check."""

    min_std_ratio: float = 0.1
    """Flat when the student's std falls below this fraction of the real batch's std."""
    max_mean_shift: float = 2.0
    """Drifting when the student's mean is further than this many real stds from the real mean."""
    patience: int = 2
    """Consecutive bad batches before stopping (non-finite outputs stop at once)."""

    def __post_init__(self) -> None:
        if self.min_std_ratio < 0 or self.max_mean_shift <= 0 or self.patience < 1:
            raise ValueError(f"collapse thresholds: min_std_ratio >= 0, max_mean_shift > 0, patience >= 1; got "
                             f"{self.min_std_ratio}, {self.max_mean_shift}, {self.patience}")


@dataclass
class BatchStats:
    fake_mean: float
    fake_std: float
    real_mean: float
    real_std: float

    def as_metrics(self) -> dict[str, float]:
        return {"collapse/fake_mean": self.fake_mean, "collapse/fake_std": self.fake_std,
                "collapse/real_mean": self.real_mean, "collapse/real_std": self.real_std}


def batch_stats(fake: torch.Tensor, real: torch.Tensor) -> BatchStats:
    fake, real = fake.detach().float(), real.detach().float()
    return BatchStats(fake.mean().item(), fake.std().item(), real.mean().item(), real.std().item())


def problem(stats: BatchStats, config: CollapseConfig) -> str | None:
    """Why this batch looks collapsed, or None."""
    values = (stats.fake_mean, stats.fake_std)
    if not all(math.isfinite(v) for v in values):
        return f"non-finite outputs (mean {stats.fake_mean}, std {stats.fake_std})"
    scale = max(stats.real_std, 1e-8)
    if stats.fake_std < config.min_std_ratio * scale:
        return (f"flat outputs: std {stats.fake_std:.4g} < {config.min_std_ratio} x the real batch's std "
                f"{stats.real_std:.4g}")
    shift = abs(stats.fake_mean - stats.real_mean) / scale
    if shift > config.max_mean_shift:
        return (f"outputs drifted: mean {stats.fake_mean:.4g} vs the real batch's {stats.real_mean:.4g} "
                f"({shift:.2f} real stds > {config.max_mean_shift})")
    return None


class CollapseDetector:
    """Counts consecutive bad batches and raises `CollapseError` at `patience`."""

    def __init__(self, config: CollapseConfig):
        self.config = config
        self.bad_streak = 0
        self.first_bad_step: int | None = None

    def check(self, fake: torch.Tensor, real: torch.Tensor, step: int, run_dir: Path) -> BatchStats:
        stats = batch_stats(fake, real)
        why = problem(stats, self.config)
        if why is None:
            self.bad_streak, self.first_bad_step = 0, None
            return stats
        self.bad_streak += 1
        if self.first_bad_step is None:
            self.first_bad_step = step
        if self.bad_streak >= self.config.patience or why.startswith("non-finite"):
            raise CollapseError(self.message(why, step, run_dir))
        return stats

    def message(self, why: str, step: int, run_dir: Path) -> str:
        good = last_good_checkpoint(run_dir, self.first_bad_step if self.first_bad_step is not None else step)
        where = (f"last good checkpoint: {good} (resume with --resume after deleting the newer ones, or start a "
                 "new run from it)" if good is not None else "no checkpoint was written before the collapse")
        return (f"DMD collapse detected at step {step}: {why}, {self.bad_streak} consecutive batch(es) since step "
                f"{self.first_bad_step}. Training stopped without saving; {where}. Try a lower optim.lr, more "
                "dmd.critic_steps or a narrower dmd timestep range.")

    def state_dict(self) -> dict:
        return {"bad_streak": self.bad_streak, "first_bad_step": self.first_bad_step}

    def load_state_dict(self, state: dict) -> None:
        self.bad_streak, self.first_bad_step = state["bad_streak"], state["first_bad_step"]


def last_good_checkpoint(run_dir: Path, first_bad_step: int) -> Path | None:
    """The newest complete checkpoint written before `first_bad_step` (its step < first_bad_step)."""
    from wantofight.inference import checkpoints

    good = [p for p in checkpoints.list_checkpoints(run_dir) if int(p.name[len(checkpoints.PREFIX):]) < first_bad_step]
    return good[-1] if good else None
