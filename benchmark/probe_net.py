"""The state probe's network: find both fighters in the whole frame, then read each from a crop.

    net = ProbeNet((128, 128), fields, Screen((224, 240), crop_left=8, crop_top=8))
    logits = net(frames)                           # {"x": (B, P, 128), "state": (B, P, 8), ...}

1. The frame branch reads the numbers: x, y (where each fighter is) and health (the HUD bars).
   A strided "patchify" stem brings any frame size to a grid about 24-32 cells high, so the cost per
   frame is nearly the same at 64 x 64 and at the native 224 x 240; the final grid is flattened, so
   the head knows where on screen a feature is, which is what position reading needs.
2. The crop branch reads the classes (facing, state, move) of one fighter from a window around it
   (CROP_NATIVE native pixels, sampled to CROP_SIZE by nearest pixel), with the player's id as an
   input and a fourth channel marking where the other fighter stands, so a pose a few pixels wide is
   seen at full resolution and a fighter drawn over it is not mistaken for it. It is
   centred on the positions the frame branch read; training centres it on the true positions
   (jittered) instead.

Numbers are classified into bins and read back as the softmax-weighted mean of the bins around the
best one (sub-bin precision).

Letters: B batch, P players, C channels, H W frame size, h w grid size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from wantofight.benchmark.labels import Field

STEM_MIN_ROWS = 24
"""The stem's stride is the largest power of two that leaves at least this many grid rows."""
CROP_NATIVE = (40, 64)
"""Native pixels (rows, columns) around a fighter that its crop covers: the 26-px-tall body, a lying
fighter 31 px wide and a limb reaching 15 px forward, either way."""
CROP_SIZE = (24, 40)
CROP_ABOVE_FEET = 30
"""The crop's top edge lies this many native rows above the fighter's feet."""
OTHER_HALF_WIDTH, OTHER_HEIGHT = 8, 26
"""The standing body of another fighter, marked in a fourth channel of the crop (native px)."""
NUMBER_FIELDS = ("x", "y", "health")


@dataclass(frozen=True)
class Screen:
    """Where game coordinates land in a native frame: column = x - crop_left, row = y - crop_top."""

    native: tuple[int, int]
    crop_left: int = 0
    crop_top: int = 0


def stem_stride(height: int) -> int:
    return 2 ** max(0, int(math.floor(math.log2(max(1, height / STEM_MIN_ROWS)))))


def conv_block(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(c_out),
                         nn.ReLU(inplace=True))


