"""What a VAE's round trip keeps of the fighters, as the benchmark's probe reads it, per frame of held-out
33-frame windows: frame 0 is encoded alone, each later latent frame holds 4 (docs/model.md, "What the
round trip loses").

    python bench/vae_probe.py --vae VAE_DIR [--probe runs/bench-probe/128x128] [--windows 3]

Reads the held-out recordings of bench/recipe.py (heldout-match, heldout-drill), `--windows` windows
spread over each episode, resized by the data path to the probe's size, encoded and decoded whole.
Prints the probe's state accuracy (and x within 4 px) on the reconstructions and on the originals
per frame and per position in a latent frame's group. Takes about 9 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recipe  # noqa: E402

FRAMES = 33


def round_trip_reading(vae_dir: Path, probe_dir: Path, root: Path, windows: int = 3) -> dict:
    """Hits per frame of the windows: {"state", "state_orig", "x", "n_state", "n_x"} arrays of FRAMES,
    and "x_tolerance"."""
    from wantofight.benchmark.episodes import open_runs
    from wantofight.benchmark.probe import load_probe
    from wantofight.datasets.frames import resize_to_model, stretch_uint8
    from wantofight.datasets.encoders import load_vae
    from wantofight.inference.generation import to_uint8

    vae, probe = load_vae(str(vae_dir))[0], load_probe(probe_dir)
    x_tolerance = next(f.tolerance for f in probe.fields if f.name == "x")
    _, episodes = open_runs([root / "heldout-match", root / "heldout-drill"])
    hits = {k: np.zeros(FRAMES) for k in ("state", "state_orig", "x", "n_state", "n_x")}
    for ep in episodes:
        for start in np.linspace(60, ep.rows - FRAMES - 1, windows).astype(int):
            rows = np.arange(start, start + FRAMES)
            real = stretch_uint8(ep.frames(rows), probe.size)  # (T, H, W, 3) uint8, as the benchmark scores
            frames = resize_to_model(real, probe.size).transpose(0, 1)[None]  # (1, 3, T, H, W), the data path's
            with torch.no_grad():
                rec = to_uint8(vae.decode(vae.encode(frames))[0])  # the benchmark's `--model vae` round trip
            read, read_orig = probe.read(rec), probe.read(real)
            truth, valid = ep.truth.values, ep.truth.valid
            ok, ok_x = valid["state"][rows], valid["x"][rows]
            hits["state"] += ((read["state"] == truth["state"][rows]) & ok).sum(1)
            hits["state_orig"] += ((read_orig["state"] == truth["state"][rows]) & ok).sum(1)
            hits["x"] += ((np.abs(read["x"] - truth["x"][rows]) <= x_tolerance) & ok_x).sum(1)
            hits["n_state"] += ok.sum(1)
            hits["n_x"] += ok_x.sum(1)
    return {**hits, "x_tolerance": x_tolerance, "episodes": len(episodes)}


def share(hits: dict, key: str, frames: list[int] | None = None) -> float:
    """Share of valid fighter-frames the probe read right (`key`: state, state_orig, x) over `frames`."""
    frames = list(range(FRAMES)) if frames is None else frames
    n = "n_x" if key == "x" else "n_state"
    return hits[key][frames].sum() / max(1, hits[n][frames].sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vae", type=Path, required=True, help="a `wtf train vae` folder")
    parser.add_argument("--probe", type=Path, default=recipe.ROOT / "runs" / "bench-probe" / "128x128")
    parser.add_argument("--root", type=Path, default=recipe.ROOT / "data" / "bench")
    parser.add_argument("--windows", type=int, default=3, help="windows per held-out episode")
    args = parser.parse_args()
    hits = round_trip_reading(args.vae, args.probe, args.root, args.windows)
    x_tolerance = hits["x_tolerance"]
    print(f"{args.vae}: {hits['episodes']} episodes x {args.windows} windows of {FRAMES} frames; probe {args.probe}")
    print(f"{'frames':<28} {'state':>7} {'originals':>10} {f'x within {x_tolerance:g} px':>14}")
    groups = [("all", list(range(FRAMES))), ("frame 0 (encoded alone)", [0])]
    groups += [(f"position {k} of a latent frame", [t for t in range(1, FRAMES) if (t - 1) % 4 == k]) for k in range(4)]
    for name, frames in groups:
        print(f"{name:<28} {share(hits, 'state', frames):7.3f} {share(hits, 'state_orig', frames):10.3f} "
              f"{share(hits, 'x', frames):14.3f}")


if __name__ == "__main__":
    main()
