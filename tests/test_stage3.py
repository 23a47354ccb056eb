"""`wtf train stage3` and train/dmd.py: the DMD gradient, TTUR ratio, 4-step self-forcing rollouts that
equal inference, overfit one batch, exact resume, collapse detection."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model_helpers import keys as random_keys, latents as random_latents, one_torch_thread, ref_tokens, tiny_model  # noqa: F401
from train_helpers import BASE_SETS, FixedBatch, stage_config, synthetic_datasets
from wantofight.inference import checkpoints
from wantofight.inference.generation import read_frames
from wantofight.train import checkpoint as ckpt
from wantofight.train.collapse import CollapseConfig, CollapseDetector, CollapseError, batch_stats, problem
from wantofight.train.config import ConfigError
from wantofight.train.dmd import dmd_gradient, dmd_loss, dmd_sigmas, generator_loss, self_forcing_rollout
from wantofight.train.metrics import read_metrics
from wantofight.train.stage2 import Stage2Trainer
from wantofight.train.stage3 import DMDConfig, Stage3Trainer, resolve_dmd, train_stage3
from wantofight_model.generate import StreamingGenerator
from wantofight_model.scheduler import FlowMatchScheduler

@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("s2") / "run"
    Stage2Trainer(stage_config("stage2", "max_steps=1"), None, out, datasets=synthetic_datasets(), progress=False).fit()
    return out


# ---------------------------------------------------------------------------------------------
# The DMD gradient
# ---------------------------------------------------------------------------------------------

def gaussian_denoiser(mean: float, std: float):
    """Exact flow-matching velocity for data ~ N(mean, std^2) per element (a known score)."""
    def denoise(latents, timesteps, keys, refs, attention):
        sigma = (timesteps / 1000.0)[:, None, :, None, None]  # (B, 1, F, 1, 1)
        a = 1 - sigma
        x0 = mean + a * std**2 / (a**2 * std**2 + sigma**2) * (latents - a * mean)  # posterior mean
        return (latents - x0) / sigma.clamp_min(1e-6)
    return denoise


def test_dmd_gradient_moves_samples_towards_the_real_distribution():
    flow = FlowMatchScheduler()
    offset = torch.zeros(1, requires_grad=True)  # the "student": samples N(offset + 2, 1), real data N(0, 1)
    optimizer = torch.optim.SGD([offset], lr=0.5)
    gens = [torch.Generator().manual_seed(i) for i in range(4)]
    prompt = torch.zeros(4, 1, 1, 2, 2)
    for _ in range(40):
        base = torch.randn(4, 1, 4, 2, 2, generator=gens[0])
        x0 = base + 2 + offset
        fake_mean = float((2 + offset).detach())
        terms = generator_loss(x0, prompt, None, None, gaussian_denoiser(0.0, 1.0), gaussian_denoiser(fake_mean, 1.0),
                               flow, gens)
        optimizer.zero_grad()
        terms.loss.backward()
        optimizer.step()
    assert abs(float(2 + offset.detach())) < 0.3, float(2 + offset.detach())  # the student's mean went from 2 to ~0


def test_dmd_gradient_is_zero_when_scores_agree_normalised_and_timesteps_clamped():
    x0, real = torch.randn(2, 3, 4, 2, 2), torch.randn(2, 3, 4, 2, 2)
    assert torch.equal(dmd_gradient(x0, real, real), torch.zeros_like(x0))
    fake = torch.randn(2, 3, 4, 2, 2)
    g = dmd_gradient(x0, real, fake)
    # invariant to the scale of the scores' disagreement: it is divided by mean |x0 - x0_real| per sample
    torch.testing.assert_close(dmd_gradient(real + 10 * (x0 - real), real, real + 10 * (fake - real)), g)
    x = x0.clone().requires_grad_(True)
    dmd_loss(x, g).backward()
    torch.testing.assert_close(x.grad, g / g.numel())
    sig = dmd_sigmas([torch.Generator().manual_seed(i) for i in range(200)], FlowMatchScheduler(), 0.1, 0.5, "cpu")
    assert float(sig.min()) >= 0.1 and float(sig.max()) <= 0.5 and float(sig.std()) > 0


# ---------------------------------------------------------------------------------------------
# Self-forcing rollouts = inference
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cache_write, passes", [("denoising-step", 4), ("clean", 5)])
def test_student_rollout_takes_4_steps_per_chunk_and_equals_the_inference_sampler(cache_write, passes):
    model = tiny_model(cache_write=cache_write)
    flow = FlowMatchScheduler(shift=model.config.timestep_shift)
    prompt, keys, refs = random_latents(1, batch=1), random_keys(1 + 8 * 3, batch=1), ref_tokens(batch=1)
    cfg = model.config
    calls = []
    handle = model.dit.register_forward_pre_hook(lambda m, args: calls.append(args[0].shape[2]))
    with torch.no_grad():
        roll = self_forcing_rollout(model.dit, model.new_cache(1), cfg, prompt, keys, refs, flow, 4,
                                    [torch.Generator().manual_seed(7)])
    handle.remove()
    # the prompt once, then per chunk 4 steps (and the clean write's pass) x 3 chunks
    assert roll.forwards == [passes] * 3 and calls == [1] + [2] * passes * 3
    chunks = (keys[:, 1 + 8 * c:9 + 8 * c] for c in range(3))
    expected = list(StreamingGenerator(model, sampler="x0_renoise").generate_latents(
        prompt, chunks, refs, 4, prompt_keys=keys[:, :1], generator=torch.Generator().manual_seed(7)))
    torch.testing.assert_close(roll.latents, torch.cat(expected, dim=2), rtol=0, atol=1e-6)


def test_one_rollout_loop_serves_inference_and_stage3(tmp_path, teacher, monkeypatch):
    """`rollout_chunks` runs for the streaming generator (`wtf generate`, `wtf play`, the benchmark and
    stage 2's validation videos go through it) and for stage 3's self-forcing rollouts: there is no
    second sampling loop to keep equal."""
    import sys

    from wantofight.inference.generation import LoadedGenerator, build_vae, stream_chunks
    from wantofight_model.rollout import rollout_chunks

    callers, frames = [], []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is rollout_chunks.__code__ and not any(f is frame for f in frames):
            frames.append(frame)  # a generator's frame is entered again for each chunk: count each rollout once
            callers.append(frame.f_back.f_code.co_name)

    model = tiny_model()
    loaded = LoadedGenerator(model, build_vae(model.config), model.config, "stage3", "test")
    masks = np.zeros((17, 2), np.uint16)
    trainer = Stage3Trainer(stage_config("stage3", "max_steps=1"), None, tmp_path / "run", teacher=teacher,
                            dmd=DMDConfig(critic_steps=1), datasets=synthetic_datasets(), progress=False).setup()
    batch = trainer.batch()
    sys.setprofile(profile)
    try:
        list(stream_chunks(loaded, torch.zeros(1, 3, 1, 64, 64), masks, torch.zeros(1, 2, 3, 64, 64), steps=2))
        trainer.rollout(batch, 0, 0, 0)
    finally:
        sys.setprofile(None)
    assert callers == ["generate_latents", "self_forcing_rollout"]


def test_gradient_flows_only_through_the_exit_step():
    model = tiny_model()
    cfg = model.config
    flow = FlowMatchScheduler(shift=cfg.timestep_shift)
    prompt, keys, refs = random_latents(1, batch=1), random_keys(17, batch=1), ref_tokens(batch=1)
    roll = self_forcing_rollout(model.dit, model.new_cache(1), cfg, prompt, keys, refs, flow, 4,
                                [torch.Generator().manual_seed(0)], exit_steps=[1, 3])
    assert roll.latents.requires_grad
    roll.latents[:, :, :2].sum().backward()  # chunk 1 only: its step-1 forward
    assert model.dit.head.head.weight.grad.abs().sum() > 0


# ---------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------

def test_critic_and_generator_updates_follow_the_ttur_ratio(tmp_path, teacher):
    config = stage_config("stage3", "max_steps=2", "ema_decay=0.0")
    trainer = Stage3Trainer(config, None, tmp_path / "run", teacher=teacher, dmd=DMDConfig(critic_steps=3),
                            datasets=synthetic_datasets(), progress=False).setup()
    teacher_w = checkpoints.read_tensors(checkpoints.latest_checkpoint(teacher), "ema.safetensors")
    for net in (trainer.model.dit, trainer.critic, trainer.teacher):  # all three start as the teacher
        assert all(torch.equal(net.state_dict()[k], v) for k, v in teacher_w.items())
    trainer.fit()
    assert trainer.critic_updates == 6
    assert all(int(s["step"]) == 2 for s in trainer.optimizer.state.values())  # 2 generator updates
    assert all(int(s["step"]) == 6 for s in trainer.critic_optimizer.state.values())
    assert trainer._last_rollout.forwards == [5, 5]  # each chunk: 4 student steps, then the clean cache write
    assert all(torch.equal(trainer.teacher.state_dict()[k], v) for k, v in teacher_w.items())  # frozen
    records = read_metrics(tmp_path / "run")
    assert [r["critic_updates"] for r in records] == [3, 6]
    assert checkpoints.read_config(checkpoints.latest_checkpoint(tmp_path / "run"))["dmd"]["critic_steps"] == 3


class RecordsRollouts(Stage3Trainer):
    """Keeps (phase, exit steps) of every rollout: phase 0 = generator update, 1.. = critic updates."""

    def rollout(self, batch, step, phase, micro, **kwargs):
        roll = super().rollout(batch, step, phase, micro, **kwargs)
        self.seen = getattr(self, "seen", []) + [(phase, roll.exit_steps)]
        return roll


def test_critic_rollouts_exit_at_random_steps_like_the_generators(tmp_path, teacher):
    """The critic must learn the score of what the DMD loss scores: each chunk's x0 at a random exit step.
    Before, critic rollouts (no gradient) always exited at the last step: 12 of 12 draws were step 3."""
    config = stage_config("stage3", "max_steps=2", "ema_decay=0.0")
    trainer = RecordsRollouts(config, None, tmp_path / "run", teacher=teacher, dmd=DMDConfig(critic_steps=3),
                              datasets=synthetic_datasets(), progress=False)
    trainer.fit()
    critic = [e for phase, exits in trainer.seen if phase > 0 for e in exits]
    generator = [e for phase, exits in trainer.seen if phase == 0 for e in exits]
    assert len(critic) == 12 and len(generator) == 4
    assert len(set(critic)) > 1 and set(critic) <= {0, 1, 2, 3}, critic


def longest_overlap(a: torch.Tensor, b: torch.Tensor, max_shift: int = 8) -> float:
    """The largest fraction of equal elements between flat tensors a and b shifted by up to `max_shift`."""
    a, b = a.flatten(), b.flatten()
    best = 0.0
    for s in range(-max_shift, max_shift + 1):
        x, y = a[max(s, 0):], b[max(-s, 0):]
        n = min(len(x), len(y))
        best = max(best, float(torch.isclose(x[:n], y[:n], rtol=0, atol=1e-6).float().mean()))
    return best


def test_score_noise_is_independent_of_the_rollouts_noise(tmp_path, teacher, monkeypatch):
    """The noise that re-noises the student's samples for the DMD and critic losses must be a stream of its
    own. Before, it came from generators seeded like the rollout's, and 87.5% of it equalled the rollout's
    initial noise shifted by one element; now no shift of it shares more than 0.05% (one element)."""
    from wantofight.train import dmd
    from wantofight_model import rollout

    draws = []
    original = dmd.randn_per_sample

    def recording(shape, generators, device, dtype=None):
        noise = original(shape, generators, device, dtype)
        draws.append(noise)
        return noise

    monkeypatch.setattr(dmd, "randn_per_sample", recording)  # the losses' draws
    monkeypatch.setattr(rollout, "randn_per_sample", recording)  # the rollouts' draws
    config = stage_config("stage3", "max_steps=1", "ema_decay=0.0")
    Stage3Trainer(config, None, tmp_path / "run", teacher=teacher, dmd=DMDConfig(critic_steps=2),
                  datasets=synthetic_datasets(), progress=False).fit()
    score = [d for d in draws if d.shape[2] == 4]  # the generated frames of both chunks: critic x2, DMD x1
    rollout = [d for d in draws if d.shape[2] == 2]  # per chunk: initial noise, then re-noising
    assert len(score) == 3 and len(rollout) == 3 * 2 * 4
    overlap = max(longest_overlap(s[i], r[i]) for s in score for r in rollout for i in range(s.shape[0]))
    assert overlap < 0.01, overlap


class OneBatch(FixedBatch, Stage3Trainer):
    def noise_step(self):
        return 0


def test_stage3_overfits_one_batch(tmp_path, teacher):
    """With one batch and fixed draws, the critic fits the student's samples (its loss halves) and the
    generator's DMD loss stays finite while the student moves."""
    config = stage_config("stage3", "max_steps=20", "optim.lr=1e-3", "ema_decay=0.0")
    trainer = OneBatch(config, None, tmp_path / "run", teacher=teacher, dmd=DMDConfig(critic_steps=3, critic_lr=5e-3),
                       datasets=synthetic_datasets(), progress=False).setup()
    before = {k: v.clone() for k, v in trainer.model.dit.state_dict().items()}
    trainer.fit()
    records = read_metrics(tmp_path / "run")
    critic = [r["critic_loss"] for r in records]
    assert min(critic[-3:]) < 0.5 * critic[0], critic
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in records)
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.dit.state_dict().items())


