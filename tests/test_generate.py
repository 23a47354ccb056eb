"""`wtf generate`: MP4 of the requested length from a key file, first chunks equal to the non-streaming
block-causal reference, keys of row t drive frame t, HUD, clip prompts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import typer
from typer.testing import CliRunner

from hud_helpers import index_line, title
from model_helpers import one_torch_thread, tiny_model  # noqa: F401
from wantofight import hud as hud_lib
from wantofight.collect.keyfile import read_key_file
from wantofight.collect.keys import mask_of
from wantofight.inference import cli as inference_cli
from wantofight.inference.generation import (LoadedGenerator, Mp4Writer, build_vae, key_rows, keys_tensor, read_frames,
                                             stream_chunks, to_uint8)
from wantofight.train import generate_cli
from wantofight_model.generate import StreamingGenerator
from wantofight_model.weights import save_model

KEYS = "# FRAMES P1 P2\n5 RIGHT -\n6 A DOWN+B\n9 - LEFT\n"  # 20 rows: 2.5 chunks


def app() -> typer.Typer:
    root, train = typer.Typer(), typer.Typer()
    inference_cli.register(root)
    generate_cli.register(root, train)
    root.add_typer(train, name="train")
    return root


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    torch.set_num_threads(1)
    d = tmp_path_factory.mktemp("gen")
    model = tiny_model()
    save_model(model, d / "model.safetensors", model.config)
    (d / "fight.keys").write_text(KEYS)
    rng = np.random.default_rng(0)
    for name in ("first", "p1", "p2"):
        writer = Mp4Writer(d / f"{name}.mp4")
        writer.write(rng.integers(0, 255, (9 if name == "first" else 1, 48, 64, 3), dtype=np.uint8))
        writer.commit()
    return d


def test_generate_writes_one_frame_per_key_file_row_with_the_hud(files, tmp_path):
    out = tmp_path / "out.mp4"
    args = ["generate", "--checkpoint", str(files / "model.safetensors"), "--first-frames", str(files / "p1.mp4"),
            "--keys", str(files / "fight.keys"), "--refs", f"{files / 'p1.mp4'},{files / 'p2.mp4'}",
            "--out", str(out), "--steps", "2"]
    result = CliRunner().invoke(app(), args)
    assert result.exit_code == 0, result.output
    assert "21 frames (3 chunks" in " ".join(result.output.split())
    assert read_frames(out).shape == (21, 64, 64, 3)  # row 0 + 20 key-file rows, at the model size
    result = CliRunner().invoke(app(), args[:-4] + ["--out", str(tmp_path / "hud.mp4"), "--hud", "--steps", "2"])
    assert result.exit_code == 0, result.output
    hud = read_frames(tmp_path / "hud.mp4")
    assert hud.shape[0] == 21 and hud.shape[1] > 128  # 2x scale plus the key panel
    # Named: row 0 is the prompt (through the VAE), the rest generated; one counter over the whole video.
    assert [title(frame) for frame in hud] == ["PROMPT"] + ["GENERATED"] * 20
    layout = hud_lib.hud_layout(64, 64, 2)
    below_title = hud[:, hud_lib.TITLE_H * 2:]
    assert [index_line(frame, layout) for frame in below_title] == [f"FRAME {t} OF 21" for t in range(21)]


def test_a_clip_prompt_covers_its_own_rows(files, tmp_path):
    out = tmp_path / "clip.mp4"
    result = CliRunner().invoke(app(), [
        "generate", "--checkpoint", str(files / "model.safetensors"), "--first-frames", str(files / "first.mp4"),
        "--keys", str(files / "fight.keys"), "--refs", f"{files / 'p1.mp4'},{files / 'p2.mp4'}",
        "--out", str(out), "--steps", "1"])
    assert result.exit_code == 0, result.output
    assert read_frames(out).shape[0] == 21  # the 9 clip frames + 12 generated rows
    assert read_frames(out, limit=9).shape[0] == 9  # a prompt decodes only its own frames, however long the clip


def test_only_the_prompt_frames_of_a_long_clip_are_decoded(files, tmp_path, monkeypatch):
    """--first-frames of a long recording: the frames after the prompt (and after the key file's rows,
    without --prompt-frames) are never decoded, so memory does not grow with the clip."""
    from wantofight import video

    decoded = []
    frames = video.iter_frames

    def counting(path):
        for frame in frames(path):
            decoded.append(1)
            yield frame

    monkeypatch.setattr(video, "iter_frames", counting)
    long = tmp_path / "long.mp4"
    writer = Mp4Writer(long, 30)
    writer.write(np.random.default_rng(0).integers(0, 256, (60, 64, 64, 3), np.uint8))
    writer.commit()
    for extra, most in ((["--prompt-frames", "1"], 1), ([], 21 + 8)):  # rows 0..20 of fight.keys, + a chunk
        decoded.clear()
        result = CliRunner().invoke(app(), [
            "generate", "--checkpoint", str(files / "model.safetensors"), "--first-frames", str(long), *extra,
            "--keys", str(files / "fight.keys"), "--refs", f"{files / 'p1.mp4'},{files / 'p2.mp4'}",
            "--out", str(tmp_path / "out.mp4"), "--steps", "1"])
        assert len(decoded) == most + 2, (extra, len(decoded))  # + p1.mp4's and p2.mp4's first frames
        assert result.exit_code == (0 if extra else 2), result.output  # without it: 25 prompt rows, nothing to make


def test_bad_inputs_fail_in_one_line(files, tmp_path):
    (tmp_path / "bad.keys").write_text("3 PUNCH -\n")
    base = ["generate", "--checkpoint", str(files / "model.safetensors"), "--first-frames", str(files / "p1.mp4"),
            "--refs", f"{files / 'p1.mp4'},{files / 'p2.mp4'}", "--out", str(tmp_path / "o.mp4")]
    result = CliRunner().invoke(app(), base + ["--keys", str(tmp_path / "bad.keys")])
    assert result.exit_code == 2 and "bad.keys:1" in result.output
    result = CliRunner().invoke(app(), base[:-4] + ["--refs", str(files / "p1.mp4"), "--out", "o.mp4",
                                                    "--keys", str(files / "fight.keys")])
    assert result.exit_code == 2 and "binds 2 players" in result.output


def test_refs_name_the_games_own_portraits_from_any_folder(files, tmp_path, monkeypatch):
    from wantofight.collect.emulator import GAMES_DIR

    monkeypatch.chdir(tmp_path)  # a folder without the repository's collect/
    refs = GAMES_DIR / "duel" / "refs"
    base = ["generate", "--checkpoint", str(files / "model.safetensors"), "--first-frames", str(files / "p1.mp4"),
            "--keys", str(files / "fight.keys"), "--steps", "1"]
    videos = {}
    for name, spec in [("paths", f"{refs / 'kai.png'},{refs / 'gor.png'}"), ("game", "duel"),
                       ("each", "duel/kai,duel/gor"), ("swapped", "duel/gor,duel/kai")]:
        result = CliRunner().invoke(app(), base + ["--refs", spec, "--out", f"{name}.mp4"])
        assert result.exit_code == 0, result.output
        videos[name] = read_frames(tmp_path / f"{name}.mp4")
    # `duel` is the game's pair with P1's fighter first (game.json `fighters`), the same as the paths
    assert np.array_equal(videos["game"], videos["paths"]) and np.array_equal(videos["each"], videos["paths"])
    assert not np.array_equal(videos["swapped"], videos["paths"])  # the names reach the model, in order
    result = CliRunner().invoke(app(), base + ["--refs", "duel/kai,duel/zed", "--out", "o.mp4"])
    assert result.exit_code == 2 and not (tmp_path / "o.mp4").exists()
    assert " ".join(result.output.split()) == ("error: duel/zed: no such file, nor a built-in reference image; "
                                               "built-in names: duel, duel/gor, duel/kai")


def loaded_tiny() -> LoadedGenerator:
    model = tiny_model()
    return LoadedGenerator(model, build_vae(model.config), model.config, "stage2", "test")


def test_streamed_chunks_equal_a_non_streaming_block_causal_forward():
    loaded = loaded_tiny()
    script = read_key_file_text(KEYS)
    masks = key_rows(script.p1, script.p2)[:17]  # rows 0..16: 2 chunks
    prompt = torch.rand(1, 3, 1, 64, 64, generator=torch.Generator().manual_seed(0)) * 2 - 1
    refs = torch.rand(1, 2, 3, 64, 64, generator=torch.Generator().manual_seed(1)) * 2 - 1
    streamed = np.concatenate([f for f, _ in stream_chunks(loaded, prompt, masks, refs, steps=3)])

    keys = keys_tensor(masks)
    with torch.no_grad():
        z0 = loaded.vae.encode(prompt)
        chunks = (keys[:, 1 + 8 * c:9 + 8 * c] for c in range(2))
        reference = list(StreamingGenerator(loaded.model).generate_latents(  # full block-causal recompute
            z0, chunks, refs, 3, prompt_keys=keys[:, :1], generator=torch.Generator().manual_seed(0),
            use_cache=False))
        frames = to_uint8(loaded.vae.decode(torch.cat([z0] + reference, dim=2))[0])  # whole-video decode
    assert streamed.shape == frames.shape == (17, 64, 64, 3)
    assert np.abs(streamed.astype(int) - frames.astype(int)).max() <= 1


def test_key_file_row_t_drives_frame_t():
    loaded = loaded_tiny()
    script = read_key_file_text(KEYS)
    masks = key_rows(script.p1, script.p2)
    seen = []
    handle = loaded.model.dit.register_forward_pre_hook(lambda m, args: seen.append(args[2].clone()))
    list(stream_chunks(loaded, torch.zeros(1, 3, 1, 64, 64), masks, torch.zeros(1, 2, 3, 64, 64), steps=1))
    handle.remove()
    prompt_keys, *passes = seen
    chunk1, chunk2, chunk3 = passes[::2]  # each chunk: its one step, then the clean cache write's pass
    assert all(torch.equal(a, b) for a, b in zip(passes[::2], passes[1::2]))  # which sees the chunk's own keys
    assert prompt_keys.shape[1] == 1 and prompt_keys.sum() == 0  # row 0: no keys
    assert chunk1[0, :5, 0, 3].eq(1).all() and chunk1[0, 5:8, 0, 4].eq(1).all()  # rows 1-5 RIGHT, 6-8 A
    assert chunk2[0, :3, 1].eq(keys_tensor(np.array([[0, mask_of(["DOWN", "B"])]]))[0, 0, 1]).all()  # rows 9-11
    assert chunk3[0, :4, 1, 2].eq(1).all() and chunk3[0, 4:].sum() == 0  # rows 17-20 LEFT, then released padding


def read_key_file_text(text: str):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "k.keys").write_text(text)
        return read_key_file(Path(d) / "k.keys")


def test_prompt_frames_picks_a_prefix_and_a_failed_run_leaves_no_file(files, tmp_path):
    out = tmp_path / "out.mp4"
    base = ["generate", "--checkpoint", str(files / "model.safetensors"),
            "--keys", str(files / "fight.keys"), "--refs", f"{files / 'p1.mp4'},{files / 'p2.mp4'}", "--out", str(out)]
    result = CliRunner().invoke(app(), [*base, "--first-frames", str(files / "first.mp4"), "--prompt-frames", "4"])
    assert result.exit_code != 0 and "--prompt-frames 4: must be 1 + 8 m frames" in " ".join(result.output.split())
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))
    result = CliRunner().invoke(app(), [*base, "--first-frames", str(files / "first.mp4"), "--prompt-frames", "1"])
    assert result.exit_code == 0, result.output
    assert out.exists() and not list(tmp_path.glob(".*.tmp"))


def test_the_keys_of_the_prompt_frame_are_not_an_input_so_training_and_generation_agree():
    """Row 0 holds the keys that led into the prompt frame. A training window that starts mid-episode has
    real ones (the trainer and `wtf eval` pass them); a picture given to `wtf generate` has none (zeros).
    The keyboard encoder reads zeros in row 0 whatever it is given, so both condition the model alike:
    the same prediction, the same generated chunks. Before, they differed (by up to 0.049 in the
    prediction and 0.024 in the generated latents)."""
    from model_helpers import keys, latents, ref_tokens

    model = tiny_model()
    x, k, refs = latents(5), keys(17), ref_tokens()
    k[:, 0, :, [3, 4]] = 1  # a window that starts while RIGHT and A are held
    released = k.clone()
    released[:, 0] = 0
    generator = StreamingGenerator(model)
    with torch.no_grad():
        training = model(x, torch.tensor([0.0, 600.0]), k, refs, attention="block_causal")
        generation = model(x, torch.tensor([0.0, 600.0]), released, refs, attention="block_causal")
        chunks = [k[:, 1:9], k[:, 9:17]]
        from_window = torch.cat(list(generator.generate_latents(
            x[:, :, :1], chunks, refs, 2, prompt_keys=k[:, :1], generator=torch.Generator().manual_seed(0))), 2)
        from_picture = torch.cat(list(generator.generate_latents(
            x[:, :, :1], chunks, refs, 2, generator=torch.Generator().manual_seed(0))), 2)
    assert torch.equal(training, generation), float((training - generation).abs().max())
    assert torch.equal(from_window, from_picture), float((from_window - from_picture).abs().max())
