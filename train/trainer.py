"""The trainer skeleton every stage shares: config -> model, optimiser, LR schedule, data, loop.

    trainer = Stage1Trainer(config, data="ds/", run_dir="runs/a")
    trainer.fit()

A stage subclasses `Trainer` and overrides only what differs (STYLE.md, torchtitan's pattern):
    batch()   one micro-batch on the device, in model space (latents, keys, reference tokens)
    loss()    the stage's objective on one micro-batch -> (scalar, per-sample losses)
    step()    one optimiser step: grad_accum x (batch, loss, backward), clip, AdamW, LR, EMA
    sample()  latents generated for the validation video
Everything else is a part the trainer holds, built once in `setup()` (which `fit()` calls; the
constructor only records the run's settings, so a subclass may set its own state before or after it):
    folder      the run folder and the collective checkpoint write (train/checkpoint.py `RunFolder`)
    data        datasets, curriculum sampler, loader (train/data_feed.py `DataFeed`)
    run_log     console notes, progress bar, metrics.jsonl (train/run_log.py `RunLog`)
    validation  when validation is due and what it measures (train/validation.py `Validation`)
A stage adds its own checkpoint state as parts too (`checkpoint_parts`, e.g. a critic's `NetworkState`),
its notes to config.json (`checkpoint_notes`) and its figures to the metrics (`step_metrics`); how its
networks are built is its to override (`build_model`, `trained_module`, `build_optimizer`), and `setup()`
calls those, never the constructor.

Randomness: every noise draw of a sample is seeded from (seed, step, micro-batch, global sample
index), so a run gives the same losses whether interrupted or not, and whether its global batch is
spread over one process or many (tests check both).
"""

from __future__ import annotations

import math
import signal
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from wantofight.datasets.loader import frames_to_model
from wantofight.inference import checkpoints
from wantofight.train import checkpoint as ckpt
from wantofight.train import distributed as dist_utils
from wantofight.train.checkpoint import RunFolder
from wantofight.train.config import TrainConfig, format_config
from wantofight.train.data_feed import DataFeed
from wantofight.train.ema import EMA
from wantofight.train.errors import TrainError
from wantofight.train.run_log import RunLog
from wantofight.train.validation import Validation

KEY_LAYOUT_VERSION = 1  # docs/contracts.md; datasets record the version they used


def fit_summary(result: dict) -> str:
    """`step 4000, loss 0.412, val loss 0.410 (keys released 0.450)`: the figures `Trainer.fit` returns."""
    parts = [f"step {result['step']:,}"] + [f"loss {result['loss']:.3f}"] * ("loss" in result)
    if "val_loss" in result:
        released = result.get("val_loss_released")
        parts.append(f"val loss {result['val_loss']:.3f}"
                     + (f" (keys released {released:.3f})" if released is not None else ""))
    return ", ".join(parts)


OOM_HINT = ("out of memory: lower data.batch_size (raise optim.grad_accum to keep the global batch), "
            "lower data.frames, set model.gradient_checkpointing=true, precision=bf16, parallel=fsdp "
            "(torchrun), or use the latent cache instead of clips (--data LATENT_DIR)")


@dataclass
class StepStats:
    loss: float
    grad_norm: float
    lr: float
    samples: int
    data_s: float
    """Waiting for the DataLoader (decode, resize, collate)."""
    encode_s: float
    """VAE encoding of clips and CLIP encoding of reference images (0 from the latent cache)."""
    compute_s: float
    """Forward, backward, optimiser step."""
    tiers: list[str]


def sample_seed(*parts: int) -> int:
    """A 63-bit seed from integers (seed, step, micro, index): independent streams per sample."""
    return int(np.random.SeedSequence([int(p) & 0xFFFFFFFF for p in parts]).generate_state(2, np.uint64)[0] >> 1)


