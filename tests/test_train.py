"""`wtf train stage1`: overfit one batch, exact resume after Ctrl-C, curriculum timing, config and errors."""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch

from train_helpers import (KEYED_SETS, SAVED, FixedBatch, FixedDraws, KeyedBlobDataset, SyntheticLatentDataset,
                           keyed_losses, losses, synthetic_datasets, tiny_config)
from wantofight.inference import checkpoints
from wantofight.outputs import OutputExists
from wantofight.train import checkpoint as ckpt
from wantofight.train.config import ConfigError, resolve_config
from wantofight.train.data import DataError
from wantofight.train.metrics import read_metrics
from wantofight.train.run import train
from wantofight.train.stage1 import Stage1Trainer
from wantofight.train.trainer import TrainError
from wantofight.train.validation import collate


# ---------------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------------

def test_set_overrides_are_typed_and_bad_ones_name_the_valid_fields(tmp_path):
    file = tmp_path / "run.yaml"
    file.write_text("optim: {lr: 0.002, grad_accum: 2}\ndata: {frames: 33}\n")
    config = resolve_config("tiny", file=file, sets=["optim.lr=3e-4", "model.gradient_checkpointing=true",
                                                     "data.tiers=[single-action]"], max_steps=7)
    assert config.optim.lr == 3e-4 and config.optim.grad_accum == 2 and config.data.frames == 33
    assert config.max_steps == 7 and config.data.tiers == ["single-action"]
    assert config.model_config().gradient_checkpointing is True
    assert resolve_config("tiny").to_dict() == type(config).from_dict(resolve_config("tiny").to_dict()).to_dict()
    with pytest.raises(ConfigError, match="valid here: .*grad_clip"):
        resolve_config("tiny", sets=["optim.lrr=1"])
    with pytest.raises(ConfigError, match="1 \\+ 8 n"):
        resolve_config("tiny", sets=["data.frames=30"])
    with pytest.raises(ConfigError, match="unknown model field"):
        resolve_config("tiny", sets=["model.dimm=3"])
    with pytest.raises(ConfigError, match="valid presets: tiny, wan-1.3b"):
        resolve_config("huge")
    with pytest.raises(ConfigError, match="must be a number"):
        resolve_config("tiny", sets=["optim.lr=fast"])


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------

class OneBatchTrainer(FixedBatch, FixedDraws, Stage1Trainer):
    """The same batch and the same noise draws at every step: the loss can only go down by fitting."""


def test_overfit_one_batch_halves_the_loss_within_30_steps(tmp_path):
    config = tiny_config("max_steps=30", "optim.lr=3e-3", "context.noise_prob=0.0", "ema_decay=0.0")
    trainer = OneBatchTrainer(config, None, tmp_path / "run", datasets=synthetic_datasets(), progress=False)
    trainer.fit()
    curve = losses(tmp_path / "run")
    assert len(curve) == 30
    assert min(curve[s] for s in range(21, 31)) < 0.5 * curve[1], curve


class KeyedBatch(FixedBatch, Stage1Trainer):
    """Every clip of `KeyedBlobDataset` in every batch, fresh noise draws at every step."""


