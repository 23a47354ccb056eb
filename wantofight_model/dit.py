"""The WanToFight denoiser: Wan2.1's video DiT with keyboard injection and player association.

Backbone = Wan2.1 T2V (patch embedding, 3D RoPE, adaLN time modulation, self-attention, FFN) with
the text path dropped: no text embedding, no text cross-attention (and its norm) in the blocks.
Parameter names follow the *original* Wan2.1 checkpoint layout (`blocks.0.self_attn.q`,
`blocks.0.modulation`, `head.head`, ...); `weights.py` maps the diffusers layout onto them.

Added modules (counted apart by `wtf model info`): `keyboard_encoder`, `keyboard_injection` (one
per injection point, after every 3rd block) and `association`. All start as the identity.

Timesteps may differ per latent frame (diffusion forcing, stage 2): adaLN modulation is computed
per frame and broadcast over that frame's tokens, exactly like Wan2.2's per-token timesteps.

Letters: B batch, C latent channels, F latent frames, h x w token grid, N = h w tokens per frame,
L = F N tokens, D width, H heads, P players, E keyboard width.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from wantofight_model.attention import (
    attention,
    block_causal_mask,
    chunk_of_frame,
    dense_mask,
    flex_block_mask,
    keyboard_window_mask,
)
from wantofight_model.config import ATTENTION_MODES, ModelConfig
from wantofight_model.keyboard import KeyboardEncoder, KeyboardInjection
from wantofight_model.kv_cache import RollingKVCache
from wantofight_model.player_association import PlayerAssociation
from wantofight_model.rope import apply_rope, rope_angles


# ---------------------------------------------------------------------------------------------
# Timestep embedding
# ---------------------------------------------------------------------------------------------

def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """Sinusoidal embedding, [cos | sin] order as in Wan (and diffusers' flip_sin_to_cos): (M,) -> (M, dim)."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = t.float()[:, None] * freqs[None, :]  # (M, dim/2)
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def frame_timesteps(timesteps: torch.Tensor | float, batch: int, num_frames: int, frame_offset: int,
                    chunk_latent_frames: int, device: torch.device) -> torch.Tensor:
    """Expand timesteps given as a scalar, (B,), (B, F) per latent frame or (B, n_chunks) to (B, F)."""
    t = torch.as_tensor(timesteps, dtype=torch.float32, device=device)
    if t.ndim == 0:
        return t.expand(batch, num_frames)
    if t.ndim == 1:
        return t[:, None].expand(batch, num_frames)
    if t.shape[1] == num_frames:
        return t
    chunks = chunk_of_frame(torch.arange(frame_offset, frame_offset + num_frames, device=device), chunk_latent_frames)
    chunks = chunks - chunks[0]
    if t.shape[1] != int(chunks[-1]) + 1:
        raise ValueError(f"timesteps of shape {tuple(t.shape)}: expected (B,), (B, {num_frames}) per latent "
                         f"frame or (B, {int(chunks[-1]) + 1}) per chunk")
    return t[:, chunks]  # (B, F)


# ---------------------------------------------------------------------------------------------
# Backbone pieces (Wan2.1)
# ---------------------------------------------------------------------------------------------

class SelfAttention(nn.Module):
    """Wan self-attention: q/k RMS-normed across heads, 3D RoPE; optionally extended by the KV cache."""

    def __init__(self, dim: int, num_heads: int, eps: float):
        super().__init__()
        self.num_heads = num_heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.norm_q = nn.RMSNorm(dim, eps=eps)
        self.norm_k = nn.RMSNorm(dim, eps=eps)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor | None,
                context: tuple[torch.Tensor, torch.Tensor] | None = None, with_kv: bool = True
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
        """x (B, L, D) -> (B, L, D), and this input's own (k, v), each (B, L, H, D/H), for the KV cache
        (None without `with_kv`: v is a view, which FSDP2 warns about when a block returns it).

        `context` = cached (k, v) of earlier chunks, each (B, Lc, H, D/H), which the queries also see.
        """
        q = self.norm_q(self.q(x)).unflatten(-1, (self.num_heads, -1))  # (B, L, H, D/H)
        k = self.norm_k(self.k(x)).unflatten(-1, (self.num_heads, -1))  # (B, L, H, D/H)
        v = self.v(x).unflatten(-1, (self.num_heads, -1))  # (B, L, H, D/H)
        q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        k_all, v_all = k, v
        if context is not None:
            k_all, v_all = torch.cat([context[0], k], dim=1), torch.cat([context[1], v], dim=1)  # (B, Lc + L, H, D/H)
        return self.o(attention(q, k_all, v_all, mask)), ((k, v) if with_kv else None)


class WanBlock(nn.Module):
    """Wan2.1 block without the text cross-attention: adaLN-modulated self-attention and FFN."""

    def __init__(self, dim: int, ffn_dim: int, num_heads: int, eps: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps, elementwise_affine=False)
        self.self_attn = SelfAttention(dim, num_heads, eps)
        self.norm2 = nn.LayerNorm(dim, eps=eps, elementwise_affine=False)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim), nn.GELU(approximate="tanh"), nn.Linear(ffn_dim, dim))
        self.modulation = nn.Parameter(torch.randn(1, 6, dim) / dim**0.5)

    def forward(self, x: torch.Tensor, e: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor],
                mask: torch.Tensor | None, context: tuple[torch.Tensor, torch.Tensor] | None = None,
                with_kv: bool = True) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
        """x (B, L, D), e (B, F, 6, D) per-frame time modulation -> (B, L, D) and the block's (k, v)
        (None without `with_kv`).

        The block never touches the cache itself (the DiT loop does), so it stays a pure function
        that `torch.compile` can share across all blocks and chunks.
        """
        F = e.shape[1]
        mod = (self.modulation[None] + e.float()).unsqueeze(3)  # (B, F, 6, 1, D): broadcast over a frame's tokens
        shift1, scale1, gate1, shift2, scale2, gate2 = mod.unbind(2)  # each (B, F, 1, D)
        xf = x.unflatten(1, (F, -1))  # (B, F, N, D)

        h = (self.norm1(xf.float()) * (1 + scale1) + shift1).type_as(x)
        h, kv = self.self_attn(h.flatten(1, 2), rope, mask, context, with_kv)
        h = h.unflatten(1, (F, -1))
        xf = (xf.float() + h * gate1).type_as(x)

        h = (self.norm2(xf.float()) * (1 + scale2) + shift2).type_as(x)
        h = self.ffn(h)
        # the residual sum is made in the flat layout, so the block returns a new tensor, not a view
        # (FSDP2's pre-backward hook would be lost on a view modified in place)
        return (xf.flatten(1, 2).float() + (h.float() * gate2).flatten(1, 2)).type_as(x), kv  # (B, L, D)


