"""What the Wan VAE's faster CPU kernels buy (wantofight_model/cpu_kernels.py): ms per chunk of a
streamed decode and encode with them and with PyTorch's own kernels, side by side in one run.

"The shipped model" here is the Wan-layout `duel-tiny` shipped on 2026-12-06 and replaced on 2026-12-07, kept as it
was in bench/assets/duel-tiny-2026-12-06 so that these measurements start from the same weights.

The same VAE and latents in both modes, interleaved repeat by repeat; "pytorch" is a copy of the VAE with
its layers turned back into diffusers' classes (`use_pytorch_kernels`). Rows: the shipped duel-tiny's VAE (128x128) and the tiny
preset's random VAE (64x64, the one the tests and the README use); a chunk is 8 frames (2 latent
frames). For scale, the last column is what the duel-tiny DiT itself takes per chunk (4 steps and
the clean cache write, DiT only): the decoder is most of a generated chunk's cost on the CPU. Not a test.

Usage: python bench/cpu_kernels.py [--chunks 6] [--repeats 5] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

import torch

from model import rollout  # bench/model.py: `python bench/cpu_kernels.py` puts bench/ first on the path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "bench" / "assets" / "duel-tiny-2026-12-06"  # the Wan-layout duel-tiny these measurements start from


def streamed(vae, latents: torch.Tensor, frames: torch.Tensor, chunks: int) -> tuple[float, float, torch.Tensor]:
    """Median ms per chunk of decoding `chunks` chunks of 2 latent frames, and of encoding 8 frames a
    chunk, each stream after its first piece; the decoded frames."""
    decoder, encoder = vae.streaming_decoder(), vae.streaming_encoder()
    decoder.decode(latents[:, :, :1])
    encoder.encode(frames[:, :, :1])
    dec, enc, out = [], [], []
    for c in range(chunks):
        t = time.perf_counter()
        out.append(decoder.decode(latents[:, :, 1 + 2 * c:3 + 2 * c]))
        dec.append(time.perf_counter() - t)
        t = time.perf_counter()
        encoder.encode(frames[:, :, 1 + 8 * c:9 + 8 * c])
        enc.append(time.perf_counter() - t)
    return 1000 * statistics.median(dec), 1000 * statistics.median(enc), torch.cat(out, dim=2)


def dit_ms(config, chunks: int) -> float:
    from wantofight_model.generate import StreamingGenerator
    from wantofight_model.model import WanToFight

    torch.manual_seed(0)
    model = WanToFight.from_config(config).eval()
    times, _ = rollout(StreamingGenerator(model), model.config, chunks, 4, use_cache=True)
    return 1000 * statistics.median(times[1:] or times)  # after the first chunk, when there is one


def main() -> None:
    from wantofight_model.config import ModelConfig
    from wantofight_model.cpu_kernels import use_pytorch_kernels
    from wantofight_model.presets import get_preset
    from wantofight_model.vae import WanVAE, load_vae_folder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    shipped = ModelConfig.from_dict(json.loads((SHIPPED / "config.json").read_text())["model"])
    torch.manual_seed(0)
    rows = [("duel-tiny VAE", "128x128", load_vae_folder(SHIPPED / "vae").eval(), shipped),
            ("tiny preset VAE", "64x64", WanVAE.from_config(get_preset("tiny").vae).eval(), get_preset("tiny"))]
    print(f"ms per chunk of 8 frames (median over the {args.chunks} chunks after the first frame, best of {args.repeats} "
          "repeats), CPU")
    print(f"{'VAE':16} {'size':8} {'threads':>7} {'decode pytorch':>15} {'decode fast':>12} {'ratio':>6} "
          f"{'encode pytorch':>15} {'encode fast':>12} {'ratio':>6} {'max |diff|':>10} {'DiT chunk':>10}")
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for name, size, fast, config in rows:
            plain = use_pytorch_kernels(copy.deepcopy(fast))
            h, w = (int(v) for v in size.split("x"))
            gen = torch.Generator().manual_seed(0)
            latents = torch.randn(1, 16, 1 + 2 * args.chunks, h // 8, w // 8, generator=gen)
            frames = torch.rand(1, 3, 1 + 8 * args.chunks, h, w, generator=gen) * 2 - 1
            best = {"pytorch": [float("inf")] * 2, "fast": [float("inf")] * 2}
            for _ in range(args.repeats):
                for mode, vae in (("pytorch", plain), ("fast", fast)):
                    d, e, out = streamed(vae, latents, frames, args.chunks)
                    best[mode] = [min(best[mode][0], d), min(best[mode][1], e)]
                    if mode == "pytorch":
                        reference = out
            diff = (out - reference).abs().max().item()
            (dp, ep), (df, ef) = best["pytorch"], best["fast"]
            print(f"{name:16} {size:8} {threads:>7} {dp:>12.1f} ms {df:>9.1f} ms {dp / df:>5.2f}x {ep:>12.1f} ms "
                  f"{ef:>9.1f} ms {ep / ef:>5.2f}x {diff:>10.1e} {dit_ms(config, args.chunks):>7.1f} ms")


if __name__ == "__main__":
    main()
