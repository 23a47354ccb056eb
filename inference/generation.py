"""Streaming generation from a checkpoint: the library behind `wtf generate` (and `wtf eval`).

    loaded = load_generator("runs/s3")                       # a run folder, a checkpoint folder, a shipped
                                                              # model's name (duel-tiny, inference/shipped.py), or a
                                                              # model .safetensors file + preset
    result = generate_video(loaded, first_frames, read_key_file("fight.keys"), refs, Path("out.mp4"), steps=4)

Time follows the alignment of docs/contracts.md and the key-file format of `wtf collect --policy keys:` (collect/keyfile.py):
row 0 is the first frame (no keys), the key file's line segments fill rows 1..N, and the output has
exactly 1 + N frames, one per key-file row plus the first frame. Frame t of the output is the frame
the keys of row t led to. When the first frames are a clip of 1 + 8 m frames, rows 1..8 m are the
clip's own frames (their keys are the prompt's keys) and generation starts at row 8 m + 1.

Generation runs chunk by chunk (8 frames) over the model's rolling KV cache, and frames are decoded
and written to the MP4 as each chunk comes out, so memory is constant for any length. The last
chunk is padded with released keys when N - 8 m is not a multiple of 8; its extra frames are dropped.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import torch

from wantofight_model.config import ModelConfig

SAMPLER_BY_STAGE = {"stage3": "x0_renoise"}
"""The sampler each stage's model was trained for; other stages (multi-step teachers) use Euler."""


class GenerationError(ValueError):
    """Inputs that cannot drive the model; the message says which and why."""


# ---------------------------------------------------------------------------------------------
# Loading a model
# ---------------------------------------------------------------------------------------------

@dataclass
class LoadedGenerator:
    """A model ready to sample, its VAE, and where it came from."""

    model: "torch.nn.Module"
    vae: "torch.nn.Module"
    config: ModelConfig
    stage: str | None
    """The trainer stage that wrote the checkpoint (None for a bare safetensors file)."""
    source: str
    """Path and weights used, for reports."""
    decoder: str = "full"
    """`full`, or the folder of the pruned decoder swapped in."""

    @property
    def default_sampler(self) -> str:
        return SAMPLER_BY_STAGE.get(self.stage or "", "euler")


def resolve_checkpoint(path: str | Path) -> Path:
    """A run folder (its latest checkpoint), a checkpoint folder, or a file, checked to exist."""
    from wantofight.inference import checkpoints
    from wantofight.inference.shipped import shipped_path, unknown_checkpoint_message

    path = Path(path)
    if not path.exists():
        shipped = shipped_path(str(path))
        if shipped is None:
            raise FileNotFoundError(unknown_checkpoint_message(path))
        return shipped
    if path.is_dir() and not (path / "config.json").exists():
        found = checkpoints.latest_checkpoint(path)
        if found is None:
            raise FileNotFoundError(f"{path} is neither a checkpoint folder (no config.json) nor a run folder "
                                    f"with complete checkpoints under {path / checkpoints.CHECKPOINT_DIR}")
        return found
    return path


def build_vae(config: ModelConfig, device: torch.device | str = "cpu"):
    """The VAE exactly as the trainer builds it: a local Wan2.1 VAE, or the random-init one of the preset
    seeded with 0 (so a tiny run's validation videos and `wtf generate` decode with the same weights)."""
    from wantofight_model.vae import build_vae as build

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return build(config.vae, device=device).eval().requires_grad_(False)


def read_checkpoint_model_config(path: Path) -> tuple[ModelConfig, str]:
    """(ModelConfig, stage) from a trainer checkpoint folder."""
    from wantofight.inference import checkpoints
    from wantofight.inference.shipped import own_vae

    saved = checkpoints.read_config(path)
    train = checkpoints.saved_train_config(saved)
    config = checkpoints.model_config(train["preset"], train["model"])
    config = replace(config, vae=replace(config.vae, pretrained=own_vae(path, config.vae.pretrained)))
    return config, saved.get("stage", "stage1")