class OverfitTeacher(FixedBatch, Stage2Trainer):
    pass


class CatchesUp(FixedBatch, Stage3Trainer):
    """One batch (the teacher's), fresh draws every step."""

    @torch.no_grad()
    def distance(self) -> float:
        """Mean squared distance of the student's 4-step samples (inference sampler, noise never
        trained on) to the batch's real latents."""
        batch = self.batch()
        return float((self.rollout(batch, -1, 0, 0, inference=True).latents - batch["latents"][:, :, 1:])
                     .pow(2).mean())


@pytest.mark.slow
def test_stage3_student_catches_up_with_a_teacher_overfit_on_one_batch(tmp_path):
    """The student side of DMD. A teacher fits one batch (400 stage-2 steps; its own 4-step samples land
    at ~0.04 of the real latents); the student starts behind it, from that run's step-100 weights (~0.36),
    the critic from the teacher as usual. 30 generator updates on that batch bring the student's samples
    at least 10% closer to its real latents (measured: 0.83, 0.88, 0.83 of the start for seeds 0, 1, 2).
    Without generator updates the ratio is 1; with the DMD gradient's sign flipped the samples diverge."""
    sets = ["context.noise_prob=0.0", "ema_decay=0.0", "checkpoint.every=100", "checkpoint.keep_last=4"]
    teacher = OverfitTeacher(stage_config("stage2", "max_steps=400", "optim.lr=3e-3", *sets), None,
                             tmp_path / "teacher", datasets=synthetic_datasets(), progress=False)
    teacher.fit()
    config = stage_config("stage3", "max_steps=30", "optim.lr=1e-3", "ema_decay=0.0")
    student = CatchesUp(config, None, tmp_path / "run", teacher=tmp_path / "teacher",
                        dmd=DMDConfig(critic_steps=3, critic_lr=5e-3), datasets=synthetic_datasets(), progress=False).setup()
    assert student.batch()["clip_id"] == teacher.batch()["clip_id"]
    teacher_distance = student.distance()
    teacher_at_100 = tmp_path / "teacher" / "checkpoints" / ckpt.checkpoint_name(100)
    behind = checkpoints.read_tensors(teacher_at_100, "model.safetensors")
    student.model.dit.load_state_dict(behind)
    start = student.distance()
    assert start > 5 * teacher_distance, (start, teacher_distance)  # the student starts well behind
    student.fit()
    assert student.distance() < 0.9 * start, (student.distance(), start)


