"""The encoders behind `wtf encode`, and the one module of datasets/ that imports the model: the VAE
(`tiny` or a local Wan2.1 / `wtf train vae` folder), the frozen CLIP image tower, the SHA-256 of their
weights that the latent cache's manifest records, and one batch of windows encoded into cache rows.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np


def weights_sha256(module) -> str:
    """SHA-256 over the state dict (names, dtypes, shapes, bytes) in name order."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        digest.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def load_vae(spec: str, device: str = "cpu"):
    """`tiny` (the tiny preset's VAE, random weights from seed 0: tests and CI) or a local VAE folder
    (a game VAE of `wtf train vae`, or the Wan2.1 VAE). Returns (the VAE, description for the manifest)."""
    import torch

    from wantofight_model.presets import get_preset
    from wantofight_model.vae import build_vae, load_vae_folder

    if spec == "tiny":
        torch.manual_seed(0)
        vae = build_vae(get_preset("tiny").vae, device=device)
    else:
        vae = load_vae_folder(spec, device=device)
    vae.eval()
    config = {k: v for k, v in dict(vae.autoencoder.config).items() if not k.startswith("_")}
    info = {"spec": spec if spec == "tiny" else str(Path(spec).resolve()), "class": type(vae.autoencoder).__name__,
            "config": json.loads(json.dumps(config, default=list)), "sha256": weights_sha256(vae.autoencoder),
            "normalised": "(z - latents_mean) / latents_std, posterior mode"}
    return vae, info


def load_clip(spec: str, model: str = "ViT-H-14", device: str = "cpu"):
    """`tiny` (the tiny preset's CLIP tower, random weights from seed 0) or a local open_clip
    checkpoint of architecture `model`. Returns (ReferenceEncoder, description)."""
    import torch

    from wantofight_model.player_association import ReferenceEncoder
    from wantofight_model.presets import get_preset

    if spec == "tiny":
        config = get_preset("tiny")
    else:
        if not Path(spec).is_file():
            raise FileNotFoundError(f"no open_clip checkpoint at {spec}")
        config = get_preset("wan-1.3b", clip_model=model, clip_pretrained=str(Path(spec).resolve()))
    torch.manual_seed(0)
    encoder = ReferenceEncoder.from_config(config, device=device).eval()
    info = {"spec": spec if spec == "tiny" else str(Path(spec).resolve()), "model": config.clip_model,
            "image_size": config.clip_image_size, "sha256": weights_sha256(encoder.visual)}
    return encoder, info


def encode_batch(batch, split, vae, clip, device) -> list[dict]:
    """Rows of the latent cache (datasets/latent_cache.py `latent_schema`) for a batch of ClipDataset items."""
    import torch

    from wantofight.key_layout import array_to_masks

    frames = torch.stack([item["frames"] for item in batch]).to(device)  # (B, T, 3, H, W)
    latents = vae.encode(frames.permute(0, 2, 1, 3, 4)).float().cpu()  # (B, 16, F, h, w)
    refs = torch.stack([item["ref_images"] for item in batch])  # (B, 2, 3, r, r)
    tokens = clip(refs.to(device)).float().cpu() if clip is not None else None  # (B, 2, N, C)
    rows = []
    for b, item in enumerate(batch):
        masks = array_to_masks(item["keys"].numpy())  # (T, 2, 16) back to uint16 masks (T, 2)
        ref_u8 = ((item["ref_images"].numpy() + 1.0) * 127.5).round().astype(np.uint8)
        rows.append({
            "clip_id": item["clip_id"], "tier": item["tier"], "split": split, "start": item["start"],
            "frames": int(frames.shape[1]),
            "latents": latents[b].numpy().tobytes(), "latent_shape": list(latents.shape[1:]),
            "ref_tokens": tokens[b].numpy().tobytes() if tokens is not None else None,
            "ref_tokens_shape": list(tokens.shape[1:]) if tokens is not None else None,
            "ref_images": ref_u8.tobytes(), "ref_images_shape": list(ref_u8.shape),
            "p1_keys": masks[:, 0].tolist(), "p2_keys": masks[:, 1].tolist(),
            "p1_effective": item["effective"][:, 0].tolist(), "p2_effective": item["effective"][:, 1].tolist(),
            "p1_action": [a[0] for a in item["actions"]], "p2_action": [a[1] for a in item["actions"]],
            "padding": item["padding"].tolist(), "meta": json.dumps(item["meta"], sort_keys=True),
        })  # fmt: skip
    return rows
