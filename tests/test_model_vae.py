"""The Wan VAE wrapper (tiny config from the notes) and pixel-level streaming generation."""

import json

import pytest
import torch
from typer.testing import CliRunner

from model_helpers import one_torch_thread  # noqa: F401  (autouse fixture)
from model_helpers import B, keys, ref_images, tiny_model
from wantofight.cli import app
from wantofight_model.generate import StreamingGenerator
from wantofight_model.presets import get_preset
from wantofight_model.vae import WanVAE


@pytest.fixture(scope="module")
def vae():
    torch.manual_seed(0)
    return WanVAE.from_config(get_preset("tiny").vae).eval()


def test_vae_compresses_4x_time_8x_space_and_normalises(vae):
    frames = torch.rand(1, 3, 9, 64, 64) * 2 - 1
    z = vae.encode(frames)
    assert z.shape == (1, 16, 3, 8, 8)
    torch.testing.assert_close(vae.denormalize(vae.normalize(z)), z)
    assert vae.decode(z).shape == (1, 3, 9, 64, 64)
    with pytest.raises(ValueError, match="1 \\+ 4k"):
        vae.encode(frames[:, :, :8])


@pytest.fixture(scope="module")
def residual_vae():
    from dataclasses import replace

    torch.manual_seed(0)
    return WanVAE.from_config(replace(get_preset("tiny").vae, is_residual=True)).eval()


@pytest.mark.parametrize("which", ["vae", "residual_vae"])
def test_streaming_decoder_equals_whole_decode(which, request):
    vae = request.getfixturevalue(which)
    z = torch.randn(1, 16, 5, 8, 8)
    whole = vae.decode(z)
    decoder = vae.streaming_decoder()
    parts = torch.cat([decoder.decode(z[:, :, :1]), decoder.decode(z[:, :, 1:3]), decoder.decode(z[:, :, 3:5])], dim=2)
    assert parts.shape == whole.shape == (1, 3, 17, 64, 64)
    assert torch.equal(parts, whole)


@pytest.mark.parametrize("which", ["vae", "residual_vae"])
def test_streaming_encoder_equals_whole_encode(which, request):
    """The teacher-forced benchmark encodes a case chunk by chunk as the model reaches it."""
    vae = request.getfixturevalue(which)
    frames = torch.rand(1, 3, 17, 64, 64) * 2 - 1
    whole = vae.encode(frames)
    encoder = vae.streaming_encoder()
    parts = torch.cat([encoder.encode(frames[:, :, :1]), encoder.encode(frames[:, :, 1:9]),
                       encoder.encode(frames[:, :, 9:17])], dim=2)
    assert parts.shape == whole.shape == (1, 16, 5, 8, 8)
    torch.testing.assert_close(parts, whole, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="4k frames"):
        encoder.encode(frames[:, :, :3])
    with pytest.raises(ValueError, match="first piece"):
        vae.streaming_encoder().encode(frames[:, :, :5])


def test_vae_loads_from_a_local_diffusers_folder(vae, tmp_path):
    """Quietly too: diffusers warns in five lines at every load without `accelerate` unless asked for the
    plain load (its logger does not propagate: listen to it directly)."""
    import logging

    vae.autoencoder.save_pretrained(tmp_path / "vae")
    heard: list[logging.LogRecord] = []
    listener = logging.Handler(logging.WARNING)
    listener.emit = heard.append
    logging.getLogger("diffusers").addHandler(listener)
    try:
        loaded = WanVAE.from_pretrained(tmp_path)
    finally:
        logging.getLogger("diffusers").removeHandler(listener)
    assert [r.getMessage() for r in heard] == []
    for (name, a), (_, b) in zip(vae.autoencoder.state_dict().items(), loaded.autoencoder.state_dict().items()):
        assert torch.equal(a, b), name
    with pytest.raises(FileNotFoundError):
        WanVAE.from_pretrained(tmp_path / "nowhere")


def test_generate_yields_8_frames_per_chunk(vae):
    gen = StreamingGenerator(tiny_model(), vae)
    first = torch.rand(B, 3, 1, 64, 64) * 2 - 1
    stream = (keys(8, seed=i) for i in range(3))
    chunks = list(gen.generate(first, stream, ref_images(), steps=2, generator=torch.Generator().manual_seed(0)))
    assert len(chunks) == 3
    assert all(c.shape == (B, 3, 8, 64, 64) for c in chunks)
    assert all(c.abs().max() <= 1 for c in chunks)


# ---- CLI ----

def test_cli_model_info_tiny_json():
    result = CliRunner().invoke(app, ["model", "info", "--preset", "tiny", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    params = info["parameters"]
    assert params["backbone"] > 0 and params["keyboard"] > 0 and params["association"] > 0
    assert params["vae_decoder"] > 0 and params["reference_encoder_frozen"] > 0
    assert info["activations_per_chunk"]["tokens"] == 32


def test_cli_model_info_wan_on_meta():
    result = CliRunner().invoke(app, ["model", "info", "--preset", "wan-1.3b"])
    assert result.exit_code == 0, result.output
    assert "1,126,858,816" in result.output  # the Wan2.1-1.3B backbone without its text path (notes: 1.127 B)


def test_cli_model_info_bad_preset():
    result = CliRunner().invoke(app, ["model", "info", "--preset", "huge"])
    assert result.exit_code == 2
    assert "tiny" in result.output and "wan-1.3b" in result.output


def test_model_cli_module_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, wantofight_model.cli; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
