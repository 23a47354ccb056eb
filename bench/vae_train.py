"""`wtf train vae` on CPU: held-out PSNR against training time, and the trained VAE's encode / decode
speed next to the tiny preset's random VAE, measured side by side in one run.

    python bench/vae_train.py --data DS_DIR                          # trains into a temporary folder
    python bench/vae_train.py --data DS_DIR --steps 3000 --threads 1 --out runs/vae
    python bench/vae_train.py --vae runs/vae --data DS_DIR           # no training: table + speed of a VAE

DS_DIR is a `wtf build-curriculum` folder with a val split (held-out episodes); the PSNR rows are the
trainer's validation (16 fixed val windows of 9 whole frames, 8-bit RGB) and the train seconds are the
steps' own time (data + compute) summed up to that row, from the run's metrics.jsonl. Step 0 is the
untrained VAE of the same architecture. Speed: encode of a 33-frame window and the streaming decode
of one 8-frame chunk (`pruned_decoder.decode_seconds_per_chunk`), medians, both VAEs alternating.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch


def psnr_table(vae_dir: Path, untrained: float) -> list[str]:
    records = [json.loads(line) for line in (vae_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rows = [f"{'step':>6} {'train s':>9} {'val PSNR dB':>12}", f"{0:>6} {0:>9.0f} {untrained:>12.2f}"]
    seconds = 0.0
    for r in records:
        seconds += r.get("data_s", 0) + r.get("encode_s", 0) + r.get("compute_s", 0)
        psnr = r.get("val_psnr", r.get("train_psnr"))
        if psnr is not None:
            rows.append(f"{r['step']:>6} {seconds:>9.0f} {psnr:>12.2f}")
    return rows


@torch.no_grad()
def speed(vaes: dict, size: tuple[int, int], repeats: int) -> dict[str, dict[str, float]]:
    """Median encode seconds of a (1, 3, 33, H, W) window and streaming-decode seconds per 8-frame chunk."""
    from wantofight.train.vae.pruned_decoder import decode_seconds_per_chunk

    frames = torch.rand(1, 3, 33, *size, generator=torch.Generator().manual_seed(0)) * 2 - 1
    times = {name: {"encode": [], "decode": []} for name in vaes}
    for _ in range(repeats):
        for name, vae in vaes.items():  # alternating, so a load change hits both alike
            t0 = time.perf_counter()
            z = vae.encode(frames)
            times[name]["encode"].append(time.perf_counter() - t0)
            times[name]["decode"].append(decode_seconds_per_chunk(vae, z, repeats=1))
    return {name: {k: statistics.median(v) for k, v in t.items()} for name, t in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="curriculum DS_DIR with a val split")
    parser.add_argument("--vae", type=Path, help="an existing `wtf train vae` folder: skip training")
    parser.add_argument("--out", type=Path, help="where to write the trained VAE (default: a temporary folder)")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--size", default="128x128")
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--precision", default="bf16", choices=["bf16", "fp32"],
                        help="bf16 autocast (1.5x faster on a CPU with AVX512-BF16) or fp32")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--set", dest="sets", action="append", default=[], help="extra `wtf train vae --set`")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from diffusers.utils import logging as diffusers_logging

    diffusers_logging.set_verbosity_error()  # "install accelerate" notes on every load

    from wantofight.datasets.clip_dataset import ClipDataset
    from wantofight.train.vae.config import GAME_VAE, parse_size
    from wantofight.train.vae.measure import measure
    from wantofight.train.vae.trainer import train_vae
    from wantofight.inference.generation import build_vae
    from wantofight_model.config import VAEConfig
    from wantofight_model.presets import get_preset
    from wantofight_model.vae import WanVAE

    size = parse_size(args.size)
    print(f"data {args.data}  size {size[0]}x{size[1]}  threads {args.threads}  precision {args.precision}  "
          f"load average at start {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    tmp = None
    vae_dir = args.vae
    if vae_dir is None:
        tmp = tempfile.TemporaryDirectory()
        vae_dir = args.out or Path(tmp.name) / "vae"
        sets = [f"precision={args.precision}", f"validation.every={args.eval_every}", *args.sets]
        t0 = time.perf_counter()
        train_vae(args.data, vae_dir, size, args.steps, sets, progress=sys.stderr.isatty())
        print(f"trained {args.steps} steps in {time.perf_counter() - t0:.0f} s wall (validation and export included); "
              f"load average now {os.getloadavg()[0]:.2f}")
    report = json.loads((vae_dir / "report.json").read_text())
    arch = report["architecture"]

    torch.manual_seed(0)  # step 0: the same architecture, untrained
    untrained = WanVAE.from_config(VAEConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in arch.items()
                                                if k in GAME_VAE})).eval()
    val = ClipDataset(args.data, "val", frames=report["train"]["data"]["frames"], size=size, pixels="uint8")
    print()
    print("\n".join(psnr_table(vae_dir, measure(untrained, val, report["vae"]["eval_windows"], size)["psnr"])))
    print(f"final (exported weights, fixed 9-frame windows): PSNR train {report['psnr']['train']:.2f} dB, "
          f"val {report['psnr'].get('val', float('nan')):.2f} dB over {report['windows']}; "
          f"{report['steps']} steps, {report['train_seconds']:.0f} s of training steps")
    print(f"normalised latent rms (should be ~1): {report['normalised_latent_rms']}")
    game = WanVAE.from_pretrained(vae_dir).eval()
    try:  # the DiT's training windows: 8 groups after the first frame (steady state of the causal cache)
        long = ClipDataset(args.data, "val", frames=33, size=size, pixels="uint8")
        print(f"val PSNR on 33-frame windows: {measure(game, long, report['vae']['eval_windows'], size)['psnr']:.2f} dB")
    except ValueError as err:
        print(f"no 33-frame val windows ({err})")
    print(f"parameters {report['parameters']['total']:,} (encoder {report['parameters']['encoder']:,}, decoder "
          f"{report['parameters']['decoder']:,}); {report['megabytes']:.2f} MB on disk; architecture {arch}")

    vaes = {"tiny random VAE": build_vae(get_preset("tiny")), "game VAE": game}
    timing = speed(vaes, size, args.repeats)
    print()
    print(f"{'at ' + args.size:<18} {'encode 33 frames ms':>20} {'decode ms/chunk':>16}")
    for name, t in timing.items():
        print(f"{name:<18} {1000 * t['encode']:>20.1f} {1000 * t['decode']:>16.1f}")
    base, game = timing["tiny random VAE"], timing["game VAE"]
    print(f"game / tiny random VAE time: encode x{game['encode'] / base['encode']:.2f}, "
          f"decode x{game['decode'] / base['decode']:.2f} (medians of {args.repeats}, fp32, {args.threads} thread(s))")
    if tmp is not None and args.out is None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