class Head(nn.Module):
    """Output norm with time modulation, then the linear un-embedding to patch values."""

    def __init__(self, dim: int, out_features: int, eps: float):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=eps, elementwise_affine=False)
        self.head = nn.Linear(dim, out_features)
        self.modulation = nn.Parameter(torch.randn(1, 2, dim) / dim**0.5)

    def forward(self, x: torch.Tensor, e0: torch.Tensor) -> torch.Tensor:
        """x (B, L, D), e0 (B, F, D) -> (B, L, C pt ph pw)."""
        F = e0.shape[1]
        shift, scale = (self.modulation[None] + e0[:, :, None].float()).unsqueeze(3).unbind(2)  # (B, F, 1, D)
        xf = x.unflatten(1, (F, -1))  # (B, F, N, D)
        return self.head((self.norm(xf.float()) * (1 + scale) + shift).type_as(x)).flatten(1, 2)


# ---------------------------------------------------------------------------------------------
# The denoiser
# ---------------------------------------------------------------------------------------------

class WanToFightDiT(nn.Module):
    """Flow-matching denoiser: (noisy latents, timesteps, keys, reference tokens) -> velocity."""

    # Prefixes of the modules WanToFight adds on top of the Wan2.1 backbone.
    ADDED_PREFIXES = ("keyboard_encoder.", "keyboard_injection.", "association.")

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        c = config
        self.gradient_checkpointing = c.gradient_checkpointing
        # ---- Wan2.1 backbone ----
        self.patch_embedding = nn.Conv3d(c.latent_channels * (2 if c.previous_frame_input else 1), c.dim,
                                         kernel_size=c.patch_size, stride=c.patch_size)
        if c.previous_frame_input:
            with torch.no_grad():
                self.patch_embedding.weight[:, c.latent_channels:] = 0  # the previous frame starts unread
        self.time_embedding = nn.Sequential(nn.Linear(c.freq_dim, c.dim), nn.SiLU(), nn.Linear(c.dim, c.dim))
        self.time_projection = nn.Sequential(nn.SiLU(), nn.Linear(c.dim, 6 * c.dim))
        self.blocks = nn.ModuleList(WanBlock(c.dim, c.ffn_dim, c.num_heads, c.eps) for _ in range(c.num_blocks))
        self.head = Head(c.dim, c.head_outputs, c.eps)
        # ---- added: keyboard injection and player association ----
        self.keyboard_encoder = KeyboardEncoder(c.num_keys, c.keyboard_dim, c.vae_time_factor)
        self.association = PlayerAssociation(c.keyboard_dim, c.clip_dim, c.association_heads, c.eps)
        self.keyboard_injection = nn.ModuleList(
            KeyboardInjection(c.dim, c.keyboard_dim, c.num_heads, c.eps, c.keyboard_gate_bias)
            for _ in c.injection_blocks
        )
        self._injection_index = {block: i for i, block in enumerate(c.injection_blocks)}

    # ---- keyboard path ----
    def keyboard_latents(self, keys: torch.Tensor, ref_tokens: torch.Tensor | None) -> torch.Tensor:
        """keys (B, T, P, 16) -> keyboard latents bound to their players (B, P, F, E)."""
        latents = self.keyboard_encoder(keys.to(self.patch_embedding.weight.dtype))
        if ref_tokens is not None:
            latents = self.association(latents, ref_tokens)
        return latents

    def forward(self, latents: torch.Tensor, timesteps: torch.Tensor | float, keys: torch.Tensor | None = None,
                ref_tokens: torch.Tensor | None = None, attention: str = "bidirectional",
                cache: RollingKVCache | None = None, write_cache: bool = False) -> torch.Tensor:
        """Predict the flow-matching velocity (noise - clean) of `latents`.

        latents (B, C, F, H, W) noisy latents; timesteps in [0, 1000]: scalar, (B,), (B, F) or
        (B, n_chunks); keys (B, T, P, 16) with T = 1 + 4 (F - 1) from frame 0, or 4 F for a
        continuation chunk; ref_tokens (B, P, N, C) from `ReferenceEncoder`; attention
        "bidirectional" (stage 1) or "block_causal" (stage 2). With `cache` the input is the next
        chunk of a rollout and attends to the cached context; `write_cache` stages this call's
        keys/values (the cache-write step). Returns (B, C, F, H, W).
        """
        c = self.config
        if attention not in ATTENTION_MODES:
            raise ValueError(f"attention={attention!r}; valid modes: {', '.join(ATTENTION_MODES)}")
        if cache is not None and attention != "block_causal":
            raise ValueError("a KV cache implies attention='block_causal'")
        B, _, F, H, W = latents.shape
        frame_offset = cache.next_frame if cache is not None else 0

        t = frame_timesteps(timesteps, B, F, frame_offset, c.chunk_latent_frames, latents.device)  # (B, F)
        time_dtype = self.time_embedding[0].weight.dtype  # float32 after `half_precision` (as Wan keeps it)
        e0 = self.time_embedding(timestep_embedding(t.flatten(), c.freq_dim).to(time_dtype))  # (B F, D)
        e = self.time_projection(e0).unflatten(-1, (6, c.dim)).unflatten(0, (B, F))  # (B, F, 6, D)
        e0 = e0.unflatten(0, (B, F))  # (B, F, D)

        if c.previous_frame_input:
            if cache is not None and write_cache:
                cache.stage_frame(latents[:, :, -1], t[:, -1])
            latents = torch.cat([latents, self.previous_frames(latents, t, frame_offset, cache)], dim=1)  # (B, 2C, F, H, W)
        x = self.patch_embedding(latents)  # (B, D, F, h, w)
        grid_h, grid_w = x.shape[-2:]
        N = grid_h * grid_w
        x = x.flatten(2).transpose(1, 2).contiguous()  # (B, L, D)
        rope = rope_angles(F, grid_h, grid_w, c.head_dim, frame_offset, c.rope_theta, latents.device)
        mask = self._self_attention_mask(attention, F, N, frame_offset, cache, latents.device)

        keyboard, keyboard_mask = None, None
        if keys is not None:
            keyboard = self.keyboard_latents(keys, ref_tokens)  # (B, P, F, E)
            if keyboard.shape[2] != F:
                raise ValueError(f"keys cover {keyboard.shape[2]} latent frames but latents have {F}")
            keyboard_offset = frame_offset
            if cache is not None:
                if write_cache:
                    cache.stage_keyboard(keyboard)
                past, keyboard_offset = cache.keyboard_context()  # (B, P, w, E)
                keyboard = torch.cat([past.to(keyboard.dtype), keyboard], dim=2)  # (B, P, w + F, E)
            keyboard_mask = dense_mask(keyboard_window_mask(N, c.keyboard_window, frame_offset, keyboard_offset),
                                       F * N, keyboard.shape[2], latents.device)

        for i, block in enumerate(self.blocks):
            if self.gradient_checkpointing and torch.is_grad_enabled() and cache is None:
                x, _ = checkpoint(block, x, e, rope, mask, None, False, use_reentrant=False)
            elif cache is None:
                x, _ = block(x, e, rope, mask, with_kv=False)
            else:
                x, (k, v) = block(x, e, rope, mask, cache.context(i))
                if write_cache:
                    cache.stage(i, k, v)
            if keyboard is not None and i in self._injection_index:
                x = self.keyboard_injection[self._injection_index[i]](x, keyboard, keyboard_mask)

        out = self.head(x, e0)  # (B, L, C pt ph pw)
        return self._unpatchify(out, F, grid_h, grid_w)

    def previous_frames(self, latents: torch.Tensor, t: torch.Tensor, frame_offset: int,
                        cache: RollingKVCache | None) -> torch.Tensor:
        """(B, C, F, H, W) at timesteps t (B, F) -> (B, C, F, H, W): for each latent frame, the last latent frame
        of the chunk before its own, taken from this input where it holds that frame and from the cache where it
        does not (the cache's newest frame, as its writing pass saw it). Zeros in chunk 0, which has no chunk
        before it, and where that frame is noisier than `previous_frame_max_sigma`: a noisy frame says little
        of where a fighter stands, and the model is not told its level, so it is read only when clean."""
        c = self.config
        per_chunk = c.chunk_latent_frames
        limit = c.num_train_timesteps * c.previous_frame_max_sigma + 1e-3
        chunks = chunk_of_frame(torch.arange(frame_offset, frame_offset + latents.shape[2]), per_chunk).tolist()
        zeros = torch.zeros_like(latents[:, :, 0])
        frames = []
        for chunk in chunks:
            source = (chunk - 1) * per_chunk  # the last frame of chunk - 1 (frame 0 is chunk 0)
            if chunk == 0:
                frames.append(zeros)
                continue
            if source >= frame_offset:
                frame, level = latents[:, :, source - frame_offset], t[:, source - frame_offset]
            elif cache is not None and source == cache.next_frame - 1 and cache.frame is not None:
                frame, level = cache.frame.to(latents.dtype), cache.frame_timestep
            else:
                raise ValueError(f"latent frame {source}, the one before chunk {chunk}, is neither in this input "
                                 f"(from frame {frame_offset}) nor the cache's newest")
            frames.append(frame * (level <= limit).to(latents.dtype)[:, None, None, None])
        return torch.stack(frames, dim=2)

    def _self_attention_mask(self, attention: str, F: int, N: int, frame_offset: int,
                             cache: RollingKVCache | None, device: torch.device):
        c = self.config
        if attention == "bidirectional":
            return None
        first_chunk = chunk_of_frame(frame_offset, c.chunk_latent_frames)
        last_chunk = chunk_of_frame(frame_offset + F - 1, c.chunk_latent_frames)
        if cache is not None and first_chunk == last_chunk:
            return None  # one chunk over its cached context: every key is visible
        kv_offset = cache.context_frame_offset if cache is not None else frame_offset
        kv_tokens = (cache.context_tokens if cache is not None else 0) + F * N
        mod = block_causal_mask(N, c.chunk_latent_frames, c.context_chunks, frame_offset, kv_offset)
        if c.mask_backend == "flex":
            return flex_block_mask(mod, F * N, kv_tokens, device)
        return dense_mask(mod, F * N, kv_tokens, device)

    def reachable(self, latents: torch.Tensor) -> torch.Tensor:
        """latents (B, C, F, H, W) -> their part that the head can move, the rest at 0 (the normalised latents'
        mean). A head with fewer inputs (`dim`) than outputs (C pt ph pw values a token) has a rank-`dim`
        weight: every velocity it gives lies in that many directions of each token's values, so a sampler
        starting from noise never removes the noise in the others and leaves it in its output (std 0.71 on
        `dim` 128 with 4x4 patches of 16 channels: speckle that no number of steps removes; docs/model.md,
        "The head's rank"). The rollout sets those directions to 0. Unchanged when dim >= the outputs."""
        if self.config.head_outputs <= self.config.dim:
            return latents
        basis, _ = torch.linalg.qr(self.head.head.weight.detach().double())  # weight (C pt ph pw, dim)  # (outputs, dim): the directions the head reaches
        basis = basis.to(latents.dtype)
        pt, ph, pw = self.config.patch_size
        B, C, F, H, W = latents.shape
        tokens = latents.reshape(B, C, F // pt, pt, H // ph, ph, W // pw, pw).permute(0, 2, 4, 6, 3, 5, 7, 1)
        shape = tokens.shape
        tokens = tokens.reshape(-1, pt * ph * pw * C)  # one row per token, in the head's (pt, ph, pw, C) order
        tokens = (tokens @ basis) @ basis.T
        tokens = tokens.reshape(shape).permute(0, 7, 1, 4, 2, 5, 3, 6)  # (B, C, F, pt, h, ph, w, pw)
        return tokens.reshape(B, C, F, H, W)

    def _unpatchify(self, x: torch.Tensor, F: int, grid_h: int, grid_w: int) -> torch.Tensor:
        pt, ph, pw = self.config.patch_size
        x = x.reshape(x.shape[0], F, grid_h, grid_w, pt, ph, pw, -1)  # (B, F, h, w, pt, ph, pw, C)
        x = x.permute(0, 7, 1, 4, 2, 5, 3, 6)  # (B, C, F, pt, h, ph, w, pw)
        return x.reshape(x.shape[0], x.shape[1], F * pt, grid_h * ph, grid_w * pw)  # (B, C, F, H, W)

    # ---- precision and bookkeeping ----
    FP32_MODULES = ("time_embedding", "time_projection")

    def half_precision(self, dtype: torch.dtype = torch.bfloat16) -> "WanToFightDiT":
        """Cast to `dtype` but keep the timestep path and the modulation tables in float32, like Wan
        (diffusers' `_keep_in_fp32_modules`): a bf16 sinusoid cannot resolve t in [0, 1000]."""
        self.to(dtype)
        for name in self.FP32_MODULES:
            getattr(self, name).float()
        for name, param in self.named_parameters():
            if name.endswith("modulation"):
                param.data = param.data.float()
        return self

    def fit_patch_embedding(self, weight: torch.Tensor) -> torch.Tensor:
        """A patch-embedding weight saved without the previous-frame channels -> one with them at zero (the
        model then computes what the saved one did); any other weight is returned as it is."""
        mine = self.patch_embedding.weight
        if self.config.previous_frame_input and weight.shape[1] * 2 == mine.shape[1] and weight.shape[2:] == mine.shape[2:]:
            return torch.cat([weight, torch.zeros_like(weight)], dim=1)
        return weight

    def backbone_state_dict(self) -> dict[str, torch.Tensor]:
        """The Wan2.1 backbone tensors only (what a Wan checkpoint provides)."""
        return {k: v for k, v in self.state_dict().items() if not k.startswith(self.ADDED_PREFIXES)}
