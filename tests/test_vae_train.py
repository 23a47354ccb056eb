"""`wtf train vae`: a game-domain Wan VAE trained on the project's own recordings, written as a diffusers
folder that every `--vae` / `model.vae.pretrained` consumer loads; PSNR report; one-line errors; learning."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from model_helpers import one_torch_thread  # noqa: F401  (autouse fixture)
from wantofight.annotate.curriculum import BuildOptions, build_curriculum
from wantofight.cli import app
from wantofight.datasets.clip_dataset import ClipDataset
from wantofight.outputs import staging_dir
from wantofight.train.vae.config import VAETrainConfig
from wantofight.train.vae.losses import Reconstruction, reconstruction_loss
from wantofight.train.vae.measure import measure, psnr_8bit
from wantofight.train.vae.trainer import VAETrainer
from wantofight_model.presets import get_preset
from wantofight_model.vae import WanVAE

SIZE = (32, 32)
FAST = ["--size", "32x32", "--no-progress", "--set", "data.frames=9", "--set", "vae.eval_windows=2", "--set", "vae.stats_windows=4",
        "--set", "data.batch_size=2", "--set", "vae.crop=0", "--set", "validation.every=0"]


@pytest.fixture(scope="module")
def ds_dir(recorded, tmp_path_factory):
    """Drills and two scripted-vs-random matches (the recordings `small_dataset` also uses), 9-frame
    clips, half the episodes in val: the held-out split the report measures."""
    drill = recorded(policy="drill", fps=30, episodes=1, max_frames=600)
    match = recorded(policy="scripted", p2_policy="random", episodes=2, max_frames=400, fps=30, seed=1)
    out = tmp_path_factory.mktemp("vae-ds") / "ds"
    build_curriculum([drill, match], out, BuildOptions(clip_frames=9, val_fraction=0.5, seed=0, balance=False),
                     workers=1, progress=False)
    return out


@pytest.fixture(scope="module")
def vae_dir(ds_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("vae") / "game-vae"
    result = CliRunner().invoke(app, ["train", "vae", "--data", str(ds_dir), "--out", str(out), "--max-steps", "3",
                                      *FAST, "--set", "vae.fighter_weight=5",  # every loss term in the loop
                                      "--set", "vae.adv_weight=0.5", "--set", "vae.adv_start=1"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith(f"wrote {out}: PSNR train "), result.stdout  # once, the last
    assert result.stdout.count("wrote ") == 1, result.stdout
    return out


def test_wtf_train_vae_writes_a_diffusers_folder_with_a_psnr_report(ds_dir, vae_dir):
    assert sorted(p.name for p in vae_dir.iterdir()) == ["config.json", "diffusion_pytorch_model.safetensors",
                                                          "metrics.jsonl", "report.json"]
    assert not staging_dir(vae_dir).exists()  # the run's checkpoints went with the staging folder
    report = json.loads((vae_dir / "report.json").read_text())
    assert set(report["psnr"]) == {"train", "val"} and all(0 < v < 60 for v in report["psnr"].values())
    assert set(report["fighters_psnr"]) == {"train", "val"} and all(0 < v < 60 for v in report["fighters_psnr"].values())
    assert set(report["last_psnr"]) == {"train", "val"} and all(0 < v < 60 for v in report["last_psnr"].values())
    assert report["steps"] == 3 and report["size"] == list(SIZE) and report["train_seconds"] > 0
    assert report["parameters"]["total"] == report["parameters"]["encoder"] + report["parameters"]["decoder"] > 0
    assert report["data"]["clips"]["val"] > 0 and report["megabytes"] > 0
    config = json.loads((vae_dir / "config.json").read_text())
    assert config["_class_name"] == "AutoencoderKLWan" and config["z_dim"] == 16
    assert config["latents_mean"] == report["latents_mean"] and config["latents_std"] == report["latents_std"]
    records = [json.loads(line) for line in (vae_dir / "metrics.jsonl").read_text().splitlines()]
    assert all(r["critic_loss"] > 0 for r in records) and records[-1]["adv_scale"] > 0  # the critic ran


def test_the_trained_vae_round_trips_through_wanvae_with_unit_variance_latents(ds_dir, vae_dir):
    vae = WanVAE.from_pretrained(vae_dir).eval()
    frames = torch.rand(1, 3, 9, 64, 64) * 2 - 1
    z = vae.encode(frames)
    assert z.shape == (1, 16, 3, 8, 8) and vae.decode(z).shape == (1, 3, 9, 64, 64)
    decoder = vae.streaming_decoder()  # the streaming path uses it unchanged
    parts = torch.cat([decoder.decode(z[:, :, :1]), decoder.decode(z[:, :, 1:])], dim=2)
    assert torch.equal(parts, vae.decode(z).clamp(-1, 1))
    # latents_mean / latents_std were measured on the train frames: normalised latents have unit scale there
    train = ClipDataset(ds_dir, "train", frames=9, size=SIZE, pixels="uint8")
    assert 0.8 < measure(vae, train, 4, SIZE)["latent_rms"] < 1.2
    report = json.loads((vae_dir / "report.json").read_text())
    assert measure(vae, train, 2, SIZE)["psnr"] == pytest.approx(report["psnr"]["train"], abs=1e-3)


class _Copy:
    """A stand-in VAE that returns its input (draws everything) or, with `stage`, only the stage."""

    def __init__(self, stage=None):
        self.stage = stage

    def encode(self, frames):
        return frames

    def decode(self, z):
        return z if self.stage is None else self.stage[None, :, None].expand_as(z)


def test_the_fighters_psnr_sees_fighters_the_whole_frame_psnr_hides(ds_dir):
    """A decoder that draws only the stage still scores a high PSNR over whole frames; the fighters' PSNR
    (pixels that differ from the stage picture) shows it drew no fighter."""
    from wantofight.train.vae.losses import fighter_mask, stage_picture

    train = ClipDataset(ds_dir, "train", frames=9, size=SIZE, pixels="uint8")
    stage = stage_picture(train, 16, SIZE)
    assert stage.shape == (3, *SIZE)
    perfect = measure(_Copy(), train, 4, SIZE, stage=stage)
    assert perfect["psnr"] == perfect["fighters_psnr"] == float("inf")
    blank = measure(_Copy(stage), train, 4, SIZE, stage=stage)
    assert blank["psnr"] > blank["fighters_psnr"] + 8, blank
    assert "fighters_psnr" not in measure(_Copy(), train, 2, SIZE)
    frames = stage[None, :, None].repeat(1, 1, 2, 1, 1)
    frames[0, :, 1, 10, 20] = -frames[0, :, 1, 10, 20] + 0.5  # one changed pixel, grown to 3x3 in its frame
    mask = fighter_mask(frames, stage)
    assert mask.sum() == 9 and mask[0, 0, 1, 9:12, 19:22].all() and mask[0, 0, 0].sum() == 0


class _Drifting(_Copy):
    """A stand-in VAE whose output drifts away from its input after the first group of frames, as a VAE
    trained on 9-frame windows does after frame 9 of 33 (docs/model.md)."""

    def decode(self, z):
        out = z.clone()
        out[:, :, 5:] = (out[:, :, 5:] + 0.5).clamp(-1, 1)
        return out


def test_the_last_frames_psnr_sees_a_vae_drift_over_a_long_window(ds_dir):
    clips = ClipDataset(ds_dir, "train", frames=9, size=SIZE, pixels="uint8")
    steady = measure(_Copy(), clips, 2, SIZE)
    assert steady["psnr"] == steady["last_psnr"] == float("inf") and steady["windows"] == 2
    drifting = measure(_Drifting(), clips, 2, SIZE)
    assert drifting["last_psnr"] < 20 and drifting["psnr"] > drifting["last_psnr"] + 2, drifting


def test_wtf_encode_takes_the_trained_vae(ds_dir, vae_dir, tmp_path):
    from wantofight.datasets.latent_dataset import LatentDataset
    from wantofight.train.data import vae_spec

    out = tmp_path / "lat"
    result = CliRunner().invoke(app, ["encode", str(ds_dir), "--out", str(out), "--vae", str(vae_dir), "--frames",
                                      "9", "--size", "32x32", "--tiers", "full", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert vae_spec(out) == str(vae_dir.resolve())
    item = LatentDataset(out, "train")[0]
    assert item["latents"].shape == (16, 3, 4, 4)


def test_bad_input_fails_in_one_line_and_writes_nothing(ds_dir, vae_dir, tmp_path):
    runner = CliRunner()
    out = tmp_path / "v"
    cases = [([], "Missing option '--data'"),
             (["--data", str(ds_dir), "--size", "100x100"], "multiples of 16"),
             (["--data", str(ds_dir), "--size", "big"], "HEIGHTxWIDTH"),
             (["--data", str(tmp_path / "none")], "does not exist"),
             (["--data", str(ds_dir), "--set", "vae.clip_frames=6"], "1 + 4 k"),
             (["--data", str(ds_dir), "--set", "vae.nope=1"], "unknown field"),
             (["--data", str(ds_dir), "--resume"], "no interrupted run")]
    for extra, message in cases:
        result = runner.invoke(app, ["train", "vae", "--out", str(out), *extra])
        assert result.exit_code == 2 and message in " ".join(result.output.split()), (extra, result.output)
        assert not out.exists() and not staging_dir(out).exists()
    before = sorted(p.name for p in vae_dir.iterdir())
    result = runner.invoke(app, ["train", "vae", "--data", str(ds_dir), "--out", str(vae_dir), *FAST])
    assert result.exit_code == 2 and "already exists" in result.output and "--overwrite" in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1
    assert sorted(p.name for p in vae_dir.iterdir()) == before and not staging_dir(vae_dir).exists()


def test_reconstruction_learns_a_fixed_batch(ds_dir):
    """80 AdamW steps of `Reconstruction` + `reconstruction_loss` on one batch of real frames raise the
    round-trip PSNR by more than 5 dB (measured 8.1 -> 16.8). Ablation: the same loop without
    `optimizer.step()` leaves it at 8.1 (+0.00 dB), so the test fails."""
    torch.manual_seed(0)
    vae = WanVAE.from_config(get_preset("tiny").vae)
    model = Reconstruction(vae.autoencoder)
    train = ClipDataset(ds_dir, "train", frames=9, size=SIZE)
    frames = torch.stack([train[(i, 0)]["frames"][:5] for i in (0, len(train) // 2)]).transpose(1, 2)  # (2, 3, 5, h, w)
    settings = VAETrainConfig()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.0)

    def round_trip() -> float:
        with torch.no_grad():
            return psnr_8bit(vae.decode(vae.encode(frames)), frames)

    before = round_trip()
    gen = torch.Generator().manual_seed(0)
    for _ in range(80):
        noise = torch.randn(2, 16, 2, SIZE[0] // 8, SIZE[1] // 8, generator=gen)
        out, mean, logvar = model(frames, noise)
        loss = reconstruction_loss(out, frames, mean, logvar, settings).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert round_trip() > before + 5, (before, round_trip())


def test_the_fighter_weight_draws_the_fighters_better(ds_dir):
    """The same 60 steps on one batch of real frames, with `vae.fighter_weight` 0 and 20: the weighted
    run's fighters' PSNR (pixels that differ from the stage) is higher by more than 1.5 dB (measured 12.7 ->
    15.4). With the weight's loss term cut (fighters=None), the two runs are the same run and it fails."""
    from wantofight.train.vae.losses import fighter_mask, stage_picture
    from wantofight.fidelity import eight_bit
    from wantofight.train.vae.measure import db

    train = ClipDataset(ds_dir, "train", frames=9, size=SIZE)
    stage = stage_picture(ClipDataset(ds_dir, "train", frames=9, size=SIZE, pixels="uint8"), 16, SIZE)
    frames = torch.stack([train[(i, 0)]["frames"][:5] for i in (0, len(train) // 3, 2 * len(train) // 3)])
    frames = frames.transpose(1, 2)  # (3, 3, 5, h, w)
    fighters = fighter_mask(frames, stage)
    assert 0 < fighters.mean() < 0.3  # the fighters are a small part of the frame

    def fighters_psnr(weight: float) -> float:
        torch.manual_seed(0)
        vae = WanVAE.from_config(get_preset("tiny").vae)
        model = Reconstruction(vae.autoencoder)
        settings = VAETrainConfig(fighter_weight=weight, sample_posterior=False)
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.0)
        noise = torch.zeros(3, 16, 2, SIZE[0] // 8, SIZE[1] // 8)
        for _ in range(60):
            out, mean, logvar = model(frames, noise)
            loss = reconstruction_loss(out, frames, mean, logvar, settings, fighters).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            out = vae.decode(vae.encode(frames))
        errors = (eight_bit(out) - eight_bit(frames)).square() * fighters  # as `measure` scores fighters' PSNR
        return db(errors.sum().item(), int(fighters.sum().item()) * 3)

    plain, weighted = fighters_psnr(0.0), fighters_psnr(20.0)
    assert weighted > plain + 1.5, (plain, weighted)


# ---- loadable wherever a VAE is taken ----

STAGE1_FAST = ["--preset", "tiny", "--max-steps", "2", "--no-progress", "--set", "data.frames=9",
               "--set", "data.batch_size=1", "--set", "validation.every=2", "--set", "validation.batches=1",
               "--set", "validation.video_frames=9", "--set", "validation.sample_steps=2",
               "--set", "data.curriculum=[{until: null, weights: {full-match: 1.0}}]"]


def same_weights(a, b) -> bool:
    sa, sb = a.autoencoder.state_dict(), b.autoencoder.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.slow
def test_stage1_trains_through_the_game_vae_and_generation_decodes_with_it(ds_dir, vae_dir, tmp_path):
    from wantofight.inference.generation import load_generator

    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "stage1", "--data", str(ds_dir), "--out", str(run), *STAGE1_FAST,
                                      "--set", f"model.vae.pretrained={vae_dir}"])
    assert result.exit_code == 0, result.output
    assert (run / "val" / "step_00000002.mp4").exists()
    loaded = load_generator(run)  # what `wtf generate` and `wtf eval` use
    assert loaded.config.vae.pretrained == str(vae_dir)
    assert same_weights(loaded.vae, WanVAE.from_pretrained(vae_dir))
    assert loaded.vae.autoencoder.config.latents_std == json.loads((vae_dir / "report.json").read_text())["latents_std"]


@pytest.mark.slow
def test_a_latent_cache_of_the_game_vae_trains_only_a_model_that_names_it(ds_dir, vae_dir, tmp_path):
    from wantofight.train.run import resolve
    from wantofight.train.stage1 import Stage1Trainer

    lat = tmp_path / "lat"
    result = CliRunner().invoke(app, ["encode", str(ds_dir), "--out", str(lat), "--vae", str(vae_dir), "--frames", "9",
                                      "--size", "64x64", "--ref-size", "64", "--no-progress"])
    assert result.exit_code == 0, result.output
    refused = CliRunner().invoke(app, ["train", "stage1", "--data", str(lat), "--out", str(tmp_path / "r0"),
                                       *STAGE1_FAST])
    assert refused.exit_code == 2 and f"--set model.vae.pretrained={vae_dir.resolve()}" in \
        " ".join(refused.output.split()), refused.output
    sets = ["data.frames=9", "data.batch_size=1", f"model.vae.pretrained={vae_dir.resolve()}",
            "data.curriculum=[{until: null, weights: {full-match: 1.0}}]"]
    trainer = Stage1Trainer(resolve("stage1", "tiny", tmp_path / "r1", False, sets=sets), lat, tmp_path / "r1",
                            progress=False).setup()
    assert trainer.source == "latents" and same_weights(trainer.get_vae(), WanVAE.from_pretrained(vae_dir))


@pytest.mark.slow
def test_a_per_frame_autoencoder_trains_encodes_trains_the_dit_and_generates(ds_dir, tmp_path):
    """`model.vae.kind=frame` end to end: `wtf train vae` writes a FrameAutoencoder folder, `wtf encode`
    caches one latent frame per frame, a model without the kind is refused in one line, stage 1 trains on
    the cache with 8 latent frames a chunk, `wtf generate` streams through the same autoencoder, and
    `wtf train decoder` prunes its decoder for `wtf generate --decoder`."""
    from wantofight.inference.generation import load_generator
    from wantofight.video import read_video
    from wantofight_model.frame_vae import FrameVAE
    from wantofight_model.vae import load_vae_folder

    vae_dir = tmp_path / "frame-vae"
    result = CliRunner().invoke(app, ["train", "vae", "--data", str(ds_dir), "--out", str(vae_dir), "--max-steps", "3",
                                      *FAST, "--set", "vae.fighter_weight=5", "--set", "model.vae.kind=frame",
                                      "--set", "model.vae.base_dim=16", "--set", "model.vae.dim_mult=[1, 2, 2, 2]"])
    assert result.exit_code == 0, result.output
    config = json.loads((vae_dir / "config.json").read_text())
    assert config["_class_name"] == "FrameAutoencoder" and config["latent_channels"] == 16
    assert json.loads((vae_dir / "report.json").read_text())["architecture"]["class"] == "FrameAutoencoder"
    assert isinstance(load_vae_folder(vae_dir), FrameVAE)

    lat = tmp_path / "lat"
    result = CliRunner().invoke(app, ["encode", str(ds_dir), "--out", str(lat), "--vae", str(vae_dir), "--frames", "9",
                                      "--size", "64x64", "--ref-size", "64", "--no-progress"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((lat / "manifest.json").read_text())
    assert manifest["latent_frames"] == 9 and manifest["latent_shape"] == [16, 9, 8, 8]
    assert manifest["vae"]["class"] == "FrameAutoencoder"

    named = [*STAGE1_FAST, "--set", f"model.vae.pretrained={vae_dir.resolve()}"]
    refused = CliRunner().invoke(app, ["train", "stage1", "--data", str(lat), "--out", str(tmp_path / "r0"), *named])
    assert refused.exit_code == 2 and "pass --set model.vae.kind=frame" in " ".join(refused.output.split())
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "stage1", "--data", str(lat), "--out", str(run), *named,
                                      "--set", "model.vae.kind=frame"])
    assert result.exit_code == 0, result.output
    loaded = load_generator(run)
    assert isinstance(loaded.vae, FrameVAE) and loaded.config.chunk_latent_frames == 8

    from wantofight.images import write_png

    frame = ClipDataset(ds_dir, "val", frames=9, pixels="uint8")[(0, 0)]["frames"][0]  # (3, h, w) native
    write_png(tmp_path / "first.png", np.asarray(frame).transpose(1, 2, 0))
    (tmp_path / "k.keys").write_text("6 RIGHT -\n6 - LEFT\n")
    out = tmp_path / "gen.mp4"
    result = CliRunner().invoke(app, ["generate", "--checkpoint", str(run), "--first-frames", str(tmp_path / "first.png"),
                                      "--keys", str(tmp_path / "k.keys"), "--refs", "duel", "--out", str(out),
                                      "--steps", "1"])
    assert result.exit_code == 0, result.output
    assert read_video(out).shape == (13, 64, 64, 3)

    dec = tmp_path / "dec"  # its decoder pruned, and generation through the pruned one
    result = CliRunner().invoke(app, ["train", "decoder", "--vae", str(vae_dir), "--data", str(ds_dir), "--out", str(dec),
                                      "--size", "64x64", "--frames", "9", "--steps", "2"])
    assert result.exit_code == 0, result.output
    report = json.loads((dec / "report.json").read_text())
    assert report["pruned_parameters"] < report["full_parameters"]
    result = CliRunner().invoke(app, ["generate", "--checkpoint", str(run), "--first-frames", str(tmp_path / "first.png"),
                                      "--keys", str(tmp_path / "k.keys"), "--refs", "duel", "--out",
                                      str(tmp_path / "gen-pruned.mp4"), "--steps", "1", "--decoder", str(dec)])
    assert result.exit_code == 0, result.output
    assert read_video(tmp_path / "gen-pruned.mp4").shape == (13, 64, 64, 3)


def test_a_128x128_model_runs_on_the_game_vaes_16x16_latents(vae_dir):
    from dataclasses import replace

    from model_helpers import keys, ref_images
    from wantofight.inference.generation import build_vae
    from wantofight_model.model import WanToFight

    config = get_preset("tiny", height=128, width=128)
    config = replace(config, vae=replace(config.vae, pretrained=str(vae_dir)))
    vae = build_vae(config)
    z = vae.encode(torch.rand(2, 3, 9, 128, 128) * 2 - 1)
    assert z.shape == (2, 16, 3, 16, 16)
    model = WanToFight.from_config(config).eval()
    with torch.no_grad():
        v = model(z, torch.full((2,), 500.0), keys(9), ref_images())
    assert v.shape == z.shape


@pytest.mark.slow
def test_wtf_train_decoder_prunes_the_game_vae(ds_dir, vae_dir, tmp_path):
    out = tmp_path / "dec"
    result = CliRunner().invoke(app, ["train", "decoder", "--vae", str(vae_dir), "--data", str(ds_dir), "--out",
                                      str(out), "--steps", "2", "--frames", "9", "--size", "32x32"])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["pruned_parameters"] < report["full_parameters"]


@pytest.mark.slow
def test_a_shipped_model_loads_by_name_and_decodes_with_the_vae_it_carries(ds_dir, vae_dir, tmp_path, monkeypatch):
    from wantofight.inference import shipped
    from wantofight.inference.generation import GenerationError, load_generator, resolve_checkpoint

    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "stage1", "--data", str(ds_dir), "--out", str(run), *STAGE1_FAST,
                                      "--set", f"model.vae.pretrained={vae_dir}"])
    assert result.exit_code == 0, result.output
    root = tmp_path / "shipped"
    folder = shipped.export_checkpoint(resolve_checkpoint(run), root / "duel-test")
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors",
                                                        "reference_encoder.safetensors", "vae"]  # EMA weights only
    assert not list(root.glob(".*"))  # nothing half-written left beside it
    config = json.loads((folder / "config.json").read_text())  # no path of this machine left in it
    assert config["train"]["model"]["vae"]["pretrained"] == config["model"]["vae"]["pretrained"] == "vae"
    monkeypatch.setattr(shipped, "SHIPPED_ROOT", root)
    loaded = load_generator("duel-test")
    assert loaded.config.vae.pretrained == str(folder / "vae")
    assert same_weights(loaded.vae, WanVAE.from_pretrained(vae_dir))
    original, raw = load_generator(run), load_generator(run, weights="model")
    assert all(torch.equal(a, b) for a, b in zip(loaded.model.state_dict().values(), original.model.state_dict().values()))
    assert not all(torch.equal(a, b) for a, b in zip(loaded.model.state_dict().values(), raw.model.state_dict().values()))
    assert "ema weights" in loaded.source
    with pytest.raises(GenerationError, match="keeps only its EMA weights"):
        load_generator("duel-test", weights="model")
    from wantofight.benchmark.run import BenchmarkError, plan_variants

    assert plan_variants("duel-test", baselines=False)[0].checkpoint == str(folder)  # `wtf benchmark run` too
    with pytest.raises(FileNotFoundError, match="shipped models: duel-test"):
        load_generator("duel-nosuch")
    with pytest.raises(BenchmarkError, match="shipped models: duel-test"):
        plan_variants("duel-nosuch")


