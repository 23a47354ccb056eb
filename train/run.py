"""The library call behind `wtf train STAGE`: resolve the config, build the stage's trainer, fit.

Tests and scripts call `train(...)`; the CLI calls `run_stage(...)`, which turns every expected
failure into a one-line error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

STAGE_TRAINERS = {
    "stage1": "wantofight.train.stage1:Stage1Trainer",
    "stage2": "wantofight.train.stage2:Stage2Trainer",
    "stage3": "wantofight.train.stage3:Stage3Trainer",
}


def trainer_class(stage: str):
    import importlib

    if stage not in STAGE_TRAINERS:
        raise ValueError(f"unknown stage {stage!r}; valid stages: {', '.join(STAGE_TRAINERS)}")
    module, name = STAGE_TRAINERS[stage].split(":")
    return getattr(importlib.import_module(module), name)


def resolve(stage: str, preset: str, out: Path, resume: bool, config_file=None, sets=(), max_steps=None):
    """The run's config: the preset (or, with --resume, the config saved in the last checkpoint),
    then the file, --max-steps and --set."""
    from wantofight.inference import checkpoints
    from wantofight.train.config import resolve_config

    base = None
    if resume:
        found = checkpoints.latest_checkpoint(out)
        if found is not None:
            base = checkpoints.saved_train_config(checkpoints.read_config(found))
    return resolve_config(preset, file=config_file, sets=list(sets), base=base, stage=stage, max_steps=max_steps)


def train(stage: str, *, preset: str, data: Path | None, out: Path, max_steps: int | None = None,
          resume: bool = False, init_from: Path | None = None, config_file: Path | None = None,
          sets=(), device: str | None = None, progress: bool = True, datasets=None,
          teacher: Path | None = None, overwrite: bool = False) -> dict:
    """Stage 3 starts from `teacher` (not `init_from`) and also takes `dmd.*` sets (`train_stage3`). With
    `overwrite` an existing `out` is replaced once the new run is complete (wantofight/outputs.py)."""
    from wantofight import outputs
    from wantofight.train.config import ConfigError

    if stage == "stage3":
        from wantofight.train.stage3 import train_stage3

        if init_from is not None:
            raise ConfigError("stage3 starts from its teacher (--teacher), not from init_from")
        return train_stage3(preset=preset, data=data, out=out, teacher=teacher, max_steps=max_steps, resume=resume,
                            config_file=config_file, sets=sets, device=device, progress=progress, datasets=datasets,
                            overwrite=overwrite)
    if teacher is not None:
        raise ConfigError(f"{stage} has no teacher; only stage3 does")
    config = resolve(stage, preset, outputs.claim(out, overwrite, resume=True), resume, config_file, sets, max_steps)
    trainer = trainer_class(stage)(config, data, out, resume=resume, init_from=init_from, device=device,
                                   progress=progress, datasets=datasets, overwrite=overwrite)
    return trainer.fit()


def run_stage(stage: str, *, fail: Callable[[str], None], **kwargs) -> None:
    """`train()` with every expected error as one line and exit code 2 (130 after Ctrl-C)."""
    run_guarded(lambda: train(stage, **kwargs), fail=fail)


def run_guarded(call: Callable[[], object], *, fail: Callable[[str], None]) -> None:
    """Run a training call for the CLI (a stage, the game VAE): an expected error is one line and exit
    code 2, Ctrl-C exit code 130, and the process group is torn down either way."""
    import typer

    from wantofight.train.config import ConfigError
    from wantofight.train.data import DataError
    from wantofight.train.distributed import teardown
    from wantofight.train.trainer import TrainError

    try:
        call()
        teardown(barrier=True)
    except KeyboardInterrupt:
        raise typer.Exit(130)
    except (ConfigError, DataError, TrainError, FileNotFoundError) as err:
        fail(str(err))
    except ImportError as err:
        fail(f'{err} (the trainer needs the [model] extra: pip install -e ".[model]")')
    finally:
        teardown()
