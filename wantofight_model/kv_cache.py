"""Rolling KV cache for chunk-wise autoregressive generation (docs/model.md).

Holds, per DiT block, the self-attention keys/values of the last `context_chunks` chunks (2 chunks =
16 frames = 4 latent frames), plus the last `keyboard_window - 1` keyboard latents per player that
the keyboard window of the next chunk reaches back to. Every buffer is allocated once from the
config, so memory is constant however long the rollout.

Protocol, per generated chunk:
    1. denoising steps read `context(block)`; the chunk's writing pass (`config.cache_write`, decided in
       `rollout.py`: an extra pass over the finished chunk, or one denoising step) also calls
       `stage(block, k, v)` with the chunk's keys/values;
    2. `stage_keyboard(latents)` once with the chunk's (bound) keyboard latents, and with
       `previous_frame_input` `stage_frame(frame, timestep)` with the last latent frame of the writing pass's input;
    3. `commit(num_frames)` after the chunk is done: staged entries join the context, the oldest
       chunk falls out, `next_frame` advances.
Keys are stored after RoPE at their absolute latent-frame positions (RoPE is relative, so they stay
valid for later queries).

Letters: K blocks, B batch, L tokens, H heads, D head dim, P players, W window - 1, E keyboard width.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from wantofight_model.config import ModelConfig


@dataclass
class RollingKVCache:
    """Typed, fixed-size cache; build it with `RollingKVCache.from_config`."""

    k: torch.Tensor
    """(K, B, context_chunks * tokens_per_chunk, H, D); valid entries are right-aligned."""
    v: torch.Tensor
    """Same shape as k."""
    staged_k: torch.Tensor
    """(K, B, tokens_per_chunk, H, D): the chunk being generated, written at the cache-write step."""
    staged_v: torch.Tensor
    """Same shape as staged_k."""
    keyboard: torch.Tensor
    """(B, P, W, E): the keyboard latents of the W latent frames before `next_frame`; right-aligned."""
    tokens_per_frame: int
    """N, tokens per latent frame."""
    context_chunks: int
    """How many chunks the cache keeps (block-causal context)."""
    chunk_tokens: list[int] = field(default_factory=list)
    """Token count of each cached chunk, oldest first (chunk 0 is one latent frame, others two)."""
    keyboard_frames: int = 0
    """How many of the W keyboard slots are valid."""
    next_frame: int = 0
    """Absolute latent-frame index of the next chunk's first frame."""
    staged_tokens: int = 0
    """Tokens staged for the chunk being generated (0 until its cache-write step)."""
    staged_keyboard: torch.Tensor | None = None
    """(B, P, f, E) keyboard latents of the chunk being generated."""
    frame: torch.Tensor | None = None
    """(B, C, H, W): the newest cached chunk's last latent frame as its writing pass saw it, the previous
    frame the next chunk reads with `previous_frame_input` (`stage_frame` before `commit`; else None)."""
    frame_timestep: torch.Tensor | None = None
    """(B,): the timestep that frame was written at."""
    staged_frame: tuple[torch.Tensor, torch.Tensor] | None = None
    """(frame, timestep) of the chunk being generated, from its writing pass (`stage_frame`); `commit` moves it to `frame`."""

    @classmethod
    def from_config(cls, config: ModelConfig, batch_size: int, device: torch.device | str = "cpu",
                    dtype: torch.dtype = torch.float32) -> "RollingKVCache":
        kv_shape = (config.num_blocks, batch_size, config.cache_tokens, config.num_heads, config.head_dim)
        staged_shape = (config.num_blocks, batch_size, config.tokens_per_chunk, config.num_heads, config.head_dim)
        kb_shape = (batch_size, config.num_players, config.keyboard_window - 1, config.keyboard_dim)

        def new(shape):
            return torch.zeros(shape, device=device, dtype=dtype)

        return cls(k=new(kv_shape), v=new(kv_shape), staged_k=new(staged_shape), staged_v=new(staged_shape),
                   keyboard=new(kb_shape), tokens_per_frame=config.tokens_per_frame,
                   context_chunks=config.context_chunks)

    # ---- reading ----
    @property
    def context_tokens(self) -> int:
        return sum(self.chunk_tokens)

    @property
    def context_frame_offset(self) -> int:
        """Absolute latent frame of the first cached token."""
        return self.next_frame - self.context_tokens // self.tokens_per_frame

    def context(self, block: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Cached (k, v) of one block, each (B, Lc, H, D), oldest token first."""
        start = self.k.shape[2] - self.context_tokens
        return self.k[block, :, start:], self.v[block, :, start:]

    def keyboard_context(self) -> tuple[torch.Tensor, int]:
        """Cached keyboard latents (B, P, w, E) and the absolute latent frame of the first one."""
        start = self.keyboard.shape[2] - self.keyboard_frames
        return self.keyboard[:, :, start:], self.next_frame - self.keyboard_frames

    # ---- writing ----
    def stage(self, block: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Remember one block's (B, L, H, D) keys/values of the chunk being generated."""
        length = k.shape[1]
        if length > self.staged_k.shape[2]:
            raise ValueError(f"chunk of {length} tokens exceeds the cache's chunk size {self.staged_k.shape[2]}")
        self.staged_k[block, :, :length] = k.detach()
        self.staged_v[block, :, :length] = v.detach()
        self.staged_tokens = length

    def stage_keyboard(self, latents: torch.Tensor) -> None:
        """Remember the chunk's keyboard latents (B, P, f, E)."""
        self.staged_keyboard = latents.detach()

    def stage_frame(self, frame: torch.Tensor, timestep: torch.Tensor) -> None:
        """Remember the chunk's last latent frame (B, C, H, W) as the writing pass sees it, at timestep (B,)."""
        self.staged_frame = frame.detach(), timestep.detach()

    def commit(self, num_frames: int) -> None:
        """Close the current chunk: its staged entries enter the context, the oldest chunk leaves."""
        tokens = num_frames * self.tokens_per_frame
        if self.context_chunks > 0:
            if self.staged_tokens != tokens:
                raise RuntimeError(f"commit of {tokens} tokens but {self.staged_tokens} were staged: "
                                   "was the cache-write step skipped?")
            kept = self.chunk_tokens[-(self.context_chunks - 1):] if self.context_chunks > 1 else []
            kept_tokens = sum(kept)
            capacity = self.k.shape[2]
            for buf, staged in ((self.k, self.staged_k), (self.v, self.staged_v)):
                old = buf[:, :, capacity - self.context_tokens:][:, :, self.context_tokens - kept_tokens:].clone()
                buf[:, :, capacity - kept_tokens - tokens:capacity - tokens] = old
                buf[:, :, capacity - tokens:] = staged[:, :, :tokens]
            self.chunk_tokens = kept + [tokens]
        window = self.keyboard.shape[2]
        if window > 0 and self.staged_keyboard is not None:
            history = torch.cat([self.keyboard_context()[0], self.staged_keyboard], dim=2)[:, :, -window:]
            self.keyboard[:, :, window - history.shape[2]:] = history
            self.keyboard_frames = history.shape[2]
        self.frame, self.frame_timestep = self.staged_frame or (None, None)
        self.staged_tokens = 0
        self.staged_keyboard = None
        self.staged_frame = None
        self.next_frame += num_frames

    @property
    def nbytes(self) -> int:
        """Bytes held by the cache's buffers (constant after construction)."""
        return sum(t.numel() * t.element_size() for t in (self.k, self.v, self.staged_k, self.staged_v, self.keyboard))
