"""Validation: loss per tier on fixed val windows and noise, and a generated clip with the key HUD.

The video (RUN_DIR/val/step_XXXXXXXX.mp4) shows the real clip on the left and the generated one on
the right, titled EMULATOR | GENERATED, both from the same first frame and under the same keys, with
each player's keys drawn under the picture, so a person can see whether the keys drive the right fighter.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from wantofight.inference.generation import to_uint8

VAL_STEP = -2
"""Step number fed to the per-sample noise seeds of validation (never a training step)."""

KEY_ABLATIONS = {
    "released": lambda keys: torch.zeros_like(keys),
    "swapped": lambda keys: keys[:, :, [1, 0]],  # (B, T, P, 16): each player gets the other's keys
}
"""The keys a flow-matching stage is also validated under, with the same windows and noise: every key
released, and the players' keys swapped (docs/training.md, "Are the keys learned?"). A model that follows
each player's keys has a higher loss under both; one that ignores them has the same three losses."""


def collate(items: list[dict]) -> dict:
    """Stack the tensors the trainer reads; keep tier / clip id as lists."""
    out: dict = {"tier": [it["tier"] for it in items], "clip_id": [it["clip_id"] for it in items]}
    for key in ("latents", "frames", "keys", "ref_tokens", "ref_images"):
        if key in items[0]:
            out[key] = torch.stack([torch.as_tensor(it[key]) for it in items])
    return out


def val_indices(item_tiers: list[str], per_tier: int) -> list[int]:
    """The first `per_tier` clips of every tier: the same windows at every validation."""
    chosen: dict[str, list[int]] = {}
    for i, tier in enumerate(item_tiers):
        if len(chosen.setdefault(tier, [])) < per_tier:
            chosen[tier].append(i)
    return [i for tier in sorted(chosen) for i in chosen[tier]]


