"""A game-domain Wan VAE: diffusers' `AutoencoderKLWan` in a small config, trained on duel frames.

    report = train_vae("data/curriculum", "runs/vae", size=(128, 128), max_steps=2000)
    vae = WanVAE.from_pretrained("runs/vae")          # what --vae / model.vae.pretrained load

The contract: VAE_DIR is a plain diffusers `AutoencoderKLWan` folder (`config.json` +
`diffusion_pytorch_model.safetensors`) with the Wan layout (4x time, 8x space, causal, 16 latent
channels), whose config's `latents_mean` / `latents_std` are measured on the training frames so that
normalised latents have unit variance per channel, plus `report.json`. Nothing else in the code
knows it was trained here: the DiT, `StreamingDecoder`, `wtf encode` and `wtf train decoder` take it
as they take a Wan2.1 VAE. The folder appears complete or not at all (built beside it, renamed).

`VAETrainer` is the shared trainer skeleton with the autoencoder as its network: `batch()` cuts a
random `vae.clip_frames` run and `vae.crop` square from each data window, `loss()` is L1 (+ MSE) on
pixels (+ `vae.fighter_weight` x MSE on the fighters' pixels) + an L1 on horizontal/vertical pixel
differences (sprite edges) + a small KL (+ `vae.adv_weight` x an adversarial term from a patch critic on
the fighters, which `step()` then updates: train/fighter_critic.py), `validate()` measures PSNR on fixed
held-out windows.
Checkpoints, Ctrl-C and `--resume` are the skeleton's; they live in the staging folder
`.VAE_DIR.partial/` until the run ends. Settings: `--set vae.FIELD=VALUE` (below), the architecture
`--set model.vae.base_dim=32`, the optimiser `--set optim.lr=...`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from wantofight import outputs
from wantofight.inference import checkpoints
from wantofight.outputs import staging_dir  # a run into VAE_DIR keeps its checkpoints there until complete
from wantofight.train import checkpoint as ckpt
from wantofight.train.config import ConfigError, TrainConfig, apply_sets, build_config, split_sets
from wantofight.train.trainer import StepStats, Trainer, TrainError

REPORT_FORMAT = "wantofight-game-vae/1"
EVAL_STEP = 0
"""Step fed to the data windows of evaluation and statistics: the same windows every time."""


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------

@dataclass
class VAETrainConfig:
    """How the VAE is trained and measured (`--set vae.FIELD=VALUE`); its size is `model.vae.*`."""

    clip_frames: int = 9
    """Frames per training sample, 1 + 4 k (a random run inside the data window of `data.frames`).
    Trained on 5 frames, windows of 9 lost 3 dB to 5; trained on 9, a VAE drifts from the 10th frame on
    (30 dB on frames 0-8, 10 dB by frame 32: docs/model.md), so a VAE for a model's windows is trained
    on runs as long as them (`--set vae.clip_frames=33`), at 3.7x the cost per step."""
    crop: int = 64
    """Side of the random square crop trained on (0 = the whole frame). Every layer but the latent
    attention is a convolution, so crops teach the same filters at a quarter of the cost per sample;
    PSNR is always measured on whole frames."""
    l1_weight: float = 0.0
    """L1 on pixels in [-1, 1]."""
    mse_weight: float = 1.0
    """MSE on pixels: what PSNR measures, and the fastest of the pixel losses tried (docs/model.md)."""
    edge_weight: float = 0.0
    """L1 between the horizontal and vertical pixel differences of output and input (1-pixel sprite
    outlines, HUD digits): a cheap stand-in for a perceptual loss (no LPIPS weights offline); off by
    default, it did not raise PSNR in the comparison of docs/model.md."""
    fighter_weight: float = 0.0
    """Extra MSE weight on the pixels that differ from the stage picture (`fighter_mask`: the fighters,
    the HUD's changing parts). They are about 2% of a 128x128 frame, so plain MSE is met by drawing the
    stage well and the fighters as blobs (fighters' PSNR 15 dB beside 29 dB overall: docs/model.md);
    with weight w each such pixel counts 1 + w times."""
    adv_weight: float = 0.0
    """Weight of an adversarial term on the fighters (train/fighter_critic.py): a patch critic, trained from
    scratch beside the VAE, learns to tell the real frames' fighter cells from the reconstructions', and the
    decoder is pushed towards what it calls real. MSE draws a pose it is unsure of as the average pose (a
    blob the probe cannot read: docs/model.md); the critic penalises the blur itself. It multiplies an
    adaptive scale (the pixel losses' gradient norm over this term's at the decoder's output layer, as in
    VQGAN), so 0.1-1 is the useful range; 0 = off (no critic)."""
    adv_start: int = 0
    """Steps during which only the critic learns: the decoder gets the adversarial term from this step on,
    once the critic can tell real from reconstructed."""
    critic_lr: float = 2e-4
    """The critic's AdamW learning rate (betas 0.5, 0.9, as GAN critics train), constant."""
    kl_weight: float = 1e-6
    """KL(posterior || N(0, I)), mean over latent elements: small, as in the Wan and SD VAEs, so the
    posterior stays a distribution without costing reconstruction (at 32 dB the MSE is 2.5e-3; the KL
    term stays near 1e-5)."""
    sample_posterior: bool = True
    """Decode a sample of the posterior (mean + std * noise), as the Wan and SD VAEs train; False decodes
    its mean (a plain autoencoder with a KL term), which the single-frame experiments of docs/model.md used."""
    eval_windows: int = 16
    """Fixed windows (whole frames, `data.frames` long) per split for the PSNR of validation and report."""
    stats_windows: int = 64
    """Train windows whose latents give the per-channel `latents_mean` / `latents_std`."""

    def __post_init__(self) -> None:
        if self.clip_frames < 1 or (self.clip_frames - 1) % 4:
            raise ConfigError(f"vae.clip_frames={self.clip_frames} must be 1 + 4 k (the Wan VAE's time grid)")
        if self.crop < 0 or self.crop % 8:
            raise ConfigError(f"vae.crop={self.crop} must be 0 (whole frames) or a multiple of 8")
        weights = (self.l1_weight, self.mse_weight, self.edge_weight, self.kl_weight, self.fighter_weight,
                   self.adv_weight)
        if min(weights) < 0 or self.l1_weight + self.mse_weight == 0:
            raise ConfigError(f"vae loss weights must be >= 0 with l1_weight or mse_weight > 0, got l1 "
                              f"{self.l1_weight}, mse {self.mse_weight}, edge {self.edge_weight}, kl {self.kl_weight}, "
                              f"fighter {self.fighter_weight}, adv {self.adv_weight}")
        if self.adv_start < 0 or self.critic_lr <= 0:
            raise ConfigError(f"vae.adv_start must be >= 0 and vae.critic_lr > 0, got {self.adv_start}, "
                              f"{self.critic_lr}")
        if not isinstance(self.sample_posterior, bool):
            raise ConfigError(f"vae.sample_posterior={self.sample_posterior!r} must be true or false")
        if self.eval_windows < 1 or self.stats_windows < 1:
            raise ConfigError(f"vae.eval_windows and vae.stats_windows must be >= 1, got {self.eval_windows}, "
                              f"{self.stats_windows}")


GAME_VAE = {"base_dim": 8, "dim_mult": [1, 4, 4, 4], "num_res_blocks": 1, "temperal_downsample": [False, True, True]}
"""The default architecture: 8 channels at full resolution, 32 below (the tiny preset's VAE has 16 and
32). It learned as fast per step as the tiny VAE's and wider ones on duel frames and costs a third less
per step, so it learns fastest per CPU second (docs/model.md)."""


def default_config(size: tuple[int, int] = (128, 128)) -> TrainConfig:
    """The run's `TrainConfig` before `--config` / `--set`: the tiny preset's model config carries the
    size (`model.height/width`) and the architecture (`model.vae`); the DiT fields are unused."""
    from wantofight.train.config import CheckpointConfig, DataConfig, OptimConfig, ValidationConfig

    return TrainConfig(
        stage="vae",
        preset="tiny",
        model={"height": size[0], "width": size[1], "vae": dict(GAME_VAE)},
        max_steps=2000,
        precision="auto",
        optim=OptimConfig(lr=1e-3, betas=(0.9, 0.999), warmup_steps=50, schedule="cosine", min_lr_ratio=0.05,
                          weight_decay=0.0, grad_clip=1.0),
        # every tier: the VAE needs every picture, not a curriculum; full matches hold most of them.
        # Windows of the DiT's length (the recipe's 33): training runs are `vae.clip_frames` inside them,
        # validation reads them whole, so a VAE that drifts after its training runs shows it (last_psnr).
        data=DataConfig(frames=33, batch_size=2, curriculum=[
            {"until": None, "weights": {"full-match": 0.6, "single-action": 0.2, "dual-action": 0.2}}]),
        ema_decay=0.0,  # the cosine decay does the averaging in a run this short
        checkpoint=CheckpointConfig(every=250, keep_last=1),
        validation=ValidationConfig(every=250, video=False),
    )


def resolve_vae_settings(sets, base: dict | None = None) -> VAETrainConfig:
    """VAETrainConfig from the defaults (or a resumed run's saved ones) and `vae.*` assignments."""
    data = apply_sets(VAETrainConfig, asdict(VAETrainConfig()) if base is None else dict(base), sets, "vae")
    try:
        return build_config(VAETrainConfig, data, "vae.")
    except TypeError as err:
        raise ConfigError(f"vae: {err}") from err


def parse_size(text: str) -> tuple[int, int]:
    """`128x128` -> (128, 128); a multiple of 16: 8x VAE downsampling times the DiT's 2x2 patches."""
    try:
        height, width = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ConfigError(f"--size {text!r}: expected HEIGHTxWIDTH, e.g. 128x128") from None
    if height < 16 or width < 16 or height % 16 or width % 16:
        raise ConfigError(f"--size {text}: height and width must be multiples of 16 (the VAE downsamples 8x, "
                          "the DiT patches its latents 2x2)")
    return height, width


# ---------------------------------------------------------------------------------------------
# Losses and measures
# ---------------------------------------------------------------------------------------------

class Reconstruction(nn.Module):
    """The training forward as one module (so DDP sees it): encode, sample the posterior, decode."""

    def __init__(self, autoencoder: nn.Module):
        super().__init__()
        self.autoencoder = autoencoder

    def forward(self, frames: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """frames (B, 3, T, H, W) in [-1, 1], noise (B, 16, F, H/8, W/8) -> (output frames, mean, logvar)."""
        posterior = self.autoencoder.encode(frames).latent_dist
        z = posterior.mean + posterior.std * noise.to(posterior.mean)
        return self.autoencoder.decode(z).sample, posterior.mean, posterior.logvar


def pixel_differences(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Vertical and horizontal neighbour differences of (B, C, T, H, W) frames."""
    return x[..., 1:, :] - x[..., :-1, :], x[..., :, 1:] - x[..., :, :-1]


def reconstruction_loss(out: torch.Tensor, frames: torch.Tensor, mean: torch.Tensor, logvar: torch.Tensor,
                        s: VAETrainConfig, fighters: torch.Tensor | None = None) -> torch.Tensor:
    """Per-sample loss (B,): weighted L1, MSE, edge L1 and KL (module docstring), and with `fighters`
    ((B, 1, T, H, W) `fighter_mask` of the frames) the extra MSE of `s.fighter_weight` on its pixels."""
    diff = out.float() - frames.float()
    loss = s.l1_weight * diff.abs().flatten(1).mean(1)
    if s.mse_weight:
        loss = loss + s.mse_weight * diff.square().flatten(1).mean(1)
    if s.fighter_weight and fighters is not None:
        loss = loss + s.fighter_weight * (diff.square() * fighters).flatten(1).mean(1)
    if s.edge_weight:
        for a, b in zip(pixel_differences(out.float()), pixel_differences(frames.float())):
            loss = loss + s.edge_weight * (a - b).abs().flatten(1).mean(1)
    if s.kl_weight:
        mean, logvar = mean.float(), logvar.float()
        kl = 0.5 * (mean.square() + logvar.exp() - 1.0 - logvar)
        loss = loss + s.kl_weight * kl.flatten(1).mean(1)
    return loss


def db(squared: float, values: int) -> float:
    """PSNR in dB of a sum of squared 8-bit errors over `values` values."""
    from wantofight.fidelity import psnr_db

    return psnr_db(squared / max(1, values), peak=255.0)


def to_uint8(frames: torch.Tensor) -> torch.Tensor:
    """[-1, 1] -> the 8-bit values a video file would hold."""
    return ((frames.float().clamp(-1, 1) + 1) * 127.5).round()


def psnr_8bit(a: torch.Tensor, b: torch.Tensor) -> float:
    """PSNR in dB over 8-bit RGB (as bench/vae_recon.py) of frames in [-1, 1]."""
    return db((to_uint8(a) - to_uint8(b)).square().sum().item(), a.numel())


def eval_indices(n: int, count: int) -> list[int]:
    """`count` clip indices spread evenly over a split of `n` clips (every tier, every episode)."""
    count = min(n, count)
    return sorted({round(i * (n - 1) / max(1, count - 1)) for i in range(count)}) if n else []


@torch.no_grad()
def stage_picture(dataset, count: int, size: tuple[int, int]) -> torch.Tensor:
    """The per-pixel median of the first frames of `count` fixed windows, (3, H, W) in [-1, 1]: the stage
    without the fighters, who stand somewhere else in most of them."""
    from wantofight.datasets.loader import frames_to_model

    firsts = [frames_to_model(torch.as_tensor(dataset[(i, EVAL_STEP)]["frames"])[None, :1], size)[0, 0]
              for i in eval_indices(len(dataset), count)]
    return torch.stack(firsts).median(0).values


def fighter_mask(frames: torch.Tensor, stage: torch.Tensor, rows: tuple[float, float] | None = None) -> torch.Tensor:
    """(B, 1, T, H, W) 1 where (B, 3, T, H, W) frames differ from the stage picture, grown by one pixel so
    their outlines count, on the rows the game's fighters can be drawn in (`rows`, fractions of the height,
    datasets/screen.py `fighter_rows`; None: every row, the HUD's changing parts included)."""
    from wantofight.datasets.screen import band_mask

    differs = ((frames - stage[None, :, None]).abs().sum(1, keepdim=True) > 0.1).float()
    grown = torch.nn.functional.max_pool3d(differs, (1, 3, 3), 1, (0, 1, 1))
    return grown * band_mask(rows, frames.shape[3]).to(grown)[:, None]


@torch.no_grad()
def measure(vae, dataset, count: int, size: tuple[int, int], batch_size: int = 2,
            stage: torch.Tensor | None = None, done=None, rows: tuple[float, float] | None = None) -> dict:
    """Round trip of fixed windows through a `WanVAE` (normalised latents, posterior mode):
    {"psnr": dB over 8-bit RGB, "windows", "latent_rms": RMS of the normalised latents}, and with a
    `stage` picture (`stage_picture`) "fighters_psnr": dB over the pixels that differ from it only. The
    stage is most of every frame, so PSNR alone can be high with no fighter drawn (docs/model.md).
    "last_psnr": dB over each window's last 4 frames (its last latent frame), where a VAE trained on
    windows shorter than these has drifted (docs/model.md). `done(n)` hears each batch of n windows."""
    from wantofight.datasets.loader import frames_to_model

    indices = eval_indices(len(dataset), count)
    squared, pixels, z_sq, z_n, fg_squared, fg_values = 0.0, 0, 0.0, 0, 0.0, 0
    last_squared, last_values = 0.0, 0
    for start in range(0, len(indices), batch_size):
        items = [dataset[(i, EVAL_STEP)] for i in indices[start:start + batch_size]]
        frames = frames_to_model(torch.stack([torch.as_tensor(it["frames"]) for it in items]), size)
        frames = frames.transpose(1, 2)  # (B, 3, T, H, W)
        z = vae.encode(frames)
        out = vae.decode(z)
        errors = (to_uint8(out) - to_uint8(frames)).square()
        squared += errors.sum().item()
        pixels += frames.numel()
        last_squared += errors[:, :, -4:].sum().item()
        last_values += errors[:, :, -4:].numel()
        if stage is not None:
            mask = fighter_mask(frames.float(), stage.to(frames), rows)
            fg_squared += (errors * mask).sum().item()
            fg_values += int(mask.sum().item()) * 3
        z_sq += z.float().square().sum().item()
        z_n += z.numel()
        if done is not None:
            done(len(items))
    result = {"psnr": db(squared, pixels), "last_psnr": db(last_squared, last_values), "windows": len(indices),
              "latent_rms": math.sqrt(z_sq / max(1, z_n))}
    if stage is not None:
        result["fighters_psnr"] = db(fg_squared, fg_values)
    return result


@torch.no_grad()
def latent_statistics(autoencoder: nn.Module, dataset, count: int, size: tuple[int, int],
                      batch_size: int = 2, done=None) -> tuple[list[float], list[float]]:
    """Per-channel mean and std of the posterior mode over `count` windows (Wan's latents_mean / _std);
    `done(n)` hears each batch of n windows."""
    from wantofight.datasets.loader import frames_to_model

    total = total_sq = None
    n = 0
    indices = eval_indices(len(dataset), count)
    for start in range(0, len(indices), batch_size):
        items = [dataset[(i, EVAL_STEP)] for i in indices[start:start + batch_size]]
        frames = frames_to_model(torch.stack([torch.as_tensor(it["frames"]) for it in items]), size)
        z = autoencoder.encode(frames.transpose(1, 2)).latent_dist.mode().double()  # (B, 16, F, h, w)
        z = z.transpose(0, 1).flatten(1)  # (16, B F h w)
        total = z.sum(1) if total is None else total + z.sum(1)
        total_sq = z.square().sum(1) if total_sq is None else total_sq + z.square().sum(1)
        n += z.shape[1]
        if done is not None:
            done(len(items))
    mean = total / n
    std = (total_sq / n - mean.square()).clamp_min(1e-12).sqrt()
    return [round(float(v), 6) for v in mean], [round(float(v), 6) for v in std]


# ---------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------

class VAETrainer(Trainer):
    """The skeleton with `Reconstruction(AutoencoderKLWan)` as its network (module docstring)."""

    stage = "vae"

    def __init__(self, config: TrainConfig, data, out, *, settings: VAETrainConfig | None = None,
                 resume: bool = False, overwrite: bool = False, **kwargs):
        self.out = Path(out)
        self.overwrite = overwrite
        run_dir = staging_dir(self.out)
        saved = None
        if resume and checkpoints.latest_checkpoint(run_dir) is not None:
            saved = checkpoints.read_config(checkpoints.latest_checkpoint(run_dir)).get("vae")
        self.settings = settings or (VAETrainConfig(**saved) if saved else VAETrainConfig())
        if config.parallel == "fsdp":
            raise ConfigError("parallel=fsdp shards DiT blocks; the VAE trains with ddp or none")
        if kwargs.get("datasets") is None and data is not None:
            from wantofight.train.data import detect_source

            if detect_source(Path(data)) != "clips":
                raise TrainError(f"--data {data} is a latent cache; the VAE trains on frames: give the curriculum "
                                 "folder (wtf build-curriculum) it was encoded from")
        self.started = time.perf_counter()
        self._micro = 0
        super().__init__(config, data, run_dir, resume=resume, **kwargs)

    def claim_run_dir(self, out: Path, resume: bool, overwrite: bool) -> Path:
        return out  # the staging folder already: train_vae checked it and the VAE folder

    # ---- the network ----
    def build_model(self, init_from) -> nn.Module:
        """A random-init AutoencoderKLWan of `model.vae` (or, with `model.vae.pretrained`, that VAE to fine-tune)."""
        from wantofight_model.vae import WanVAE

        if init_from is not None:
            raise TrainError("the VAE trainer has no --init-from; fine-tune a VAE with --set model.vae.pretrained=DIR")
        vae = WanVAE.from_config(self.model_config.vae, device=self.device)
        return Reconstruction(vae.autoencoder.float()).train()

    def trained_module(self) -> nn.Module:
        return self.model

    def build_optimizer(self) -> torch.optim.Optimizer:
        """The skeleton's AdamW for the autoencoder, and with `vae.adv_weight` the critic and its own AdamW."""
        self.critic = None
        if self.settings.adv_weight:
            from wantofight.train import distributed as dist_utils
            from wantofight.train.fighter_critic import FighterCritic

            self.critic = FighterCritic().to(self.device)
            self.critic_wrapped = dist_utils.wrap(self.critic, self.parallel, self.dist, self.bf16)
            self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=self.settings.critic_lr,
                                                      betas=(0.5, 0.9), weight_decay=0.0)
        self._for_critic: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        return super().build_optimizer()

    def wan_vae(self):
        """The autoencoder being trained, behind the normalising wrapper the rest of the code uses."""
        from wantofight_model.vae import WanVAE

        return WanVAE(self.model.autoencoder)

    @property
    def size(self) -> tuple[int, int]:
        return self.model_config.height, self.model_config.width

    # ---- data ----
    def batch(self) -> dict:
        """A random `clip_frames` run and `crop` square of each window: {"frames" (B, 3, t, c, c), ...}."""
        from wantofight.datasets.loader import frames_to_model

        raw = self.next_raw()
        frames = frames_to_model(raw["frames"].to(self.device), self.size)  # (B, T, 3, H, W)
        s, (H, W) = self.settings, self.size
        fighters = (fighter_mask(frames.transpose(1, 2), self.stage_image().to(frames), self.fighter_rows())
                    .transpose(1, 2) if s.fighter_weight or s.adv_weight else None)  # (B, T, 1, H, W)
        t = min(s.clip_frames, frames.shape[1])
        ch, cw = (min(s.crop, H), min(s.crop, W)) if s.crop else (H, W)
        step, micro = self.step_count, self._micro
        crops, masks = [], []
        for b in range(frames.shape[0]):
            gen = self.noise_generator(step, micro, self.global_index(b, frames.shape[0]), stream=1)
            t0, y0, x0 = (int(torch.randint(hi + 1, (1,), generator=gen, device=self.device))
                          for hi in (frames.shape[1] - t, H - ch, W - cw))
            crops.append(frames[b, t0:t0 + t, :, y0:y0 + ch, x0:x0 + cw])
            if fighters is not None:
                masks.append(fighters[b, t0:t0 + t, :, y0:y0 + ch, x0:x0 + cw])
        self._micro += 1
        return {"frames": torch.stack(crops).transpose(1, 2), "tier": list(raw["tier"]),  # (B, 3, t, c, c)
                "clip_id": list(raw["clip_id"]),
                "fighters": torch.stack(masks).transpose(1, 2) if masks else None}  # (B, 1, t, c, c)

    def step(self) -> StepStats:
        """The skeleton's step for the autoencoder, then (`vae.adv_weight`) one critic step on its reconstructions."""
        self._micro, self._for_critic = 0, []
        stats = super().step()
        if self.critic is not None:
            self._critic_loss = self.critic_step(self._for_critic)
        self._for_critic = []
        return stats

    def critic_step(self, seen: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> float:
        """One AdamW step of the critic over the step's micro-batches of (frames, reconstructions, fighters)."""
        from wantofight.train import distributed as dist_utils
        from wantofight.train.fighter_critic import critic_loss, fighter_cells, images

        self.critic_optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for micro, (frames, out, fighters) in enumerate(seen):
            with dist_utils.no_sync(self.critic_wrapped, skip=micro < len(seen) - 1), self.autocast():
                loss = critic_loss(self.critic_wrapped(images(frames)), self.critic_wrapped(images(out)),
                                   fighter_cells(fighters))
                (loss / len(seen)).backward()
            total += float(loss.detach()) / len(seen)
        torch.nn.utils.clip_grad_norm_(self.critic.parameters(), self.config.optim.grad_clip or float("inf"))
        self.critic_optimizer.step()
        return float(dist_utils.mean(torch.as_tensor(total, device=self.device), self.dist))

    def _record(self, stats, progress, extra):
        if self.critic is not None:
            extra = {"critic_loss": self._critic_loss, "adv_scale": self._adv_scale, **extra}
        super()._record(stats, progress, extra)

    # ---- objective ----
    def loss(self, batch: dict, micro: int, step: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        step = self.step_count if step is None else step
        frames = batch["frames"]
        B, _, T, H, W = frames.shape
        shape = (self.model_config.vae.z_dim, 1 + (T - 1) // 4, H // 8, W // 8)
        if self.settings.sample_posterior:
            noise = torch.stack([torch.randn(shape, generator=self.noise_generator(step, micro, self.global_index(b, B)),
                                             device=self.device) for b in range(B)])
        else:  # the posterior mean: mean + std * 0
            noise = torch.zeros((B, *shape), device=self.device)
        with self.autocast():
            out, mean, logvar = self.wrapped(frames, noise)
        per_sample = reconstruction_loss(out, frames, mean, logvar, self.settings, batch.get("fighters"))
        if self.critic is not None and torch.is_grad_enabled():
            per_sample = per_sample + self.adversarial_term(out, batch["fighters"], per_sample.mean(), step)
            self._for_critic.append((frames.detach(), out.detach(), batch["fighters"]))
        return per_sample.mean(), per_sample.detach()

    def adversarial_term(self, out: torch.Tensor, fighters: torch.Tensor, reconstruction: torch.Tensor,
                         step: int) -> torch.Tensor:
        """Per sample (B,): `adv_weight` x the adaptive scale x minus the critic's logit on the reconstructed
        fighter cells (train/fighter_critic.py); 0 before `vae.adv_start`. The critic is not trained by it."""
        from wantofight.train.fighter_critic import adaptive_scale, fighter_cells, generator_loss, images

        self._adv_scale = 0.0
        if step < self.settings.adv_start:
            return torch.zeros(out.shape[0], device=out.device)
        self.critic.requires_grad_(False)
        try:
            with self.autocast():
                logits = self.critic(images(out))
        finally:
            self.critic.requires_grad_(True)
        term = generator_loss(logits, fighter_cells(fighters), out.shape[0])
        scale = adaptive_scale(reconstruction, term.mean(), self.model.autoencoder.decoder.conv_out.weight)
        self._adv_scale = float(scale)
        return self.settings.adv_weight * scale * term

    # ---- validation: PSNR on fixed held-out windows ----
    def eval_split(self) -> tuple[str, object]:
        """The val split when the data has one, else the train split (said in the report)."""
        if self.datasets.get("val") is not None:
            return "val", self.datasets["val"]
        return "train", self.datasets["train"]

    def validate(self) -> dict:
        if not self.dist.is_main:
            return {}
        split, dataset = self.eval_split()
        self.model.eval()
        try:
            result = measure(self.wan_vae(), dataset, self.settings.eval_windows, self.size, stage=self.stage_image(),
                             rows=self.fighter_rows())
        finally:
            self.model.train()
        return {f"{split}_psnr": result["psnr"], f"{split}_last_psnr": result["last_psnr"],
                f"{split}_fighters_psnr": result["fighters_psnr"]}

    def stage_image(self) -> torch.Tensor:
        """The stage picture of the train split's fixed windows (`stage_picture`), made once."""
        if getattr(self, "_stage", None) is None:
            self._stage = stage_picture(self.datasets["train"], self.settings.stats_windows, self.size)
        return self._stage

    def fighter_rows(self) -> tuple[float, float] | None:
        """The rows the train split's game draws its fighters in (datasets/screen.py), read once."""
        if not hasattr(self, "_fighter_rows"):
            from wantofight.datasets.screen import fighter_rows_of

            self._fighter_rows = fighter_rows_of(self.datasets["train"])
        return self._fighter_rows

    # ---- checkpoints ----
    def checkpoint_config(self) -> dict:
        return {**super().checkpoint_config(), "vae": asdict(self.settings)}

    def trainer_state(self) -> dict:
        if self.critic is None:
            return super().trainer_state()
        return {**super().trainer_state(), "critic": {k: v.detach().cpu() for k, v in self.critic.state_dict().items()},
                "critic_optimizer": self.critic_optimizer.state_dict()}

    def load(self, path: Path) -> None:
        super().load(path)
        if self.critic is not None:
            state = ckpt.read_torch(path, "trainer.pt")
            if "critic" not in state:
                raise TrainError(f"{path} was trained without vae.adv_weight: it holds no critic to resume")
            self.critic.load_state_dict(state["critic"])
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])

    # ---- the loop, then the VAE folder ----
    def fit(self) -> dict:
        self.log(f"vae settings: {json.dumps(asdict(self.settings))}")
        super().fit()  # raises KeyboardInterrupt after Ctrl-C, with a checkpoint in the staging folder
        report = self.export() if self.dist.is_main else {}
        from wantofight.train import distributed as dist_utils

        dist_utils.barrier(self.dist)
        return report

    def last_line(self, result: dict) -> None:
        return None  # export() names the VAE folder once it is in place, not the staging run

    def export(self) -> dict:
        """Latent statistics into the config, the diffusers folder and report.json, renamed into place."""
        if not self.overwrite and outputs.holds_other(self.out):
            raise TrainError(f"--out {self.out} appeared during training and is not empty; the trained run is kept "
                             f"in {self.run_dir} (move {self.out} away and run again with --resume)")
        if self.ema is not None:
            self.ema.copy_to(self._trainable())
        ae = copy.deepcopy(self.model.autoencoder).float().eval().requires_grad_(False)
        train, (split, held) = self.datasets["train"], self.eval_split()
        from wantofight.progress import Progress
        from wantofight_model.vae import WanVAE

        measured = {"train": train, **({"val": held} if split == "val" else {})}
        total = len(eval_indices(len(train), self.settings.stats_windows)) + sum(
            len(eval_indices(len(ds), self.settings.eval_windows)) for ds in measured.values())
        # after the last step: latent statistics, then PSNR per split (minutes on CPU, silent before)
        with Progress("measure", total, "windows", enabled=self.show_progress) as bar:
            mean, std = latent_statistics(ae, train, self.settings.stats_windows, self.size, done=bar.advance)
            ae.register_to_config(latents_mean=mean, latents_std=std)
            vae = WanVAE(ae)
            psnr = {name: measure(vae, ds, self.settings.eval_windows, self.size, stage=self.stage_image(),
                                  rows=self.fighter_rows(), done=bar.advance) for name, ds in measured.items()}
        staged = self.run_dir / "vae"
        shutil.rmtree(staged, ignore_errors=True)
        ae.save_pretrained(staged, safe_serialization=True)
        report = self._report(ae, psnr, mean, std, staged)
        (staged / "report.json").write_text(json.dumps(report, indent=1) + "\n")
        if (self.run_dir / "metrics.jsonl").exists():
            shutil.copy2(self.run_dir / "metrics.jsonl", staged / "metrics.jsonl")
        outputs.swap_in(staged, self.out)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        print(f"wrote {self.out}: PSNR " + ", ".join(f"{k} {v['psnr']:.2f} dB" for k, v in psnr.items()) +
                 f" ({report['parameters']['total']:,} parameters, {report['train_seconds']:.0f} s of training)")
        return report

    def _train_seconds(self) -> float:
        """Seconds spent in training steps (data, compute) over the whole run, resumed sessions included."""
        path = self.run_dir / "metrics.jsonl"
        if not path.exists():
            return 0.0
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return sum(r.get("data_s", 0) + r.get("encode_s", 0) + r.get("compute_s", 0) for r in records)

    def _report(self, ae: nn.Module, psnr: dict, mean: list[float], std: list[float], folder: Path) -> dict:
        count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
        manifest = self.data_path / "manifest.json"
        datasets = {k: v for k, v in self.datasets.items() if v is not None}
        return {
            "format": REPORT_FORMAT,
            "psnr": {split: round(m["psnr"], 3) for split, m in psnr.items()},
            "fighters_psnr": {split: round(m["fighters_psnr"], 3) for split, m in psnr.items()},
            "last_psnr": {split: round(m["last_psnr"], 3) for split, m in psnr.items()},
            "psnr_note": "dB over 8-bit RGB, whole frames, posterior mode, fixed windows of data.frames frames; "
                         "val = held-out episodes; fighters_psnr: only the pixels that differ from the stage "
                         "(the per-pixel median of the train windows' first frames), grown by one pixel; "
                         "last_psnr: only each window's last 4 frames",
            "normalised_latent_rms": {split: round(m["latent_rms"], 4) for split, m in psnr.items()},
            "windows": {split: m["windows"] for split, m in psnr.items()},
            "size": list(self.size),
            "parameters": {"encoder": count(ae.encoder) + count(ae.quant_conv),
                           "decoder": count(ae.decoder) + count(ae.post_quant_conv), "total": count(ae)},
            "megabytes": round(sum(f.stat().st_size for f in folder.iterdir()) / 2**20, 3),
            "steps": self.step_count, "samples": self.samples_seen,
            "train_seconds": round(self._train_seconds(), 1),
            "wall_seconds": round(time.perf_counter() - self.started, 1),
            "threads": torch.get_num_threads(), "device": str(self.device),
            "latents_mean": mean, "latents_std": std,
            "data": {"path": str(self.data_path.resolve()),
                     "manifest_sha1": hashlib.sha1(manifest.read_bytes()).hexdigest() if manifest.is_file() else None,
                     "clips": {split: len(ds) for split, ds in datasets.items()}},
            "architecture": {k: v for k, v in dict(ae.config).items()
                             if k in ("base_dim", "decoder_base_dim", "dim_mult", "num_res_blocks",
                                      "temperal_downsample", "z_dim")},
            "train": self.config.to_dict(), "vae": asdict(self.settings),
        }


# ---------------------------------------------------------------------------------------------
# The library call behind `wtf train vae`
# ---------------------------------------------------------------------------------------------

def train_vae(data: str | Path, out: str | Path, size: tuple[int, int] = (128, 128), max_steps: int | None = None,
              sets=(), config_file: str | Path | None = None, resume: bool = False, device: str | None = None,
              progress: bool = True, datasets=None, overwrite: bool = False) -> dict:
    """Train a game VAE on a curriculum DS_DIR and write VAE_DIR (module docstring); returns the report.
    An existing VAE_DIR is refused, or with `overwrite` replaced once the new one is complete."""
    from wantofight.train.config import resolve_config

    out = Path(out)
    if not overwrite and outputs.holds_other(out):
        raise outputs.OutputExists(out)
    if data is not None and not Path(data).is_dir():
        raise FileNotFoundError(f"--data {data} does not exist or is not a folder")
    run_dir = staging_dir(out)
    found = checkpoints.latest_checkpoint(run_dir)
    if resume and found is None:
        raise TrainError(f"--resume: no interrupted run for {out} ({run_dir} holds no checkpoint); start without "
                         "--resume")
    if not resume and found is not None:
        raise TrainError(f"an interrupted run for {out} is in {run_dir}: pass --resume to continue it, or delete "
                         "that folder")
    vae_sets, other = split_sets(sets, "vae")
    saved = checkpoints.read_config(found) if resume else None
    base = saved["train"] if saved else default_config(size).to_dict()
    if saved is None:
        base["model"] = {**base["model"], "height": size[0], "width": size[1]}
    settings = resolve_vae_settings(vae_sets, saved.get("vae") if saved else None)
    config = resolve_config(base["preset"], file=config_file, sets=other, base=base, max_steps=max_steps)
    if config.stage != "vae":
        raise ConfigError(f"stage={config.stage!r}: this is the VAE trainer")
    trainer = VAETrainer(config, data, out, settings=settings, resume=resume, device=device, progress=progress,
                         datasets=datasets, overwrite=overwrite)
    return trainer.fit()


__all__ = ["VAETrainConfig", "VAETrainer", "default_config", "train_vae", "parse_size", "measure",
           "latent_statistics", "reconstruction_loss", "staging_dir"]
