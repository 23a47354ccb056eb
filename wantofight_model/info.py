"""`wtf model info`: parameter counts per component and per-chunk activation sizes of a preset.

Everything is built on the meta device, so even `wan-1.3b` is sized instantly without memory.
"""

from __future__ import annotations

import torch

from wantofight_model.config import ModelConfig
from wantofight_model.presets import get_preset

BF16_BYTES = 2


def _count(module: torch.nn.Module, prefixes: tuple[str, ...] | None = None, exclude: bool = False) -> int:
    total = 0
    for name, param in module.named_parameters():
        hit = prefixes is None or name.startswith(prefixes)
        if hit != exclude:
            total += param.numel()
    return total


def model_info(preset: str) -> dict:
    """Parameter counts and activation sizes of `preset` (raises ValueError on an unknown preset)."""
    config = get_preset(preset)
    from wantofight_model.model import WanToFight
    from wantofight_model.vae import build_vae

    model = WanToFight.from_config(config, device="meta")
    vae = build_vae(config.vae, device="meta")
    dit = model.dit
    params = {
        "backbone": _count(dit, dit.ADDED_PREFIXES, exclude=True),
        "keyboard": _count(dit, ("keyboard_encoder.", "keyboard_injection.")),
        "association": _count(dit, ("association.",)),
        "reference_encoder_frozen": _count(model.reference_encoder),
        "vae_encoder": _count(vae.autoencoder, ("encoder.", "quant_conv.")),
        "vae_decoder": _count(vae.autoencoder, ("decoder.", "post_quant_conv.")),
    }
    params["trainable"] = params["backbone"] + params["keyboard"] + params["association"]
    params["total"] = sum(v for k, v in params.items() if k != "trainable")
    return {"preset": preset, "config": config.to_dict(), "parameters": params,
            "activations_per_chunk": activation_sizes(config)}


def activation_sizes(config: ModelConfig) -> dict:
    """Sizes of one generated chunk at inference (bf16)."""
    tokens = config.tokens_per_chunk
    context = config.cache_tokens
    kv_cache = 2 * config.num_blocks * context * config.dim * BF16_BYTES
    return {
        "pixel_frames": config.chunk_frames,
        "latent_shape": [config.latent_channels, config.chunk_latent_frames, config.latent_height, config.latent_width],
        "tokens": tokens,
        "context_tokens": context,
        "hidden_state_bytes_bf16": tokens * config.dim * BF16_BYTES,
        "ffn_activation_bytes_bf16": tokens * config.ffn_dim * BF16_BYTES,
        "attention_scores_per_head_bytes_bf16": tokens * (tokens + context) * BF16_BYTES,
        "kv_cache_bytes_bf16": kv_cache,
        "injection_points": list(config.injection_blocks),
    }


def _human(n: float, unit: str = "") -> str:
    for suffix in ("", "K", "M", "G", "T"):
        if abs(n) < 1000 or suffix == "T":
            return f"{n:.3g}{suffix}{unit}" if suffix else f"{int(n)}{unit}"
        n /= 1000
    return str(n)


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def format_info(info: dict) -> str:
    p, a = info["parameters"], info["activations_per_chunk"]
    c = info["config"]
    lines = [
        f"preset {info['preset']}: {c['num_blocks']} blocks, width {c['dim']}, {c['num_heads']} heads, "
        f"FFN {c['ffn_dim']}, {c['width']}x{c['height']}, chunk {c['chunk_frames']} frames",
        "parameters:",
        f"  backbone (Wan2.1 DiT, text path dropped)  {p['backbone']:>14,}  ({_human(p['backbone'])})",
        f"  keyboard (encoder + {len(a['injection_points'])} injections)        {p['keyboard']:>14,}  ({_human(p['keyboard'])})",
        f"  association (binding cross-attention)    {p['association']:>14,}  ({_human(p['association'])})",
        f"  trainable total                          {p['trainable']:>14,}  ({_human(p['trainable'])})",
        f"  reference encoder (frozen open_clip)     {p['reference_encoder_frozen']:>14,}  "
        f"({_human(p['reference_encoder_frozen'])})",
        f"  VAE encoder                              {p['vae_encoder']:>14,}  ({_human(p['vae_encoder'])})",
        f"  VAE decoder                              {p['vae_decoder']:>14,}  ({_human(p['vae_decoder'])})",
        f"  all                                      {p['total']:>14,}  ({_human(p['total'])})",
        "per chunk (inference, bf16):",
        f"  latent {tuple(a['latent_shape'])}, {a['tokens']} tokens, context {a['context_tokens']} tokens",
        f"  hidden state {_mib(a['hidden_state_bytes_bf16'])}, FFN activation {_mib(a['ffn_activation_bytes_bf16'])}, "
        f"attention scores / head {_mib(a['attention_scores_per_head_bytes_bf16'])}",
        f"  rolling KV cache {_mib(a['kv_cache_bytes_bf16'])} (constant), keyboard injection after blocks "
        f"{a['injection_points']}",
    ]
    return "\n".join(lines)
