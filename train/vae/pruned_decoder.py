"""A structurally pruned VAE decoder, fine-tuned on game frames (cheaper decoding at generation time, docs/stages.md).

What is pruned: the hidden width of every residual block of the decoder (`mid_block.resnets.*`,
`up_blocks.*.resnets.*`). A Wan residual block computes

    x + conv2(silu(norm2(conv1(silu(norm1(x))))))        conv1: C_in -> C_hid, conv2: C_hid -> C_out

and C_hid (the output channels of conv1 = the RMS-norm width of norm2 = the input channels of
conv2) touches nothing outside the block, so whole hidden channels can be removed without changing
any other layer: the block is rebuilt with smaller `conv1`, `norm2` and `conv2` modules (a genuinely
smaller network with fewer parameters and FLOPs, not a mask). These two 3x3x3 convolutions hold
most of the decoder's parameters. The per-frame autoencoder's 2D blocks (`ResnetBlock2D`: GroupNorm,
3x3 convolutions) have the same shape and prune the same way, to a whole number of GroupNorm groups.
The residual stream widths, the attention of the mid block, the
upsamplers and the in/out convolutions keep their shapes, so the decoder's causal-conv feature
cache (streaming decode) works unchanged.

Importance of hidden channel j (weights only, computed per block):

    s_j = ||conv1.weight[j]||_2 * |norm2.gamma[j]| * ||conv2.weight[:, j]||_2

i.e. how strongly the channel is written, scaled and read; the `keep_ratio` highest-scoring
channels of each block stay. `norm2` of a pruned block normalises over the kept channels (its RMS
scale becomes sqrt(kept)), which is why the pruned decoder is then fine-tuned.

Fine-tuning (`train_decoder`): the pruned decoder learns to reproduce the full decoder's frames from
the same latents (distillation) and, when the data are clips, the ground-truth frames themselves:

    loss = || D_pruned(z) - D_full(z) ||^2  +  gt_weight || D_pruned(z) - frames ||^2

Saved as OUT/decoder.safetensors + OUT/pruned_decoder.json (hidden widths, kept channel indices, the
VAE it came from) + OUT/report.json (parameters, CPU decode time per chunk, PSNR against the full
decoder before and after fine-tuning).
"""

from __future__ import annotations

import copy
import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from wantofight.inference.decoder import FORMAT, PruningError, norm_scale, prune_block, residual_blocks, width_step
from wantofight.progress import Progress

# ---------------------------------------------------------------------------------------------
# Pruning
# ---------------------------------------------------------------------------------------------

def channel_importance(block: nn.Module) -> torch.Tensor:
    """(C_hid,) importance of each hidden channel (module docstring)."""
    w1 = block.conv1.weight.detach().float().flatten(1).norm(dim=1)  # (C_hid,)
    gamma = norm_scale(block.norm2).detach().float().flatten().abs()  # (C_hid,)
    w2 = block.conv2.weight.detach().float().transpose(0, 1).flatten(1).norm(dim=1)  # (C_hid,)
    return w1 * gamma * w2


def kept_channels(block: nn.Module, keep_ratio: float) -> torch.Tensor:
    """Sorted indices of the hidden channels that stay (a multiple of the block's GroupNorm groups)."""
    scores, step = channel_importance(block), width_step(block)
    keep = max(step, step * int(round(scores.numel() * keep_ratio / step)))
    return scores.topk(keep).indices.sort().values


def prune_decoder(decoder: nn.Module, keep_ratio: float = 0.5) -> tuple[nn.Module, dict[str, list[int]]]:
    """A pruned copy of a decoder (Wan layout or per frame) and the kept hidden channels of each residual block."""
    if not 0 < keep_ratio <= 1:
        raise PruningError(f"keep_ratio must be in (0, 1], got {keep_ratio}")
    pruned = copy.deepcopy(decoder)
    kept = {}
    for name, block in residual_blocks(pruned).items():
        idx = kept_channels(block, keep_ratio)
        prune_block(block, idx)
        kept[name] = idx.tolist()
    return pruned, kept


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# ---------------------------------------------------------------------------------------------
# Saving (inference/decoder.py loads)
# ---------------------------------------------------------------------------------------------

