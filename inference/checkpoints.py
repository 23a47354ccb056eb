"""Reading the trainer's checkpoints: where a run keeps them, which is the newest, and what sampling reads.

    RUN_DIR/checkpoints/step_00000020/   config.json, model.safetensors, ema.safetensors, ...
    RUN_DIR/checkpoints/latest           name of the newest complete checkpoint

train/checkpoint.py writes them (the full layout is in its docstring); a checkpoint is complete once its
config.json exists, so the readers here never see a half-written one.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

import torch

from wantofight_model.config import DERIVED_FIELDS, ModelConfig

CHECKPOINT_DIR = "checkpoints"
PREFIX = "step_"


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints, oldest first."""
    root = Path(run_dir) / CHECKPOINT_DIR
    if not root.exists():
        return []
    done = [p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX) and (p / "config.json").exists()]
    return sorted(done, key=lambda p: int(p.name[len(PREFIX):]))


def latest_checkpoint(run_dir: Path) -> Path | None:
    root = Path(run_dir) / CHECKPOINT_DIR
    pointer = root / "latest"
    if pointer.exists():
        candidate = root / pointer.read_text().strip()
        if (candidate / "config.json").exists():
            return candidate
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def read_config(path: Path) -> dict:
    return json.loads((Path(path) / "config.json").read_text())


def read_tensors(path: Path, name: str) -> dict[str, torch.Tensor] | None:
    from safetensors.torch import load_file

    file = Path(path) / name
    return load_file(str(file)) if file.exists() else None


EMA_ONLY = "ema_only"
"""A config.json key set by `shipped.export_checkpoint`: model.safetensors holds the EMA weights, and no raw ones
are kept (half the size; sampling and initialising a stage read the EMA weights)."""


def read_weights(path: Path, weights: str = "ema") -> tuple[dict[str, torch.Tensor], str]:
    """The DiT's state dict in a checkpoint folder, and which weights it holds: `ema` asks for the EMA shadows over
    the model file's tensors where the folder keeps them (else the raw weights), `model` for the raw ones. A
    ValueError where `model` is asked of an export that kept only its EMA weights."""
    state = read_tensors(path, "model.safetensors")
    if read_config(path).get(EMA_ONLY):
        if weights == "model":
            raise ValueError(f"{path} keeps only its EMA weights (an exported model); its raw weights are not there: "
                             "use the EMA weights, or the run it was exported from")
        return state, "ema"
    ema = read_tensors(path, "ema.safetensors") if weights == "ema" else None
    return ({**state, **ema}, "ema") if ema is not None else (state, "model")  # buffers come from the model file


def saved_train_config(saved: dict) -> dict:
    """A checkpoint's saved train config, with the model fields its model predates set to the values it
    was made with (`LEGACY_FIELDS`): an old run resumes, and an old model samples, as before."""
    from wantofight_model.config import LEGACY_FIELDS

    train = json.loads(json.dumps(saved["train"]))
    missing = {k: v for k, v in LEGACY_FIELDS.items() if k not in saved.get("model", {})}
    train["model"] = {**missing, **(train.get("model") or {})}
    return train


def model_config(preset: str, overrides: dict) -> ModelConfig:
    """The model preset `preset` with the `model` section of a train config (`overrides`) applied; a
    ValueError names an unknown field or a bad value (ModelConfig validates itself)."""
    from wantofight_model.presets import get_preset

    overrides = {k: v for k, v in overrides.items() if k not in DERIVED_FIELDS}  # saved before they were derived
    base = get_preset(preset)
    if "vae" in overrides:
        overrides["vae"] = replace(base.vae, **overrides["vae"]) if isinstance(overrides["vae"], dict) \
            else overrides["vae"]
    known = {f.name for f in fields(ModelConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown model field(s) {unknown}; valid: {', '.join(sorted(known))}")
    for key, value in list(overrides.items()):
        if isinstance(value, list):
            overrides[key] = tuple(value)
    try:
        return replace(base, **overrides)
    except ValueError as err:
        raise ValueError(f"model: {err}") from err
