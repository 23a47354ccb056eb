"""Builders for the trainer tests: tiny configs and in-memory datasets with the datasets' item dicts."""

from __future__ import annotations

from pathlib import Path

import torch

from wantofight.train.config import resolve_config
from wantofight_model.presets import get_preset

SAVED = Path(__file__).parent / "saved"  # configs of models saved before a setting existed (its README.md)
TIERS = ("single-action", "dual-action", "full-match")
FRAMES = 17  # chunk 0 + 2 chunks of 8: 5 latent frames, enough for every code path and fast on CPU


BASE_SETS = [f"data.frames={FRAMES}", "data.batch_size=2", "checkpoint.every=1000", "validation.every=0",
             "optim.warmup_steps=0"]


def tiny_config(*sets: str, **fields):
    """The tiny train preset at 17 frames, no validation, no checkpoints between steps."""
    return resolve_config("tiny", sets=BASE_SETS + list(sets), **fields)


def stage_config(stage: str, *sets: str):
    """`tiny_config` for another stage."""
    config = tiny_config(*sets)
    return type(config).from_dict({**config.to_dict(), "stage": stage})


class FixedBatch:
    """Trainer mixin: train on the first batch at every step (overfit-one-batch tests)."""

    def batch(self):
        if not hasattr(self, "_fixed"):
            self._fixed = super().batch()
        return self._fixed


class FixedDraws:
    """Trainer mixin: the noise draws of step 0 at every step, so the loss can only fall by fitting."""

    def loss(self, batch, micro, step=None):
        return super().loss(batch, micro, step=0)


class SyntheticLatentDataset:
    """A latent cache in memory: item i is fixed by (seed, i); tiers cycle through `tiers`.

    Latents carry a learnable structure (a per-clip pattern that moves with the keys), so a model can
    fit them; items have the LatentDataset dict: latents (16, F, h, w), keys (T, 2, 16), effective
    (T, 2), ref_tokens (2, N, C), tier, clip_id, start.
    """

    is_latent = True

    def __init__(self, n: int = 12, frames: int = FRAMES, tiers=TIERS, seed: int = 0, ref_tokens: int = 4,
                 preset: str = "tiny"):
        m = get_preset(preset)
        self.frames, self.seed, self.n_ref = frames, seed, ref_tokens
        self.F = 1 + (frames - 1) // 4
        self.shape = (m.latent_channels, self.F, m.latent_height, m.latent_width)
        self.clip_dim = m.clip_dim
        self.item_tiers = [tiers[i % len(tiers)] for i in range(n)]

    def __len__(self) -> int:
        return len(self.item_tiers)

    def __getitem__(self, key) -> dict:
        i, step = key if isinstance(key, tuple) else (key, 0)
        gen = torch.Generator().manual_seed(self.seed * 100003 + i)
        keys = (torch.rand(self.frames, 2, 16, generator=gen) > 0.8).float()
        keys[0] = 0
        base = torch.randn(self.shape[0], 1, *self.shape[2:], generator=gen)
        drift = torch.linspace(0, 1, self.F).view(1, -1, 1, 1)
        latents = base + drift * keys[:, 0, :4].mean() + 0.1 * torch.randn(self.shape, generator=gen)
        return {
            "latents": latents.float(),
            "keys": keys,
            "effective": torch.ones(self.frames, 2, dtype=torch.bool),
            "ref_tokens": torch.randn(2, self.n_ref, self.clip_dim, generator=gen),
            "tier": self.item_tiers[i],
            "clip_id": f"clip{i:04d}",
            "start": 0,
        }


class KeyedBlobDataset:
    """Latents that only the keys explain: two blobs, one per player, each moved by its own player's keys.

    Every clip starts from the same latent frame and has the same reference tokens; clips differ only
    in their keys. Player p's blob has its own channel signature and row; in each latent frame f >= 1
    the player holds LEFT, RIGHT or nothing through the frame's 4 pixel frames (rows 4f-3 .. 4f) and
    the blob stands 2 latent columns left of, right of, or at its home column. So without the keys the
    frames are a mixture of 3 places per blob, and with the players' keys swapped the wrong blob moves.
    The model is symmetric in the players, so it can only tell whose keys are whose by the reference
    tokens (a fixed random set per player). Same item dict as `SyntheticLatentDataset`.
    """

    is_latent = True
    rows, homes, amplitude = (2, 5), (3, 4), 3.0

    def __init__(self, n: int = 8, frames: int = FRAMES, seed: int = 0, preset: str = "tiny"):
        from wantofight.collect.keys import SLOT_INDEX

        m = get_preset(preset)
        self.frames, self.seed, self.F = frames, seed, 1 + (frames - 1) // 4
        self.shape = (m.latent_channels, self.F, m.latent_height, m.latent_width)
        self.slots = {-1: SLOT_INDEX["LEFT"], 1: SLOT_INDEX["RIGHT"]}
        gen = torch.Generator().manual_seed(1000 + seed)
        self.signatures = torch.randn(2, m.latent_channels, generator=gen).sign()  # (P, C): each blob's look
        self.ref_tokens = torch.randn(2, 4, m.clip_dim, generator=gen)  # (P, N, C)
        self.item_tiers = ["single-action"] * n

    def __len__(self) -> int:
        return len(self.item_tiers)

    def moves(self, i: int) -> torch.Tensor:
        """(F - 1, P) in {-1, 0, 1}: where each player steers its blob in latent frames 1 .."""
        return torch.randint(-1, 2, (self.F - 1, 2), generator=torch.Generator().manual_seed(self.seed * 100003 + i))

    def __getitem__(self, key) -> dict:
        i = key[0] if isinstance(key, tuple) else key
        moves = self.moves(i)
        keys = torch.zeros(self.frames, 2, 16)
        C, F, h, w = self.shape
        y, x = torch.arange(h).view(-1, 1).float(), torch.arange(w).view(1, -1).float()
        latents = torch.zeros(self.shape)
        for p in range(2):
            for f in range(F):
                move = int(moves[f - 1, p]) if f else 0
                if move:
                    keys[4 * f - 3:4 * f + 1, p, self.slots[move]] = 1
                column = self.homes[p] + 2 * move
                blob = torch.exp(-((y - self.rows[p]) ** 2 + (x - column) ** 2) / (2 * 0.8**2))  # (h, w)
                latents[:, f] += self.amplitude * self.signatures[p].view(C, 1, 1) * blob
        return {
            "latents": latents,
            "keys": keys,
            "effective": torch.ones(self.frames, 2, dtype=torch.bool),
            "ref_tokens": self.ref_tokens.clone(),
            "tier": self.item_tiers[i],
            "clip_id": f"blobs{i:04d}",
            "start": 0,
        }


