"""DataLoader helpers: a collate that keeps strings, per-worker seeding, pinned memory, persistent
workers, and the GPU-side resize for `pixels="uint8"` datasets."""

from __future__ import annotations

import random

import numpy as np


def collate(items: list[dict]) -> dict:
    """Stack tensors along a new batch dim, make ints/floats/bools a tensor, keep everything else
    (strings, label lists, meta dicts) as a list of the items' values."""
    import torch

    out = {}
    for key in items[0]:
        values = [item[key] for item in items]
        first = values[0]
        if isinstance(first, torch.Tensor):
            out[key] = torch.stack(values)
        elif isinstance(first, (bool, int, float)) and not isinstance(first, str):
            out[key] = torch.tensor(values)
        else:
            out[key] = values
    return out


def seed_worker(worker_id: int) -> None:
    """Seed numpy, random and torch in a worker from the DataLoader's per-worker seed, and keep
    each worker to one intra-op thread (the workers are the parallelism)."""
    import torch

    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(1)


def make_loader(dataset, sampler, num_workers: int = 0, pin_memory: bool = False,
                persistent_workers: bool | None = None, prefetch_factor: int | None = None, seed: int = 0):
    """A DataLoader that asks `sampler` (a batch sampler, e.g. CurriculumSampler) for each step's
    items. `persistent_workers` defaults to True whenever there are workers (no re-spawn per pass);
    `seed` fixes the workers' base seed so a rerun seeds them alike."""
    import torch
    from torch.utils.data import DataLoader

    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0, got {num_workers}")
    extra = {}
    if num_workers > 0:
        extra["persistent_workers"] = True if persistent_workers is None else persistent_workers
        extra["prefetch_factor"] = prefetch_factor or 2
    return DataLoader(dataset, batch_sampler=sampler, num_workers=num_workers, collate_fn=collate,
                      pin_memory=pin_memory, worker_init_fn=seed_worker,
                      generator=torch.Generator().manual_seed(seed), **extra)


def frames_to_model(frames, size: tuple[int, int], resize: str = "stretch"):
    """uint8 frames (B, T, 3, h, w) from a `pixels="uint8"` dataset -> float32 (B, T, 3, H, W) in
    [-1, 1] on their device (move them to the GPU first): the same numbers as `pixels="float"`."""
    from wantofight.datasets.frames import to_model

    return to_model(frames, size, resize)