def save_pruned_decoder(out: Path, decoder: nn.Module, kept: dict[str, list[int]], vae_source: str,
                        keep_ratio: float) -> None:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous().cpu() for k, v in decoder.state_dict().items()},
              str(out / "decoder.safetensors"))
    meta = {"format": FORMAT, "vae": vae_source, "keep_ratio": keep_ratio,
            "hidden_widths": {k: len(v) for k, v in kept.items()}, "kept_channels": kept,
            "parameters": count_parameters(decoder)}
    (out / "pruned_decoder.json").write_text(json.dumps(meta, indent=1))


def with_decoder(vae, decoder: nn.Module):
    """A shallow copy of a `WanVAE` whose autoencoder uses `decoder` (the original is untouched)."""
    ae = copy.copy(vae.autoencoder)
    ae._modules = dict(ae._modules)
    ae._modules["decoder"] = decoder
    new = copy.copy(vae)
    new._modules = dict(vae._modules)
    new._modules["autoencoder"] = ae
    return new


# ---------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------

def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    """PSNR in dB of frames in [-1, 1] (peak-to-peak 2)."""
    from wantofight.fidelity import psnr_db

    return psnr_db((a.float() - b.float()).pow(2).mean().item(), peak=2.0)


@torch.no_grad()
def decode_seconds_per_chunk(vae, latents: torch.Tensor, repeats: int = 3) -> float:
    """Median CPU seconds to stream-decode one chunk (8 frames: 2 latent frames of the Wan layout, 8 of a
    per-frame autoencoder) after the first frame."""
    n = 8 // vae.time_factor
    chunks = (latents.shape[2] - 1) // n
    if chunks < 1:
        raise PruningError(f"timing needs latents of at least {1 + n} frames (the first frame + one chunk)")
    times = []
    for _ in range(repeats):
        decoder = vae.streaming_decoder()
        decoder.decode(latents[:, :, :1])
        for c in range(chunks):
            t0 = time.perf_counter()
            decoder.decode(latents[:, :, 1 + n * c:1 + n * (c + 1)])
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


# ---------------------------------------------------------------------------------------------
# Fine-tuning
# ---------------------------------------------------------------------------------------------

@dataclass
class DecoderTrainConfig:
    """Pruning and fine-tuning settings of `wtf train decoder`."""

    keep_ratio: float = 0.5
    """Fraction of each residual block's hidden channels kept."""
    steps: int = 200
    """Fine-tuning optimiser steps."""
    lr: float = 2e-4
    """AdamW learning rate."""
    batch_size: int = 2
    """Windows per step."""
    frames: int = 9
    """Frames per window (1 + 4 k) decoded per step (clip data); a latent cache sets its own."""
    gt_weight: float = 0.5
    """Weight of the ground-truth frame loss (clip data only; latents have no frames)."""
    seed: int = 0
    """Data order and initialisation."""
    eval_items: int = 4
    """Held-out windows (val split when present) for the PSNR report."""

    def __post_init__(self) -> None:
        # named as `wtf train decoder` spells them, the command this config mirrors
        if not 0 < self.keep_ratio <= 1:
            raise PruningError(f"--keep must be in (0, 1], got {self.keep_ratio}")
        if self.steps < 0:
            raise PruningError(f"--steps must be >= 0, got {self.steps}")
        if self.batch_size < 1:
            raise PruningError(f"--batch-size must be >= 1, got {self.batch_size}")
        if self.lr <= 0:
            raise PruningError(f"--lr must be > 0, got {self.lr}")
        if (self.frames - 1) % 4:
            raise PruningError(f"--frames must be 1 + 4 k (the Wan VAE's time grid), got {self.frames}")


def resolve_decoder_settings(sets=(), **flags) -> DecoderTrainConfig:
    """DecoderTrainConfig from the command's flags and the `--set decoder.FIELD=VALUE` assignments over
    them (the fields without a flag of their own: `seed`, `eval_items`)."""
    from wantofight.train.config import apply_sets, build_config

    data = apply_sets(DecoderTrainConfig, asdict(DecoderTrainConfig(**flags)), sets, "decoder")
    return build_config(DecoderTrainConfig, data, "decoder.")


