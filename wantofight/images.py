"""Pictures for people: PNG files and integer upscaling of RGB frames, done by OpenCV
(`opencv-python-headless`, a core dependency). Not the model's resize: the training data path's
`datasets.frames.to_model` keeps its own exact nearest-neighbour pixels.

OpenCV works in BGR order; these functions take and return RGB, like the rest of the project.
bench/opencv.py measures them against the hand-written code they replaced (bench/results/opencv.txt).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

PNG_COMPRESSION = 6
"""zlib level. With no row filter (below) the files match the old hand-written writer's in size and
time; libpng's adaptive filters made the HUD's flat pixel art bigger or slower (bench/opencv.py)."""


def png_bytes(image: np.ndarray) -> bytes:
    """(H, W, 3) uint8 RGB -> PNG bytes (8-bit RGB, lossless)."""
    import cv2

    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"expected (H, W, 3) uint8 RGB, got {image.shape} {image.dtype}")
    params = [cv2.IMWRITE_PNG_COMPRESSION, PNG_COMPRESSION, cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_NONE]
    ok, data = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), params)
    if not ok:
        raise ValueError(f"OpenCV could not encode a {image.shape} image as PNG")
    return data.tobytes()


def write_png(out: Path, image: np.ndarray) -> None:
    Path(out).write_bytes(png_bytes(image))


def read_png(data: bytes) -> np.ndarray:
    """PNG bytes -> (H, W, 3) uint8 RGB.

    Read by PyAV, not OpenCV: `import decord` (the data path's video reader) puts its bundled zlib 1.2.3
    in the process's global symbols, and OpenCV's libpng then fails to decode any PNG ("bad parameters
    to zlib"; bench/opencv.py shows it). Its encoder is unaffected."""
    import io

    import av

    try:
        with av.open(io.BytesIO(data), format="png_pipe") as container:
            return next(container.decode(video=0)).to_ndarray(format="rgb24")
    except (av.error.FFmpegError, StopIteration) as err:
        raise ValueError(f"not a PNG image ({err})") from None


def upscale(frames: np.ndarray, scale: int) -> np.ndarray:
    """(..., H, W, C) uint8 -> (..., H·s, W·s, C): every pixel becomes an s×s block (pixel art keeps
    its edges). Equal to `repeat` along both axes, several times faster (bench/opencv.py)."""
    import cv2

    frames = np.asarray(frames)
    if scale == 1:
        return frames
    if scale < 1:
        raise ValueError(f"scale must be at least 1, got {scale}")
    *lead, h, w, c = frames.shape
    flat = np.ascontiguousarray(frames).reshape(-1, h, w, c)
    out = np.empty((len(flat), h * scale, w * scale, c), dtype=frames.dtype)
    for image, target in zip(flat, out):
        # An integer factor: INTER_NEAREST and INTER_NEAREST_EXACT give the same pixels; this one is faster.
        cv2.resize(image, (w * scale, h * scale), dst=target, interpolation=cv2.INTER_NEAREST)
    return out.reshape(*lead, h * scale, w * scale, c)
