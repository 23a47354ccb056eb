"""`fighter_weight`: the stage latent, the fighter cells and the weighted flow-matching loss of stages 1 and 2."""

from __future__ import annotations

import pytest
import torch

from train_helpers import FixedBatch, KeyedBlobDataset, stage_config, tiny_config
from wantofight.train.config import ConfigError
from wantofight.train.fighter_cells import cell_weights, fighter_cells, stage_latent
from wantofight.train.stage1 import Stage1Trainer
from wantofight.train.stage2 import Stage2Trainer


def test_stage_latent_is_the_stage_and_the_fighter_cells_are_the_fighters():
    """Eight windows of a busy random stage, each with a "fighter" (one cell) standing on another column in
    every latent frame but the first, where it stands on column 0 in all of them."""
    stage = torch.randn(16, 5, 8, 8, generator=torch.Generator().manual_seed(7))
    latents = stage.repeat(8, 1, 1, 1, 1)
    for i in range(8):
        latents[i, :, 0, 6, 0] += 2.0
        latents[i, :, 1:, 6, i] += 2.0
    made = stage_latent(latents)
    assert torch.equal(made[:, 1:], stage[:, 1:])  # each cell shows the fighter in one window of eight
    assert torch.allclose(made[:, 0, 6, 0], stage[:, 0, 6, 0] + 2.0)  # ... but frame 0's column 0 in all
    mask = fighter_cells(latents, made)  # (N, 1, F, h, w)
    assert mask.shape == (8, 1, 5, 8, 8)
    for i in range(8):
        expected = torch.zeros(5, 8, 8)
        expected[1:, 6, i] = 1
        assert torch.equal(mask[i, 0], expected), i
    assert set(cell_weights(latents, made, 9.0).unique().tolist()) == {1.0, 10.0}


def test_fighter_cells_compare_later_frames_with_the_stages_last_frame():
    stage = torch.zeros(16, 3, 4, 4)
    z = torch.zeros(1, 16, 5, 4, 4)
    z[0, :, 4, 2, 2] = 1.0
    mask = fighter_cells(z, stage)
    assert mask.shape == (1, 1, 5, 4, 4) and mask.sum() == 1 and mask[0, 0, 4, 2, 2] == 1


def test_fighter_weight_must_not_be_negative():
    with pytest.raises(ConfigError, match="fighter_weight must be >= 0"):
        tiny_config("fighter_weight=-1")


class StagedBlobs(KeyedBlobDataset):
    """The keyed blobs on a busy random stage."""

    def __getitem__(self, key):
        item = super().__getitem__(key)
        stage = torch.randn(self.shape, generator=torch.Generator().manual_seed(7))
        return {**item, "latents": stage + item["latents"]}


class Batch(FixedBatch, Stage1Trainer):
    pass


class Batch2(FixedBatch, Stage2Trainer):
    pass


@pytest.mark.parametrize("trainer_class, stage", [(Batch, "stage1"), (Batch2, "stage2")])
def test_the_loss_weights_the_fighter_cells(tmp_path, trainer_class, stage):
    """The stage's loss with fighter_weight w is the squared error times 1 + w on the cells that differ from
    the stage latent of the train windows, averaged as before; with w = 0 it is the plain MSE."""
    data = {"train": StagedBlobs(n=8), "val": None}
    losses, errors = {}, {}
    for weight in (0.0, 4.0):
        config = stage_config(stage, f"fighter_weight={weight}", "data.batch_size=8", "ema_decay=0.0")
        trainer = trainer_class(config, None, tmp_path / f"{stage}-{weight}", datasets=data, progress=False).setup()
        batch = trainer.batch()
        with torch.no_grad():
            losses[weight] = float(trainer.loss(batch, 0, step=0)[0])
        if weight:
            expected = stage_latent(torch.stack([data["train"][i]["latents"] for i in range(8)]))
            assert torch.allclose(trainer._stage_latent, expected)
            mask = fighter_cells(batch["latents"], expected)
            assert 0 < float(mask[:, :, 1:].mean()) < 0.5
            errors[weight] = mask
    # the same draws and weights at init (same seed): the weighted loss is the plain one plus w x the
    # squared error on the fighter cells; recompute it from the trainer's own velocity
    trainer.wrapped.eval()
    z = batch["latents"]
    noise, sigmas = trainer.draw(z, 0, 0)
    x = trainer.flow.add_noise(z, noise, sigmas[:, None, :, None, None])
    with torch.no_grad():
        v = trainer.wrapped(x, trainer.flow.timestep(sigmas), batch["keys"], batch["ref_tokens"], trainer.attention)
    squared = (v.float() - trainer.flow.velocity_target(z, noise)).pow(2)
    targets = torch.ones(z.shape[0], z.shape[2], dtype=torch.bool)
    targets[:, 0] = False  # the context frame carries no loss; in stage 2 neither do the context chunks
    targets = getattr(trainer, "last_targets", targets)[:, None, :, None, None]

    def mean_over_targets(values):  # per sample over its target frames, then over the batch
        cells = targets.sum(dim=(1, 2, 3, 4)) * values[0, :, 0].numel()  # (B,) target frames x C h w
        return float(((values * targets).sum(dim=(1, 2, 3, 4)) / cells).mean())

    plain = mean_over_targets(squared)
    fighters = mean_over_targets(squared * errors[4.0])
    assert losses[0.0] == pytest.approx(plain, rel=1e-4)
    assert losses[4.0] == pytest.approx(plain + 4.0 * fighters, rel=1e-4)
    assert losses[4.0] > losses[0.0] * 1.05


