"""Stage 3 (docs/stages.md): DMD distillation of the stage-2 model into a 4-step causal student.

    wtf train stage3 --teacher runs/s2 --data DS_DIR --out runs/s3 [--set dmd.critic_steps=5]

Networks (train/dmd.py has the maths): the student (`self.model`, trained by the skeleton's
optimiser, LR schedule and EMA) and the critic (fake score, its own AdamW) both start as copies of
the teacher's weights; the teacher (real score) stays frozen.

One optimiser step (`step()`), for the step's micro-batches of real conditioning (the first latent
frame, the keys of every frame, the reference tokens):

    critic_steps x   critic update: self-forcing rollout of the student without gradient (the
                     inference sampler, each chunk's output taken at a random exit step as below),
                     flow-matching loss of the critic on it, AdamW step
    1 x              generator update: rollout with gradient at one random exit step per chunk,
                     DMD loss (teacher vs critic x0 predictions), AdamW step, LR schedule, EMA
    collapse check   student outputs of the batch vs its real latents (train/collapse.py)

The critic's rollouts exit like the generator's so that the critic learns the score of the very
samples the DMD loss scores. The losses re-noise the rollouts with noise from a seed stream of
their own (`phase_generators(..., "score")`), not the one the rollout was drawn from.

Under torchrun (`parallel=ddp|fsdp`) each rank runs the same step on its share of the global batch with
the draws one process would make (per-sample generators keyed by the global sample index; exit steps
from a generator every rank shares), so 2 ranks train like 1 process (tests/test_stage3.py):

    student  wrapped by the skeleton (DDP, or FSDP2 in place). The generator update makes one gradient
             forward per chunk (its exit step) and then one backward; the KV cache holds detached
             tensors, so that backward reaches each parameter's gradient accumulator once, with the sum
             over chunks. That is what DDP's reducer needs (each parameter ready once per backward: one
             all-reduce per bucket), and FSDP2 reduce-scatters after the backward as usual.
    critic   wrapped the same way (`critic_wrapped`), one gradient forward per micro-batch; the DMD
             loss's no-grad calls go to `self.critic`, the DDP replica or the sharded module itself.
    teacher  frozen. DDP: a full copy per rank (DDP wraps only trainable modules). FSDP: sharded like
             the critic, because a full fp32 copy is 5.2 GB per rank for wan-1.3b, and so that teacher
             and critic go through the same sharding and mixed precision: their difference (the DMD
             gradient) is then what the critic learned, not a precision gap.
    metrics  critic loss and DMD gradient averaged over ranks; the collapse check sees the gathered
             global batch on every rank, so all ranks take the same decision (none stops alone).

Checkpoints add to the skeleton's files (in trainer.pt) the critic's weights, its optimiser state,
the update counters and the collapse detector's state; config.json records the teacher and the
`dmd` settings, so `--resume` continues exactly (the teacher is re-read from its recorded path).
`dmd.*` settings are given with `--set dmd.critic_steps=3` like any other field.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from wantofight.inference import checkpoints
from wantofight.train import checkpoint as ckpt
from wantofight.train import distributed as dist_utils
from wantofight.train.collapse import CollapseConfig, CollapseDetector
from wantofight.train.config import ConfigError, apply_sets, build_config, split_sets
from wantofight.train.dmd import critic_loss, generator_loss, self_forcing_rollout
from wantofight.train.stage2 import Stage2Trainer, load_trainer_weights
from wantofight.train.trainer import StepStats, TrainError

SEED_STREAMS = {"rollout": 0, "score": 1}
"""Which `Trainer.noise_generator` stream each use of a sample's draws takes."""