@torch.no_grad()
def tier_losses(trainer, dataset) -> dict[str, float]:
    v, bs = trainer.config.validation, trainer.config.data.batch_size
    tiers = sorted(set(dataset.item_tiers))
    per_tier = max(1, (v.batches * bs) // max(1, len(tiers)))
    indices = val_indices(list(dataset.item_tiers), per_tier)
    ablations = {"val_loss": None, **({f"val_loss_{a}": f for a, f in KEY_ABLATIONS.items()} if trainer.key_ablations
                                      else {})}
    sums: dict[tuple[str, str], float] = {}
    counts: dict[str, int] = {}
    for b, start in enumerate(range(0, len(indices), bs)):
        batch = trainer.to_model_space(collate([dataset[(i, 0)] for i in indices[start:start + bs]]))
        for name, ablate in ablations.items():
            keyed = batch if ablate is None else {**batch, "keys": ablate(batch["keys"])}
            _, per_sample = trainer.loss(keyed, micro=b, step=VAL_STEP)  # the same noise for every name
            for tier, value in zip(batch["tier"], per_sample.tolist()):
                sums[name, tier] = sums.get((name, tier), 0.0) + value
        for tier in batch["tier"]:
            counts[tier] = counts.get(tier, 0) + 1
    out = {}
    for name in ablations:
        out.update({f"{name}/{t}": sums[name, t] / counts[t] for t in sorted(counts)})
        out[name] = sum(sums[name, t] for t in counts) / max(1, sum(counts.values()))
    return out


@torch.no_grad()
def validation_video(trainer, dataset, path: Path) -> Path:
    v, m = trainer.config.validation, trainer.model_config
    frames = min(v.video_frames, trainer.config.data.frames)
    F = 1 + (frames - 1) // m.vae_time_factor
    batch = trainer.to_model_space(collate([dataset[(0, 0)]]))
    generated = trainer.sample(batch, v.sample_steps, F)  # (1, C, F, h, w)
    vae = trainer.get_vae()
    with trainer.autocast():
        if "frames" in batch:  # clips: show the real frames themselves, not a VAE reconstruction
            real_title = "EMULATOR"
            real = to_uint8(batch["frames"][0, :frames].transpose(0, 1).float())
            fake = to_uint8(vae.decode(generated.float()).float()[0, :, :frames])
        else:
            real_title = "EMULATOR (VAE)"  # a latent cache holds no pixels: its latents decoded
            pixels = vae.decode(torch.cat([batch["latents"][:, :, :F], generated]).float()).float()  # (2, 3, T, H, W)
            real, fake = (to_uint8(p) for p in pixels[:, :, :frames])
    keys = batch["keys"][0, :frames].cpu().numpy() > 0.5  # (T, P, 16)
    video = side_by_side([(real_title, hud(real, keys)), ("GENERATED", hud(fake, keys))])
    if trainer.dist.is_main:
        write_mp4(video, path, v.fps)
    return path


def hud(frames: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Keys drawn under the frames: the curator tools' renderer (`wtf inspect`) when installed."""
    try:
        from wantofight.hud import render_hud
    except ImportError:
        return _simple_hud(frames, keys)
    masks = (keys.astype(np.int64) << np.arange(keys.shape[2])).sum(axis=2).astype(np.uint16)  # (T, P) bit i = slot i
    return render_hud(frames, masks[:, 0], masks[:, 1], scale=2, episode_rows=False)


def side_by_side(panels: list[tuple[str, np.ndarray]]) -> np.ndarray:
    """Titled panels next to each other (wantofight/hud.py), or plainly joined without it."""
    try:
        from wantofight.hud import side_by_side as titled
    except ImportError:
        return np.concatenate([video for _, video in panels], axis=2)
    return titled(panels, scale=2)


def _simple_hud(frames: np.ndarray, keys: np.ndarray, cell: int = 4) -> np.ndarray:
    """Fallback: two rows of 16 cells (P1 red, P2 blue) under each frame, lit while held; 2x scale."""
    T, H, W, _ = frames.shape
    frames = frames.repeat(2, axis=1).repeat(2, axis=2)
    strip = np.zeros((T, 2 * cell + 3, 2 * W, 3), np.uint8)
    colours = (np.array([230, 60, 60], np.uint8), np.array([60, 120, 230], np.uint8))
    for p in range(min(2, keys.shape[1])):
        for s in range(keys.shape[2]):
            y, x = 1 + p * (cell + 1), 1 + s * (cell + 1)
            strip[:, y:y + cell, x:x + cell] = 50
            strip[keys[:, p, s], y:y + cell, x:x + cell] = colours[p]
    return np.concatenate([frames, strip], axis=1)


def write_mp4(video: np.ndarray, path: Path, fps: int) -> None:
    """(T, H, W, 3) uint8 -> the recordings' lossless RGB MP4 (pixel art keeps its edges), written atomically."""
    from wantofight.video import VideoWriter

    T, H, W, _ = video.shape
    if H % 2 or W % 2:
        video = np.pad(video, ((0, 0), (0, H % 2), (0, W % 2), (0, 0)))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    writer = VideoWriter(tmp, fps, video.shape[2], video.shape[1])
    for frame in video:
        writer.write(frame)
    writer.close()
    tmp.replace(path)


class Validation:
    """The trainer's validation part: when it is due, and what it measures (the stage's loss on the val
    split per tier, with the keys released and swapped, and a video). A trainer whose network is scored
    otherwise (the VAE's PSNR) holds a subclass with its own `measure`."""

    def __init__(self, settings, datasets: dict, max_steps: int):
        self.settings, self.datasets, self.max_steps = settings, datasets, max_steps

    def due(self, step: int) -> bool:
        if self.settings.every == 0 or self.datasets.get("val") is None:
            return False
        return step % self.settings.every == 0 or step == self.max_steps

    def run(self, trainer) -> dict:
        """The figures of one validation, with the trained network in eval mode meanwhile."""
        trainer.wrapped.eval()
        try:
            return self.measure(trainer)
        finally:
            trainer.wrapped.train()

    def measure(self, trainer) -> dict:
        dataset = self.datasets.get("val")
        result = tier_losses(trainer, dataset)
        if self.settings.video:
            path = trainer.run_dir / "val" / f"step_{trainer.step_count:08d}.mp4"
            validation_video(trainer, dataset, path)
            result["val_video"] = str(path)
        return result
