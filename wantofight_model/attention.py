"""Attention masks (as small named mask-mod factories) and the attention call shared by all modules.

A mask mod is a predicate `mod(q_idx, kv_idx) -> bool tensor` on token indices (torchtitan /
flex-attention style); `dense_mask` materialises one as an (Lq, Lk) boolean matrix, True = may attend.
Tokens are ordered (latent frame, row, column), so the frame of token i is `offset + i // N`.

Chunks (config.py): chunk 0 is latent frame 0 alone, chunk c >= 1 is latent frames
(c-1) C + 1 .. c C with C = latent frames per chunk (2), hence chunk(f) = ceil(f / C).

Letters: B batch, H heads, Lq / Lk query / key tokens, D head dim, N tokens per latent frame.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

MaskMod = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def chunk_of_frame(frame: torch.Tensor | int, chunk_latent_frames: int):
    """Chunk index of a latent frame: 0 -> 0, 1..C -> 1, C+1..2C -> 2, ... (ceil(f / C))."""
    return (frame + chunk_latent_frames - 1) // chunk_latent_frames


# ---------------------------------------------------------------------------------------------
# Mask mods
# ---------------------------------------------------------------------------------------------

def bidirectional_mask() -> MaskMod:
    """Stage 1: every token sees every token."""

    def mod(q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        return torch.ones_like(q_idx + kv_idx, dtype=torch.bool)

    return mod


def block_causal_mask(tokens_per_frame: int, chunk_latent_frames: int, context_chunks: int,
                      q_frame_offset: int = 0, kv_frame_offset: int = 0) -> MaskMod:
    """Stage 2: bidirectional inside a chunk; chunk k also sees chunks k-context .. k-1 (the paper: 2)."""

    def mod(q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        q_chunk = chunk_of_frame(q_frame_offset + q_idx // tokens_per_frame, chunk_latent_frames)
        kv_chunk = chunk_of_frame(kv_frame_offset + kv_idx // tokens_per_frame, chunk_latent_frames)
        return (kv_chunk <= q_chunk) & (kv_chunk >= q_chunk - context_chunks)

    return mod


def keyboard_window_mask(tokens_per_frame: int, window: int, q_frame_offset: int = 0,
                         kv_frame_offset: int = 0) -> MaskMod:
    """Keyboard cross-attention: a video token of latent frame f sees keyboard latents f-window+1 .. f.

    Keys side has one token per latent frame (one player's keyboard latents); window 3 = own step + 2
    previous (paper).
    """

    def mod(q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        q_frame = q_frame_offset + q_idx // tokens_per_frame
        kv_frame = kv_frame_offset + kv_idx
        return (kv_frame <= q_frame) & (kv_frame > q_frame - window)

    return mod


def dense_mask(mod: MaskMod, num_q: int, num_kv: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Materialise a mask mod as a (Lq, Lk) boolean matrix."""
    q_idx = torch.arange(num_q, device=device)[:, None]
    kv_idx = torch.arange(num_kv, device=device)[None, :]
    return mod(q_idx, kv_idx).expand(num_q, num_kv)


def flex_block_mask(mod: MaskMod, num_q: int, num_kv: int, device: torch.device | str | None = None):
    """The same mask as a flex-attention `BlockMask`: sparse by 128-token blocks, so a 161-frame
    block-causal training sample (31 k tokens at 512x384) needs no dense (L, L) matrix."""
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(lambda b, h, q_idx, kv_idx: mod(q_idx, kv_idx), None, None, num_q, num_kv,
                             device=device)


# ---------------------------------------------------------------------------------------------
# Attention
# ---------------------------------------------------------------------------------------------

_compiled_flex_attention = None


def _flex_attention(q, k, v, block_mask):
    """flex_attention, compiled on GPU (its fused kernel); eager elsewhere (CPU: forward only)."""
    global _compiled_flex_attention
    from torch.nn.attention.flex_attention import flex_attention

    if not q.is_cuda:
        return flex_attention(q, k, v, block_mask=block_mask)
    if _compiled_flex_attention is None:
        _compiled_flex_attention = torch.compile(flex_attention, dynamic=False)
    return _compiled_flex_attention(q, k, v, block_mask=block_mask)


def attention(q_BLHD: torch.Tensor, k_BLHD: torch.Tensor, v_BLHD: torch.Tensor, mask=None) -> torch.Tensor:
    """Scaled dot-product attention on (B, L, H, D) tensors.

    mask: None, an (Lq, Lk) bool tensor (True = attend) for SDPA, or a flex-attention `BlockMask`
    (`flex_block_mask`). Returns (B, Lq, H D). Every query sees at least its own frame under the
    masks above, so no row is empty.
    """
    q, k, v = (t.transpose(1, 2) for t in (q_BLHD, k_BLHD, v_BLHD))  # (B, H, L, D)
    if mask is None or isinstance(mask, torch.Tensor):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, Lq, D)
    else:
        out = _flex_attention(q, k, v, mask)  # (B, H, Lq, D)
    return out.transpose(1, 2).flatten(2)  # (B, Lq, H D)