def test_stage3_resume_is_exact(tmp_path, teacher):
    sets = BASE_SETS + ["checkpoint.every=2", "dmd.critic_steps=2"]
    train_stage3(preset="tiny", data=None, out=tmp_path / "full", teacher=teacher, max_steps=4, sets=sets,
                 progress=False, datasets=synthetic_datasets())
    train_stage3(preset="tiny", data=None, out=tmp_path / "cut", teacher=teacher, max_steps=2, sets=sets,
                 progress=False, datasets=synthetic_datasets())
    train_stage3(preset="tiny", data=None, out=tmp_path / "cut", max_steps=4, resume=True, progress=False,
                 datasets=synthetic_datasets())  # the teacher and dmd settings come from the checkpoint
    a, b = read_metrics(tmp_path / "full"), read_metrics(tmp_path / "cut")
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(a, b):
        assert ra["loss"] == rb["loss"] and ra["critic_loss"] == rb["critic_loss"], (ra, rb)
    fa, fb = checkpoints.latest_checkpoint(tmp_path / "full"), checkpoints.latest_checkpoint(tmp_path / "cut")
    wa, wb = checkpoints.read_tensors(fa, "model.safetensors"), checkpoints.read_tensors(fb, "model.safetensors")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    ca, cb = ckpt.read_torch(fa, "trainer.pt"), ckpt.read_torch(fb, "trainer.pt")
    assert ca["critic_updates"] == cb["critic_updates"] == 8
    assert all(torch.equal(ca["critic"][k], cb["critic"][k]) for k in ca["critic"])