def load_generator(checkpoint: str | Path, preset: str | None = None, weights: str = "ema",
                   device: torch.device | str = "cpu", decoder: str | Path | None = None) -> LoadedGenerator:
    """Build the model of a trainer checkpoint (or a `save_model` safetensors file of `preset`) for sampling.

    `weights`: `ema` (the EMA shadows when the checkpoint has them, else the raw weights) or `model`.
    `decoder`: a folder written by `wtf train decoder` whose pruned decoder replaces the full one.
    """
    from wantofight.inference import checkpoints
    from wantofight_model.model import WanToFight
    from wantofight_model.presets import get_preset
    from wantofight_model.weights import load_model, read_config

    if weights not in ("ema", "model"):
        raise GenerationError(f"weights={weights!r}; valid: ema, model")
    path = resolve_checkpoint(checkpoint)
    if path.is_dir():
        config, stage = read_checkpoint_model_config(path)
        if preset is not None and preset != json.loads((path / "config.json").read_text()).get("preset"):
            raise GenerationError(f"{path} holds a {json.loads((path / 'config.json').read_text()).get('preset')} "
                                  f"model, not {preset}")
        model = WanToFight.from_config(config, device=device)
        try:
            state, used = checkpoints.read_weights(path, weights)
        except ValueError as e:
            raise GenerationError(str(e)) from None
        model.dit.load_state_dict(state)
        ref = checkpoints.read_tensors(path, "reference_encoder.safetensors")
        if ref is not None:
            model.reference_encoder.load_state_dict(ref)
        source = f"{path} ({used} weights)"
    else:
        if path.suffix != ".safetensors":
            raise GenerationError(f"{path}: expected a trainer checkpoint folder or a model .safetensors file")
        try:
            config = read_config(path)
        except ValueError:
            if preset is None:
                raise GenerationError(f"{path} carries no model config: pass --preset") from None
            config = get_preset(preset)
        stage = None
        model = WanToFight.from_config(config, device=device)
        load_model(model, path)
        source = str(path)
    model.eval().requires_grad_(False)
    vae = build_vae(config, device)
    loaded = LoadedGenerator(model, vae, config, stage, source)
    if decoder is not None:
        from wantofight.inference.decoder import load_pruned_decoder

        vae.autoencoder.decoder = load_pruned_decoder(decoder, vae, device)
        loaded.decoder = str(decoder)
    return loaded


# ---------------------------------------------------------------------------------------------
# Inputs: first frames, reference images, keys
# ---------------------------------------------------------------------------------------------

def read_frames(path: str | Path, limit: int | None = None) -> np.ndarray:
    """An image (PNG/JPEG...) or a video (MP4...) -> (T, h, w, 3) uint8: every frame, or the first `limit`
    (the rest is not decoded: a prompt from a long episode costs only its own frames)."""
    import itertools

    import av

    from wantofight.video import iter_frames

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    try:
        frames = list(itertools.islice(iter_frames(path), limit))
    except (av.error.FFmpegError, ValueError, IndexError) as err:
        raise GenerationError(f"{path}: cannot read frames ({err})") from None
    if not frames:
        raise GenerationError(f"{path}: no frames")
    return np.stack(frames)


