"""The state probe: train it on recorded frames and their RAM, save, load, score frames.

    probe = train_probe([Path("data/match")], Path("runs/probe"), ProbeConfig(size=(128, 128)))
    probe = load_probe(Path("runs/probe"))
    read = probe.read(frames_uint8)                    # {"x": (N, 2), "state": (N, 2), ...}

Frames reach the probe as the model sees them: resized to `size` by the training data path
(`datasets.frames.to_model`, nearest-neighbour stretch), as uint8 RGB. Training frames are split by
episode; `report.json` holds the held-out accuracy of every field for each player and the targets
of docs/benchmark.md. Randomness comes from `seed` alone (split, initial weights, batches,
augmentation).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from wantofight.benchmark.episodes import LabelledEpisode, open_runs
from wantofight.benchmark.labels import Field
from wantofight.benchmark.probe_net import NUMBER_FIELDS, ProbeNet, Screen, read_fields
from wantofight.outputs import write_atomic, written

PROBE_VERSION = 1
CENTRE_JITTER = 3.0
"""px: training crops are centred up to this far from the true position (the read one is within 4)."""
NATIVE = "native"
TARGETS = {"x_within": 0.95, "state": 0.90, "facing": 0.98}
"""Held-out accuracy a probe must reach for both players (docs/benchmark.md)."""


class ProbeError(ValueError):
    """A probe that cannot be trained, loaded or used on these frames; the message says why."""


def parse_size(text: str) -> tuple[int, int] | None:
    """`128x128` -> (128, 128) (height x width); `native` -> None (the recordings' own size)."""
    from wantofight.datasets.cli import parse_size as height_width

    if text == NATIVE:
        return None
    try:
        return height_width(text)
    except ValueError as err:
        raise ProbeError(f"{err} (or {NATIVE})") from None


@dataclass
class ProbeConfig:
    size: tuple[int, int] | None = None
    """Frame size (H, W) the probe reads; None = the recordings' native size."""
    steps: int = 2000
    """Optimiser steps."""
    batch_size: int = 128
    lr: float = 2e-3
    val_fraction: float = 0.2
    """Share of episodes held out (at least one when there are two or more)."""
    max_frames: int = 40000
    """Training frames kept in memory at most, spread evenly over the training episodes."""
    seed: int = 0
    threads: int = 0
    """torch threads (0: torch's default)."""

    def __post_init__(self) -> None:
        # named as `wtf probe train` spells them, the command this config mirrors
        for name in ("steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ProbeError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.max_frames < self.batch_size:
            raise ProbeError(f"--max-frames must be >= --batch-size ({self.batch_size}), got {self.max_frames}")
        if not 0 <= self.val_fraction < 1:
            raise ProbeError(f"--val-fraction must be in [0, 1), got {self.val_fraction}")


# ---------------------------------------------------------------------------------------------
# Frames and targets
# ---------------------------------------------------------------------------------------------

def to_probe_pixels(frames: np.ndarray, size: tuple[int, int]) -> torch.Tensor:
    """(N, h, w, 3) uint8 -> (N, 3, H, W) uint8 at the probe's size, resized by the data path (the
    pixels `datasets.frames.to_model` picks), stored channels-last (the fast layout on a CPU)."""
    from wantofight.datasets.frames import stretch_uint8

    if frames.shape[1:3] != tuple(size):
        frames = stretch_uint8(frames, size)
    return torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2)


def to_input(pixels: torch.Tensor) -> torch.Tensor:
    """(N, 3, H, W) uint8 -> float in [-1, 1], channels-last (the fast layout on CPU)."""
    return pixels.float().mul_(2.0 / 255.0).sub_(1.0).contiguous(memory_format=torch.channels_last)


@dataclass
class FrameSet:
    """Frames at the probe's size with each field's truth: pixels (N, 3, H, W) uint8, per field
    values (N, 2) and valid (N, 2)."""

    pixels: torch.Tensor
    values: dict[str, np.ndarray]
    valid: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.pixels)


