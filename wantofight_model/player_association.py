"""Player association (paper §3.4): bind each player's key stream to the character it controls.

Wiring (docs/model.md explains the choice):
    reference image of player p -> frozen open_clip vision tower -> patch tokens R_p (N, C)
    keyboard latents of player p  K_p (F, E) -> K_p + o(Attn(q = K_p, kv = R_p))
so each keyboard latent carries "these presses belong to the fighter who looks like this". The
video tokens of a fighter then find their own player's stream in the keyboard cross-attention by
appearance, not by slot index: there is deliberately no learned player-slot embedding, so the
model cannot bind "P1" to a screen side, which is exactly what breaks after a side swap. Players
are processed one after the other with shared weights; `o` starts at zero (identity at step 0).

Letters: B batch, P players, F latent frames, E keyboard width, N reference tokens, C CLIP width.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from wantofight_model.attention import attention
from wantofight_model.config import ModelConfig
from wantofight_model.presets import TINY_CLIP_CONFIG, TINY_CLIP_NAME

# open_clip's normalisation for OpenAI-style CLIP towers (ViT-H/14 LAION uses the same).
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


# ---------------------------------------------------------------------------------------------
# Frozen reference-image encoder
# ---------------------------------------------------------------------------------------------

def register_tiny_clip() -> None:
    """Register the tiny test vision tower with open_clip (idempotent; no download)."""
    import open_clip

    if TINY_CLIP_NAME in open_clip.list_models():
        return
    # open_clip reads the file as it registers it, so the folder can go at once.
    with tempfile.TemporaryDirectory(prefix="wtf-clip-") as folder:
        path = Path(folder) / f"{TINY_CLIP_NAME}.json"
        path.write_text(json.dumps(TINY_CLIP_CONFIG))
        open_clip.add_model_config(path)


def _no_random_init_warning(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("No pretrained weights loaded for model")


class ReferenceEncoder(nn.Module):
    """Frozen open_clip vision tower: images (B, P, 3, h, w) in [-1, 1] -> patch tokens (B, P, N, C)."""

    def __init__(self, visual: nn.Module, image_size: int):
        super().__init__()
        self.visual = visual
        self.visual.output_tokens = True
        self.image_size = image_size
        self.register_buffer("mean", torch.tensor(CLIP_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(CLIP_STD).view(1, 3, 1, 1), persistent=False)
        self.requires_grad_(False)

    @classmethod
    def from_config(cls, config: ModelConfig, device: torch.device | str = "cpu") -> "ReferenceEncoder":
        try:
            import open_clip
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError("the reference encoder needs open_clip: pip install 'wantofight[model]'") from err
        register_tiny_clip()
        # Random init is intended without clip_pretrained (tests, meta sizing): drop open_clip's one
        # warning about it (logged on the root logger) while the model is built, and nothing else.
        root = logging.getLogger()
        root.addFilter(_no_random_init_warning)
        try:
            model = open_clip.create_model(config.clip_model, pretrained=config.clip_pretrained, device=device)
        finally:
            root.removeFilter(_no_random_init_warning)
        return cls(model.visual, config.clip_image_size)

    def train(self, mode: bool = True) -> "ReferenceEncoder":
        return super().train(False)  # frozen: dropout / norm statistics never switch to training

    @torch.no_grad()
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        B, P = images.shape[:2]
        x = images.flatten(0, 1).float()  # (B P, 3, h, w)
        if x.shape[-2:] != (self.image_size, self.image_size):
            x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear", antialias=True,
                              align_corners=False)
        x = ((x + 1) / 2 - self.mean) / self.std
        _, tokens = self.visual(x.to(next(self.visual.parameters()).dtype))  # (B P, N, C)
        return tokens.unflatten(0, (B, P))  # (B, P, N, C)


# ---------------------------------------------------------------------------------------------
# Binding cross-attention
# ---------------------------------------------------------------------------------------------

class PlayerAssociation(nn.Module):
    """Keyboard latents of each player attend to that player's reference tokens."""

    def __init__(self, keyboard_dim: int, clip_dim: int, num_heads: int, eps: float = 1e-6):
        super().__init__()
        self.num_heads = num_heads
        self.norm_keyboard = nn.LayerNorm(keyboard_dim, eps=eps)
        self.norm_reference = nn.LayerNorm(clip_dim, eps=eps)
        self.q = nn.Linear(keyboard_dim, keyboard_dim)
        self.k = nn.Linear(clip_dim, keyboard_dim)
        self.v = nn.Linear(clip_dim, keyboard_dim)
        self.o = nn.Linear(keyboard_dim, keyboard_dim)
        nn.init.zeros_(self.o.weight)  # identity at step 0
        nn.init.zeros_(self.o.bias)

    def forward(self, keyboard: torch.Tensor, references: torch.Tensor) -> torch.Tensor:
        """keyboard (B, P, F, E); references (B, P, N, C) -> bound keyboard latents (B, P, F, E)."""
        bound = []
        for p in range(keyboard.shape[1]):  # players one after the other (paper)
            q = self.q(self.norm_keyboard(keyboard[:, p])).unflatten(-1, (self.num_heads, -1))  # (B, F, h, E/h)
            r = self.norm_reference(references[:, p].to(keyboard.dtype))  # (B, N, C)
            k = self.k(r).unflatten(-1, (self.num_heads, -1))  # (B, N, h, E/h)
            v = self.v(r).unflatten(-1, (self.num_heads, -1))  # (B, N, h, E/h)
            bound.append(keyboard[:, p] + self.o(attention(q, k, v)))  # (B, F, E)
        return torch.stack(bound, dim=1)  # (B, P, F, E)
