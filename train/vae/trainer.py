"""`VAETrainer` (the trainer skeleton with the autoencoder as its network) and `train_vae`, the library
call behind `wtf train vae` (train/vae/__init__.py has the contract)."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import torch
from torch import nn

from wantofight import outputs
from wantofight.inference import checkpoints
from wantofight.outputs import staging_dir  # a run into VAE_DIR keeps its checkpoints there until complete
from wantofight.train.config import ConfigError, TrainConfig, split_sets
from wantofight.train.checkpoint import NetworkState
from wantofight.train.trainer import StepStats, Trainer, TrainError
from wantofight.train.validation import Validation
from wantofight.datasets.sampler import eval_indices
from wantofight.train.vae.config import REPORT_FORMAT, VAETrainConfig, default_config, resolve_vae_settings
from wantofight.train.vae.losses import Reconstruction, fighter_mask, reconstruction_loss, stage_picture
from wantofight.train.vae.measure import latent_statistics, measure

class ReconstructionValidation(Validation):
    """The VAE's validation part: PSNR of the whole frame, the last frames and the fighters on the fixed
    held-out windows (train/vae/measure.py), from the main rank."""

    def run(self, trainer) -> dict:
        if not trainer.dist.is_main:
            return {}
        split, dataset = trainer.eval_split()
        trainer.model.eval()
        try:
            result = measure(trainer.wrapped_vae(), dataset, trainer.settings.eval_windows, trainer.size,
                             stage=trainer.stage_image(), rows=trainer.fighter_rows())
        finally:
            trainer.model.train()
        return {f"{split}_psnr": result["psnr"], f"{split}_last_psnr": result["last_psnr"],
                f"{split}_fighters_psnr": result["fighters_psnr"]}


class VAETrainer(Trainer):
    """The skeleton with `Reconstruction(AutoencoderKLWan)` as its network (module docstring)."""

    stage = "vae"
    claims_output = False  # it runs in the staging folder: train_vae checked it and the VAE folder
    validation_part = ReconstructionValidation

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
        self.checkpoint_notes["vae"] = asdict(self.settings)

    # ---- the network ----
    def build_model(self, init_from) -> nn.Module:
        """A random-init autoencoder of `model.vae` (its `kind`: the Wan layout or per frame), or with
        `model.vae.pretrained` that VAE to fine-tune."""
        from wantofight_model.vae import build_vae

        if init_from is not None:
            raise TrainError("the VAE trainer has no --init-from; fine-tune a VAE with --set model.vae.pretrained=DIR")
        vae = build_vae(self.model_config.vae, device=self.device)
        self.vae_class, self.factors = type(vae), (vae.time_factor, vae.space_factor)
        return Reconstruction(vae.autoencoder.float()).train()

    def trained_module(self) -> nn.Module:
        return self.model

    def build_optimizer(self) -> torch.optim.Optimizer:
        """The skeleton's AdamW for the autoencoder, and with `vae.adv_weight` the critic and its own AdamW."""
        self.critic = None
        if self.settings.adv_weight:
            from wantofight.train import distributed as dist_utils
            from wantofight.train.vae.critic import FighterCritic

            self.critic = FighterCritic().to(self.device)
            self.critic_wrapped = dist_utils.wrap(self.critic, self.parallel, self.dist, self.bf16)
            self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=self.settings.critic_lr,
                                                      betas=(0.5, 0.9), weight_decay=0.0)
            self.checkpoint_parts["critic"] = NetworkState("critic", self.critic_wrapped, self.critic_optimizer,
                                                           "it was trained without vae.adv_weight: it holds no critic "
                                                           "to resume")
        self._for_critic: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        return super().build_optimizer()

    def wrapped_vae(self, autoencoder: nn.Module | None = None):
        """The autoencoder being trained (or `autoencoder`), behind the normalising wrapper the rest of the
        code uses."""
        return self.vae_class(self.model.autoencoder if autoencoder is None else autoencoder)

    @property
    def size(self) -> tuple[int, int]:
        return self.model_config.height, self.model_config.width

    # ---- data ----
    def batch(self) -> dict:
        """A random `clip_frames` run and `crop` square of each window: {"frames" (B, 3, t, c, c), ...}."""
        from wantofight.datasets.loader import frames_to_model

        raw = self.data.next()
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
            self.step_metrics = {"critic_loss": self.critic_step(self._for_critic), "adv_scale": self._adv_scale}
        self._for_critic = []
        return stats

    def critic_step(self, seen: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> float:
        """One AdamW step of the critic over the step's micro-batches of (frames, reconstructions, fighters)."""
        from wantofight.train import distributed as dist_utils
        from wantofight.train.vae.critic import critic_loss, fighter_cells, images

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

    # ---- objective ----
    def loss(self, batch: dict, micro: int, step: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        step = self.step_count if step is None else step
        frames = batch["frames"]
        B, _, T, H, W = frames.shape
        (time, space), z = self.factors, self.model.autoencoder.config
        shape = (z.z_dim if "z_dim" in z else z.latent_channels, 1 + (T - 1) // time, H // space, W // space)
        if self.settings.sample_posterior:
            gens = [self.noise_generator(step, micro, self.global_index(b, B)) for b in range(B)]
            noise = torch.stack([torch.randn(shape, generator=g, device=self.device) for g in gens])
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
        fighter cells (train/vae/critic.py); 0 before `vae.adv_start`. The critic is not trained by it."""
        from wantofight.train.vae.critic import adaptive_scale, fighter_cells, generator_loss, images

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

        measured = {"train": train, **({"val": held} if split == "val" else {})}
        total = len(eval_indices(len(train), self.settings.stats_windows)) + sum(
            len(eval_indices(len(ds), self.settings.eval_windows)) for ds in measured.values())
        # after the last step: latent statistics, then PSNR per split (minutes on CPU, silent before)
        with Progress("measure", total, "windows", enabled=self.run_log.show_progress) as bar:
            mean, std = latent_statistics(ae, train, self.settings.stats_windows, self.size, done=bar.advance)
            ae.register_to_config(latents_mean=mean, latents_std=std)
            vae = self.wrapped_vae(ae)
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
            "architecture": {"class": type(ae).__name__, **{
                k: v for k, v in dict(ae.config).items()
                if k in ("base_dim", "decoder_base_dim", "dim_mult", "num_res_blocks", "temperal_downsample", "z_dim",
                         "block_out_channels", "layers_per_block", "latent_channels", "norm_num_groups")}},
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