class ProbeNet(nn.Module):
    """(B, 3, H, W) in [-1, 1] (and optionally true centres) -> {field: logits (B, P, classes)}."""

    def __init__(self, size: tuple[int, int], fields: tuple[Field, ...], screen: Screen, players: int = 2,
                 widths: tuple[int, ...] = (16, 32, 32, 48), crop_widths: tuple[int, ...] = (16, 24, 32, 48),
                 hidden: int = 256):
        super().__init__()
        H, W = size
        s = stem_stride(H)
        self.size, self.fields, self.screen, self.players = (H, W), fields, screen, players
        self.numbers = tuple(f for f in fields if f.name in NUMBER_FIELDS)
        self.classes = tuple(f for f in fields if f.name not in NUMBER_FIELDS)
        c0, c1, c2, c3 = widths
        self.stem = nn.Sequential(nn.Conv2d(3, c0, s, stride=s), nn.BatchNorm2d(c0), nn.ReLU(inplace=True))
        self.body = nn.Sequential(conv_block(c0, c1), conv_block(c1, c2, 2), conv_block(c2, c2),
                                  conv_block(c2, c3, 2), conv_block(c3, c3))
        with torch.no_grad():
            h, w = self.body(self.stem(torch.zeros(1, 3, H, W))).shape[2:]
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(c3 * h * w, hidden), nn.ReLU(inplace=True))
        self.out = nn.Linear(hidden, players * sum(f.classes for f in self.numbers))
        k0, k1, k2, k3 = crop_widths
        self.crop_body = nn.Sequential(conv_block(4, k0), conv_block(k0, k1, 2), conv_block(k1, k2, 2),
                                       conv_block(k2, k3, 2), nn.AdaptiveAvgPool2d((2, 3)), nn.Flatten())
        self.player_embed = nn.Embedding(players, k3 * 6)
        self.crop_head = nn.Sequential(nn.Linear(k3 * 6, hidden), nn.ReLU(inplace=True),
                                       nn.Linear(hidden, sum(f.classes for f in self.classes)))

    def forward(self, frames: torch.Tensor, centres: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """frames (B, 3, H, W); centres (B, P, 2) true (x, y) in game px for training, else the read ones."""
        if tuple(frames.shape[-2:]) != self.size:
            raise ValueError(f"the probe reads {self.size[0]}x{self.size[1]} frames, got "
                             f"{frames.shape[-2]}x{frames.shape[-1]}")
        B, P = len(frames), self.players
        z = self.out(self.head(self.body(self.stem(frames)))).view(B, P, -1)  # (B, P, sum(bins))
        logits = dict(zip((f.name for f in self.numbers), z.split([f.classes for f in self.numbers], dim=-1)))
        if centres is None:
            with torch.no_grad():
                centres = torch.stack([read_number(logits[n], f) for n, f in
                                       ((f.name, f) for f in self.numbers if f.name in ("x", "y"))], dim=-1)
        crops = self.crops(frames, centres)  # (B P, 3, h, w)
        feats = self.crop_body(crops) + self.player_embed.weight.repeat(B, 1)  # (B P, C)
        z = self.crop_head(feats).view(B, P, -1)  # (B, P, sum(classes))
        logits.update(zip((f.name for f in self.classes), z.split([f.classes for f in self.classes], dim=-1)))
        return logits

    def crops(self, frames: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W), centres (B, P, 2) game (x, y) -> (B P, 4, *CROP_SIZE) windows, nearest pixel
        (as the data path resizes), edges repeated where a window leaves the frame; channel 4 marks
        where the other fighters stand, so one drawn over this one is not read as it."""
        B, P = len(frames), centres.shape[1]
        (nh, nw), (H, W) = self.screen.native, self.size
        col = centres[..., 0] - self.screen.crop_left  # native column of the fighter's centre
        top = centres[..., 1] - self.screen.crop_top - CROP_ABOVE_FEET
        ys = torch.arange(CROP_SIZE[0], device=frames.device) * (CROP_NATIVE[0] / CROP_SIZE[0])
        xs = (torch.arange(CROP_SIZE[1], device=frames.device) - CROP_SIZE[1] / 2) * (CROP_NATIVE[1] / CROP_SIZE[1])
        rows = ((top[..., None] + ys) * (H / nh)).floor().long().clamp(0, H - 1)  # (B, P, h)
        cols = ((col[..., None] + xs) * (W / nw)).floor().long().clamp(0, W - 1)  # (B, P, w)
        b = torch.arange(B, device=frames.device).view(B, 1, 1, 1)
        pixels = frames.permute(0, 2, 3, 1)  # (B, H, W, 3): a view, contiguous for channels-last input
        out = pixels[b, rows[..., :, None], cols[..., None, :]]  # (B, P, h, w, 3)
        others = torch.stack([centres.roll(k, dims=1) for k in range(1, P)], dim=2)  # (B, P, P-1, 2)
        ocol = others[..., 0] - self.screen.crop_left  # (B, P, P-1)
        ofeet = others[..., 1] - self.screen.crop_top
        crow = (top[..., None] + ys)[..., None, :, None]  # (B, P, 1, h, 1) native rows of the crop
        ccol = (col[..., None] + xs)[..., None, None, :]  # (B, P, 1, 1, w)
        near = ((ccol - ocol[..., None, None]).abs() <= OTHER_HALF_WIDTH) & \
            (crow >= ofeet[..., None, None] - OTHER_HEIGHT) & (crow <= ofeet[..., None, None])  # (B, P, P-1, h, w)
        other = near.any(2).to(out.dtype)[..., None] * 2 - 1  # (B, P, h, w, 1): +1 where another fighter stands
        out = torch.cat([out, other], dim=-1)  # (B, P, h, w, 4)
        return out.flatten(0, 1).permute(0, 3, 1, 2)  # (B P, 4, h, w), channels-last


def read_number(logits: torch.Tensor, field: Field, window: int = 2) -> torch.Tensor:
    """Bin logits (..., bins) -> values: the softmax-weighted mean of the bins within `window` of
    the most likely one."""
    best = logits.argmax(-1, keepdim=True)  # (..., 1)
    offsets = torch.arange(-window, window + 1, device=logits.device)
    idx = (best + offsets).clamp(0, field.classes - 1)  # (..., 2 window + 1)
    weights = torch.softmax(logits.gather(-1, idx), dim=-1)
    return (weights * idx.to(weights.dtype)).sum(-1) * field.step


FOUND_MASS = 0.5
"""A fighter is found in a frame when at least this share of the x and of the y softmax lies within
two bins of the most likely one (a drawn fighter is read this surely; a smear or an empty stage is not)."""


def peak_mass(logits: torch.Tensor, window: int = 2) -> torch.Tensor:
    """(..., bins) -> (...): softmax mass within `window` bins of the most likely one."""
    p = torch.softmax(logits, dim=-1)
    bins = torch.arange(p.shape[-1], device=p.device)
    near = (bins - p.argmax(-1, keepdim=True)).abs() <= window  # (..., bins)
    return (p * near).sum(-1)


def read_fields(logits: dict[str, torch.Tensor], fields: tuple[Field, ...]) -> dict[str, torch.Tensor]:
    """Logits -> per field (B, P) values: numbers in their units, classes as indices; and `found`
    (B, P), 1 where the fighter is found (FOUND_MASS)."""
    out = {f.name: read_number(logits[f.name], f) if f.is_number else logits[f.name].argmax(-1).float()
           for f in fields}
    out["found"] = ((peak_mass(logits["x"]) >= FOUND_MASS) & (peak_mass(logits["y"]) >= FOUND_MASS)).float()
    return out
