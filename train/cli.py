"""`wtf train ...`: the three-stage trainer."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from wantofight.cli_util import DEVICE_OPTION, MAX_STEPS_OPTION, OVERWRITE_OPTION, fail

app = typer.Typer(help="Train WanToFight: stage1 (bidirectional), stage2 (causal), stage3 (DMD).", no_args_is_help=True)


@app.callback()
def _group() -> None:
    """Train WanToFight: stage1 (bidirectional), stage2 (causal), stage3 (DMD)."""


@app.command()
def stage1(
    preset: str = typer.Option("tiny", "--preset", help="Model and training preset: tiny, wan-1.3b."),
    data: Path = typer.Option(..., "--data", help="Curriculum DS_DIR (wtf build-curriculum) or latent cache (wtf encode)."),
    out: Path = typer.Option(..., "--out", help="Run folder: checkpoints/, metrics.jsonl, val/ videos."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Optimiser steps to train to (default: the preset's)."),
    max_steps: Optional[int] = MAX_STEPS_OPTION,
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out exactly where its last checkpoint stopped."),
    overwrite: bool = OVERWRITE_OPTION,
    init_from: Optional[Path] = typer.Option(None, "--init-from", help="Local Wan2.1 checkpoint (file or folder) for the backbone."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="YAML/JSON file of config fields applied over the preset."),
    set_: List[str] = typer.Option([], "--set", help="Override a config field: --set optim.lr=1e-4 (repeatable)."),
    device: str = DEVICE_OPTION,
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
) -> None:
    """Stage 1: bidirectional flow-matching pretraining with the curriculum (docs/training.md).

    Runs as is on one CPU/GPU, and under `torchrun --nproc-per-node G` on many GPUs.
    """
    from wantofight.cli_util import step_count
    from wantofight.devices import resolve_device
    from wantofight.train.run import run_stage

    run_stage("stage1", preset=preset, data=data, out=out, max_steps=step_count(steps, max_steps), resume=resume,
              init_from=init_from, config_file=config_file, sets=set_, device=resolve_device(device), progress=progress,
              overwrite=overwrite, fail=fail)
