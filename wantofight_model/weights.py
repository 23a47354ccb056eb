"""Weights: load a Wan2.1 checkpoint into the backbone; save / load a whole model as safetensors.

A Wan2.1 checkpoint comes in two key layouts:
  - original (Wan-Video/Wan2.1, `*.safetensors` / `*.pth`): `blocks.0.self_attn.q.weight`, ... -
    the names our backbone uses, so no renaming;
  - diffusers (`WanTransformer3DModel`, a folder with `config.json` and
    `diffusion_pytorch_model*.safetensors`, possibly under `transformer/`): renamed by
    `DIFFUSERS_TO_ORIGINAL` below (the inverse of diffusers' own conversion script).
Text-conditioning tensors are *dropped* on purpose (DROPPED_PREFIXES); they are reported, not
loaded. The added WanToFight modules are absent from any Wan checkpoint and keep their
(identity) initialisation; they are not reported as missing.
With `strict=True` any missing backbone tensor, unexpected tensor or shape mismatch raises an
error that lists them; with `strict=False` they are returned in the `LoadReport`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from wantofight_model.config import ModelConfig

# (diffusers pattern, original replacement), applied in order to each key.
DIFFUSERS_TO_ORIGINAL: tuple[tuple[str, str], ...] = (
    (r"^condition_embedder\.time_embedder\.linear_1\.", "time_embedding.0."),
    (r"^condition_embedder\.time_embedder\.linear_2\.", "time_embedding.2."),
    (r"^condition_embedder\.time_proj\.", "time_projection.1."),
    (r"^condition_embedder\.text_embedder\.linear_1\.", "text_embedding.0."),
    (r"^condition_embedder\.text_embedder\.linear_2\.", "text_embedding.2."),
    (r"^condition_embedder\.image_embedder\.", "img_emb."),
    (r"^scale_shift_table$", "head.modulation"),
    (r"^proj_out\.", "head.head."),
    (r"^(blocks\.\d+)\.attn1\.to_q\.", r"\1.self_attn.q."),
    (r"^(blocks\.\d+)\.attn1\.to_k\.", r"\1.self_attn.k."),
    (r"^(blocks\.\d+)\.attn1\.to_v\.", r"\1.self_attn.v."),
    (r"^(blocks\.\d+)\.attn1\.to_out\.0\.", r"\1.self_attn.o."),
    (r"^(blocks\.\d+)\.attn1\.norm_(q|k)\.", r"\1.self_attn.norm_\2."),
    (r"^(blocks\.\d+)\.attn2\.to_q\.", r"\1.cross_attn.q."),
    (r"^(blocks\.\d+)\.attn2\.to_k\.", r"\1.cross_attn.k."),
    (r"^(blocks\.\d+)\.attn2\.to_v\.", r"\1.cross_attn.v."),
    (r"^(blocks\.\d+)\.attn2\.to_out\.0\.", r"\1.cross_attn.o."),
    (r"^(blocks\.\d+)\.attn2\.norm_(q|k)\.", r"\1.cross_attn.norm_\2."),
    (r"^(blocks\.\d+)\.attn2\.add_k_proj\.", r"\1.cross_attn.k_img."),
    (r"^(blocks\.\d+)\.attn2\.add_v_proj\.", r"\1.cross_attn.v_img."),
    (r"^(blocks\.\d+)\.attn2\.norm_added_k\.", r"\1.cross_attn.norm_k_img."),
    (r"^(blocks\.\d+)\.norm2\.", r"\1.norm3."),  # diffusers norm2 = original norm3 = text cross-attn norm
    (r"^(blocks\.\d+)\.ffn\.net\.0\.proj\.", r"\1.ffn.0."),
    (r"^(blocks\.\d+)\.ffn\.net\.2\.", r"\1.ffn.2."),
    (r"^(blocks\.\d+)\.scale_shift_table$", r"\1.modulation"),
)

# Original-layout tensors of the text (and I2V image) conditioning, which WanToFight drops.
DROPPED_PREFIXES = ("text_embedding.", "img_emb.")
DROPPED_PATTERN = re.compile(r"^blocks\.\d+\.(cross_attn|norm3)\.")


def diffusers_to_original(key: str) -> str:
    for pattern, replacement in DIFFUSERS_TO_ORIGINAL:
        new, count = re.subn(pattern, replacement, key)
        if count:
            return new
    return key


def is_dropped(key: str) -> bool:
    """True for original-layout keys of the text / image conditioning that WanToFight does not use."""
    return key.startswith(DROPPED_PREFIXES) or DROPPED_PATTERN.match(key) is not None


def is_diffusers_layout(keys) -> bool:
    return any(k.startswith("condition_embedder.") or ".attn1." in k for k in keys)


# ---------------------------------------------------------------------------------------------
# Reading checkpoints
# ---------------------------------------------------------------------------------------------

def _read_file(path: Path) -> dict[str, torch.Tensor]:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    state = torch.load(path, map_location="cpu", weights_only=True)
    return state.get("state_dict", state) if isinstance(state, dict) else state


def read_wan_checkpoint(path: str | Path) -> dict[str, torch.Tensor]:
    """All tensors of a Wan2.1 transformer checkpoint: a file, a folder of shards, or a diffusers repo."""
    path = Path(path)
    if path.is_file():
        return _read_file(path)
    if not path.is_dir():
        raise FileNotFoundError(f"no Wan checkpoint at {path}")
    if (path / "transformer").is_dir():
        path = path / "transformer"
    files = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.pth")) or sorted(path.glob("*.pt"))
    files = [f for f in files if "vae" not in f.name.lower() and "clip" not in f.name.lower()
             and "t5" not in f.name.lower()]
    if not files:
        raise FileNotFoundError(f"no *.safetensors / *.pth transformer weights in {path}")
    state: dict[str, torch.Tensor] = {}
    for file in files:
        state.update(_read_file(file))
    return state


# ---------------------------------------------------------------------------------------------
# Loading into the backbone
# ---------------------------------------------------------------------------------------------

@dataclass
class LoadReport:
    """What a checkpoint load did."""

    loaded: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    """Backbone tensors the checkpoint lacks (kept at their initial values)."""
    unexpected: list[str] = field(default_factory=list)
    """Checkpoint tensors with no counterpart (and not a known dropped module)."""
    mismatched: list[str] = field(default_factory=list)
    """'name: checkpoint shape vs model shape'."""
    dropped: list[str] = field(default_factory=list)
    """Text/image-conditioning tensors skipped on purpose."""
    layout: str = "original"

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.mismatched)

    def describe(self) -> str:
        lines = [f"layout={self.layout} loaded={len(self.loaded)} dropped={len(self.dropped)}"]
        for name in ("missing", "unexpected", "mismatched"):
            items = getattr(self, name)
            if items:
                lines.append(f"{name} ({len(items)}): " + ", ".join(items[:20]) + (" ..." if len(items) > 20 else ""))
        return "\n".join(lines)


def load_wan_weights(dit: nn.Module, checkpoint: str | Path | dict[str, torch.Tensor],
                     strict: bool = True) -> LoadReport:
    """Copy Wan2.1 backbone tensors into `dit` (a `WanToFightDiT`); see the module docstring."""
    state = checkpoint if isinstance(checkpoint, dict) else read_wan_checkpoint(checkpoint)
    report = LoadReport(layout="diffusers" if is_diffusers_layout(state) else "original")
    if report.layout == "diffusers":
        state = {diffusers_to_original(k): v for k, v in state.items()}
    state = {k.removeprefix("model."): v for k, v in state.items()}
    targets = dit.backbone_state_dict()
    with torch.no_grad():
        for key, tensor in state.items():
            if key == "patch_embedding.weight":
                tensor = dit.fit_patch_embedding(tensor)
            if is_dropped(key):
                report.dropped.append(key)
            elif key not in targets:
                report.unexpected.append(key)
            elif tuple(tensor.shape) != tuple(targets[key].shape):
                report.mismatched.append(f"{key}: {tuple(tensor.shape)} vs {tuple(targets[key].shape)}")
            else:
                targets[key].copy_(tensor.to(targets[key].dtype))
                report.loaded.append(key)
    report.missing = sorted(set(targets) - set(report.loaded) - {m.split(":")[0] for m in report.mismatched})
    if strict and not report.ok:
        raise ValueError("Wan checkpoint does not match the backbone:\n" + report.describe())
    return report


# ---------------------------------------------------------------------------------------------
# Whole-model safetensors round trip
# ---------------------------------------------------------------------------------------------

def save_model(module: nn.Module, path: str | Path, config: ModelConfig | None = None) -> None:
    """Save every parameter and persistent buffer of `module` (with the config as metadata)."""
    from safetensors.torch import save_file

    state = {k: v.detach().contiguous() for k, v in module.state_dict().items()}
    metadata = {"config": json.dumps(config.to_dict())} if config is not None else None
    save_file(state, str(path), metadata=metadata)


def load_model(module: nn.Module, path: str | Path, strict: bool = True) -> tuple[list[str], list[str]]:
    """Load a `save_model` file; returns (missing, unexpected) and raises on them when strict."""
    from safetensors.torch import load_file

    result = module.load_state_dict(load_file(str(path)), strict=False)
    if strict and (result.missing_keys or result.unexpected_keys):
        raise ValueError(f"missing keys: {result.missing_keys}; unexpected keys: {result.unexpected_keys}")
    return result.missing_keys, result.unexpected_keys


def read_config(path: str | Path) -> ModelConfig:
    """The `ModelConfig` stored in a `save_model` file's metadata."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata() or {}
    if "config" not in metadata:
        raise ValueError(f"{path} has no config metadata")
    return ModelConfig.from_dict(json.loads(metadata["config"]))
