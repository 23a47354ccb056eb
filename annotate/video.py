"""Episode video in, clip MP4 bytes out: stream-decode once, encode each clip in memory.

Clips use the recorder's lossless codec (`libx264rgb`, crf 0, preset ultrafast, one thread), so a
clip's decoded frames equal the episode's. `decord.VideoReader(io.BytesIO(data))` reads them back.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Iterator

import numpy as np

from wantofight.collect.episode_files import VIDEO_CODEC, VIDEO_OPTIONS


def iter_frames(path: Path) -> Iterator[np.ndarray]:
    """Every frame of a video in order, (H, W, 3) uint8 RGB, one at a time."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_count = 1
        for frame in container.decode(stream):
            yield frame.to_ndarray(format="rgb24")


class ClipEncoder:
    """Encodes frames into an MP4 held in memory."""

    def __init__(self, fps: int, width: int, height: int):
        import av

        self.buffer = io.BytesIO()
        self.container = av.open(self.buffer, "w", format="mp4")
        self.stream = self.container.add_stream(VIDEO_CODEC, rate=fps)
        self.stream.width, self.stream.height = width, height
        self.stream.pix_fmt = "rgb24"
        self.stream.options = dict(VIDEO_OPTIONS)
        self.stream.codec_context.thread_count = 1
        self._frame_type = av.VideoFrame

    def write(self, rgb: np.ndarray) -> None:
        for packet in self.stream.encode(self._frame_type.from_ndarray(rgb, format="rgb24")):
            self.container.mux(packet)

    def finish(self) -> bytes:
        for packet in self.stream.encode():
            self.container.mux(packet)
        self.container.close()
        return self.buffer.getvalue()


def decode_mp4(data: bytes) -> np.ndarray:
    """All frames of in-memory MP4 bytes: (T, H, W, 3) uint8."""
    import decord

    reader = decord.VideoReader(io.BytesIO(data), ctx=decord.cpu(0))
    return reader.get_batch(list(range(len(reader)))).asnumpy()