# ---------------------------------------------------------------------------------------------
# torchrun: 2 processes (gloo on CPU) = 1 process on the same global batch
# ---------------------------------------------------------------------------------------------

def two_process_stage3(out, teacher, sets: list[str], resume: bool = False) -> None:
    """`train("stage3")` on 2 ranks x batch 1 (teacher None: read from the checkpoint on --resume)."""
    import torch.multiprocessing as mp

    from train_helpers import fit_worker, free_port

    args = (2, free_port(), str(out), ["data.batch_size=1", *sets], resume, "stage3", None,
            None if teacher is None else str(teacher))
    mp.spawn(fit_worker, args=args, nprocs=2)


def assert_same_run(single, parallel) -> None:
    """Same generator and critic losses and collapse statistics per step; same final student and critic."""
    a, b = read_metrics(single), read_metrics(parallel)
    assert [r["step"] for r in b] == [r["step"] for r in a]
    for ra, rb in zip(a, b):
        for key in ("loss", "critic_loss", "collapse/fake_std", "collapse/real_mean"):
            assert rb[key] == pytest.approx(ra[key], rel=1e-5), (ra["step"], key, ra[key], rb[key])
    fa, fb = checkpoints.latest_checkpoint(single), checkpoints.latest_checkpoint(parallel)
    # AdamW turns float-rounding differences of near-zero gradients into steps of up to lr (1e-3 here), so
    # the weights match to 1e-4 after 3 steps; an update from half the batch would differ by ~1e-3
    for wa, wb in ((checkpoints.read_tensors(fa, "model.safetensors"),
                    checkpoints.read_tensors(fb, "model.safetensors")),
                   (ckpt.read_torch(fa, "trainer.pt")["critic"], ckpt.read_torch(fb, "trainer.pt")["critic"])):
        assert set(wa) == set(wb)
        for k in wa:
            torch.testing.assert_close(wb[k], wa[k], rtol=0, atol=1e-4, msg=k)


