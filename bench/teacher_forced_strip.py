"""One held-out case as four strips of frames, to see what a teacher-forced x error is made of: the recording, the
VAE round trip (the best a model that decodes with that VAE can show), the checkpoint teacher-forced (each chunk
from the recorded chunks before it) and the last-frame baseline (the recorded row before each chunk, held).

    python bench/teacher_forced_strip.py [--checkpoint duel-tiny] [--case dcb7df6fe97e3d4d] [--out docs/teacher-forced-walk.png]

Reads the suite and probe of bench/learns.py (data/bench/suite, runs/bench-probe/128x128); the strips are cut to
the band of rows the fighters stand in, every 4th row from the prompt (row 0) on. Used for docs/model.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ROWS = (0, 4, 8, 12, 16, 20, 24)
BAND = slice(72, 116)
"""Rows of a 128x128 frame the fighters stand in (below the HUD, above the floor's front edge)."""


def strips(checkpoint: str, case_id: str, suite_dir: Path, probe_dir: Path) -> np.ndarray:
    from wantofight.benchmark.probe import load_probe
    from wantofight.benchmark.run import Producer, Variant, load_checkpoint, resized
    from wantofight.benchmark.suite import Suite
    from wantofight.inference.generation import resolve_checkpoint

    suite, probe = Suite(suite_dir), load_probe(probe_dir)
    case = next((c for c in suite.cases() if c.case_id == case_id), None)
    if case is None:
        raise SystemExit(f"--case {case_id}: no such case in {suite_dir}")
    checkpoint = str(resolve_checkpoint(checkpoint))
    real = resized(case.frames(), probe.size)
    forced = Variant("checkpoint", checkpoint=checkpoint, steps=4, teacher_forced=True)
    vae = str(Path(checkpoint) / "vae")
    made = [real,
            Producer(Variant("vae", vae=vae), probe.size)(case, real)[0],
            Producer(forced, probe.size, load_checkpoint(forced, suite, probe, "cpu"))(case, real)[0],
            Producer(Variant("last-frame"), probe.size)(case, real)[0]]

    def strip(frames: np.ndarray) -> np.ndarray:
        return np.concatenate([np.pad(frames[r][BAND], ((0, 2), (0, 2), (0, 0)), constant_values=255)
                               for r in ROWS if r < len(frames)], axis=1)

    return np.concatenate([strip(f) for f in made], axis=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="duel-tiny", help="a run, a checkpoint folder or a shipped model's name")
    parser.add_argument("--case", default="dcb7df6fe97e3d4d", help="a case of the suite (default: a walk_forward)")
    parser.add_argument("--suite", type=Path, default=ROOT / "data" / "bench" / "suite")
    parser.add_argument("--probe", type=Path, default=ROOT / "runs" / "bench-probe" / "128x128")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "teacher-forced-walk.png")
    args = parser.parse_args()
    image = strips(args.checkpoint, args.case, args.suite, args.probe)
    image = cv2.resize(image, (image.shape[1] * 2, image.shape[0] * 2), interpolation=cv2.INTER_NEAREST)
    ok, png = cv2.imencode(".png", image[:, :, ::-1])
    tmp = args.out.with_name(f".{args.out.name}.tmp")
    tmp.write_bytes(png.tobytes())
    tmp.replace(args.out)
    print(f"wrote {args.out} (rows: recording, VAE round trip, {args.checkpoint} teacher-forced, last frame held)")


if __name__ == "__main__":
    main()