# ---- the adversarial patch critic on the fighters (vae.adv_weight) ----

ADV_SETS = ["data.frames=9", "vae.eval_windows=2", "vae.stats_windows=4", "data.batch_size=2", "vae.crop=0",
            "validation.every=0", "checkpoint.every=100", "vae.adv_weight=0.5", "vae.adv_start=1"]


def test_the_critic_tells_real_fighters_from_blurred_ones(ds_dir):
    """40 AdamW steps of `FighterCritic` on real 64x64 frames against the same frames blurred (what an
    MSE-trained VAE draws of a pose it is unsure of) open a margin of more than 1 between its mean logits on
    the fighter cells (measured 5.1). Ablation: without `optimizer.step()` the margin stays near 0
    (measured 0.0002), so the test fails."""
    from torch.nn import functional as F

    from wantofight.train.vae.critic import FighterCritic, critic_loss, fighter_cells, images
    from wantofight.train.vae.losses import fighter_mask, stage_picture

    size = (64, 64)
    train = ClipDataset(ds_dir, "train", frames=9, size=size)
    stage = stage_picture(ClipDataset(ds_dir, "train", frames=9, size=size, pixels="uint8"), 16, size)
    frames = torch.stack([train[(i, 0)]["frames"][:5] for i in (0, len(train) // 3, 2 * len(train) // 3)])
    frames = frames.transpose(1, 2)  # (3, 3, 5, h, w)
    blurred = F.avg_pool3d(frames, (1, 3, 3), 1, (0, 1, 1), count_include_pad=False)
    cells = fighter_cells(fighter_mask(frames, stage))
    assert 0 < cells.mean() < 0.6
    torch.manual_seed(0)
    critic = FighterCritic()
    optimizer = torch.optim.AdamW(critic.parameters(), lr=1e-3, betas=(0.5, 0.9), weight_decay=0.0)
    for _ in range(40):
        loss = critic_loss(critic(images(frames)), critic(images(blurred)), cells)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        margin = ((critic(images(frames)) - critic(images(blurred))) * cells).sum() / cells.sum()
    assert margin > 1.0, float(margin)


class _InterruptedVAE(VAETrainer):
    """`VAETrainer` that receives a Ctrl-C during its second step (it finishes the step, saves, stops)."""

    def loss(self, batch, micro, step=None):
        if self.step_count == 1 and micro == 0 and torch.is_grad_enabled():
            os.kill(os.getpid(), signal.SIGINT)
        return super().loss(batch, micro, step)


def test_ctrl_c_then_resume_with_the_critic_gives_the_same_run(ds_dir, tmp_path, monkeypatch):
    """A VAE run with the adversarial critic, stopped by Ctrl-C after step 2 and resumed, logs the same loss,
    critic loss and adaptive scale at every step and exports the same weights as the run never stopped.
    Ablation: with the critic's weights and optimiser left out of the checkpoint's restore (`load`), steps
    3-4 differ and the test fails."""
    from wantofight.train.vae import trainer as game_vae

    full = game_vae.train_vae(ds_dir, tmp_path / "full", size=SIZE, max_steps=4, sets=ADV_SETS, progress=False)
    assert full["steps"] == 4
    monkeypatch.setattr(game_vae, "VAETrainer", _InterruptedVAE)
    with pytest.raises(KeyboardInterrupt):
        game_vae.train_vae(ds_dir, tmp_path / "cut", size=SIZE, max_steps=4, sets=ADV_SETS, progress=False)
    assert not (tmp_path / "cut").exists() and staging_dir(tmp_path / "cut").is_dir()
    monkeypatch.undo()
    game_vae.train_vae(ds_dir, tmp_path / "cut", size=SIZE, max_steps=4, resume=True, progress=False)

    def records(folder):
        return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]

    a, b = records(tmp_path / "full"), records(tmp_path / "cut")
    assert [r["step"] for r in a] == [r["step"] for r in b] == [1, 2, 3, 4]
    assert a[0]["adv_scale"] == 0 and all(r["adv_scale"] > 0 for r in a[1:])  # the decoder's term from adv_start
    for ra, rb in zip(a, b):
        assert (ra["loss"], ra["critic_loss"], ra["adv_scale"]) == (rb["loss"], rb["critic_loss"], rb["adv_scale"])
    wa = WanVAE.from_pretrained(tmp_path / "full")
    wb = WanVAE.from_pretrained(tmp_path / "cut")
    assert same_weights(wa, wb)


def test_the_adversarial_settings_are_checked_in_one_line(ds_dir, tmp_path):
    runner = CliRunner()
    for bad, message in (("vae.adv_weight=-1", "adv -1.0"), ("vae.adv_start=-2", "vae.adv_start must be >= 0"),
                         ("vae.critic_lr=0", "vae.critic_lr > 0")):
        result = runner.invoke(app, ["train", "vae", "--data", str(ds_dir), "--out", str(tmp_path / "v"), *FAST,
                                     "--set", bad])
        assert result.exit_code == 2 and message in " ".join(result.output.split()), (bad, result.output)
        assert not (tmp_path / "v").exists() and not staging_dir(tmp_path / "v").exists()
