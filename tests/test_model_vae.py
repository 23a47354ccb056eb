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


def conv_kernels(run) -> tuple[torch.Tensor, set[str]]:
    """`run()`'s result and the convolution and norm kernels PyTorch ran for it."""
    with torch.autograd.profiler.profile() as prof:
        out = run()
    return out, {e.key for e in prof.key_averages() if e.key.startswith("aten::") and ("conv" in e.key or "norm" in e.key)}


def test_the_vae_takes_the_faster_cpu_kernels_and_gives_the_same_frames(residual_vae):
    """PyTorch runs a streamed decode's small convolutions on its slow im2col kernels; the VAE's own
    layers call oneDNN and sum the RMS norm's squares (wantofight_model/cpu_kernels.py): the same frames
    to float32 rounding."""
    import copy
    import pickle

    from wantofight_model.cpu_kernels import use_pytorch_kernels

    z = torch.randn(1, 16, 3, 8, 8)
    fast, kernels = conv_kernels(lambda: residual_vae.streaming_decoder().decode(z))
    slow_kernels = {"aten::slow_conv3d_forward", "aten::_slow_conv2d_forward", "aten::linalg_vector_norm"}
    assert "aten::mkldnn_convolution" in kernels and not kernels & slow_kernels, kernels
    plain = use_pytorch_kernels(copy.deepcopy(residual_vae))
    slow, kernels = conv_kernels(lambda: plain.streaming_decoder().decode(z))
    assert kernels >= slow_kernels, kernels  # what the VAE ran before: the test can tell
    torch.testing.assert_close(fast, slow, rtol=0, atol=1e-4)
    again = pickle.loads(pickle.dumps(residual_vae))  # a layer class that pickles (worker processes)
    assert torch.equal(again.streaming_decoder().decode(z), fast)
    with torch.enable_grad():  # training keeps PyTorch's own choice (and its gradients)
        frames = residual_vae.autoencoder.decode(z.requires_grad_()).sample
        frames.mean().backward()
    assert z.grad is not None


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


# ---- the per-frame autoencoder (wantofight_model/frame_vae.py) ----

FRAME_VAE = dict(kind="frame", base_dim=16, dim_mult=(1, 2, 2, 2), num_res_blocks=1)


@pytest.fixture(scope="module")
def frame_vae():
    from wantofight_model.config import VAEConfig
    from wantofight_model.vae import build_vae

    torch.manual_seed(0)
    return build_vae(VAEConfig(**FRAME_VAE)).eval()


def test_the_frame_vae_keeps_every_frame_and_codes_each_alone(frame_vae):
    """1x in time, 8x in space, any number of frames; a frame's latent depends on that frame only, so a
    stream in pieces of any length equals the whole (no cache to carry), past the 32-frame piece too."""
    frames = torch.rand(1, 3, 37, 32, 32) * 2 - 1
    z = frame_vae.encode(frames)
    assert z.shape == (1, 16, 37, 4, 4) and frame_vae.time_factor == 1 and frame_vae.space_factor == 8
    out = frame_vae.decode(z)
    assert out.shape == frames.shape and out.abs().max() <= 1
    alone = frame_vae.encode(frames[:, :, 20:21])
    torch.testing.assert_close(alone, z[:, :, 20:21], rtol=0, atol=1e-5)
    encoder, decoder = frame_vae.streaming_encoder(), frame_vae.streaming_decoder()
    parts = torch.cat([encoder.encode(frames[:, :, :1]), encoder.encode(frames[:, :, 1:4]),
                       encoder.encode(frames[:, :, 4:])], dim=2)
    torch.testing.assert_close(parts, z, rtol=0, atol=1e-5)
    decoded = torch.cat([decoder.decode(z[:, :, :1]), decoder.decode(z[:, :, 1:])], dim=2)
    torch.testing.assert_close(decoded, out, rtol=0, atol=1e-5)


def test_a_vae_folder_loads_as_the_class_it_holds(vae, frame_vae, tmp_path):
    from wantofight_model.frame_vae import FrameVAE
    from wantofight_model.vae import load_vae_folder

    frame_vae.autoencoder.save_pretrained(tmp_path / "frame")
    vae.autoencoder.save_pretrained(tmp_path / "wan" / "vae")  # a Wan2.1 repo root
    loaded = load_vae_folder(tmp_path / "frame")
    assert isinstance(loaded, FrameVAE)
    x = torch.rand(1, 3, 3, 32, 32) * 2 - 1
    torch.testing.assert_close(loaded.encode(x), frame_vae.encode(x))
    assert isinstance(load_vae_folder(tmp_path / "wan"), WanVAE)
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "config.json").write_text(json.dumps({"_class_name": "UNet2DModel"}))
    with pytest.raises(ValueError, match="UNet2DModel; valid: AutoencoderKLWan, FrameAutoencoder"):
        load_vae_folder(tmp_path / "odd")
    with pytest.raises(FileNotFoundError, match="no VAE at"):
        load_vae_folder(tmp_path / "nowhere")


@pytest.mark.parametrize("fields, message", [
    (dict(kind="conv"), "vae.kind='conv'; valid: wan, frame"),
    (dict(kind="frame", dim_mult=(1, 2)), "4 stages .* or 3"),
    (dict(kind="frame", base_dim=12, norm_groups=8), "norm_groups=8 must divide"),
    (dict(temperal_downsample=(False, False, True)), "exactly twice"),
])
def test_vae_config_errors_name_the_field(fields, message):
    from wantofight_model.config import VAEConfig

    with pytest.raises(ValueError, match=message):
        VAEConfig(**fields)


def test_the_layouts_compress_as_their_config_says():
    from wantofight_model.config import VAEConfig

    assert (VAEConfig().time_factor, VAEConfig().space_factor) == (4, 8)
    assert (VAEConfig(kind="frame").time_factor, VAEConfig(kind="frame", dim_mult=(1, 2, 2)).space_factor) == (1, 4)
    assert VAEConfig(dim_mult=(1, 4, 4), temperal_downsample=(True, True)).space_factor == 4


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
