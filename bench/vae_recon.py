"""Wan2.1 VAE reconstruction PSNR on game frames at the model's resolution (512x384 by default).

A VAE trained on natural video may reconstruct small sprites poorly; this measures it on our frames.

    python bench/vae_recon.py --vae /path/to/Wan2.1-T2V-1.3B-Diffusers --frames run/episode_000.mp4
    python bench/vae_recon.py --tiny --frames clip.npz          # smoke test with a random tiny VAE

Frames come from an MP4 (decoded with PyAV) or a .npz / .npy array of (T, H, W, 3) uint8 (key
`frames` in an npz). They are resized to --width x --height (nearest neighbour by default, which
keeps pixel-art edges sharp; use --resize bilinear to compare) and cut into clips of 1 + 4k frames.
PSNR is over 8-bit RGB, per frame, and reported overall and by position in the VAE's 4-frame group
(the first frame of a clip is encoded alone).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from wantofight.fidelity import eight_bit


def read_frames(path: Path, limit: int) -> np.ndarray:
    """(T, H, W, 3) uint8."""
    if path.suffix in (".npz", ".npy"):
        data = np.load(path)
        frames = data["frames"] if path.suffix == ".npz" else data
    else:
        import av

        with av.open(str(path)) as container:
            frames = np.stack([f.to_ndarray(format="rgb24") for _, f in zip(range(limit), container.decode(video=0))])
    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"expected (T, H, W, 3) frames, got {frames.shape}")
    return frames[:limit]


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    """PSNR in dB between uint8-range tensors."""
    from wantofight.fidelity import psnr_db

    return psnr_db((a.float() - b.float()).square().mean().item(), peak=255.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--vae", help="local Wan2.1 diffusers folder (with vae/) or the vae folder itself")
    source.add_argument("--tiny", action="store_true", help="random tiny VAE (smoke test; PSNR is meaningless)")
    parser.add_argument("--frames", required=True, help="MP4, .npz (key 'frames') or .npy of (T, H, W, 3) uint8")
    parser.add_argument("--clip-frames", type=int, default=17, help="frames per encoded clip (1 + 4k)")
    parser.add_argument("--max-frames", type=int, default=17 * 8)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--height", type=int, default=384)
    parser.add_argument("--resize", default="nearest", choices=["nearest", "bilinear"])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    args = parser.parse_args()
    if (args.clip_frames - 1) % 4:
        parser.error("--clip-frames must be 1 + 4k")

    from wantofight_model.config import VAEConfig
    from wantofight_model.presets import get_preset
    from wantofight_model.vae import WanVAE

    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    if args.tiny:
        torch.manual_seed(0)
        vae = WanVAE.from_config(get_preset("tiny").vae, device=args.device, dtype=dtype)
    else:
        vae = WanVAE.from_config(VAEConfig(pretrained=args.vae), device=args.device, dtype=dtype)
    vae.eval()

    frames = read_frames(Path(args.frames), args.max_frames)
    video = torch.from_numpy(frames).permute(3, 0, 1, 2).float()  # (3, T, H, W) in 0..255
    source_hw = tuple(video.shape[-2:])
    kwargs = {"antialias": True, "align_corners": False} if args.resize == "bilinear" else {}
    video = F.interpolate(video, size=(args.height, args.width), mode=args.resize, **kwargs).clamp(0, 255).round()
    clips = video.shape[1] // args.clip_frames
    if clips == 0:
        print(f"error: need at least {args.clip_frames} frames, got {video.shape[1]}", file=sys.stderr)
        return 2

    per_frame, by_position = [], {}
    for c in range(clips):
        clip = video[:, c * args.clip_frames:(c + 1) * args.clip_frames]  # (3, T, H, W)
        x = (clip[None] / 127.5 - 1).to(args.device)  # (1, 3, T, H, W) in [-1, 1]
        recon = vae.decode(vae.encode(x)).float().cpu()[0]
        recon = eight_bit(recon)
        for t in range(clip.shape[1]):
            value = psnr(recon[:, t], clip[:, t])
            per_frame.append(value)
            position = "first" if t == 0 else f"{(t - 1) % 4 + 1}/4"
            by_position.setdefault(position, []).append(value)

    label = "random tiny VAE (smoke test only)" if args.tiny else f"Wan2.1 VAE from {args.vae}"
    print(f"{label}; {clips} clips x {args.clip_frames} frames from {args.frames} "
          f"({source_hw[1]}x{source_hw[0]} -> {args.width}x{args.height}, {args.resize}); {args.dtype}")
    print(f"PSNR mean {np.mean(per_frame):.2f} dB, median {np.median(per_frame):.2f}, min {np.min(per_frame):.2f}")
    print("by position in the 4-frame latent group: " +
          ", ".join(f"{k} {np.mean(v):.2f}" for k, v in sorted(by_position.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
