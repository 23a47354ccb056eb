"""`wtf train stage2 | stage3 | decoder | vae`.

    from wantofight.train import generate_cli
    generate_cli.register(app, train_cli.app)      # in wantofight/cli.py

Each command builds its settings and calls the library function that the tests call
(train/stage2.py, train/stage3.py, train/vae/pruned_decoder.py, train/vae/);
heavy imports happen inside the commands so `wtf --help` stays instant. `wtf generate` is
inference/cli.py's, `wtf benchmark eval` (alias `wtf eval`) benchmark/cli.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from wantofight.cli_util import DEVICE_OPTION, MAX_STEPS_OPTION, OVERWRITE_OPTION, console, fail, step_count


# ---------------------------------------------------------------------------------------------
# wtf train stage2 / stage3 / decoder
# ---------------------------------------------------------------------------------------------

def stage2_command(
    init_from: Optional[Path] = typer.Option(None, "--init-from", help="Stage-1 run or checkpoint folder, a stage-2 one or a shipped model's name (e.g. duel-tiny) to fine-tune (its EMA weights, a fresh optimiser and step count), or a Wan2.1 checkpoint. Not needed with --resume."),
    preset: str = typer.Option("tiny", "--preset", help="Model and training preset: tiny, wan-1.3b."),
    data: Path = typer.Option(..., "--data", help="Curriculum DS_DIR or latent cache."),
    out: Path = typer.Option(..., "--out", help="Run folder: checkpoints/, metrics.jsonl, val/ videos."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Optimiser steps to train to (default: the preset's)."),
    max_steps: Optional[int] = MAX_STEPS_OPTION,
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out exactly."),
    overwrite: bool = OVERWRITE_OPTION,
    config_file: Optional[Path] = typer.Option(None, "--config", help="YAML/JSON config fields over the preset."),
    set_: List[str] = typer.Option([], "--set", help="Override a config field (repeatable)."),
    device: str = DEVICE_OPTION,
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
) -> None:
    """Stage 2: block-causal attention, one noise level per chunk (diffusion forcing), from stage 1 (or a stage 2 to fine-tune)."""
    from wantofight.devices import resolve_device
    from wantofight.train.run import run_stage

    if init_from is None and not resume:
        fail("stage2 starts from a stage-1 (or stage-2) checkpoint: pass --init-from RUN_OR_CKPT (or --resume)")
    run_stage("stage2", preset=preset, data=data, out=out, max_steps=step_count(steps, max_steps), resume=resume,
              init_from=init_from, config_file=config_file, sets=set_, device=resolve_device(device), progress=progress,
              overwrite=overwrite, fail=fail)


def stage3_command(
    teacher: Optional[Path] = typer.Option(None, "--teacher", help="Stage-2 run or checkpoint folder (frozen real score; student and critic start from it)."),
    preset: str = typer.Option("tiny", "--preset", help="Model and training preset: tiny, wan-1.3b."),
    data: Path = typer.Option(..., "--data", help="Curriculum DS_DIR or latent cache (conditioning: first frames, keys, references)."),
    out: Path = typer.Option(..., "--out", help="Run folder."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Generator steps to train to (default: the preset's)."),
    max_steps: Optional[int] = MAX_STEPS_OPTION,
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out exactly (the teacher path is recorded)."),
    overwrite: bool = OVERWRITE_OPTION,
    config_file: Optional[Path] = typer.Option(None, "--config", help="YAML/JSON config fields over the preset."),
    set_: List[str] = typer.Option([], "--set", help="Override a field, dmd.* included: --set dmd.critic_steps=5."),
    device: str = DEVICE_OPTION,
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
) -> None:
    """Stage 3: DMD to a 4-step causal student with a TTUR critic and self-forcing rollouts."""
    from wantofight.devices import resolve_device
    from wantofight.train.run import run_stage

    run_stage("stage3", preset=preset, data=data, out=out, teacher=teacher, max_steps=step_count(steps, max_steps),
              resume=resume, config_file=config_file, sets=set_, device=resolve_device(device), progress=progress,
              overwrite=overwrite, fail=fail)


def decoder_command(
    vae: str = typer.Option("tiny", "--vae", help="tiny (the preset's VAE, as the trainer builds it) or a local Wan2.1 VAE folder."),
    data: Path = typer.Option(..., "--data", help="Curriculum DS_DIR (frames: also fits the ground truth) or latent cache."),
    out: Path = typer.Option(..., "--out", help="Folder for decoder.safetensors, pruned_decoder.json, report.json."),
    keep: float = typer.Option(0.5, "--keep", help="Fraction of each residual block's hidden channels kept."),
    steps: int = typer.Option(200, "--steps", help="Fine-tuning steps."),
    lr: float = typer.Option(2e-4, "--lr", help="AdamW learning rate."),
    batch_size: int = typer.Option(2, "--batch-size", help="Windows per step."),
    frames: int = typer.Option(9, "--frames", help="Frames per window of clip data (1 + 4 k)."),
    gt_weight: float = typer.Option(0.5, "--gt-weight", help="Weight of the ground-truth frame loss (clip data)."),
    preset: str = typer.Option("tiny", "--preset", help="Model preset whose resolution the clips are resized to."),
    size: Optional[str] = typer.Option(None, "--size", help="Resize clips to HEIGHTxWIDTH instead (e.g. the size of a `wtf train vae` VAE)."),
    overwrite: bool = OVERWRITE_OPTION,
    set_: List[str] = typer.Option([], "--set", help="Override a field: --set decoder.seed=1, --set decoder.eval_items=8 (repeatable)."),
) -> None:
    """Structured pruning of the Wan VAE decoder, fine-tuned against the full decoder and the frames."""
    from wantofight.inference.decoder import PruningError
    from wantofight.train.data import DataError
    from wantofight.train.vae.pruned_decoder import resolve_decoder_settings, train_decoder

    try:
        config = resolve_decoder_settings(set_, keep_ratio=keep, steps=steps, lr=lr, batch_size=batch_size,
                                          frames=frames, gt_weight=gt_weight)
        hw = None
        if size is not None:
            from wantofight.train.vae.config import parse_size

            hw = parse_size(size)
        train_decoder(vae, data, out, config, preset, log=lambda m: console.print(m, highlight=False), size=hw,
                      overwrite=overwrite)
    except (PruningError, DataError, FileNotFoundError, ValueError) as err:
        fail(str(err))


def vae_command(
    data: Path = typer.Option(..., "--data", help="Curriculum DS_DIR (wtf build-curriculum); PSNR is measured on its val split."),
    out: Path = typer.Option(..., "--out", help="New folder: a diffusers autoencoder (loadable wherever --vae is) + report.json."),
    size: str = typer.Option("128x128", "--size", help="Frame size HEIGHTxWIDTH trained and measured at (multiples of 16)."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Optimiser steps (default 2000)."),
    max_steps: Optional[int] = MAX_STEPS_OPTION,
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run into --out."),
    overwrite: bool = OVERWRITE_OPTION,
    config_file: Optional[Path] = typer.Option(None, "--config", help="YAML/JSON config fields over the defaults."),
    set_: List[str] = typer.Option([], "--set", help="Override a field: --set vae.crop=0, --set model.vae.base_dim=32, --set optim.lr=5e-4."),
    device: str = DEVICE_OPTION,
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
) -> None:
    """Train the game's autoencoder on its frames: the Wan layout (4x time, 8x space, 16 channels) or, with
    --set model.vae.kind=frame, a per-frame one (no time compression, 8x or 4x in space)."""
    from wantofight.devices import resolve_device
    from wantofight.train.run import run_guarded
    from wantofight.train.vae.config import parse_size
    from wantofight.train.vae.trainer import train_vae

    steps = step_count(steps, max_steps)
    run_guarded(lambda: train_vae(data, out, parse_size(size), steps, set_, config_file, resume, resolve_device(device),
                                  progress, overwrite=overwrite), fail=fail)


def register(root: typer.Typer, train_app: typer.Typer) -> None:
    """Add `stage2`, `stage3`, `decoder`, `vae` to `wtf train` (`root` is unused: kept for the callers)."""
    train_app.command("stage2")(stage2_command)
    train_app.command("stage3")(stage3_command)
    train_app.command("decoder")(decoder_command)
    train_app.command("vae")(vae_command)
