"""Pixels and keys of one clip window: decode, window choice, resize, key bits, reference crops.

Coordinates: a clip's recorded rows are 0 .. num_frames - 1 (row 0 = the shard row's
`start_frame` in its episode). Action clips are padded (docs/curriculum.md): rows before 0 show
row 0 and rows from num_frames on show the last row, with no keys. A window is `frames`
consecutive rows starting at `start`, which is negative when it begins in the padding.

Resize policy (docs/datasets.md): `stretch` (default) maps the whole picture onto the model size
with nearest-neighbour sampling, so the HUD and both stage edges stay in view (nothing is cropped)
and sprites keep hard edges and their exact palette colours; NES 240x224 -> 512x384 stretches x by
2.13 and y by 1.71. `letterbox` keeps the aspect ratio and pads with black (-1) instead.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

import numpy as np

RESIZE_MODES = ("stretch", "letterbox")
REF_CROP = 48
"""Side of the square reference crop in screen pixels: a 32x32 fighter canvas plus margin."""
REF_FEET_MARGIN = 6
"""Screen rows kept below the feet in a reference crop."""


class ClipError(ValueError):
    """A row whose content is unusable (undecodable video, wrong frame count or size, ...)."""


# ---------------------------------------------------------------------------------------------
# Windows


@dataclass(frozen=True)
class Padding:
    """Padding of one clip for a window of `frames`: rows [-before, num_frames + after)."""

    before: int
    after: int


def padding_for(num_frames: int, pad_before: int, pad_after: int, frames: int, padded: bool) -> Padding:
    """The shard's padding for action clips, widened evenly when `frames` exceeds it; none for
    full-match clips (`padded=False`), which must hold the window themselves."""
    if not padded:
        return Padding(0, 0)
    extra = max(0, frames - (pad_before + num_frames + pad_after))
    return Padding(pad_before + extra // 2, pad_after + extra - extra // 2)


def start_range(num_frames: int, pad: Padding, frames: int) -> tuple[int, int]:
    """Inclusive range of window starts: inside the padded clip and, when the window is at least
    as long as the recording, covering every recorded row."""
    if pad.before + num_frames + pad.after < frames:
        raise ClipError(f"clip of {num_frames} rows (+{pad.before}/{pad.after} padding) is shorter than {frames}")
    if frames >= num_frames:
        return max(-pad.before, num_frames - frames), min(0, num_frames + pad.after - frames)
    return 0, num_frames - frames


def window_rows(start: int, frames: int, num_frames: int) -> np.ndarray:
    """Recorded row shown by each window frame (padding repeats the first / last row)."""
    return np.clip(np.arange(start, start + frames), 0, num_frames - 1)


def window_padding(start: int, frames: int, num_frames: int) -> np.ndarray:
    """(T,) bool: True where the window frame is padding, not a recorded row."""
    t = np.arange(start, start + frames)
    return (t < 0) | (t >= num_frames)


# ---------------------------------------------------------------------------------------------
# Decode


def decode_rows(video: bytes, rows: np.ndarray, num_frames: int, height: int, width: int) -> np.ndarray:
    """Frames `rows` of in-memory MP4 bytes: (len(rows), H, W, 3) uint8, decoding each distinct row
    once. Raises ClipError when the video does not hold `num_frames` frames of `height` x `width`."""
    from wantofight.video import open_video

    with ExitStack() as stack:
        try:
            reader = stack.enter_context(open_video(video, num_threads=1))
        except Exception as err:  # decord raises its own DECORDError and RuntimeError variants
            raise ClipError(f"undecodable video ({err})") from None
        if len(reader) != num_frames:
            raise ClipError(f"video has {len(reader)} frames, the row says {num_frames}")
        unique, inverse = np.unique(rows, return_inverse=True)
        try:
            decoded = reader.get_batch(unique.tolist()).asnumpy()
        except Exception as err:
            raise ClipError(f"video frames {unique[0]}..{unique[-1]} undecodable ({err})") from None
    if decoded.shape[1:] != (height, width, 3):
        raise ClipError(f"video frames are {decoded.shape[1:3]}, the row says {(height, width)}")
    return decoded[inverse]


# ---------------------------------------------------------------------------------------------
# Resize


def letterbox_box(src: tuple[int, int], dst: tuple[int, int], mode: str) -> tuple[int, int, int, int]:
    """(top, left, height, width) of the picture inside a `dst` frame: all of it for `stretch`,
    the largest aspect-keeping box, centred, for `letterbox`."""
    if mode not in RESIZE_MODES:
        raise ValueError(f"unknown resize mode {mode!r}; valid: {', '.join(RESIZE_MODES)}")
    (h, w), (H, W) = src, dst
    if mode == "stretch":
        return 0, 0, H, W
    scale = min(H / h, W / w)
    bh, bw = max(1, round(h * scale)), max(1, round(w * scale))
    return (H - bh) // 2, (W - bw) // 2, bh, bw


def to_model(frames, size: tuple[int, int], mode: str = "stretch"):
    """uint8 frames (..., 3, h, w) (a torch tensor on any device) -> float32 (..., 3, H, W) in
    [-1, 1], nearest neighbour (source pixel floor((i + 0.5) h / H)), black bars for letterbox.

    The loader's `uint8` mode ships native frames and calls this on the GPU; the default float
    mode calls it in the worker. Both give the same numbers."""
    import torch.nn.functional as F

    lead, (h, w) = frames.shape[:-3], frames.shape[-2:]
    top, left, bh, bw = letterbox_box((h, w), tuple(size), mode)
    x = frames.reshape(-1, 3, h, w).float().mul_(2.0 / 255.0).sub_(1.0)  # (N, 3, h, w)
    x = F.interpolate(x, size=(bh, bw), mode="nearest-exact")  # (N, 3, bh, bw)
    if (bh, bw) != tuple(size):
        x = F.pad(x, (left, size[1] - bw - left, top, size[0] - bh - top), value=-1.0)
    return x.reshape(*lead, 3, *size)


def nearest_index(src: int, dst: int) -> np.ndarray:
    """Source index of each of `dst` output pixels under `nearest-exact`: floor((i + 0.5) src / dst)."""
    return np.minimum(((np.arange(dst) + 0.5) * src / dst).astype(np.int64), src - 1)


def stretch_uint8(frames: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(..., h, w, 3) uint8 -> (..., H, W, 3) uint8: the pixels `to_model` picks in `stretch` mode,
    without the float copy (for readers of many frames: the benchmark's probe)."""
    h, w = frames.shape[-3:-1]
    return frames[..., nearest_index(h, size[0]), :, :][..., nearest_index(w, size[1]), :]


