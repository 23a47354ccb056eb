"""Loader throughput, measured side by side in one run (not a test).

Builds a small curriculum with the project's own collector (161-frame full-match windows), then
prints frames/s of: raw decord decode of the same MP4 bytes (one process, one thread), ClipDataset
through a DataLoader with 0 and 2 workers (float frames at the model size, the API default, and
uint8 native frames that the GPU resizes), and LatentDataset samples/s.

    python bench/loader.py [--size 384x512] [--frames 161] [--batches 6]
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path


def build(tmp: Path, frames: int) -> Path:
    from wantofight.annotate.curriculum import BuildOptions, build_curriculum
    from wantofight.collect.run import RunSettings, collect

    run = tmp / "run"
    collect(RunSettings(policy="scripted", p2_policy="random", episodes=2, max_frames=1200, fps=30, seed=1), run,
            workers=2, progress=False)
    out = tmp / "ds"
    build_curriculum([run], out, BuildOptions(clip_frames=frames, tiers=("full-match",), val_fraction=0.0),
                     workers=2, progress=False)
    return out


def raw_decode(ds_dir: Path) -> float:
    import pyarrow.parquet as pq

    from wantofight.video import open_video

    videos = [v.as_py() for f in sorted(ds_dir.glob("full-match/*.parquet")) for v in pq.read_table(f, columns=["video"])["video"]]
    count, start = 0, time.perf_counter()
    for video in videos:
        with open_video(video, num_threads=1) as reader:
            count += len(reader.get_batch(list(range(len(reader)))).asnumpy())
    return count / (time.perf_counter() - start)


def through_loader(ds, workers: int, batches: int, batch_size: int = 1) -> float:
    from wantofight.datasets.loader import make_loader
    from wantofight.datasets.sampler import CurriculumSampler, CurriculumSchedule

    sampler = CurriculumSampler(ds.item_tiers, CurriculumSchedule.constant({ds.item_tiers[0]: 1.0}), batch_size)
    loader = make_loader(ds, sampler, num_workers=workers)
    it = iter(loader)
    next(it)  # worker start-up and the first prefetch are not throughput
    count, start = 0, time.perf_counter()
    for batch in itertools.islice(it, batches):
        count += batch["keys"].shape[0] * batch["keys"].shape[1]
    rate = count / (time.perf_counter() - start)
    del it, loader
    return rate


def main() -> None:
    import torch

    from wantofight.datasets.clip_dataset import ClipDataset
    from wantofight.datasets.latent_cache import encode_dataset
    from wantofight.datasets.latent_dataset import LatentDataset

    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="384x512")
    parser.add_argument("--frames", type=int, default=161)
    parser.add_argument("--batches", type=int, default=6)
    args = parser.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        ds_dir = build(Path(tmp), args.frames)
        raw = raw_decode(ds_dir)
        print(f"raw decord decode (1 process, 1 thread)        {raw:8.0f} frames/s")
        for pixels in ("float", "uint8"):
            ds = ClipDataset(ds_dir, frames=args.frames, size=size, pixels=pixels)
            for workers in (0, 2):
                rate = through_loader(ds, workers, args.batches)
                label = f"ClipDataset {pixels:5s} {workers} workers"
                print(f"{label:46s} {rate:8.0f} frames/s  ({rate / raw:.2f} of raw decode)")
        lat = Path(tmp) / "lat"
        encode_dataset(ds_dir, lat, vae="tiny", clip="tiny", frames=args.frames, size=(32, 32), ref_size=64,
                       batch_size=4, progress=False)
        latents = LatentDataset(lat)
        rate = through_loader(latents, 0, 50, batch_size=4) / args.frames
        print(f"LatentDataset (tiny VAE 32x32 latents), 0 workers {rate:8.0f} samples/s")
    print(f"(model size {size[0]}x{size[1]}, {args.frames}-frame windows; float = API default, uint8 = native frames "
          "resized on the GPU by loader.frames_to_model)")


if __name__ == "__main__":
    main()