@dataclass
class DecoderReport:
    full_parameters: int
    pruned_parameters: int
    full_seconds_per_chunk: float
    pruned_seconds_per_chunk: float
    psnr_before_finetune: float
    """Pruned vs full decoder on held-out latents, dB, right after pruning."""
    psnr_after_finetune: float
    """The same after fine-tuning."""
    psnr_full_vs_frames: float | None = None
    """Full decoder vs the ground-truth frames (clip data only)."""
    psnr_pruned_vs_frames: float | None = None
    losses: list[float] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"decoder parameters: full {self.full_parameters:,}  pruned {self.pruned_parameters:,} "
               f"({self.pruned_parameters / self.full_parameters:.0%})",
               f"CPU decode per chunk (8 frames): full {1000 * self.full_seconds_per_chunk:.1f} ms  "
               f"pruned {1000 * self.pruned_seconds_per_chunk:.1f} ms "
               f"(x{self.full_seconds_per_chunk / max(self.pruned_seconds_per_chunk, 1e-12):.2f})",
               f"PSNR pruned vs full decoder: {self.psnr_before_finetune:.2f} dB after pruning, "
               f"{self.psnr_after_finetune:.2f} dB after {len(self.losses)} fine-tuning steps"]
        if self.psnr_full_vs_frames is not None:
            out.append(f"PSNR vs ground-truth frames: full {self.psnr_full_vs_frames:.2f} dB  "
                       f"pruned {self.psnr_pruned_vs_frames:.2f} dB")
        return out


def open_vae(vae: str, preset: str = "tiny"):
    """`tiny` (the preset's random-init VAE, exactly as the trainer builds it) or a local VAE folder (the
    Wan2.1 VAE or one of `wtf train vae`'s, either kind); the preset gives the frame size and references."""
    from dataclasses import replace

    from wantofight.inference.generation import build_vae
    from wantofight_model.presets import get_preset
    from wantofight_model.vae import load_vae_folder

    config = get_preset(preset)
    if vae != "tiny":  # a missing folder: load_vae_folder's one line names what would be valid
        return load_vae_folder(vae).eval().requires_grad_(False), replace(config, vae=replace(config.vae,
                                                                                           pretrained=str(vae)))
    if preset != "tiny":
        raise PruningError("--vae tiny goes with --preset tiny; give a Wan2.1 VAE folder for other presets")
    return build_vae(config), config


class _Windows:
    """(latents, frames or None) windows from a curriculum DS_DIR (encoded here) or a latent cache."""

    def __init__(self, data: Path, split: str, vae, model_config, frames: int):
        from wantofight.train.data import datasets_api, detect_source

        self.vae = vae
        self.source = detect_source(data)
        if self.source == "latents":
            self.ds = datasets_api("LatentDataset")(data, split)
        else:
            self.ds = datasets_api("ClipDataset")(data, split=split, frames=frames,
                                                  size=(model_config.height, model_config.width),
                                                  ref_size=model_config.clip_image_size)

    def __len__(self) -> int:
        return len(self.ds)

    @torch.no_grad()
    def get(self, indices: list[int], step: int = 0) -> tuple[torch.Tensor, torch.Tensor | None]:
        items = [self.ds[(i, step)] for i in indices]
        if self.source == "latents":
            return torch.stack([torch.as_tensor(it["latents"]) for it in items]).float(), None
        frames = torch.stack([torch.as_tensor(it["frames"]) for it in items]).transpose(1, 2)  # (B, 3, T, H, W)
        return self.vae.encode(frames).float(), frames.float()


