"""The trainer's data part: the train / val datasets, the curriculum sampler and the loader.

    feed = DataFeed(config, model_config, data_path, dist, device, log)   # opens and checks the data
    feed.start(step)        # the sampler and loader, positioned at an optimiser step (resume)
    raw = feed.next()       # one collated micro-batch of this rank (CPU tensors)

A curriculum phase's `until` counts optimiser steps; the sampler counts micro-batches, so it is scaled
by `grad_accum` here. A tier the data lacks is dropped, and the note says so (docs/training.md,
"Curriculum").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

from wantofight.train.errors import TrainError


def fit_curriculum(phases: list[dict], tiers: set[str]) -> tuple[list[dict], list[str]]:
    """The curriculum phases restricted to the tiers the data holds, and notes saying what changed.

    A tier the data lacks is dropped from every phase; a phase left without tiers is skipped (its steps
    go to the next phase kept); the last phase kept runs to the end (`until` None). Empty when no phase
    uses a tier the data holds.
    """
    notes = []
    absent = sorted({t for p in phases for t in p["weights"]} - tiers)
    if absent:
        notes.append(f"the train split has no {', '.join(absent)} clips; the curriculum phases use the other tiers")
    kept = []
    for number, phase in enumerate(phases, start=1):
        weights = {t: w for t, w in phase["weights"].items() if t in tiers}
        if weights:
            kept.append({**phase, "weights": weights})
        else:
            notes.append(f"curriculum phase {number} ({', '.join(phase['weights'])} only) skipped: the train split has none")
    if kept:
        kept[-1]["until"] = None
    return kept, notes


def is_latent(dataset) -> bool:
    return type(dataset).__name__.startswith("Latent") or getattr(dataset, "is_latent", False)


class DataFeed:
    def __init__(self, config, model_config, data_path: Path | None, dist, device, log: Callable[[str], None],
                 datasets: dict[str, Any] | None = None):
        from wantofight.train.data import check_item, open_datasets

        self.config, self.data_path, self.dist, self.device, self.log = config, data_path, dist, device, log
        if datasets is None:
            if data_path is None:
                raise TrainError("no --data given")
            datasets = open_datasets(data_path, config, model_config)
        self.datasets = datasets
        train = datasets["train"]
        self.source = "latents" if is_latent(train) else "clips"
        if len(train) == 0:
            raise TrainError(f"the train split of {data_path} is empty")
        check_item(train[0], config, model_config, str(data_path))  # data and preset disagree: both named
        if config.validation.every and datasets.get("val") is None:
            log("[yellow]note:[/] the data has no val split for the curriculum's tiers: validation is skipped")
        self.sampler = None
        self.loader = None
        self._iter: Iterator | None = None

    def start(self, step: int, sampler_state: dict | None = None) -> None:
        """The curriculum sampler at optimiser step `step` (with a resumed run's saved state) and its loader."""
        from wantofight.train.data import datasets_api

        CurriculumSampler, CurriculumSchedule = datasets_api("CurriculumSampler"), datasets_api("CurriculumSchedule")
        make_loader = datasets_api("make_loader")
        c, accum = self.config, self.config.optim.grad_accum
        phases = [{"until": None if p.get("until") is None else int(p["until"]) * accum,
                   "weights": dict(p["weights"])} for p in c.data.curriculum]
        tiers = set(self.datasets["train"].item_tiers)
        phases, notes = fit_curriculum(phases, tiers)
        for note in notes:
            self.log(f"[yellow]note:[/] {note}")
        if not phases:
            raise TrainError(
                f"no curriculum phase uses a tier the train split of {self.data_path} holds (it holds "
                f"{', '.join(sorted(tiers)) or 'no clips'}); add such clips or set data.curriculum in a --config file")
        schedule = CurriculumSchedule.from_dict({"phases": phases})
        try:
            self.sampler = CurriculumSampler(self.datasets["train"].item_tiers, schedule, c.data.batch_size,
                                             seed=c.seed, rank=self.dist.rank, world_size=self.dist.world_size,
                                             start_step=step * accum)
        except ValueError as err:  # e.g. a tier with fewer clips than one global batch
            raise TrainError(str(err)) from None
        if sampler_state is not None:
            self.sampler.load_state_dict(sampler_state)
        workers = c.data.num_workers
        self.loader = make_loader(self.datasets["train"], self.sampler, num_workers=workers,
                                  pin_memory=self.device.type == "cuda", persistent_workers=workers > 0)
        self._iter = None

    def next(self) -> dict:
        """The next collated micro-batch; a finite sampler starts another pass from where it stands."""
        if self._iter is None:
            self._iter = iter(self.loader)
        try:
            return next(self._iter)
        except StopIteration:
            self._iter = iter(self.loader)
            return next(self._iter)

    def state_dict(self, step: int) -> dict:
        """The sampler's position at optimiser step `step` (the loader prefetches ahead of training, so the
        data position is the next step to train)."""
        return self.sampler.state_dict(step=step * self.config.optim.grad_accum)
