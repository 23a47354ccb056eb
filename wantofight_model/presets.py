"""The one registry of model sizes: `tiny` for CPU tests, `wan-1.3b` for the paper's configuration."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from wantofight_model.config import ModelConfig, VAEConfig

# A 2-layer, width-64 ViT over 64x64 images (~155 k parameters); registered with open_clip on demand
# by `player_association.register_tiny_clip()` so the tiny preset builds without any download.
TINY_CLIP_NAME = "wtf-tiny-vit"
TINY_CLIP_CONFIG = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "head_width": 32, "patch_size": 16},
    "text_cfg": {"context_length": 8, "vocab_size": 64, "width": 32, "heads": 2, "layers": 1},
}


def tiny() -> ModelConfig:
    """Runs forward and backward on a CPU in well under a second: 4 blocks, width 64, 64x64 pixels."""
    return ModelConfig(
        dim=64,
        num_heads=4,
        ffn_dim=128,
        num_blocks=4,
        height=64,
        width=64,
        keyboard_dim=32,
        keyboard_every=2,  # two injection points in 4 blocks, so chained injections are exercised
        clip_model=TINY_CLIP_NAME,
        clip_image_size=64,
        clip_dim=64,
        association_heads=2,
        vae=VAEConfig(base_dim=16, dim_mult=(1, 2, 2, 2), num_res_blocks=1),
    )


def wan_1_3b() -> ModelConfig:
    """Wan2.1-T2V-1.3B backbone with the paper's keyboard injection and player association (docs/model.md)."""
    return ModelConfig()


PRESETS: dict[str, Callable[[], ModelConfig]] = {
    "tiny": tiny,
    "wan-1.3b": wan_1_3b,
}


def get_preset(name: str, **overrides) -> ModelConfig:
    """Return the config of preset `name`, with dataclass `overrides` applied (validated again)."""
    if name not in PRESETS:
        raise ValueError(f"unknown model preset {name!r}; valid presets: {', '.join(sorted(PRESETS))}")
    config = PRESETS[name]()
    return replace(config, **overrides) if overrides else config
