"""The game VAE's settings (`--set vae.FIELD=VALUE`), its run's default `TrainConfig` and the windows it
is measured on (train/vae/__init__.py has the map)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from wantofight.train.config import ConfigError, TrainConfig, apply_sets, build_config

REPORT_FORMAT = "wantofight-game-vae/1"
EVAL_STEP = 0
"""Step fed to the data windows of evaluation and statistics: the same windows every time."""


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
    """Extra MSE weight on the pixels that differ from the stage picture inside the game's fighter rows
    (`fighter_mask`: the fighters, not the HUD; docs/contracts.md). They are about 2% of a 128x128 frame,
    so plain MSE is met by drawing the stage well and the fighters as blobs (fighters' PSNR 15 dB beside
    29 dB overall: docs/model.md); with weight w each such pixel counts 1 + w times."""
    adv_weight: float = 0.0
    """Weight of an adversarial term on the fighters (train/vae/critic.py): a patch critic, trained from
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