def train_decoder(vae_name: str, data: str | Path, out: str | Path, config: DecoderTrainConfig | None = None,
                  preset: str = "tiny", log=print, size: tuple[int, int] | None = None,
                  overwrite: bool = False) -> DecoderReport:
    """Prune the decoder of `vae_name`, fine-tune it on `data`, save it to `out` and report. Clips are
    resized to `size` (default: the preset's), e.g. the size a `wtf train vae` VAE was trained at. An
    existing `out` is refused, or with `overwrite` replaced once the new decoder is saved."""
    from dataclasses import replace

    from wantofight import outputs

    config = config or DecoderTrainConfig()
    out = Path(out)
    work = outputs.claim(out, overwrite)
    torch.manual_seed(config.seed)
    vae, model_config = open_vae(vae_name, preset)
    if size is not None:
        model_config = replace(model_config, height=size[0], width=size[1])
    data = Path(data)
    train = _Windows(data, "train", vae, model_config, config.frames)
    try:
        held = _Windows(data, "val", vae, model_config, config.frames)
        if len(held) == 0:
            raise ValueError
    except (FileNotFoundError, ValueError):
        held = train
    if len(train) == 0:
        raise PruningError(f"{data} has no train windows")

    full = vae.autoencoder.decoder
    pruned, kept = prune_decoder(full, config.keep_ratio)
    pruned_vae = with_decoder(vae, pruned)
    eval_idx = list(range(min(config.eval_items, len(held))))
    eval_latents, eval_frames = held.get(eval_idx)
    with torch.no_grad():
        full_frames = vae.decode(eval_latents)
        before = psnr(pruned_vae.decode(eval_latents), full_frames)
    log(f"pruned {len(kept)} residual blocks to {config.keep_ratio:.0%} of their hidden channels: "
        f"{count_parameters(full):,} -> {count_parameters(pruned):,} decoder parameters; "
        f"PSNR vs full {before:.2f} dB")

    pruned.train().requires_grad_(True)
    optimizer = torch.optim.AdamW(pruned.parameters(), lr=config.lr, weight_decay=0.0)
    order = torch.Generator().manual_seed(config.seed)
    losses = []
    with Progress("decoder", config.steps, "steps", "loss {loss:.4f}", eta=True, loss=float("nan")) as bar:
        for step in range(config.steps):
            idx = torch.randint(len(train), (config.batch_size,), generator=order).tolist()
            latents, frames = train.get(idx, step)
            with torch.no_grad():
                target = vae.decode(latents)
            pred = pruned_vae.autoencoder.decode(pruned_vae.denormalize(latents)).sample  # with gradients
            loss = (pred - target).pow(2).mean()
            if frames is not None and config.gt_weight > 0:
                loss = loss + config.gt_weight * (pred - frames).pow(2).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            bar.advance(loss=losses[-1])
    pruned.eval().requires_grad_(False)

    with torch.no_grad():
        pruned_frames = pruned_vae.decode(eval_latents)
    report = DecoderReport(
        full_parameters=count_parameters(full), pruned_parameters=count_parameters(pruned),
        full_seconds_per_chunk=decode_seconds_per_chunk(vae, _timing_latents(eval_latents, 8 // vae.time_factor)),
        pruned_seconds_per_chunk=decode_seconds_per_chunk(pruned_vae,
                                                          _timing_latents(eval_latents, 8 // vae.time_factor)),
        psnr_before_finetune=before, psnr_after_finetune=psnr(pruned_frames, full_frames), losses=losses)
    if eval_frames is not None:
        report.psnr_full_vs_frames = psnr(full_frames, eval_frames)
        report.psnr_pruned_vs_frames = psnr(pruned_frames, eval_frames)
    save_pruned_decoder(work, pruned, kept, str(vae_name), config.keep_ratio)
    (work / "report.json").write_text(json.dumps({**asdict(report), "config": asdict(config),
                                                  "data": str(data), "source": train.source}, indent=1))
    outputs.swap_in(work, out)
    for line in report.lines():
        log(line)
    log(f"wrote {out}: {report.pruned_parameters:,} of {report.full_parameters:,} decoder parameters kept, PSNR vs "
        f"the full decoder {report.psnr_after_finetune:.2f} dB after {len(report.losses)} steps")
    return report


def _timing_latents(latents: torch.Tensor, latents_per_chunk: int = 2) -> torch.Tensor:
    """One window, at least the first frame + 2 chunks (repeated in time when the windows are short)."""
    z = latents[:1]
    while z.shape[2] < 1 + 2 * latents_per_chunk:
        z = torch.cat([z, z[:, :, 1:] if z.shape[2] > 1 else z], dim=2)
    return z