KEYED_SETS = ["data.batch_size=8", "optim.lr=3e-3", "train_shift=20", "context.noise_prob=0.0", "ema_decay=0.0",
              'data.curriculum=[{"until": null, "weights": {"single-action": 1}}]']
"""Training on `KeyedBlobDataset`: the whole set (8 clips) in every batch; train_shift 20 puts most noise
levels near 1, where the keys decide what the frames show (at low noise the noisy frames show it)."""


def keyed_losses(trainer, draws: int = 8) -> dict[str, float]:
    """The trainer's loss on its (fixed) batch, averaged over `draws` fixed noise draws, with the batch's
    keys, with every key released, and with the two players' keys swapped."""
    from wantofight.train.validation import KEY_ABLATIONS

    batch = trainer.batch()
    variants = {"keys": batch["keys"], **{name: ablate(batch["keys"]) for name, ablate in KEY_ABLATIONS.items()}}
    trainer.wrapped.eval()
    with torch.no_grad():
        return {name: sum(float(trainer.loss({**batch, "keys": keys}, 0, step=10_000 + d)[0])
                          for d in range(draws)) / draws for name, keys in variants.items()}


def synthetic_datasets(n: int = 12, frames: int = FRAMES) -> dict:
    return {"train": SyntheticLatentDataset(n, frames, seed=0), "val": SyntheticLatentDataset(6, frames, seed=1)}


def tiny_stage2_checkpoint(out):
    """A tiny stage-2 run in `out`: one step on synthetic latents (a checkpoint to sample from, fast)."""
    from wantofight.train.stage2 import Stage2Trainer

    torch.set_num_threads(1)
    Stage2Trainer(stage_config("stage2", "max_steps=1"), None, out, datasets=synthetic_datasets(), progress=False).fit()
    return out


def losses(run_dir) -> dict[int, float]:
    from wantofight.train.metrics import read_metrics

    return {r["step"]: r["loss"] for r in read_metrics(run_dir) if "loss" in r}


# ---------------------------------------------------------------------------------------------
# DDP: one process per rank (torch.multiprocessing.spawn), gloo on CPU
# ---------------------------------------------------------------------------------------------

def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gradients_after_one_micro_batch(out_dir, global_batch: int, rank: int = 0, world: int = 1) -> dict:
    """Build the stage-1 trainer (DDP when world > 1), run one micro-batch of the real training path
    (sampler -> batch() -> loss() -> backward, DDP averaging the gradients) and one optimiser step;
    return the loss, the gradients and the updated weights."""
    from pathlib import Path

    from wantofight.train.stage1 import Stage1Trainer

    torch.set_num_threads(1)
    config = tiny_config(f"data.batch_size={global_batch // world}", "ema_decay=0.0", "max_steps=2")
    trainer = Stage1Trainer(config, None, Path(out_dir) / f"rank{rank}", datasets=synthetic_datasets(),
                            progress=False).setup()
    trainer.wrapped.train()
    batch = trainer.batch()
    loss, _ = trainer.loss(batch, micro=0)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in trainer.model.dit.named_parameters() if p.grad is not None}
    loss_mean = float(__import__("wantofight.train.distributed", fromlist=["mean"]).mean(loss.detach(), trainer.dist))
    stats = trainer.step()  # a full optimiser step on the next batch, through the same skeleton
    weights = {n: p.detach().clone() for n, p in trainer.model.dit.named_parameters()}
    return {"loss": loss_mean, "grads": grads, "step_loss": stats.loss, "weights": weights,
            "clip_ids": batch["clip_id"]}


def ddp_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    import os

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                       "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank)})
    from wantofight.train.distributed import teardown

    try:
        result = gradients_after_one_micro_batch(out_dir, global_batch=4, rank=rank, world=world)
        torch.save(result, f"{out_dir}/ddp_rank{rank}.pt")
        teardown(barrier=True)
    finally:
        teardown()


def fit_worker(rank: int, world: int, port: int, out_dir: str, sets: list[str], resume: bool,
               stage: str = "stage1", init_from: str | None = None, teacher: str | None = None) -> None:
    """One rank of a stage's `train()` under torchrun-like environment variables (gloo on CPU);
    `teacher` (and `dmd.*` sets) for stage 3."""
    import os

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                       "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank)})
    from wantofight.train.distributed import teardown
    from wantofight.train.run import train

    torch.set_num_threads(1)
    try:
        train(stage, preset="tiny", data=None, out=out_dir, resume=resume, init_from=init_from, teacher=teacher,
              sets=BASE_SETS + list(sets), progress=False, datasets=synthetic_datasets())
        teardown(barrier=True)
    finally:
        teardown()