@pytest.fixture(scope="module")
def keyed_stage1(tmp_path_factory) -> dict[str, float]:
    """Losses (`keyed_losses`) of 600 stage-1 steps on the keyed blobs: about 40 s on one core."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trainer = KeyedBatch(tiny_config("max_steps=600", *KEYED_SETS), None, tmp_path_factory.mktemp("keyed") / "run",
                             datasets={"train": KeyedBlobDataset(), "val": None}, progress=False)
        trainer.fit()
        return keyed_losses(trainer)
    finally:
        torch.set_num_threads(previous)


@pytest.mark.slow
def test_stage1_learns_from_each_players_keys(keyed_stage1):
    """On latents that only the keys explain (every clip starts alike), the trained model's loss with the
    batch's keys is under half its loss with every key released (measured: 0.16 vs 0.52; with data and
    run seeds 1, 2: 0.09 vs 0.67, 0.11 vs 0.58). Ablation: with the keys cut out inside the DiT (its
    forward given keys=None) the losses are equal (0.29 each) and this fails. The overfit test above
    passes with the keys cut out; this one cannot."""
    assert keyed_stage1["keys"] < 0.5 * keyed_stage1["released"], keyed_stage1


@pytest.mark.slow
def test_stage1_binds_each_players_keys_to_that_players_blob(keyed_stage1):
    """The same model with the two players' keys swapped moves the wrong blobs: its loss is more than
    twice the loss with the right keys (measured: 0.66 vs 0.16; seeds 1, 2: 0.74 vs 0.09, 0.76 vs
    0.11). Ablation: with the same reference tokens for both players nothing tells the players apart (the
    model is symmetric in them), swapping the keys changes nothing (0.22 either way) and this fails."""
    assert keyed_stage1["keys"] < 0.5 * keyed_stage1["swapped"], keyed_stage1


def test_validation_also_scores_the_val_windows_with_the_keys_released_and_swapped(tmp_path):
    """`val_loss_released` and `val_loss_swapped` (per tier too) are the loss on the same val windows and
    noise with every key released and with the players' keys swapped. At init the keyboard injection is
    the identity, so the keys cannot matter yet and the three are equal; 20 steps on the keyed blobs make
    them differ. Ablation: with KEY_ABLATIONS returning the keys unchanged the three stay equal and this fails."""
    from wantofight.train.validation import VAL_STEP, tier_losses

    datasets = {"train": KeyedBlobDataset(), "val": KeyedBlobDataset(seed=1)}
    trainer = KeyedBatch(tiny_config("max_steps=20", *KEYED_SETS), None, tmp_path / "run", datasets=datasets,
                         progress=False).setup()
    with torch.no_grad():
        before = tier_losses(trainer, datasets["val"])
    assert before["val_loss_released"] == before["val_loss"] == before["val_loss_swapped"], before
    trainer.fit()
    trainer.wrapped.eval()
    with torch.no_grad():
        after = tier_losses(trainer, datasets["val"])
        batch = trainer.to_model_space(collate([datasets["val"][i] for i in range(8)]))  # one val batch of 8
        released = trainer.loss({**batch, "keys": torch.zeros_like(batch["keys"])}, micro=0, step=VAL_STEP)[0]
        swapped = trainer.loss({**batch, "keys": batch["keys"][:, :, [1, 0]]}, micro=0, step=VAL_STEP)[0]
    assert after["val_loss_released/single-action"] == pytest.approx(float(released), rel=1e-6)
    assert after["val_loss_swapped/single-action"] == pytest.approx(float(swapped), rel=1e-6)
    assert after["val_loss_released"] != after["val_loss"] != after["val_loss_swapped"], after


class InterruptAt(Stage1Trainer):
    """Delivers a real SIGINT (Ctrl-C) to the process in the middle of step `at`."""

    at = 3

    def loss(self, batch, micro, step=None):
        if self.step_count + 1 == self.at and micro == 0 and step is None:
            os.kill(os.getpid(), signal.SIGINT)
        return super().loss(batch, micro, step)


def test_ctrl_c_then_resume_gives_the_same_loss_at_every_later_step(tmp_path):
    sets = ("max_steps=7", "optim.grad_accum=2", "checkpoint.every=2", "optim.schedule=cosine",
            "optim.warmup_steps=2")
    full = train("stage1", preset="tiny", data=None, out=tmp_path / "full", sets=tiny_config_sets(*sets),
                 progress=False, datasets=synthetic_datasets())
    assert full["step"] == 7

    config = tiny_config(*sets)
    with pytest.raises(KeyboardInterrupt):
        InterruptAt(config, None, tmp_path / "cut", datasets=synthetic_datasets(), progress=False).fit()
    # step 3 finished, then saved
    assert checkpoints.latest_checkpoint(tmp_path / "cut").name == ckpt.checkpoint_name(3)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    resumed = train("stage1", preset="tiny", data=None, out=tmp_path / "cut", resume=True, progress=False,
                    datasets=synthetic_datasets())
    assert resumed["step"] == 7
    a, b = losses(tmp_path / "full"), losses(tmp_path / "cut")
    assert sorted(b) == list(range(1, 8))
    for step in range(1, 8):
        assert a[step] == b[step], (step, a[step], b[step])  # exact, not approximately
    final_a = checkpoints.read_tensors(checkpoints.latest_checkpoint(tmp_path / "full"), "model.safetensors")
    final_b = checkpoints.read_tensors(checkpoints.latest_checkpoint(tmp_path / "cut"), "model.safetensors")
    ema_a = checkpoints.read_tensors(checkpoints.latest_checkpoint(tmp_path / "full"), "ema.safetensors")
    ema_b = checkpoints.read_tensors(checkpoints.latest_checkpoint(tmp_path / "cut"), "ema.safetensors")
    assert all(torch.equal(final_a[k], final_b[k]) for k in final_a)
    assert all(torch.equal(ema_a[k], ema_b[k]) for k in ema_a)
    assert len(checkpoints.list_checkpoints(tmp_path / "full")) == 2  # keep_last of the tiny preset


def tiny_config_sets(*sets: str) -> list[str]:
    """The `--set` list `tiny_config` applies, for calls through `train()`."""
    from train_helpers import FRAMES

    return [f"data.frames={FRAMES}", "data.batch_size=2", "checkpoint.every=1000", "validation.every=0",
            "optim.warmup_steps=0", *sets]


def test_curriculum_tiers_appear_at_the_configured_optimiser_steps(tmp_path):
    phases = json.dumps([{"until": 2, "weights": {"single-action": 1}},
                         {"until": 4, "weights": {"dual-action": 1}},
                         {"until": None, "weights": {"full-match": 1}}])
    config = tiny_config("max_steps=6", "optim.grad_accum=2", f"data.curriculum={phases}", "ema_decay=0.0")
    Stage1Trainer(config, None, tmp_path / "run", datasets=synthetic_datasets(), progress=False).fit()
    seen = {r["step"]: r["tiers"] for r in read_metrics(tmp_path / "run")}
    expect = {1: "single-action", 2: "single-action", 3: "dual-action", 4: "dual-action", 5: "full-match",
              6: "full-match"}
    for step, tier in expect.items():
        assert seen[step] == {tier: 4}, (step, seen[step])  # 2 micro-batches x 2 samples, one tier


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

def test_resume_without_a_checkpoint_and_a_reused_run_dir_fail_clearly(tmp_path):
    config = tiny_config("max_steps=1")
    with pytest.raises(TrainError, match="no complete checkpoint"):
        Stage1Trainer(config, None, tmp_path / "run", resume=True, datasets=synthetic_datasets(), progress=False)
    Stage1Trainer(config, None, tmp_path / "run", datasets=synthetic_datasets(), progress=False).fit()
    with pytest.raises(OutputExists, match="--resume to continue it, or --overwrite"):
        Stage1Trainer(config, None, tmp_path / "run", datasets=synthetic_datasets(), progress=False)
    with pytest.raises(ConfigError, match="trained with preset 'tiny', not 'wan-1.3b'"):
        train("stage1", preset="wan-1.3b", data=None, out=tmp_path / "run", resume=True,
              datasets=synthetic_datasets(), progress=False)
    other = tiny_config("max_steps=2", "model.ffn_dim=96")
    with pytest.raises(TrainError, match="different ffn_dim"):
        Stage1Trainer(other, None, tmp_path / "run", resume=True, datasets=synthetic_datasets(), progress=False).setup()


def test_a_vae_named_by_a_relative_or_an_absolute_path_is_the_same_model(tmp_path, monkeypatch):
    """`--init-from` and `--resume` compare the saved model config with the run's: a run that names the VAE
    folder `runs/vae` and one that names it `/abs/runs/vae` hold the same model; another folder does not."""
    from dataclasses import replace

    from wantofight.train.checkpoint import model_differences
    from wantofight_model.presets import get_preset

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "vae").mkdir(parents=True)
    tiny = get_preset("tiny")

    def named(folder: str) -> dict:
        return json.loads(json.dumps(replace(tiny, vae=replace(tiny.vae, pretrained=folder)).to_dict()))

    assert model_differences(named("runs/vae"), named(str(tmp_path / "runs" / "vae")).copy()) == []
    assert model_differences(named("runs/other"), named("runs/vae")) == [f"vae={named('runs/other')['vae']!r}"]
    assert model_differences({**named("runs/vae"), "dim": 32}, named("runs/vae")) == ["dim=32"]
    # a copy of the folder's weights (a shipped model's vae/) is the same VAE; other bytes are not
    (tmp_path / "runs" / "vae" / "diffusion_pytorch_model.safetensors").write_bytes(b"weights")
    for name, data in (("copy", b"weights"), ("retrained", b"weightz")):
        (tmp_path / "runs" / name).mkdir()
        (tmp_path / "runs" / name / "diffusion_pytorch_model.safetensors").write_bytes(data)
    assert model_differences(named("runs/copy"), named("runs/vae")) == []
    assert model_differences(named("runs/retrained"), named("runs/vae")) == [f"vae={named('runs/retrained')['vae']!r}"]
    assert model_differences({**named("runs/copy"), "vae": {**named("runs/copy")["vae"], "base_dim": 8}},
                             named("runs/vae")) != []  # same weights file, other architecture
    # the latent cache's check: encoded with runs/vae, trained naming its copy (bench/assets) or not
    from wantofight.train.data import check_cache_vae

    check_cache_vae(tmp_path / "latents", "runs/vae", str(tmp_path / "runs" / "copy"))
    with pytest.raises(DataError, match="was encoded with the VAE in runs/vae; model.vae.pretrained is runs/retrained"):
        check_cache_vae(tmp_path / "latents", "runs/vae", "runs/retrained")


def test_a_model_saved_before_the_vae_had_a_kind_is_the_same_model():
    """A run saved before the per-frame autoencoder (duel-tiny as shipped from 2026-12-06, made here from its
    config with the two keys dropped) has no `kind` and no `norm_groups` in its VAE config: they were the
    defaults then, so `--init-from` such a run is not refused as a different model; a saved VAE of the other kind
    still is."""
    from wantofight.train.checkpoint import model_differences
    from wantofight.train.config import resolve_config

    folder = SAVED / "duel-tiny-2026-12-06"  # its configs (tests/saved/README.md)
    saved = json.loads((folder / "config.json").read_text())["model"]
    for key in ("kind", "norm_groups"):  # what this test is about: a config saved before they existed
        saved["vae"].pop(key, None)
    vae = str((folder / "vae").resolve())
    saved["vae"]["pretrained"] = vae
    mine = resolve_config("tiny", None, [f"model.vae.pretrained={vae}", "model.height=128", "model.width=128",
                                         "model.dim=128", "model.ffn_dim=256",
                                         f"model.rope_theta={saved['rope_theta']}"]).model_config().to_dict()
    assert model_differences(saved, mine) == []
    assert model_differences({**saved, "vae": {**saved["vae"], "kind": "frame"}}, mine) != []
    assert model_differences({**saved, "timestep_shift": 2.0}, mine) == ["timestep_shift=2.0"]


def test_the_constructor_calls_nothing_a_stage_overrides_and_setup_builds_the_parts(tmp_path, monkeypatch):
    """A stage's own state may be set before or after `super().__init__`: the constructor records the run's
    settings, and `setup()` (which `fit()` calls) builds the model, the data and the optimiser."""
    from wantofight.train.trainer import Trainer

    hooks = ("build_model", "trained_module", "build_optimizer", "build_scheduler", "load", "batch", "loss", "step",
             "sample", "validate", "checkpoint_config", "trainer_state", "save", "_record")
    called = []
    for name in hooks:
        original = getattr(Stage1Trainer, name)
        monkeypatch.setattr(Stage1Trainer, name, lambda self, *a, _f=original, _n=name, **k: (called.append(_n),
                                                                                             _f(self, *a, **k))[1])
    trainer = Stage1Trainer(tiny_config(), None, tmp_path / "run", datasets=synthetic_datasets(), progress=False)
    assert called == [] and not (tmp_path / "run").exists()
    assert trainer.setup() is trainer and trainer.setup() is trainer  # idempotent
    assert called[0] == "build_model" and set(called) == {"build_model", "trained_module", "build_optimizer",
                                                          "build_scheduler"}
    assert isinstance(trainer, Trainer) and trainer.data.sampler is not None and (tmp_path / "run").is_dir()


def test_data_that_disagrees_with_the_preset_is_refused_naming_both_sides(tmp_path):
    wrong = SyntheticLatentDataset(4)
    wrong.shape = (16, wrong.F, 6, 6)  # 48x48 pixels encoded; the tiny preset is 64x64
    with pytest.raises(DataError, match="48x48 pixels.*64x64"):
        Stage1Trainer(tiny_config(), None, tmp_path / "a", datasets={"train": wrong, "val": None}, progress=False).setup()
    with pytest.raises(DataError, match="items hold 17 frames, data.frames is 33"):
        Stage1Trainer(tiny_config("data.frames=33"), None, tmp_path / "b", datasets=synthetic_datasets(),
                      progress=False).setup()


# ---------------------------------------------------------------------------------------------
# DDP
# ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_two_process_ddp_averages_gradients_like_one_process_on_the_global_batch(tmp_path):
    import torch.multiprocessing as mp

    from train_helpers import ddp_worker, free_port, gradients_after_one_micro_batch

    mp.spawn(ddp_worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"ddp_rank{r}.pt", weights_only=False) for r in range(2)]
    single = gradients_after_one_micro_batch(tmp_path / "single", global_batch=4)

    assert ranks[0]["clip_ids"] + ranks[1]["clip_ids"] == single["clip_ids"]  # the global batch, split by rank
    assert ranks[0]["loss"] == pytest.approx(single["loss"], rel=1e-5)
    assert ranks[0]["step_loss"] == pytest.approx(single["step_loss"], rel=1e-5)
    assert set(ranks[0]["grads"]) == set(single["grads"])
    for name, grad in single["grads"].items():
        assert torch.equal(ranks[0]["grads"][name], ranks[1]["grads"][name]), name  # all-reduced: identical
        torch.testing.assert_close(ranks[0]["grads"][name], grad, rtol=1e-4, atol=1e-6, msg=name)
    for name, weight in single["weights"].items():
        torch.testing.assert_close(ranks[0]["weights"][name], weight, rtol=1e-4, atol=1e-6, msg=name)


def test_init_from_loads_a_wan_checkpoint_into_the_backbone_and_a_bad_one_fails(tmp_path):
    from safetensors.torch import save_file

    from wantofight_model.model import WanToFight

    torch.manual_seed(123)
    donor = WanToFight.from_config(tiny_config().model_config()).dit.backbone_state_dict()
    save_file({k: v.contiguous() for k, v in donor.items()}, str(tmp_path / "wan.safetensors"))
    trainer = Stage1Trainer(tiny_config(), None, tmp_path / "run", init_from=tmp_path / "wan.safetensors",
                            datasets=synthetic_datasets(), progress=False).setup()
    mine = trainer.model.dit.state_dict()
    assert all(torch.equal(mine[k], v) for k, v in donor.items())
    save_file({"blocks.0.self_attn.q.weight": torch.zeros(3, 3)}, str(tmp_path / "bad.safetensors"))
    with pytest.raises(TrainError, match="--init-from .*bad.safetensors"):
        Stage1Trainer(tiny_config(), None, tmp_path / "run2", init_from=tmp_path / "bad.safetensors",
                      datasets=synthetic_datasets(), progress=False).setup()


@pytest.mark.slow
def test_fsdp2_on_two_processes_trains_saves_and_resumes_like_one_process(tmp_path):
    import warnings

    import torch.multiprocessing as mp

    from train_helpers import fit_worker, free_port

    warnings.filterwarnings("ignore", message="FSDP2-wrapped module")
    single = tiny_config("max_steps=3")
    Stage1Trainer(single, None, tmp_path / "single", datasets=synthetic_datasets(), progress=False).fit()
    sets = ["data.batch_size=1", "parallel=fsdp", "checkpoint.every=2"]  # 2 ranks x 1 = the same global batch
    mp.spawn(fit_worker, args=(2, free_port(), str(tmp_path / "fsdp"), sets + ["max_steps=2"], False), nprocs=2)
    mp.spawn(fit_worker, args=(2, free_port(), str(tmp_path / "fsdp"), sets + ["max_steps=3"], True), nprocs=2)
    a, b = losses(tmp_path / "single"), losses(tmp_path / "fsdp")
    assert sorted(b) == [1, 2, 3]
    for step in a:
        assert b[step] == pytest.approx(a[step], rel=1e-5), step
    saved = checkpoints.read_tensors(checkpoints.latest_checkpoint(tmp_path / "fsdp"), "model.safetensors")
    single = checkpoints.latest_checkpoint(tmp_path / "single")
    assert set(saved) == set(checkpoints.read_tensors(single, "model.safetensors"))