@dataclass
class DMDConfig:
    """Distillation settings (`--set dmd.FIELD=VALUE`)."""

    critic_steps: int = 5
    """Critic (fake score) updates per generator update: the two time-scale update rule of DMD2."""
    critic_lr: float = 0.0
    """Critic AdamW learning rate, constant; 0 = optim.lr."""
    student_steps: int = 4
    """Denoising steps of the student per chunk (the paper: 4)."""
    sampler: str = "x0_renoise"
    """Student sampler: x0_renoise (predict x0, re-noise to the next level) or euler."""
    t_min: float = 0.02
    """Lowest noise level at which the scores are compared (DMD2 timestep clamping, 20 / 1000)."""
    t_max: float = 0.98
    """Highest such noise level (980 / 1000)."""
    random_exit: bool = True
    """Each chunk's output (and gradient) from a random denoising step (Self-Forcing), in generator and
    critic rollouts alike; else always the last."""
    collapse: CollapseConfig = field(default_factory=CollapseConfig)
    """Per-batch collapse thresholds."""

    def __post_init__(self) -> None:
        if isinstance(self.collapse, dict):
            self.collapse = CollapseConfig(**self.collapse)
        if self.critic_steps < 1 or self.student_steps < 1 or self.critic_lr < 0:
            raise ConfigError(f"dmd.critic_steps >= 1, dmd.student_steps >= 1, dmd.critic_lr >= 0 required; got "
                              f"{self.critic_steps}, {self.student_steps}, {self.critic_lr}")
        if self.sampler not in ("x0_renoise", "euler"):
            raise ConfigError(f"dmd.sampler={self.sampler!r}; valid: x0_renoise, euler")
        if not 0 <= self.t_min < self.t_max <= 1:
            raise ConfigError(f"dmd.t_min={self.t_min}, dmd.t_max={self.t_max}: need 0 <= t_min < t_max <= 1")


def resolve_dmd(sets, base: dict | None = None) -> DMDConfig:
    """DMDConfig from defaults (or a resumed run's saved settings) and `dmd.*` assignments."""
    data = apply_sets(DMDConfig, asdict(DMDConfig()) if base is None else copy.deepcopy(base), sets, "dmd")
    try:
        return build_config(DMDConfig, data, "dmd.")
    except (TypeError, ValueError) as err:
        raise ConfigError(f"dmd: {err}") from err