def planar(frames: np.ndarray):
    """(T, h, w, 3) uint8 numpy -> torch uint8 (T, 3, h, w), contiguous."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(frames.transpose(0, 3, 1, 2)))


def resize_to_model(frames: np.ndarray, size: tuple[int, int], mode: str = "stretch"):
    """(T, h, w, 3) uint8 -> torch float32 (T, 3, H, W) in [-1, 1]."""
    return to_model(planar(frames), size, mode)


# ---------------------------------------------------------------------------------------------
# Reference images


def crop_fighter(frame: np.ndarray, x: int, y: int, crop_left: int, crop_top: int) -> np.ndarray:
    """A REF_CROP square of `frame` (h, w, 3) around a fighter whose centre is x and feet y in game
    coordinates (image column = x - crop_left, row = y - crop_top), shifted to stay inside."""
    h, w = frame.shape[:2]
    side = min(REF_CROP, h, w)
    cx, feet = int(x) - crop_left, int(y) - crop_top
    top = min(max(feet + REF_FEET_MARGIN - side, 0), h - side)
    left = min(max(cx - side // 2, 0), w - side)
    return frame[top:top + side, left:left + side]


def square_resize(image: np.ndarray, size: int):
    """(h, w, 3) uint8 -> torch float32 (3, size, size) in [-1, 1], nearest neighbour."""
    return resize_to_model(image[None], (size, size), "stretch")[0]