@pytest.mark.slow
def test_stage3_on_two_ddp_processes_trains_like_one_process(tmp_path, teacher):
    """DDP all-reduces the student's gradients once, after the backward through every chunk's exit-step
    forward; the critic's as usual; losses, collapse statistics and weights are the global batch's."""
    sets = ["dmd.critic_steps=2", "max_steps=3"]
    train_stage3(preset="tiny", data=None, out=tmp_path / "single", teacher=teacher, sets=BASE_SETS + sets,
                 progress=False, datasets=synthetic_datasets())
    two_process_stage3(tmp_path / "ddp", teacher, ["parallel=ddp", *sets])
    assert_same_run(tmp_path / "single", tmp_path / "ddp")


@pytest.mark.slow
def test_stage3_fsdp2_on_two_processes_trains_saves_and_resumes_like_one_process(tmp_path, teacher):
    """Student, critic and teacher sharded; a checkpoint at step 2, --resume (teacher and dmd settings from
    the checkpoint) to step 3; the saved critic equals one process's."""
    sets = ["dmd.critic_steps=2", "checkpoint.every=2"]
    train_stage3(preset="tiny", data=None, out=tmp_path / "single", teacher=teacher, max_steps=3,
                 sets=BASE_SETS + sets, progress=False, datasets=synthetic_datasets())
    two_process_stage3(tmp_path / "fsdp", teacher, ["parallel=fsdp", "max_steps=2", *sets])
    assert checkpoints.latest_checkpoint(tmp_path / "fsdp").name == ckpt.checkpoint_name(2)
    two_process_stage3(tmp_path / "fsdp", None, ["parallel=fsdp", "max_steps=3", *sets], resume=True)
    saved = checkpoints.read_config(checkpoints.latest_checkpoint(tmp_path / "fsdp"))
    assert saved["world_size"] == 2 and saved["train"]["parallel"] == "fsdp" and saved["dmd"]["critic_steps"] == 2
    assert_same_run(tmp_path / "single", tmp_path / "fsdp")


def test_dmd_settings_are_validated():
    assert resolve_dmd(["dmd.critic_steps=2", "dmd.collapse.patience=4"]).collapse.patience == 4
    with pytest.raises(ConfigError, match="unknown field"):
        resolve_dmd(["dmd.critic_stepz=2"])
    with pytest.raises(ConfigError, match="t_min"):
        resolve_dmd(["dmd.t_min=0.9", "dmd.t_max=0.5"])


# ---------------------------------------------------------------------------------------------
# Collapse
# ---------------------------------------------------------------------------------------------

