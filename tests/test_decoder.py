"""Pruned VAE decoder: a genuinely smaller module, right shapes, exact at keep=1, streaming, save/load,
and `wtf train decoder` on a real curriculum dataset (report: parameters, CPU time per chunk, PSNR)."""

from __future__ import annotations

import json

import pytest
import torch
import typer
from typer.testing import CliRunner

from datasets_helpers import small_dataset
from model_helpers import one_torch_thread  # noqa: F401
from wantofight.inference.decoder import load_pruned_decoder, residual_blocks
from wantofight.inference.generation import build_vae
from wantofight.train import generate_cli
from wantofight.train.vae.pruned_decoder import count_parameters, prune_decoder, save_pruned_decoder, with_decoder
from wantofight_model.presets import get_preset


@pytest.fixture(scope="module")
def vae():
    return build_vae(get_preset("tiny"))


def latents(frames: int = 5) -> torch.Tensor:
    return torch.randn(1, 16, frames, 8, 8, generator=torch.Generator().manual_seed(0))


def test_pruned_decoder_is_smaller_and_decodes_to_the_right_shape(vae):
    full = vae.autoencoder.decoder
    pruned, kept = prune_decoder(full, 0.5)
    assert count_parameters(pruned) < 0.7 * count_parameters(full)
    for name, block in residual_blocks(pruned).items():  # real smaller modules, not masks
        width = residual_blocks(full)[name].conv1.out_channels
        assert block.conv1.out_channels == block.norm2.gamma.shape[0] == block.conv2.in_channels == len(kept[name])
        assert len(kept[name]) == round(width * 0.5)
    small = with_decoder(vae, pruned)
    with torch.no_grad():
        out = small.decode(latents())
        assert out.shape == (1, 3, 17, 64, 64)
        streamed = small.streaming_decoder()
        parts = [streamed.decode(latents()[:, :, :1]), streamed.decode(latents()[:, :, 1:3]),
                 streamed.decode(latents()[:, :, 3:])]
    torch.testing.assert_close(torch.cat(parts, dim=2), out.clamp(-1, 1), rtol=0, atol=1e-5)
    assert vae.autoencoder.decoder is full  # the original VAE is untouched


def test_keeping_every_channel_is_the_full_decoder_and_save_load_round_trips(vae, tmp_path):
    same, _ = prune_decoder(vae.autoencoder.decoder, 1.0)
    with torch.no_grad():
        torch.testing.assert_close(with_decoder(vae, same).decode(latents()), vae.decode(latents()), rtol=0, atol=1e-5)
    pruned, kept = prune_decoder(vae.autoencoder.decoder, 0.25)
    save_pruned_decoder(tmp_path / "dec", pruned, kept, "tiny", 0.25)
    loaded = load_pruned_decoder(tmp_path / "dec", vae)
    with torch.no_grad():
        assert torch.equal(with_decoder(vae, loaded).decode(latents()), with_decoder(vae, pruned).decode(latents()))


@pytest.mark.slow
def test_wtf_train_decoder_fine_tunes_and_reports(recorded, tmp_path_factory, tmp_path):
    ds = small_dataset(recorded, tmp_path_factory)
    root, train = typer.Typer(), typer.Typer()
    generate_cli.register(root, train)
    root.add_typer(train, name="train")
    out = tmp_path / "dec"
    result = CliRunner().invoke(root, ["train", "decoder", "--vae", "tiny", "--data", str(ds), "--out", str(out),
                                       "--steps", "15", "--lr", "2e-3", "--keep", "0.5", "--frames", "9"])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["pruned_parameters"] < report["full_parameters"]
    assert report["psnr_after_finetune"] > report["psnr_before_finetune"]  # fine-tuning pulls it to the full decoder
    assert report["pruned_seconds_per_chunk"] > 0 and report["full_seconds_per_chunk"] > 0
    assert report["psnr_pruned_vs_frames"] is not None  # clip data: ground-truth frames were used
    assert "PSNR pruned vs full decoder" in " ".join(result.output.split())
    assert result.stdout.splitlines()[-1] == (
        f"wrote {out}: {report['pruned_parameters']:,} of {report['full_parameters']:,} decoder parameters kept, "
        f"PSNR vs the full decoder {report['psnr_after_finetune']:.2f} dB after 15 steps")
    assert "step 1/15" not in result.output  # its progress is the shared bar's, not lines of its own
    assert load_pruned_decoder(out, build_vae(get_preset("tiny"))) is not None


def test_the_per_frame_autoencoders_decoder_prunes_to_whole_groupnorm_groups(tmp_path):
    """The per-frame autoencoder's 2D residual blocks (`ResnetBlock2D`) prune like the Wan layout's: smaller
    conv1 / norm2 / conv2 modules, the hidden width a multiple of the block's GroupNorm groups, the full
    decoder again at keep=1, the same frames after save and load, and a stream of pieces equal to the whole."""
    from wantofight_model.config import VAEConfig
    from wantofight_model.vae import build_vae as build_autoencoder

    torch.manual_seed(0)
    vae = build_autoencoder(VAEConfig(kind="frame", base_dim=16, dim_mult=(1, 2, 2), num_res_blocks=1,
                                      norm_groups=8)).eval()
    z = torch.randn(1, 16, 9, 8, 8, generator=torch.Generator().manual_seed(0))
    full = vae.autoencoder.decoder
    pruned, kept = prune_decoder(full, 0.4)
    assert count_parameters(pruned) < 0.7 * count_parameters(full)
    for name, block in residual_blocks(pruned).items():
        assert block.conv1.out_channels == block.norm2.num_channels == block.conv2.in_channels == len(kept[name])
        assert len(kept[name]) % 8 == 0 and 0 < len(kept[name]) < residual_blocks(full)[name].conv1.out_channels
    small = with_decoder(vae, pruned)
    with torch.no_grad():
        out = small.decode(z)
        assert out.shape == (1, 3, 9, 32, 32)
        streamed = small.streaming_decoder()
        torch.testing.assert_close(torch.cat([streamed.decode(z[:, :, :1]), streamed.decode(z[:, :, 1:])], dim=2), out,
                                   rtol=0, atol=1e-5)
        same, _ = prune_decoder(full, 1.0)
        torch.testing.assert_close(with_decoder(vae, same).decode(z), vae.decode(z), rtol=0, atol=1e-5)
    save_pruned_decoder(tmp_path / "dec", pruned, kept, "frame", 0.4)
    loaded = load_pruned_decoder(tmp_path / "dec", vae)
    with torch.no_grad():
        assert torch.equal(with_decoder(vae, loaded).decode(z), out)