class Trainer:
    """Shared skeleton. Subclasses set `stage` and `attention` and implement `loss()`."""

    stage = "base"
    attention = "bidirectional"
    key_ablations = True
    """Validation also scores the val windows with the keys released and swapped (train/validation.py):
    meaningful for a loss that reconstructs the clip under its keys."""

    validation_part = Validation
    """The validation part's class (the VAE trainer holds one that measures PSNR instead)."""
    claims_output = True
    """The trainer claims `run_dir` (`outputs.claim`); False when its caller already has (`wtf train vae`)."""

    def __init__(self, config: TrainConfig, data: str | Path | None, run_dir: str | Path, *, resume: bool = False,
                 init_from: str | Path | None = None, device: str | None = None, progress: bool = True,
                 datasets: dict[str, Any] | None = None, overwrite: bool = False):
        """Records the run's settings, claims its folder and finds the checkpoint --resume continues (both
        refused here in one line); the model, data and optimiser are built by
        `setup()` (called by `fit()`), so nothing a subclass overrides runs here."""
        self.config = config
        self.data_path = Path(data) if data is not None else None
        self.dist = dist_utils.setup(device)
        self.device = self.dist.device
        self.model_config = config.model_config()
        self.bf16 = config.precision == "bf16" or (config.precision == "auto" and self.device.type == "cuda")
        self.folder = RunFolder.claim(run_dir, overwrite, resume) if self.claims_output else RunFolder(run_dir, run_dir)
        self.run_log = RunLog(self.stage, main=self.dist.is_main, show_progress=progress, log_every=config.log_every)
        self._resume_from = self.folder.resume_point(resume)  # refused here, before anything is built
        self.step_count = 0
        self.samples_seen = 0
        self.vae = None
        self._settings = {"init_from": init_from, "datasets": datasets}
        self.checkpoint_parts: dict[str, Any] = {}
        """A stage's own state beyond the network (a critic, its optimiser, counters), by name: each part's
        `state_dict()` is a dict merged into trainer.pt beside the skeleton's keys (gathered on every rank,
        so it may be collective), and its `load_state_dict(trainer_pt)` restores it on --resume."""
        self.checkpoint_notes: dict = {}
        """What a stage adds to a checkpoint's config.json (stage 3's teacher and DMD settings)."""
        self.step_metrics: dict = {}
        """Figures of the last step beyond the loss (a critic's loss), written into its metrics line."""
        self._ready = False
        self._encode_s = 0.0
        self._stop = False
        self._stage_latent: torch.Tensor | None = None
        self._fighter_rows: tuple[float, float] | None = None

    @property
    def run_dir(self) -> Path:
        """Where the run writes (the staging folder of an --overwrite run until it completes)."""
        return self.folder.path

    @property
    def output(self) -> Path:
        return self.folder.output

    @property
    def latest(self) -> dict:
        return self.run_log.latest

    def setup(self) -> Trainer:
        """Build the parts, in order: seeds, model, data, parallel wrapper, optimiser, schedule, EMA, the
        resumed state, the sampler, the run folder, the metrics file. Idempotent; returns the trainer."""
        if self._ready:
            return self
        config, resume_from = self.config, self._resume_from
        self._seed_everything(config.seed)
        self.model = self.build_model(self._settings["init_from"])
        self.data = DataFeed(config, self.model_config, self.data_path, self.dist, self.device, self.log,
                             self._settings["datasets"])
        self.datasets, self.source = self.data.datasets, self.data.source
        self.validation = self.validation_part(config.validation, self.datasets, config.max_steps)
        self.parallel = dist_utils.resolve_parallel(config.parallel, config.preset, self.dist)
        self.wrapped = dist_utils.wrap(self.trained_module(), self.parallel, self.dist, self.bf16)
        self.optimizer = self.build_optimizer()
        self.scheduler = self.build_scheduler()
        self.ema = EMA(self._trainable(), config.ema_decay) if config.ema_decay > 0 else None
        if resume_from is not None:
            self.load(resume_from)
        self.data.start(self.step_count,
                        ckpt.read_torch(resume_from, "trainer.pt")["sampler"] if resume_from is not None else None)
        self.folder.create(self.dist)  # every rank has claimed it before any rank writes into it
        self.run_log.open(self.run_dir, self.step_count if resume_from is not None else None)
        self._ready = True
        return self

    def _seed_everything(self, seed: int) -> None:
        import random

        random.seed(seed + self.dist.rank)
        np.random.seed((seed + self.dist.rank) % 2**32)
        torch.manual_seed(seed)  # same on every rank: identical initial weights

    def build_model(self, init_from: str | Path | None) -> nn.Module:
        """WanToFight on the device, fp32 master weights; the frozen CLIP tower never trains."""
        from wantofight_model.model import WanToFight

        model = WanToFight.from_config(self.model_config, device=self.device)
        model.dit.gradient_checkpointing = self.model_config.gradient_checkpointing
        if init_from is not None:
            from wantofight_model.weights import load_wan_weights

            try:
                report = load_wan_weights(model.dit, init_from, strict=True)
            except (ValueError, FileNotFoundError, OSError) as err:
                raise TrainError(f"--init-from {init_from}: {err}") from err
            self.log(f"initialised the backbone from {init_from}: {report.describe()}")
        model.reference_encoder.requires_grad_(False)
        return model

    def trained_module(self) -> nn.Module:
        """The network the optimiser trains: the DiT (a VAE trainer returns its autoencoder)."""
        return self.model.dit

    def _trainable(self) -> dict[str, nn.Parameter]:
        return {n: p for n, p in self.trained_module().named_parameters() if p.requires_grad}

    def build_optimizer(self) -> torch.optim.Optimizer:
        o = self.config.optim
        decay, no_decay = [], []
        for name, p in self._trainable().items():
            # norms, biases and adaLN modulation tables are not weight-decayed (DiT / Wan practice)
            (no_decay if p.ndim < 2 or "modulation" in name or "norm" in name else decay).append(p)
        groups = [{"params": decay, "weight_decay": o.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        fused = self.device.type == "cuda"
        return torch.optim.AdamW(groups, lr=o.lr, betas=tuple(o.betas), eps=o.eps, fused=fused)

    def build_scheduler(self) -> torch.optim.lr_scheduler.LRScheduler:
        o, total = self.config.optim, self.config.max_steps

        def factor(step: int) -> float:
            if o.warmup_steps and step < o.warmup_steps:
                return (step + 1) / o.warmup_steps
            if o.schedule == "cosine":
                progress = min(1.0, (step - o.warmup_steps) / max(1, total - o.warmup_steps))
                return o.min_lr_ratio + (1 - o.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
            return 1.0

        return torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)

    # ------------------------------------------------------------------------------------------
    # Data
    # ------------------------------------------------------------------------------------------

    def get_vae(self):
        """The VAE (encode clips on the fly, decode validation videos); built once, frozen."""
        if self.vae is None:
            from wantofight_model.vae import build_vae, load_vae_folder

            from wantofight.train.data import vae_spec

            spec = vae_spec(self.data_path) if self.data_path is not None and self.source == "latents" else None
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)  # a random-init (tiny) VAE is the same in every run and as `wtf encode`'s
                if spec not in (None, "tiny"):  # decode with the VAE the latent cache was encoded with
                    vae = load_vae_folder(spec, device=self.device)
                else:
                    vae = build_vae(self.model_config.vae, device=self.device)
            self.vae = vae.eval().requires_grad_(False)
        return self.vae

    def to_model_space(self, raw: dict) -> dict:
        """Collated item dict -> {"latents" (B,C,F,h,w), "keys" (B,T,P,16), "ref_tokens" (B,P,N,C), ...}."""
        out = {"tier": list(raw["tier"]), "clip_id": list(raw["clip_id"])}
        t0 = time.perf_counter()
        with torch.no_grad():
            out["latents"], frames = self.latents_of(raw)
            if frames is not None:
                out["frames"] = frames
            out["keys"] = raw["keys"].to(self.device, torch.float32, non_blocking=True)
            if "ref_tokens" in raw:
                out["ref_tokens"] = raw["ref_tokens"].to(self.device, torch.float32, non_blocking=True)
            else:
                out["ref_tokens"] = self.model.encode_references(raw["ref_images"].to(self.device)).float()
        self._sync_device()
        self._encode_s += time.perf_counter() - t0
        return out

    def latents_of(self, raw: dict) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(B, C, F, h, w) latents of a collated batch, read from a latent cache or encoded from its clips'
        frames by the VAE; and those frames, (B, T, 3, H, W) in [-1, 1] (None for a latent cache)."""
        if "latents" in raw:
            return raw["latents"].to(self.device, torch.float32, non_blocking=True), None
        frames = raw["frames"].to(self.device, non_blocking=True)
        if not frames.dtype.is_floating_point:  # uint8 native frames -> model size, [-1, 1]
            frames = frames_to_model(frames, (self.model_config.height, self.model_config.width))
        with self.autocast():
            return self.get_vae().encode(frames.transpose(1, 2)).float(), frames  # VAE takes (B, 3, T, H, W)

    def loss_weights(self, z: torch.Tensor) -> torch.Tensor | None:
        """(B, 1, F, h, w) weights of the latent cells under `fighter_weight` (train/fighter_cells.py), or
        None when it is 0. The stage latent is made once, from the train split's fixed windows."""
        if not self.config.fighter_weight:
            return None
        from wantofight.train.fighter_cells import cell_weights

        if self._stage_latent is None:
            from wantofight.datasets.screen import fighter_rows_of

            self._stage_latent, self._fighter_rows = self.stage_latent(), fighter_rows_of(self.datasets["train"])
        return cell_weights(z, self._stage_latent, self.config.fighter_weight, self._fighter_rows)

    @torch.no_grad()
    def stage_latent(self, count: int = 64) -> torch.Tensor:
        """(C, F, h, w) stage latent of `count` train windows spread over the split (clips are encoded)."""
        from wantofight.train.fighter_cells import stage_latent
        from wantofight.datasets.sampler import eval_indices

        dataset, latents = self.datasets["train"], []
        for i in eval_indices(len(dataset), count):
            item = dataset[(i, 0)]
            one = {k: torch.as_tensor(item[k])[None] for k in ("latents", "frames") if k in item}  # a batch of one
            latents.append(self.latents_of(one)[0][0])
        return stage_latent(torch.stack(latents))

    # ------------------------------------------------------------------------------------------
    # The overridable steps
    # ------------------------------------------------------------------------------------------

    def batch(self) -> dict:
        """One micro-batch of this rank, in model space, on the device."""
        return self.to_model_space(self.data.next())

    def loss(self, batch: dict, micro: int, step: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean loss, per-sample losses (B,)) of one micro-batch; the stage's objective. `step` seeds the
        noise draws (default: the current step; validation passes a fixed one)."""
        raise NotImplementedError

    def step(self) -> StepStats:
        """One optimiser step over `grad_accum` micro-batches."""
        accum = self.config.optim.grad_accum
        self.wrapped.train()
        self.optimizer.zero_grad(set_to_none=True)
        total, samples, data_s, compute_s, tiers = 0.0, 0, 0.0, 0.0, []
        self._encode_s = 0.0
        for micro in range(accum):
            t0 = time.perf_counter()
            batch = self.batch()
            t1 = time.perf_counter()
            with self.no_sync(last=micro == accum - 1):
                loss, _ = self.loss(batch, micro)
                (loss / accum).backward()
            self._sync_device()
            data_s += t1 - t0
            compute_s += time.perf_counter() - t1
            total += loss.detach().float() / accum
            samples += len(batch["tier"])
            tiers += batch["tier"]
        t2 = time.perf_counter()
        grad_norm = self.clip_gradients()
        self.optimizer.step()
        self.scheduler.step()
        if self.ema is not None:
            self.ema.update()
        self._sync_device()
        compute_s += time.perf_counter() - t2
        loss_value = float(dist_utils.mean(torch.as_tensor(total, device=self.device), self.dist))
        return StepStats(loss_value, grad_norm, self.scheduler.get_last_lr()[0], samples * self.dist.world_size,
                         data_s - self._encode_s, self._encode_s, compute_s, tiers)

    def sample(self, batch: dict, steps: int, num_latent_frames: int) -> torch.Tensor:
        """Latents generated for the validation video (B, C, F, h, w)."""
        raise NotImplementedError

    # ------------------------------------------------------------------------------------------
    # Step helpers
    # ------------------------------------------------------------------------------------------

    def autocast(self):
        if self.bf16:
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return nullcontext()

    def no_sync(self, last: bool):
        """Skip the gradient all-reduce on all but the last micro-batch of an accumulation."""
        return dist_utils.no_sync(self.wrapped, skip=not last and self.dist.enabled)

    def clip_gradients(self) -> float:
        params = [p for p in self.trained_module().parameters() if p.grad is not None]
        max_norm = self.config.optim.grad_clip if self.config.optim.grad_clip > 0 else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        if hasattr(norm, "full_tensor"):
            norm = norm.full_tensor()
        return float(norm)

    def noise_generator(self, step: int, micro: int, index: int, stream: int = 0) -> torch.Generator:
        """Generator of one sample's draws; `index` is the sample's place in the global micro-batch.
        `stream` > 0 gives an independent stream of the same sample, for a draw that must not reuse the
        main one's numbers (stage 3 re-noises its rollouts with one)."""
        gen = torch.Generator(device=self.device)
        gen.manual_seed(sample_seed(self.config.seed, step, micro, index, *([stream] if stream else [])))
        return gen

    def global_index(self, i: int, batch_size: int) -> int:
        return self.dist.rank * batch_size + i

    def _sync_device(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def log(self, message: str) -> None:
        self.run_log.print(message)

    # ------------------------------------------------------------------------------------------
    # The loop
    # ------------------------------------------------------------------------------------------

    def fit(self) -> dict:
        """Train to `max_steps`; checkpoint every N steps and at exit.

        Ctrl-C (SIGINT) or SIGTERM (cluster pre-emption) finishes the running step, writes a checkpoint
        and raises KeyboardInterrupt; a second Ctrl-C stops at once without saving.
        """
        self.setup()
        c = self.config
        self.log(f"[bold]{self.stage}[/] preset={c.preset} source={self.source} parallel={self.parallel} "
                 f"world={self.dist.world_size} device={self.device} bf16={self.bf16}\n{format_config(c)}")
        m = getattr(self, "model_config", None)
        if m is not None and m.head_outputs > m.dim:
            self.log(f"[yellow]note:[/] model.dim={m.dim} is below the {m.head_outputs} values the head gives a token "
                     f"({m.latent_channels} channels x {m.patch_size[1]}x{m.patch_size[2]} patches): it reaches {m.dim} "
                     "directions of them and sampling sets the rest to 0 (docs/model.md, \"The head's rank\"); "
                     f"--set model.dim={m.head_outputs} or smaller patches reach them all")
        self._stop = False
        previous = self._install_signal_handlers()
        last_saved = self.step_count
        stopping = False
        try:
            with self.run_log.progress(c.max_steps, self.step_count) as progress:
                while self.step_count < c.max_steps and not stopping:
                    stats = self._run_step()
                    self.step_count += 1
                    self.samples_seen += stats.samples
                    extra = self.validate() if self.validation.due(self.step_count) else {}
                    self._record(stats, progress, extra)
                    if self.step_count % c.checkpoint.every == 0:
                        self.save()
                        last_saved = self.step_count
                    stopping = dist_utils.any_rank(self._stop, self.dist)  # all ranks stop after the same step
        finally:
            self._restore_signal_handlers(previous)
            self.run_log.close()
        if self.step_count != last_saved:  # the same decision on every rank (save is collective)
            self.save()
        if self._stop or stopping:
            self.log(f"stopped at step {self.step_count}; checkpoint written: continue with --resume")
            raise KeyboardInterrupt
        self.folder.complete(self.dist)  # an --overwrite run, complete: it replaces the old one now
        result = {"step": self.step_count, "run_dir": str(self.run_dir),
                  **{k: self.latest[k] for k in ("loss", "val_loss", "val_loss_released") if k in self.latest}}
        line = self.last_line(result)
        if line and self.dist.is_main:
            print(line, flush=True)  # stdout, as every command's result line
        return result

    def last_line(self, result: dict) -> str | None:
        """The command's last line: what the run wrote, where, and how far it got."""
        return f"wrote {result['run_dir']}: {fit_summary(result)}"

    def request_stop(self, signum=None, frame=None) -> None:
        """Finish the current step, save and stop; a second request interrupts at once."""
        if self._stop and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self._stop = True

    def _install_signal_handlers(self) -> dict:
        import threading

        if threading.current_thread() is not threading.main_thread():
            return {}
        return {sig: signal.signal(sig, self.request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}

    @staticmethod
    def _restore_signal_handlers(previous: dict) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def _run_step(self) -> StepStats:
        try:
            return self.step()
        except torch.OutOfMemoryError as err:
            raise TrainError(f"{OOM_HINT} ({str(err).splitlines()[0]})") from err

    def _record(self, stats: StepStats, progress, extra: dict) -> None:
        seconds = stats.data_s + stats.encode_s + stats.compute_s
        counts = {t: stats.tiers.count(t) for t in sorted(set(stats.tiers))}
        self.run_log.record({"step": self.step_count, "loss": stats.loss, "lr": stats.lr, "grad_norm": stats.grad_norm,
                             "samples": self.samples_seen, "samples_per_s": stats.samples / max(seconds, 1e-9),
                             "it_per_s": 1.0 / max(seconds, 1e-9), "data_s": stats.data_s, "encode_s": stats.encode_s,
                             "compute_s": stats.compute_s, "tiers": counts, **self.step_metrics, **extra}, progress)

    # ------------------------------------------------------------------------------------------
    # Validation
    # ------------------------------------------------------------------------------------------

    def validate(self) -> dict:
        return self.validation.run(self)

    # ------------------------------------------------------------------------------------------
    # Checkpoints
    # ------------------------------------------------------------------------------------------

    def checkpoint_config(self) -> dict:
        return {"stage": self.stage, "preset": self.config.preset, "train": self.config.to_dict(),
                "model": self.model_config.to_dict(), "world_size": self.dist.world_size,
                "step": self.step_count, "samples_seen": self.samples_seen,
                "key_layout_version": KEY_LAYOUT_VERSION, "source": self.source, **self.checkpoint_notes}

    def trainer_state(self) -> dict:
        return {"step": self.step_count, "samples_seen": self.samples_seen,
                "scheduler": self.scheduler.state_dict(), "sampler": self.data.state_dict(self.step_count)}

    def save(self) -> Path | None:
        """Write a checkpoint of the current step (collective under FSDP: every rank must call it)."""
        model_state = dist_utils.model_state(self.wrapped)
        optim_state = dist_utils.optimizer_state(self.wrapped, self.optimizer)
        ema_state = self.ema.state_dict() if self.ema is not None else None
        parts = {}
        for part in self.checkpoint_parts.values():  # on every rank: a part's state may be gathered
            parts.update(part.state_dict())

        def main() -> dict:
            ref = None if self.model_config.clip_pretrained or not hasattr(self.model, "reference_encoder") else \
                {k: v.detach().cpu() for k, v in self.model.reference_encoder.state_dict().items()}
            return {"config": self.checkpoint_config(), "model": model_state, "optimizer": optim_state,
                    "trainer": {**self.trainer_state(), **parts}, "ema": ema_state, "reference_encoder": ref}

        return self.folder.write(self.step_count, self.dist, self.config.checkpoint.keep_last, main)

    def check_checkpoint(self, path: Path) -> None:
        saved = checkpoints.read_config(path)
        if saved.get("stage") != self.stage and not self.accepts_checkpoint_of(saved.get("stage")):
            raise TrainError(f"{path} is a {saved.get('stage')} checkpoint; this is {self.stage}")
        if saved.get("preset") != self.config.preset:
            raise TrainError(f"{path} was trained with preset {saved.get('preset')!r}, "
                             f"not {self.config.preset!r}: pass --preset {saved.get('preset')}")
        changed = ckpt.model_differences(saved["model"], self.model_config.to_dict())
        if changed:
            raise TrainError(f"{path} holds a model with different {', '.join(changed)}")

    def accepts_checkpoint_of(self, stage: str | None) -> bool:
        """Stages that may start from another stage's checkpoint (e.g. stage 2 from stage 1) override this."""
        return False

    def load(self, path: Path) -> None:
        """Restore weights, optimiser, LR schedule, EMA, step, RNG; the data position follows the step."""
        self.check_checkpoint(path)
        weights = checkpoints.read_tensors(path, "model.safetensors")
        dist_utils.load_model_state(self.wrapped, weights)
        ref = checkpoints.read_tensors(path, "reference_encoder.safetensors")
        if ref is not None:
            self.model.reference_encoder.load_state_dict(ref)
        dist_utils.load_optimizer_state(self.wrapped, self.optimizer, ckpt.read_torch(path, "optimizer.pt"))
        state = ckpt.read_torch(path, "trainer.pt")
        self.scheduler.load_state_dict(state["scheduler"])
        self.step_count = state["step"]
        self.samples_seen = state["samples_seen"]
        if self.ema is not None:
            ema = checkpoints.read_tensors(path, "ema.safetensors")
            if ema is None:
                raise TrainError(f"{path} has no ema.safetensors but ema_decay={self.config.ema_decay}")
            self.ema.load_state_dict(ema)
        rng = ckpt.read_rng(path, self.dist.rank)
        if rng is None:
            saved_world = checkpoints.read_config(path).get("world_size")
            self.log(f"note: {path} has no RNG state for rank {self.dist.rank} (saved with world size "
                     f"{saved_world}); training noise is seeded per sample, so only global RNG differs")
        else:
            ckpt.set_rng_state(rng)
        for part in self.checkpoint_parts.values():
            try:
                part.load_state_dict(state)
            except TrainError as err:
                raise TrainError(f"{path}: {err}") from None
        self.log(f"resumed from {path} at step {self.step_count}")
