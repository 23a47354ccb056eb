"""3D rotary position embedding of Wan2.1: the head dim is split into (time, height, width) parts.

Wan splits head_dim d as t = d - 4 (d // 6), h = w = 2 (d // 6) (128 -> 44 / 42 / 42) and rotates
interleaved pairs (x[2i], x[2i+1]). Angles are computed on the fly from absolute latent-frame
indices, so a streaming rollout can run past Wan's 1024-entry table; because RoPE is relative,
keys cached at their absolute positions stay valid for every later query.

Letters: B batch, L tokens, H heads, D head dim, F latent frames, h/w token grid.
"""

from __future__ import annotations

import torch


def rope_split(head_dim: int) -> tuple[int, int, int]:
    """(time, height, width) widths of the head dim, as in Wan2.1."""
    hw = 2 * (head_dim // 6)
    return head_dim - 2 * hw, hw, hw


def _axis_angles(positions: torch.Tensor, dim: int, theta: float) -> torch.Tensor:
    """positions (L,) -> angles (L, dim / 2), float64 like Wan's table."""
    inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64, device=positions.device) / dim)
    return positions.to(torch.float64)[:, None] * inv_freq[None, :]


def rope_angles(num_frames: int, grid_h: int, grid_w: int, head_dim: int, frame_offset: int = 0,
                theta: float = 10000.0, device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of shape (F h w, D / 2) for tokens ordered (frame, row, column)."""
    d_t, d_h, d_w = rope_split(head_dim)
    frames = torch.arange(frame_offset, frame_offset + num_frames, device=device)
    rows = torch.arange(grid_h, device=device)
    cols = torch.arange(grid_w, device=device)
    a_t = _axis_angles(frames, d_t, theta)[:, None, None, :].expand(num_frames, grid_h, grid_w, -1)
    a_h = _axis_angles(rows, d_h, theta)[None, :, None, :].expand(num_frames, grid_h, grid_w, -1)
    a_w = _axis_angles(cols, d_w, theta)[None, None, :, :].expand(num_frames, grid_h, grid_w, -1)
    angles = torch.cat([a_t, a_h, a_w], dim=-1).reshape(num_frames * grid_h * grid_w, head_dim // 2)  # (L, D/2)
    return angles.cos().float(), angles.sin().float()


def apply_rope(x_BLHD: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs of x (B, L, H, D) by angles (L, D/2); computed in float32."""
    x = x_BLHD.float().unflatten(-1, (-1, 2))  # (B, L, H, D/2, 2)
    x1, x2 = x[..., 0], x[..., 1]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    out = torch.stack([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).flatten(-2)  # (B, L, H, D)
    return out.type_as(x_BLHD)
