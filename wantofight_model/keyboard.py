"""Keyboard injection (paper §3.3): key stream -> 1D-conv encoder -> windowed, gated cross-attention.

Time alignment (keys[t] caused the transition into frame t, docs/model.md). Latent frame 0 holds
pixel frame 0 alone; latent frame f >= 1 holds pixel frames 4f-3 .. 4f. The encoder sees exactly
those frames' keys: a stream that starts at frame 0 (T = 1 + 4k) is front-padded with 3 zero frames,
then two stride-2 convolutions compress time 4x, so keyboard latent f depends on keys[4f-3 .. 4f]
only. Row 0 itself (the keys that led into the prompt frame) is read as zeros: inference starting from
a picture cannot know it, so a training window that starts mid-episode must not see it either.
Temporal context across latents comes from the window mask, not from the encoder, which keeps
streaming exact: a chunk's keyboard latents need only its own 8 keys.

Letters: B batch, T pixel frames, P players, K key slots (16), F latent frames, E keyboard width,
L video tokens, D model width, H heads.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from wantofight_model.attention import attention


# ---------------------------------------------------------------------------------------------
# Encoder: (B, T, P, 16) -> (B, P, F, E)
# ---------------------------------------------------------------------------------------------

class KeyboardEncoder(nn.Module):
    """Per-player 1D-conv encoder compressing the frame-rate key stream to the latent rate: 4x for the
    Wan VAE (two stride-2 convolutions), 1x for a per-frame autoencoder (pointwise: latent frame f gets
    key row f alone, docs/contracts.md "Frame/key alignment")."""

    def __init__(self, num_keys: int, dim: int, time_factor: int = 4):
        super().__init__()
        if time_factor not in (1, 4):
            raise ValueError(f"the keyboard encoder groups 4 key rows per latent frame or 1, got {time_factor}")
        self.time_factor = time_factor
        step = 2 if time_factor == 4 else 1
        self.net = nn.Sequential(
            nn.Conv1d(num_keys, dim, kernel_size=step, stride=step),
            nn.SiLU(),
            nn.Conv1d(dim, dim, kernel_size=step, stride=step),
            nn.SiLU(),
            nn.Conv1d(dim, dim, kernel_size=1),
        )

    def forward(self, keys: torch.Tensor) -> torch.Tensor:
        """keys (B, T, P, K) float in {0, 1}; T = 1 + 4k (stream start) or 4k (continuation); any T at 1x."""
        B, T, P, K = keys.shape
        if self.time_factor == 1:
            pass  # one row per latent frame; row 0 (the prompt frame's) is 0 by the alignment contract
        elif T % self.time_factor == 1:
            # (B, T + 3, P, K): latent 0 = 4 zero rows, the prompt frame's own keys (row 0) included
            keys = F.pad(keys[:, 1:], (0, 0, 0, 0, self.time_factor, 0))
        elif T % self.time_factor != 0:
            raise ValueError(f"key stream of {T} frames: expected 1 + 4k (from frame 0) or 4k frames")
        x = keys.permute(0, 2, 3, 1).reshape(B * P, K, keys.shape[1])  # (B P, K, T')
        x = self.net(x)  # (B P, E, F)
        return x.reshape(B, P, x.shape[1], x.shape[2]).transpose(2, 3)  # (B, P, F, E)


# ---------------------------------------------------------------------------------------------
# Injection: windowed cross-attention + sigmoid gate, added to the residual stream
# ---------------------------------------------------------------------------------------------

class KeyboardInjection(nn.Module):
    """Cross-attention from video tokens to both players' keyboard latents at once, gated.

    The keys/values are the players' (bound) latents in one set, the same window mask for each player:
        h = o(Attn(q = x, kv = [keyboard_1 | keyboard_2], window mask)),  g = sigmoid(W h + b)
    and x + g * h is returned. One softmax over both players lets each video token weigh one player's
    presses against the other's: a token on a fighter's sprite can take its own player's keys. The
    latents carry their player's identity (`PlayerAssociation`), which is what it matches them by; a
    softmax per player would give every token of a frame the same update whenever a player's keys are
    held (the window's latents are then equal). A set has no order, so the result does not depend on
    which player is called "P1". The output projection `o` starts at zero, so at initialisation the
    injection is the identity and a pretrained backbone is unchanged.
    """

    def __init__(self, dim: int, keyboard_dim: int, num_heads: int, eps: float = 1e-6, gate_bias: float = 0.0):
        super().__init__()
        self.num_heads = num_heads
        self.norm = nn.LayerNorm(dim, eps=eps)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(keyboard_dim, dim)
        self.v = nn.Linear(keyboard_dim, dim)
        self.norm_q = nn.RMSNorm(dim, eps=eps)
        self.norm_k = nn.RMSNorm(dim, eps=eps)
        self.o = nn.Linear(dim, dim)
        self.gate = nn.Linear(dim, dim)
        nn.init.zeros_(self.o.weight)  # identity at step 0 (adaLN-Zero style)
        nn.init.zeros_(self.o.bias)
        nn.init.constant_(self.gate.bias, gate_bias)

    def forward(self, x: torch.Tensor, keyboard: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """x (B, L, D); keyboard (B, P, Fk, E); mask (L, Fk) window mask -> (B, L, D)."""
        P = keyboard.shape[1]
        q = self.norm_q(self.q(self.norm(x))).unflatten(-1, (self.num_heads, -1))  # (B, L, H, D/H)
        both = keyboard.flatten(1, 2)  # (B, P Fk, E): player-major, one set
        k = self.norm_k(self.k(both)).unflatten(-1, (self.num_heads, -1))  # (B, P Fk, H, D/H)
        v = self.v(both).unflatten(-1, (self.num_heads, -1))  # (B, P Fk, H, D/H)
        if mask is not None:
            mask = mask.repeat(1, P)  # (L, P Fk): each player's latents under the same window
        h = self.o(attention(q, k, v, mask))  # (B, L, D)
        g = torch.sigmoid(self.gate(h))  # gate: lets the model ignore presses mid-animation
        return x + g * h