class Stage3Trainer(Stage2Trainer):
    """DMD with a TTUR critic and self-forcing rollouts of the student through the rolling KV cache."""

    stage = "stage3"
    attention = "block_causal"
    key_ablations = False  # DMD's loss scores the student's rollouts against critics, not the clip under its keys
    init_stages = ("stage2",)
    sampler_name = "x0_renoise"

    def __init__(self, config, data, run_dir, *, teacher: str | Path | None = None, dmd: DMDConfig | None = None,
                 resume: bool = False, **kwargs):
        from wantofight import outputs

        run = outputs.claim(run_dir, kwargs.get("overwrite", False), resume=True)  # the run --resume continues
        saved = None
        if resume and checkpoints.latest_checkpoint(run) is not None:
            saved = checkpoints.read_config(checkpoints.latest_checkpoint(run))
        if teacher is None:
            if saved is None:
                raise TrainError("stage3 needs --teacher STAGE2_CKPT (a stage-2 run or checkpoint folder)")
            teacher = saved["teacher"]
        self.dmd = dmd or (DMDConfig(**saved["dmd"]) if saved is not None else DMDConfig())
        self.sampler_name = self.dmd.sampler
        self.teacher_source = Path(teacher)
        self.critic_updates = 0
        self.collapse = CollapseDetector(self.dmd.collapse)
        self._last_rollout = None
        super().__init__(config, data, run_dir, resume=resume, init_from=None, **kwargs)

    # ---- three networks ----
    def build_model(self, init_from):
        model = super().build_model(None)
        self.teacher_path = load_trainer_weights(self, model, self.teacher_source, self.init_stages)
        self.checkpoint_notes.update(teacher=str(self.teacher_path), dmd=asdict(self.dmd))
        self.teacher = copy.deepcopy(model.dit).eval().requires_grad_(False)
        self.critic = copy.deepcopy(model.dit).train().requires_grad_(True)
        return model  # the student; on --resume its weights (and the critic's) come from the checkpoint

    def build_optimizer(self):
        o = self.config.optim
        self.critic_wrapped = dist_utils.wrap(self.critic, self.parallel, self.dist, self.bf16)
        if self.parallel == "fsdp":  # sharded like the critic: 1/G of its memory, and the same numerics
            dist_utils.wrap(self.teacher, "fsdp", self.dist, self.bf16)
        self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=self.dmd.critic_lr or o.lr,
                                                  betas=tuple(o.betas), eps=o.eps, weight_decay=0.0)
        self.checkpoint_parts["critic"] = ckpt.NetworkState("critic", self.critic_wrapped, self.critic_optimizer,
                                                       "it holds no DMD critic to resume")
        self.checkpoint_parts["counters"] = DMDCounters(self)
        return super().build_optimizer()

    # ---- rollouts ----
    def rollout(self, batch: dict, step: int, phase: int, micro: int, inference: bool = False):
        """The student's chunks after the batch's first latent frame, as inference makes them, each
        chunk's output taken at its exit step: drawn at random per chunk (`dmd.random_exit`) for the
        generator update and the critic's updates alike, so the critic learns the score of the samples
        the DMD loss scores; `inference` exits at the last step (the sampler's own output)."""
        from wantofight_model.kv_cache import RollingKVCache

        z = batch["latents"]
        B = z.shape[0]
        m = self.model_config
        gens = self.phase_generators(step, phase, micro, B)
        n_chunks = (z.shape[2] - 1) // m.chunk_latent_frames
        exits = None
        if self.dmd.random_exit and not inference:
            shared = self.noise_generator(step, phase * 1000 + micro, 2**31 - 1)  # same on every rank
            exits = torch.randint(self.dmd.student_steps, (n_chunks,), generator=shared, device=self.device).tolist()
        cache = RollingKVCache.from_config(m, B, self.device, torch.float32)
        with self.autocast():
            return self_forcing_rollout(self.wrapped, cache, m, z[:, :, :1], batch["keys"], batch["ref_tokens"],
                                        self.flow_sampling, self.dmd.student_steps, gens, exit_steps=exits,
                                        sampler=self.dmd.sampler, reachable=self.model.dit.reachable)

    def phase_generators(self, step: int, phase: int, micro: int, batch_size: int,
                         purpose: str = "rollout") -> list[torch.Generator]:
        """One generator per sample for each (step, phase, micro-batch); phase 0 = generator update,
        1..critic_steps = critic updates. `purpose` gives each use its own stream: `rollout` (the
        student's chunk noise) or `score` (the noise level and noise of the DMD / critic losses), so the
        samples are not re-noised with the very noise they were generated from."""
        stream = SEED_STREAMS[purpose]
        return [self.noise_generator(step, phase * 1000 + micro, self.global_index(i, batch_size), stream)
                for i in range(batch_size)]

    @property
    def flow_sampling(self):
        from wantofight_model.scheduler import FlowMatchScheduler

        return FlowMatchScheduler(self.model_config.num_train_timesteps, self.model_config.timestep_shift)

    # ---- objectives ----
    def loss(self, batch: dict, micro: int, step: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """DMD generator loss of one micro-batch (with gradient to the student when enabled)."""
        step = self.noise_step() if step is None else step
        roll = self.rollout(batch, step, 0, micro)
        self._last_rollout = roll
        z = batch["latents"]
        gens = self.phase_generators(step, 0, micro, z.shape[0], "score")
        with self.autocast():
            terms = generator_loss(roll.latents, z[:, :, :1], batch["keys"], batch["ref_tokens"], self.teacher,
                                   self.critic, self.flow_sampling, gens, self.dmd.t_min, self.dmd.t_max)
        self.step_metrics["dmd_grad"] = terms.grad_norm
        return terms.loss, terms.per_sample

    def critic_step(self, batches: list[dict], step: int, phase: int) -> float:
        accum = len(batches)
        self.critic_wrapped.train()
        self.critic_optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for micro, batch in enumerate(batches):
            with torch.no_grad():
                roll = self.rollout(batch, step, phase, micro)
            z = batch["latents"]
            gens = self.phase_generators(step, phase, micro, z.shape[0], "score")
            with dist_utils.no_sync(self.critic_wrapped, skip=micro < accum - 1), self.autocast():
                loss = critic_loss(roll.latents, z[:, :, :1], batch["keys"], batch["ref_tokens"], self.critic_wrapped,
                                   self.flow_sampling, gens, self.dmd.t_min, self.dmd.t_max)
                (loss / accum).backward()
            total += float(loss.detach()) / accum
        clip = self.config.optim.grad_clip if self.config.optim.grad_clip > 0 else float("inf")
        torch.nn.utils.clip_grad_norm_([p for p in self.critic.parameters() if p.grad is not None], clip)
        self.critic_optimizer.step()
        self.critic_updates += 1
        return total

    def noise_step(self) -> int:
        """The step number that seeds this step's draws (an overfit test pins it)."""
        return self.step_count

    def step(self) -> StepStats:
        accum = self.config.optim.grad_accum
        step = self.noise_step()
        self._encode_s = 0.0
        t0 = time.perf_counter()
        batches = [self.batch() for _ in range(accum)]
        t1 = time.perf_counter()
        critic = [self.critic_step(batches, step, 1 + k) for k in range(self.dmd.critic_steps)]

        self.wrapped.train()
        self.optimizer.zero_grad(set_to_none=True)
        total, fakes, reals = 0.0, [], []
        for micro, batch in enumerate(batches):
            with self.no_sync(last=micro == accum - 1):
                loss, _ = self.loss(batch, micro)
                (loss / accum).backward()
            total += float(loss.detach()) / accum
            fakes.append(self._last_rollout.latents.detach())
            reals.append(batch["latents"][:, :, 1:])
        grad_norm = self.clip_gradients()
        self.optimizer.step()
        self.scheduler.step()
        if self.ema is not None:
            self.ema.update()
        # the global batch on every rank: the same statistics as one process, the same decision on all ranks
        fakes, reals = (dist_utils.gather(torch.cat(x), self.dist) for x in (fakes, reals))
        stats = self.collapse.check(fakes, reals, self.step_count + 1, self.run_dir)
        self._sync_device()
        compute_s = time.perf_counter() - t1
        # this rank's losses -> the global batch's (float64: one process keeps its exact values)
        means = dist_utils.mean(torch.tensor([*critic, self.step_metrics["dmd_grad"]], dtype=torch.float64,
                                             device=self.device), self.dist).tolist()
        critic, self.step_metrics["dmd_grad"] = means[:-1], means[-1]
        self.step_metrics.update({"critic_loss": sum(critic) / len(critic), "critic_updates": self.critic_updates,
                            "generator_updates": self.step_count + 1, **stats.as_metrics()})
        loss_value = float(dist_utils.mean(torch.as_tensor(total, device=self.device), self.dist))
        samples = sum(b["latents"].shape[0] for b in batches)
        tiers = [t for b in batches for t in b["tier"]]
        return StepStats(loss_value, grad_norm, self.scheduler.get_last_lr()[0], samples * self.dist.world_size,
                         t1 - t0 - self._encode_s, self._encode_s, compute_s, tiers)

    @torch.no_grad()
    def sample(self, batch: dict, steps: int, num_latent_frames: int) -> torch.Tensor:
        """The student's streaming samples in its own step count (validation videos)."""
        return super().sample(batch, self.dmd.student_steps, num_latent_frames)


class DMDCounters:
    """Stage 3's counters in its checkpoint: the critic's updates and the collapse detector's history."""

    def __init__(self, trainer: Stage3Trainer):
        self.trainer = trainer

    def state_dict(self) -> dict:
        return {"critic_updates": self.trainer.critic_updates, "collapse": self.trainer.collapse.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.trainer.critic_updates = state["critic_updates"]
        self.trainer.collapse.load_state_dict(state["collapse"])


def train_stage3(*, preset: str, data, out: Path, teacher=None, max_steps=None, resume=False, config_file=None,
                 sets=(), device=None, progress=True, datasets=None, overwrite=False) -> dict:
    """`wtf train stage3` as a library call (tests call it directly)."""
    from wantofight import outputs
    from wantofight.train.run import resolve

    dmd_sets, other = split_sets(sets, "dmd")
    base = None
    run = outputs.claim(out, overwrite, resume=True)  # the run --resume continues
    if resume and checkpoints.latest_checkpoint(run) is not None:
        base = checkpoints.read_config(checkpoints.latest_checkpoint(run)).get("dmd")
    dmd = resolve_dmd(dmd_sets, base)
    config = resolve("stage3", preset, run, resume, config_file, other, max_steps)
    trainer = Stage3Trainer(config, data, out, teacher=teacher, dmd=dmd, resume=resume, device=device,
                            progress=progress, datasets=datasets, overwrite=overwrite)
    return trainer.fit()
