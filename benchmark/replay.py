"""`wtf benchmark eval` (alias `wtf eval`): replay a dataset's clips' key streams through the model and score
its frames against the emulator's, pixel by pixel.

The benchmark's other mode, `wtf benchmark run`, reads what the fighters do (the probe, against RAM) on
test cases mined from recordings; this one needs only a curriculum dataset and measures fidelity.

For every clip of the split (one deterministic window of `frames` frames per clip, `ds[(i, 0)]`):
the model gets the clip's first frame, its reference images and its key stream (rows 1..T-1, the
keys that led to each real frame, docs/contracts.md) and generates rows 1..T-1 chunk by chunk over the
rolling KV cache, exactly as `wtf generate` does. Each generated frame is compared with the real
emulator frame of the same row (both as the uint8 RGB frames a video would hold, at the model's
resolution) by wantofight/fidelity.py:

    PSNR   torchmetrics.functional.image.peak_signal_noise_ratio, data range 1, per clip over all frames
    SSIM   torchmetrics.functional.image.structural_similarity_index_measure (Gaussian 11x11, sigma 1.5)
    LPIPS  the `lpips` package (v0.1 linear layers, shipped in the package) on torchvision's ImageNet
           AlexNet, read from --lpips-backbone or torchvision's cache and never downloaded; without
           them LPIPS is reported as unavailable, with the reason, never guessed

Results are averaged per tier and overall; latency is the wall time per generated chunk (denoise +
streaming decode) on this machine. With `keys_dir`, each clip's key stream is also written as a key
file (`CLIP_ID.keys`, the `wtf collect --policy keys:` format), so the same input can be replayed on
the emulator.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from wantofight.fidelity import EvalError, lpips_metric, score, torchmetrics_image


@dataclass
class ClipScore:
    clip_id: str
    tier: str
    psnr: float
    ssim: float
    lpips: float | None
    chunk_seconds: list[float]


@dataclass
class EvalReport:
    checkpoint: str
    steps: int
    sampler: str
    frames: int
    lpips_backend: str
    """What computed LPIPS, or why it is unavailable."""
    clips: list[ClipScore] = field(default_factory=list)

    def tiers(self) -> dict[str, dict[str, float | None]]:
        out = {}
        groups: dict[str, list[ClipScore]] = {}
        for clip in self.clips:
            groups.setdefault(clip.tier, []).append(clip)
        groups["all"] = list(self.clips)
        for tier, clips in groups.items():
            chunks = [s for c in clips for s in c.chunk_seconds]
            lp = [c.lpips for c in clips if c.lpips is not None]
            out[tier] = {"clips": len(clips), "psnr": _mean([c.psnr for c in clips]),
                         "ssim": _mean([c.ssim for c in clips]), "lpips": _mean(lp) if lp else None,
                         "chunk_ms_mean": 1000 * _mean(chunks), "chunk_ms_median": 1000 * statistics.median(chunks)}
        return out

    def to_dict(self) -> dict:
        return {**{k: v for k, v in asdict(self).items() if k != "clips"}, "tiers": self.tiers(),
                "clips": [asdict(c) for c in self.clips]}

    def table(self) -> str:
        lines = [f"{'tier':<14} {'clips':>5} {'PSNR dB':>8} {'SSIM':>6} {'LPIPS':>6} {'ms/chunk':>9}"]
        for tier, row in self.tiers().items():
            lp = f"{row['lpips']:.3f}" if row["lpips"] is not None else "n/a"
            lines.append(f"{tier:<14} {row['clips']:>5} {row['psnr']:>8.2f} {row['ssim']:>6.3f} {lp:>6} "
                         f"{row['chunk_ms_mean']:>9.1f}")
        lines.append(f"LPIPS: {self.lpips_backend}")
        return "\n".join(lines)


def _mean(values) -> float:
    return float(sum(values) / len(values)) if values else float("nan")


# ---------------------------------------------------------------------------------------------
# The replay
# ---------------------------------------------------------------------------------------------

def evaluate(checkpoint: str | Path, data: str | Path, split: str = "val", frames: int = 33, steps: int = 4,
             keys_dir: str | Path | None = None, max_clips: int | None = None, tiers=None, weights: str = "ema",
             decoder: str | Path | None = None, sampler: str | None = None, device: str = "cpu", seed: int = 0,
             lpips: bool = True, lpips_backbone: str | Path | None = None, log=None) -> EvalReport:
    from wantofight.collect.keyfile import write_key_file
    from wantofight.collect.keys import array_to_masks
    from wantofight.datasets.clip_dataset import ClipDataset
    from wantofight.inference.generation import load_generator, stream_chunks, to_uint8

    torchmetrics_image()  # fail before loading the model
    loaded = load_generator(checkpoint, None, weights, device, decoder)
    cfg = loaded.config
    try:
        ds = ClipDataset(data, split=split, tiers=tiers, frames=frames, size=(cfg.height, cfg.width),
                         ref_size=cfg.clip_image_size, seed=seed)
    except (FileNotFoundError, ValueError) as err:
        raise EvalError(f"--data {data}: {err}") from None
    if len(ds) == 0:
        raise EvalError(f"--data {data} has no {split} clips" + (f" of tiers {tiers}" if tiers else ""))
    net, backend = lpips_metric(lpips_backbone) if lpips else (None, "not computed (--no-lpips)")
    report = EvalReport(loaded.source, steps, sampler or loaded.default_sampler, frames, backend)
    if keys_dir is not None:
        Path(keys_dir).mkdir(parents=True, exist_ok=True)
    count = len(ds) if max_clips is None else min(max_clips, len(ds))
    for i in range(count):
        item = ds[(i, 0)]
        masks = array_to_masks(np.asarray(item["keys"]))  # (T, 2) rows 0..T-1
        if keys_dir is not None:
            write_key_file(Path(keys_dir) / f"{item['clip_id']}.keys", masks[1:, 0], masks[1:, 1])
        clip = torch.as_tensor(item["frames"])  # (T, 3, H, W) in [-1, 1]
        prompt = clip[:1].permute(1, 0, 2, 3)[None]  # (1, 3, 1, H, W)
        refs = torch.as_tensor(item["ref_images"])[None]
        out, seconds = [], []
        t0 = time.perf_counter()
        for k, (chunk, _) in enumerate(stream_chunks(loaded, prompt, masks, refs, steps, sampler, seed)):
            if k > 0:
                out.append(chunk)
                seconds.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
        generated = np.concatenate(out)  # rows 1..T-1
        real = to_uint8(clip[1:].permute(1, 0, 2, 3))
        psnr, ssim, lp = score(generated, real, net)
        report.clips.append(ClipScore(item["clip_id"], item["tier"], psnr, ssim, lp, seconds))
        if log is not None:
            log(f"{i + 1}/{count} {item['clip_id']} ({item['tier']}): PSNR {psnr:.2f} SSIM {ssim:.3f}"
                + (f" LPIPS {lp:.3f}" if lp is not None else ""))
    return report


def write_report(report: EvalReport, path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(report.to_dict(), indent=1))
