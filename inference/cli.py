"""`wtf generate`: the command-line face of `inference/` (inference/generation.py does the work)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from wantofight.cli_util import DEVICE_OPTION, fail, wrote


def generate_command(
    checkpoint: Path = typer.Option(..., "--checkpoint", help="Trainer run or checkpoint folder, a shipped model's name (duel-tiny), or a model .safetensors file (with --preset)."),
    first_frames: Path = typer.Option(..., "--first-frames", help="An image (the first frame) or a clip (its first 1 + 8 m frames are the prompt)."),
    keys: Path = typer.Option(..., "--keys", help="Key file (the `wtf collect --policy keys:` format), or a built-in one by name (duel/walk-under-a): rows 1..N, one output frame each."),
    refs: str = typer.Option(..., "--refs", help="Reference images, one per player: P1.png,P2.png, or a built-in game's by name: duel (its pair), duel/kai,duel/gor."),
    out: Path = typer.Option(..., "--out", help="Output MP4 (1 + N frames, lossless RGB H.264)."),
    steps: int = typer.Option(4, "--steps", help="Denoising steps per chunk (4 for the stage-3 student, more for a teacher)."),
    hud: bool = typer.Option(False, "--hud", help="Draw both players' keys under the frames (the wtf inspect HUD)."),
    preset: Optional[str] = typer.Option(None, "--preset", help="Model preset of a bare safetensors file: tiny, wan-1.3b."),
    weights: str = typer.Option("ema", "--weights", help="ema (EMA weights when the checkpoint has them) or model."),
    decoder: Optional[Path] = typer.Option(None, "--decoder", help="Pruned decoder folder from `wtf train decoder`."),
    sampler: Optional[str] = typer.Option(None, "--sampler", help="euler or x0_renoise (default: x0_renoise for stage-3 checkpoints, else euler)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the noise draws."),
    fps: int = typer.Option(30, "--fps", help="Frame rate written into the MP4."),
    device: str = DEVICE_OPTION,
    prompt: Optional[int] = typer.Option(None, "--prompt-frames", help="Use the first 1 + 8 m frames of --first-frames as the prompt (default: the longest such prefix)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar (stderr)."),
) -> None:
    """Stream a video from a checkpoint, a first frame, a key file and reference images (any length)."""
    from wantofight.collect.game_registry import resolve_refs
    from wantofight.collect.keyfile import KeyFileError
    from wantofight.devices import resolve_device
    from wantofight.inference.generation import GenerationError, generate_from_files

    device = resolve_device(device)
    if steps < 1:
        fail(f"--steps must be >= 1, got {steps}")
    try:
        result = generate_from_files(checkpoint, first_frames, keys, resolve_refs(refs), out, steps,
                                     hud, preset, weights, decoder, sampler, seed, fps, device, prompt_count=prompt,
                                     progress=progress)
    except (GenerationError, KeyFileError, FileNotFoundError, ValueError) as err:
        fail(str(err))
    ms = [1000 * s for s in result.chunk_seconds]
    wrote(out, f"{result.frames} frames ({result.chunks} chunks, {steps} steps each); "
               f"{sum(ms) / len(ms):.0f} ms per chunk on {device}")


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root `wtf` app."""
    app.command("generate")(generate_command)