def frame_set(episodes: list[LabelledEpisode], size: tuple[int, int], max_frames: int | None = None,
              log=None) -> FrameSet:
    """Every row of the episodes (or `max_frames` spread evenly over them), decoded and resized."""
    total = sum(ep.rows for ep in episodes)
    every = max(1, -(-total // max_frames)) if max_frames else 1
    pixels, values, valid = [], {}, {}
    for i, ep in enumerate(episodes):
        rows = np.arange(0, ep.rows, every)
        pixels.append(to_probe_pixels(ep.frames(rows), size))
        for name in ep.truth.values:
            values.setdefault(name, []).append(ep.truth.values[name][rows])
            valid.setdefault(name, []).append(ep.truth.valid[name][rows])
        if log is not None:
            log(f"decoded {i + 1}/{len(episodes)} episodes")
    return FrameSet(torch.cat(pixels), {k: np.concatenate(v) for k, v in values.items()},
                    {k: np.concatenate(v) for k, v in valid.items()})


def split_episodes(episodes: list[LabelledEpisode], val_fraction: float, seed: int):
    """(train, val) by a seeded order of the episodes' identity hashes."""
    order = sorted(episodes, key=lambda ep: hashlib.sha1(f"{seed}:{ep.uid}".encode()).hexdigest())
    n_val = round(len(order) * val_fraction)
    if val_fraction > 0 and len(order) >= 2:
        n_val = min(max(n_val, 1), len(order) - 1)
    return order[n_val:], order[:n_val]


# ---------------------------------------------------------------------------------------------
# The probe
# ---------------------------------------------------------------------------------------------

class Probe:
    """A trained probe: its network, fields, frame size and where it came from."""

    def __init__(self, net: ProbeNet, meta: dict):
        self.net, self.meta = net.eval(), meta

    @property
    def size(self) -> tuple[int, int]:
        return tuple(self.net.size)

    @property
    def fields(self) -> tuple[Field, ...]:
        return self.net.fields

    @property
    def game(self) -> str:
        return self.meta["game"]

    @torch.inference_mode()
    def read(self, frames: np.ndarray | torch.Tensor, batch_size: int = 256) -> dict[str, np.ndarray]:
        """Frames at the probe's size, (N, H, W, 3) uint8 numpy or (N, 3, H, W) uint8 torch ->
        per field (N, 2) readings."""
        if isinstance(frames, np.ndarray):
            if frames.shape[1:3] != self.size:
                raise ProbeError(f"the probe reads {self.size[0]}x{self.size[1]} frames, got "
                                 f"{frames.shape[1]}x{frames.shape[2]}")
            frames = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2)  # channels-last view
        out: dict[str, list] = {}
        for i in range(0, len(frames), batch_size):
            read = read_fields(self.net(to_input(frames[i:i + batch_size])), self.fields)
            for name, v in read.items():
                out.setdefault(name, []).append(v.numpy())
        return {name: np.concatenate(v) for name, v in out.items()}


def save_probe(probe: Probe, out: Path, report: dict) -> None:
    """probe.safetensors, probe.json and report.json, each under a temporary name then renamed;
    probe.json (written last) marks a complete probe."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    (out / "probe.json").unlink(missing_ok=True)
    with written(out / "probe.safetensors") as tmp:
        save_file({k: v.contiguous() for k, v in probe.net.state_dict().items()}, str(tmp))
    for name, doc in (("report.json", report), ("probe.json", probe.meta)):
        write_atomic(out / name, json.dumps(doc, indent=1) + "\n")


def load_probe(path: str | Path) -> Probe:
    from safetensors.torch import load_file

    path = Path(path)
    meta_path = path / "probe.json"
    if not meta_path.is_file():
        raise ProbeError(f"{path} is not a probe folder (no probe.json; train one with `wtf probe train`)")
    meta = json.loads(meta_path.read_text())
    if meta.get("probe_version") != PROBE_VERSION:
        raise ProbeError(f"{path}: probe version {meta.get('probe_version')}, this wtf reads {PROBE_VERSION}")
    fields = tuple(Field(**f) for f in meta["fields"])
    net = ProbeNet(tuple(meta["size"]), fields, Screen(tuple(meta["native_size"]), *meta["screen_offset"]))
    net.load_state_dict(load_file(str(path / "probe.safetensors")))
    return Probe(net.to(memory_format=torch.channels_last), meta)


def probe_digest(path: str | Path) -> str:
    return hashlib.sha1((Path(path) / "probe.safetensors").read_bytes()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------

class ProbeTrainer:
    """Minibatch training of the probe on a FrameSet: `batch()`, `loss()`, `step()`, `fit()`.

    Not a subclass of `train.trainer.Trainer`: that skeleton is built around WanToFight (its DiT, the
    reference encoder, the curriculum sampler, latents, torchrun, checkpoints to resume from). The
    probe trains on frames held in memory in minutes on one process and is retrained rather than
    resumed, so it keeps the same step names in a loop of its own."""

    def __init__(self, net: ProbeNet, data: FrameSet, config: ProbeConfig):
        self.net, self.data, self.config = net, data, config
        self.gen = torch.Generator().manual_seed(config.seed)
        self.optimizer = torch.optim.AdamW(net.parameters(), lr=config.lr, weight_decay=1e-4)
        self.scheduler = torch.optim.lr_scheduler.OneCycleLR(self.optimizer, config.lr, total_steps=config.steps,
                                                             pct_start=0.15)
        self.targets = {f.name: torch.from_numpy(soft_or_hard(f, data.values[f.name])) for f in net.fields}
        located = data.valid["x"] & data.valid["y"]  # the crop branch reads classes around a known position
        self.valid = {f.name: torch.from_numpy(data.valid[f.name] & (located | (f.name in NUMBER_FIELDS)))
                      for f in net.fields}
        self.centres = torch.from_numpy(np.nan_to_num(np.stack([data.values["x"], data.values["y"]], -1))).float()

    def batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(len(self.data), (self.config.batch_size,), generator=self.gen)
        return augment(to_input(self.data.pixels[idx]), self.gen), idx

    def loss(self, frames: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        jitter = CENTRE_JITTER * (2 * torch.rand(self.centres[idx].shape, generator=self.gen) - 1)
        logits = self.net(frames, self.centres[idx] + jitter)  # crops at the true positions, as read +- a few px
        total = frames.new_zeros(())
        for f in self.net.fields:
            target, valid = self.targets[f.name][idx], self.valid[f.name][idx]  # (B, 2[, bins]), (B, 2)
            if not valid.any():
                continue
            total = total + F.cross_entropy(logits[f.name][valid], target[valid])
        return total

    def step(self) -> float:
        self.net.train()
        frames, idx = self.batch()
        loss = self.loss(frames, idx)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        return loss.item()

    def fit(self, progress=None) -> list[float]:
        losses = []
        for step in range(self.config.steps):
            losses.append(self.step())
            if progress is not None:
                progress(step + 1, losses[-1])
        return losses


def soft_or_hard(f: Field, values: np.ndarray) -> np.ndarray:
    """Training targets: class indices, or for a number a Gaussian over its bins (sigma one bin),
    so a near miss costs less than a far one."""
    if not f.is_number:
        return np.nan_to_num(values).astype(np.int64)
    centres = np.arange(f.classes) * f.step  # (bins,)
    d = (np.nan_to_num(values)[..., None] - centres) / f.step  # (N, 2, bins)
    w = np.exp(-0.5 * d * d).astype(np.float32)
    return w / np.maximum(w.sum(-1, keepdims=True), 1e-12)


def augment(frames: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Blur, noise and a colour scale on random thirds of the batch, so frames a model generates
    (softer, noisier) read like the recordings they imitate. In place."""
    B = len(frames)
    blur = torch.rand(B, generator=gen) < 1 / 3
    if blur.any():  # a 3x3 box filter, as a depthwise convolution (the fast form on channels-last)
        box = frames.new_full((3, 1, 3, 3), 1 / 9).contiguous(memory_format=torch.channels_last)
        frames[blur] = F.conv2d(frames[blur], box, padding=1, groups=3)
    noisy = torch.nonzero(torch.rand(B, generator=gen) < 1 / 3).flatten()
    if len(noisy):
        sigma = 0.08 * torch.rand(len(noisy), 1, 1, 1, generator=gen)
        frames[noisy] += sigma * torch.randn((len(noisy), *frames.shape[1:]), generator=gen)
    frames *= 1 + 0.1 * (torch.rand(B, 3, 1, 1, generator=gen) - 0.5)
    return frames.clamp_(-1, 1)


# ---------------------------------------------------------------------------------------------
# Scoring real frames
# ---------------------------------------------------------------------------------------------

def field_metrics(read: dict[str, np.ndarray], data: FrameSet, fields: tuple[Field, ...]) -> dict:
    """Per player, per field: accuracy (classes), share within tolerance and mean error (numbers),
    over the frames whose truth is known."""
    out = {}
    for p in (0, 1):
        player = {}
        for f in fields:
            ok = data.valid[f.name][:, p]
            got, want = read[f.name][ok, p], data.values[f.name][ok, p]
            if f.is_number:
                err = np.abs(got - want)
                player[f"{f.name}_within"] = float((err <= f.tolerance).mean()) if len(err) else None
                player[f"{f.name}_mae"] = float(err.mean()) if len(err) else None
            else:
                player[f.name] = float((got == want).mean()) if len(got) else None
            player[f"{f.name}_frames"] = int(ok.sum())
        out[f"p{p + 1}"] = player
    return out


def targets_met(metrics: dict) -> dict:
    """{target: {player: value, ..., "met": bool}} for the targets of TARGETS."""
    out = {}
    for name, need in TARGETS.items():
        values = {p: metrics[p].get(name) for p in ("p1", "p2")}
        out[name] = {**values, "need": need, "met": all(v is not None and v >= need for v in values.values())}
    return out


def evaluate_probe(probe: Probe, data: FrameSet) -> dict:
    t0 = time.perf_counter()
    read = probe.read(data.pixels)
    seconds = time.perf_counter() - t0
    metrics = field_metrics(read, data, probe.fields)
    return {"frames": len(data), "frames_per_s": len(data) / max(seconds, 1e-9), "metrics": metrics,
            "targets": targets_met(metrics)}


def format_metrics(result: dict) -> str:
    """The held-out table: one line per field, both players, targets marked."""
    m = result["metrics"]
    lines = [f"{'field':<16} {'P1':>7} {'P2':>7}  target"]
    for key in m["p1"]:
        if key.endswith("_frames"):
            continue
        need = TARGETS.get(key)
        mark = "" if need is None else f">= {need:.2f} " + ("met" if result["targets"][key]["met"] else "MISSED")
        fmt = (lambda v: f"{v:7.2f}") if key.endswith("_mae") else (lambda v: f"{100 * v:6.1f}%")
        cells = [fmt(m[p][key]) if m[p][key] is not None else "    n/a" for p in ("p1", "p2")]
        lines.append(f"{key:<16} {cells[0]} {cells[1]}  {mark}")
    lines.append(f"{result['frames']} frames, {result['frames_per_s']:.0f} frames/s")
    return "\n".join(lines)


def verdict(report: dict) -> str:
    """One line: did the probe reach its held-out targets, and if not, roughly how many more training
    frames it needs, assuming its error falls as 1 / sqrt(frames) (a rough learning curve, not a promise)."""
    held = report.get("held_out")
    if not held:
        return "held-out accuracy: not measured (no held-out episode; keep --val-fraction above 0 with 2+ episodes)"
    missed = {name: min(v for p, v in t.items() if p in ("p1", "p2") and v is not None)
              for name, t in held["targets"].items() if not t["met"]
              and any(t.get(p) is not None for p in ("p1", "p2"))}
    if not missed:
        return "held-out accuracy: every target met (" + ", ".join(
            f"{name} >= {100 * need:.0f}%" for name, need in TARGETS.items()) + ")"
    frames = report["train_frames"]
    factor = max(((1 - got) / (1 - TARGETS[name])) ** 2 for name, got in missed.items())
    more = max(0, int(round(frames * factor - frames, -3)))
    return ("held-out accuracy MISSED its targets: " + ", ".join(
        f"{name} {100 * got:.1f}% (needs {100 * TARGETS[name]:.0f}%)" for name, got in missed.items())
        + f"; trained on {frames:,} frames, it likely needs about {more:,} more (or more --steps if the loss was "
        "still falling); the benchmark's figures read through it are that much less sure")


def train_probe(run_dirs: list[Path], out: Path, config: ProbeConfig, log=None, progress=None,
                overwrite: bool = False) -> dict:
    """Train a probe on the runs' episodes (held-out episodes for the report) and save it in `out`. An
    existing `out` is refused, or with `overwrite` replaced once the new probe is saved."""
    from wantofight import outputs

    log = log or (lambda m: None)
    work = outputs.claim(out, overwrite)
    if config.threads:
        torch.set_num_threads(config.threads)
    t0 = time.perf_counter()
    game, episodes = open_runs(run_dirs)
    native = (int(episodes[0].meta["height"]), int(episodes[0].meta["width"]))
    size = tuple(config.size) if config.size else native
    train_eps, val_eps = split_episodes(episodes, config.val_fraction, config.seed)
    log(f"{len(train_eps)} training and {len(val_eps)} held-out episodes of {game.name}; frames at {size[0]}x{size[1]}")
    train = frame_set(train_eps, size, config.max_frames)
    val = frame_set(val_eps, size) if val_eps else None
    decode_s = time.perf_counter() - t0
    torch.manual_seed(config.seed)
    screen = Screen(native, game.crop_left, game.crop_top)
    net = ProbeNet(size, game.fields, screen).to(memory_format=torch.channels_last)
    trainer = ProbeTrainer(net, train, config)
    losses = trainer.fit(progress)
    train_s = time.perf_counter() - t0 - decode_s
    meta = {"probe_version": PROBE_VERSION, "game": game.name, "size": list(size), "native_size": list(native),
            "screen_offset": [game.crop_left, game.crop_top],
            "resize": "stretch", "fps": episodes[0].meta["fps"], "fields": [asdict(f) for f in game.fields],
            "config": {**asdict(config), "size": list(size)},
            "train_episodes": [str(ep.path) for ep in train_eps], "val_episodes": [str(ep.path) for ep in val_eps]}
    probe = Probe(net, meta)
    report = {"game": game.name, "size": list(size), "parameters": sum(p.numel() for p in net.parameters()),
              "train_frames": len(train), "val_frames": len(val) if val else 0, "decode_s": decode_s,
              "train_s": train_s, "final_loss": float(np.mean(losses[-50:])),
              "held_out": evaluate_probe(probe, val) if val else None}
    save_probe(probe, work, report)
    outputs.swap_in(work, out)
    return report


def eval_probe(probe_dir: Path, run_dirs: list[Path], max_frames: int | None = None) -> dict:
    """Score a saved probe on other recordings: every frame whose truth is known, or `max_frames`
    spread evenly over the episodes."""
    probe = load_probe(probe_dir)
    game, episodes = open_runs(run_dirs)
    if game.name != probe.game:
        raise ProbeError(f"the probe in {probe_dir} reads {probe.game}; the recordings are {game.name}")
    return evaluate_probe(probe, frame_set(episodes, probe.size, max_frames))