def prompt_frames(frames: np.ndarray, config: ModelConfig, count: int | None = None) -> torch.Tensor:
    """(T, h, w, 3) uint8 -> a prompt 1 + 8 m frames long, (1, 3, 1 + 8 m, H, W) in [-1, 1]: the first
    `count` frames, or the longest such prompt when `count` is None."""
    from wantofight.datasets.frames import resize_to_model

    L = config.chunk_frames
    keep = 1 + L * ((len(frames) - 1) // L)
    if count is not None:
        if count < 1 or (count - 1) % L or count > len(frames):
            raise GenerationError(f"--prompt-frames {count}: must be 1 + {L} m frames and at most the "
                                  f"{len(frames)} frames given")
        keep = count
    x = resize_to_model(frames[:keep], (config.height, config.width))  # (T, 3, H, W)
    return x.permute(1, 0, 2, 3)[None]


def reference_images(paths: list[str | Path], config: ModelConfig) -> torch.Tensor:
    """One image per player -> (1, P, 3, s, s) in [-1, 1] at the CLIP input size."""
    from wantofight.datasets.frames import square_resize

    if len(paths) != config.num_players:
        raise GenerationError(f"{len(paths)} reference image(s) given; the model binds {config.num_players} players "
                              "(--refs P1.png,P2.png)")
    return torch.stack([square_resize(read_frames(p, limit=1)[0], config.clip_image_size) for p in paths])[None]


def key_rows(p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
    """Masks of rows 1..N per player -> masks of rows 0..N, (1 + N, 2) uint16 (row 0 holds no keys)."""
    masks = np.zeros((1 + len(p1), 2), np.uint16)
    masks[1:, 0], masks[1:, 1] = p1, p2
    return masks


def keys_tensor(masks: np.ndarray) -> torch.Tensor:
    """(T, 2) uint16 masks -> (1, T, 2, 16) float keys (bit i = slot i)."""
    from wantofight.key_layout import masks_to_array

    return torch.from_numpy(masks_to_array(masks))[None]


# ---------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------

@dataclass
class GenerationResult:
    frames: int
    """Frames in the output (1 + N)."""
    chunks: int
    """Chunks generated."""
    chunk_seconds: list[float] = field(default_factory=list)
    """Wall time of each chunk (denoise + decode)."""
    path: Path | None = None


def chunk_count(rows: int, prompt_rows: int, chunk_frames: int) -> int:
    """Chunks that generate rows prompt_rows..rows-1 (the last one padded with released keys)."""
    return max(0, -(-(rows - prompt_rows) // chunk_frames))


def stream_chunks(loaded: LoadedGenerator, prompt: torch.Tensor, masks: np.ndarray, refs: torch.Tensor,
                  steps: int = 4, sampler: str | None = None, seed: int = 0, prompt_sigma: float = 0.0,
                  true_frames: Iterable[np.ndarray] | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (frames (t, H, W, 3) uint8, their key masks (t, 2)) for the prompt, then for each chunk.

    prompt (1, 3, 1 + 8 m, H, W) in [-1, 1]; masks (1 + N, 2) rows 0..N; refs (1, P, 3, s, s);
    `true_frames` (teacher forcing): the recorded frames after the prompt, (t, h, w, 3) uint8 pieces
    of one chunk each (the last may be shorter), read as the model reaches them.
    """
    L = loaded.config.chunk_frames
    T0 = prompt.shape[2]
    total = len(masks)
    if total <= T0:
        raise GenerationError(f"the key file covers rows 1..{total - 1} but the first frames already cover rows "
                              f"0..{T0 - 1}: nothing to generate (give more key-file rows)")
    n_chunks = chunk_count(total, T0, L)
    padded = np.zeros((T0 + n_chunks * L, 2), np.uint16)
    padded[:total] = masks  # released keys pad the last chunk
    chunks = (padded[T0 + c * L:T0 + (c + 1) * L] for c in range(n_chunks))
    row = 0
    for frames, rows in stream_keyed_chunks(loaded, prompt, masks[:T0], chunks, refs, steps, sampler, seed,
                                            prompt_sigma, true_frames):
        frames = frames[:total - row]
        yield frames, rows[:len(frames)]
        row += len(frames)


def stream_keyed_chunks(loaded: LoadedGenerator, prompt: torch.Tensor, prompt_masks: np.ndarray,
                        chunk_masks: Iterable[np.ndarray], refs: torch.Tensor, steps: int = 4,
                        sampler: str | None = None, seed: int = 0, prompt_sigma: float = 0.0,
                        true_frames: Iterable[np.ndarray] | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (frames (t, H, W, 3) uint8, masks (t, 2)) for the prompt, then one chunk of 8 frames for each
    (8, 2) entry of `chunk_masks`, which is read only when the model is ready for that chunk: a live
    source (`wtf play --checkpoint`) decides a chunk's keys as late as the rolling cache allows.

    prompt (1, 3, 1 + 8 m, H, W) in [-1, 1]; prompt_masks (1 + 8 m, 2), row 0 holding none; refs (1, P, 3, s, s);
    `true_frames` as in `stream_chunks`.
    """
    from wantofight_model.generate import StreamingGenerator

    device = next(loaded.model.parameters()).device
    taken: list[np.ndarray] = []

    def key_stream():
        for masks in chunk_masks:
            taken.append(np.asarray(masks, np.uint16))
            yield keys_tensor(taken[-1]).to(device)  # (1, 8, 2, 16)

    generator = StreamingGenerator(loaded.model, loaded.vae, sampler=sampler or loaded.default_sampler)
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        truths = None
        if true_frames is None:
            latent_prompt = loaded.vae.encode(prompt.to(device))
        else:  # teacher forcing: the prompt and then each true chunk through one streaming encoder
            encoder = loaded.vae.streaming_encoder()
            latent_prompt = torch.cat([encoder.encode(p) for p in prompt.to(device).split([1, prompt.shape[2] - 1], 2)
                                       if p.shape[2]], dim=2)
            truths = true_latent_chunks(encoder, true_frames, loaded.config, device)
        decoder = loaded.vae.streaming_decoder()
        yield to_uint8(decoder.decode(latent_prompt)[0]), prompt_masks
        chunks = generator.generate_latents(latent_prompt, key_stream(), refs.to(device), steps,
                                            prompt_keys=keys_tensor(prompt_masks).to(device), generator=gen,
                                            prompt_sigma=prompt_sigma, true_chunks=truths)
        for latents in chunks:
            yield to_uint8(decoder.decode(latents)[0]), taken.pop(0)


def true_latent_chunks(encoder, pieces: Iterable[np.ndarray], config: ModelConfig, device) -> Iterator[torch.Tensor]:
    """Recorded frames after the prompt, (t, h, w, 3) uint8 pieces of one chunk (the last may be shorter:
    padded with its last frame, like the released keys that pad the last chunk) -> (1, C, 2, h', w')
    latents of each chunk, encoded after the prompt by the same streaming encoder."""
    from wantofight.datasets.frames import resize_to_model

    L = config.chunk_frames
    for piece in pieces:
        if not 0 < len(piece) <= L:
            raise GenerationError(f"teacher forcing reads the recorded frames a chunk ({L} rows) at a time, "
                                  f"got a piece of {len(piece)}")
        piece = np.concatenate([piece, np.repeat(piece[-1:], L - len(piece), axis=0)])
        x = resize_to_model(piece, (config.height, config.width))  # (L, 3, H, W) in [-1, 1]
        yield encoder.encode(x.permute(1, 0, 2, 3)[None].to(device))


def to_uint8(frames: torch.Tensor) -> np.ndarray:
    """(3, T, H, W) in [-1, 1] -> (T, H, W, 3) uint8."""
    from wantofight.fidelity import eight_bit

    return eight_bit(frames).to(torch.uint8).permute(1, 2, 3, 0).cpu().numpy()


class Mp4Writer:
    """Append frames chunk by chunk to an MP4 (the recorder's lossless writer) under a temporary name;
    `commit()` renames it into place, `discard()` removes it."""

    def __init__(self, path: Path, fps: int = 30):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_name(f".{self.path.name}.tmp")
        self.fps = fps
        self.video = None

    def write(self, frames: np.ndarray) -> None:
        from wantofight.video import VideoWriter

        H, W = frames.shape[1:3]
        if H % 2 or W % 2:  # H.264 wants even sizes
            frames = np.pad(frames, ((0, 0), (0, H % 2), (0, W % 2), (0, 0)))
        if self.video is None:
            self.video = VideoWriter(self.tmp, self.fps, frames.shape[2], frames.shape[1])
        for frame in frames:
            self.video.write(frame)

    def commit(self) -> None:
        if self.video is None:
            raise GenerationError(f"no frames were written to {self.path}")
        self.video.close()
        self.tmp.replace(self.path)

    def discard(self) -> None:
        if self.video is not None:
            try:
                self.video.close()
            except Exception:  # an encoder that failed mid-write may not close cleanly; the file goes anyway
                pass
        self.tmp.unlink(missing_ok=True)


def draw_hud(frames: np.ndarray, masks: np.ndarray, start_row: int, total: int, title: str) -> np.ndarray:
    """The key HUD of `wtf inspect` under each frame (wantofight/hud.py) and `title` above: a chunk of
    rows start_row.. of a `total`-row video, counted over the whole video."""
    from wantofight.hud import add_titles, render_hud

    video = render_hud(frames, masks[:, 0], masks[:, 1], start_index=start_row, scale=2,
                       timeline_span=(0, total), episode_rows=False)
    return add_titles(video, [(0, title)], scale=2)


def generate_video(loaded: LoadedGenerator, prompt: torch.Tensor, masks: np.ndarray, refs: torch.Tensor,
                   out: Path, steps: int = 4, hud: bool = False, fps: int = 30, sampler: str | None = None,
                   seed: int = 0, prompt_sigma: float = 0.0, progress: bool = False) -> GenerationResult:
    """Generate rows 0..N (masks (1 + N, 2)) and write them to `out` chunk by chunk (with `progress`, a
    bar of the chunks on stderr)."""
    from wantofight.progress import Progress

    writer = Mp4Writer(out, fps)
    result = GenerationResult(frames=0, chunks=0, path=Path(out))
    chunks = chunk_count(len(masks), prompt.shape[2], loaded.config.chunk_frames)
    try:
        with Progress("generate", total=chunks, unit="chunks", detail="{rows:,} rows", enabled=progress, eta=True,
                      transient=True, rows=0) as bar:
            t0 = time.perf_counter()
            for i, (frames, rows) in enumerate(stream_chunks(loaded, prompt, masks, refs, steps, sampler, seed,
                                                             prompt_sigma)):
                if i > 0:
                    result.chunk_seconds.append(time.perf_counter() - t0)
                    result.chunks += 1
                if hud:  # the first part is the prompt, through the VAE; the rest is the model's
                    frames = draw_hud(frames, rows, result.frames, len(masks), "GENERATED" if i else "PROMPT")
                writer.write(frames)
                result.frames += len(rows)
                bar.update(completed=result.chunks, rows=result.frames)
                t0 = time.perf_counter()
    except BaseException:
        writer.discard()
        raise
    writer.commit()
    return result


def generate_from_files(checkpoint: str | Path, first_frames: str | Path, keys: str | Path, refs: list[str],
                        out: str | Path, steps: int = 4, hud: bool = False, preset: str | None = None,
                        weights: str = "ema", decoder: str | Path | None = None, sampler: str | None = None,
                        seed: int = 0, fps: int = 30, device: str = "cpu", prompt_sigma: float = 0.0,
                        prompt_count: int | None = None, progress: bool = False) -> GenerationResult:
    """`wtf generate`: files in, MP4 out."""
    from wantofight.collect.keyfile import read_key_file

    loaded = load_generator(checkpoint, preset, weights, device, decoder)
    script = read_key_file(keys)
    masks = key_rows(script.p1, script.p2)
    # a prompt longer than the key file's rows leaves nothing to generate (stream_chunks says so): reading a
    # chunk more than them is enough to tell, however long the clip
    limit = prompt_count if prompt_count is not None and prompt_count >= 1 else len(masks) + loaded.config.chunk_frames
    prompt = prompt_frames(read_frames(first_frames, limit), loaded.config, prompt_count)
    ref = reference_images(refs, loaded.config)
    return generate_video(loaded, prompt, masks, ref, Path(out), steps, hud, fps,
                          sampler, seed, prompt_sigma, progress=progress)