def test_collapse_thresholds_on_flat_black_and_broken_batches():
    config = CollapseConfig()
    real = torch.randn(2, 16, 4, 8, 8)
    assert problem(batch_stats(torch.randn(2, 16, 4, 8, 8), real), config) is None
    assert "flat" in problem(batch_stats(torch.full_like(real, 0.3), real), config)
    assert "drifted" in problem(batch_stats(torch.randn_like(real) - 5, real), config)
    assert "non-finite" in problem(batch_stats(real * float("nan"), real), config)


class CollapsesAt(Stage3Trainer):
    """The student's outputs are forced flat and black (constant -3) from step `at` on."""

    at = 3

    def rollout(self, batch, step, phase, micro):
        roll = super().rollout(batch, step, phase, micro)
        if self.step_count + 1 >= self.at:
            roll.latents = roll.latents * 0 - 3
        return roll


def test_collapse_stops_training_and_names_the_last_good_checkpoint(tmp_path, teacher):
    config = stage_config("stage3", "max_steps=6", "ema_decay=0.0", "checkpoint.every=1", "checkpoint.keep_last=5")
    trainer = CollapsesAt(config, None, tmp_path / "run", teacher=teacher,
                          dmd=DMDConfig(critic_steps=1, collapse=CollapseConfig(patience=2)),
                          datasets=synthetic_datasets(), progress=False)
    with pytest.raises(CollapseError) as err:
        trainer.fit()
    message = str(err.value)
    good = tmp_path / "run" / "checkpoints" / "step_00000002"
    assert "collapse detected at step 4" in message and "since step 3" in message
    assert f"last good checkpoint: {good}" in message
    assert checkpoints.latest_checkpoint(tmp_path / "run").name == "step_00000003"  # nothing saved after detection
    detector = CollapseDetector(CollapseConfig(patience=1))
    with pytest.raises(CollapseError, match="no checkpoint was written"):
        detector.check(torch.zeros(2, 3), torch.randn(2, 3), 1, tmp_path / "empty")


@pytest.mark.slow
def test_cli_stage1_stage2_stage3_on_a_real_dataset(recorded, tmp_path_factory, tmp_path):
    import typer
    from typer.testing import CliRunner

    from wantofight.annotate.curriculum import BuildOptions, build_curriculum
    from wantofight.train import cli as train_cli
    from wantofight.train import generate_cli

    # A drill run and a 2-episode match run; the match run gives val one episode (validation runs).
    drill = recorded(policy="drill", fps=30, episodes=1, max_frames=600)
    match = recorded(policy="scripted", p2_policy="random", episodes=2, max_frames=400, fps=30, seed=1)
    ds = tmp_path / "ds"
    build_curriculum([drill, match], ds, BuildOptions(clip_frames=33, val_fraction=0.5, seed=0, balance=False),
                     workers=2, progress=False)
    root = typer.Typer()
    generate_cli.register(root, train_cli.app)
    root.add_typer(train_cli.app, name="train")
    sets = ["--set", "data.frames=17", "--set", "validation.every=0", "--set", "data.batch_size=1",
            "--no-progress", "--max-steps", "1"]
    run = CliRunner().invoke
    result = run(root, ["train", "stage1", "--data", str(ds), "--out", str(tmp_path / "s1"), *sets])
    assert result.exit_code == 0, result.output
    # Stages 2 and 3 also validate: loss per tier and a streamed clip with the key HUD.
    with_validation = [*sets, "--set", "validation.every=1", "--set", "validation.video_frames=17"]
    result = run(root, ["train", "stage2", "--init-from", str(tmp_path / "s1"), "--data", str(ds),
                        "--out", str(tmp_path / "s2"), *with_validation])
    assert result.exit_code == 0, result.output
    result = run(root, ["train", "stage3", "--teacher", str(tmp_path / "s2"), "--data", str(ds),
                        "--out", str(tmp_path / "s3"), "--set", "dmd.critic_steps=2", *with_validation])
    assert result.exit_code == 0, result.output
    for stage in ("s2", "s3"):
        videos = list((tmp_path / stage / "val").glob("step_*.mp4"))
        assert videos, f"{stage} wrote no validation video"
        assert read_frames(videos[0]).shape[0] == 17
    assert checkpoints.read_config(checkpoints.latest_checkpoint(tmp_path / "s3"))["stage"] == "stage3"
    result = run(root, ["train", "stage3", "--data", str(ds), "--out", str(tmp_path / "bad"), *sets])
    assert result.exit_code == 2 and "needs --teacher" in result.output
