"""Episode video in, clip MP4 bytes out: stream-decode once, encode each clip in memory.

Clips use the recorder's lossless codec (`libx264rgb`, crf 0, preset ultrafast, one thread), so a
clip's decoded frames equal the episode's. `decord.VideoReader(io.BytesIO(data))` reads them back.
"""

from __future__ import annotations

import io

import numpy as np

from wantofight.video import VideoWriter, read_video


class ClipEncoder(VideoWriter):
    """Encodes frames into an MP4 held in memory (the recorder's lossless, bit-exact writer)."""

    def __init__(self, fps: int, width: int, height: int):
        self.buffer = io.BytesIO()
        super().__init__(self.buffer, fps, width, height)

    def finish(self) -> bytes:
        self.close()
        return self.buffer.getvalue()


def decode_mp4(data: bytes) -> np.ndarray:
    """All frames of in-memory MP4 bytes: (T, H, W, 3) uint8."""
    return read_video(data)