def test_the_fighter_rows_hold_every_fighter_and_leave_out_the_hud(recorded):
    """A scripted fight against random keys, recorded by the collector: every fighter's drawn extent (its
    feet's y from RAM, the tallest sprite above them) lies inside `fighter_rows("duel")`; the pixels that
    change outside them are the HUD's (health bars and timer, above the band), and the fighter masks of the
    VAE (pixels) and of the DiT's loss (latent cells) keep none of them. With rows=None (the mask before
    the game's band) the HUD's changing pixels are counted as fighters."""
    import numpy as np

    from wantofight.benchmark.episodes import open_runs
    from wantofight.datasets.screen import band_mask, fighter_rows, game_info
    from wantofight.train.vae.losses import fighter_mask

    _, (ep, *_) = open_runs([recorded(policy="scripted", p2_policy="random", episodes=1, max_frames=600, seed=3)])
    frames = ep.frames(np.arange(0, ep.rows, 2))  # (T, 224, 240, 3)
    y = ep.truth.values["y"][::2][ep.truth.valid["y"][::2]]
    info = game_info("duel")
    top, bottom = fighter_rows("duel")
    height = frames.shape[1]
    crop_top = info["screen"]["crop_top"]
    tallest = max(-box[1] for box in info["boxes"]["sprite"].values())
    assert (y - tallest - crop_top).min() >= top * height and (y + 1 - crop_top).max() <= bottom * height
    assert (y - tallest - crop_top).min() < top * height + 16  # a jump reaches near the top of the band

    pixels = torch.from_numpy(frames).permute(3, 0, 1, 2).float() / 127.5 - 1  # (3, T, H, W)
    stage = pixels.median(1).values
    everything = fighter_mask(pixels[None], stage)[0, 0]  # (T, H, W)
    band = band_mask((top, bottom), height).bool()
    outside = everything[:, ~band]
    assert outside.sum() > 100  # the HUD changes as the health bars drain and the timer counts
    changed_rows = torch.nonzero(everything.amax(dim=(0, 2))).flatten()
    assert changed_rows[changed_rows < top * height].numel() > 0  # ... above the fighters
    fighters = fighter_mask(pixels[None], stage, (top, bottom))[0, 0]
    assert fighters[:, ~band].sum() == 0 and torch.equal(fighters[:, band], everything[:, band])

    z = torch.zeros(1, 4, 2, 16, 16)
    z[0, :, :, 1] = z[0, :, :, 10] = 1.0  # a HUD row and a fighter row differ from the stage
    cells = fighter_cells(z, torch.zeros(4, 2, 16, 16), (top, bottom))
    assert cells[0, 0, :, 1].sum() == 0 and cells[0, 0, :, 10].sum() == 2 * 16
    assert fighter_cells(z, torch.zeros(4, 2, 16, 16))[0, 0, :, 1].sum() == 2 * 16
