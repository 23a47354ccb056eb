"""Every video the project writes and reads: one writer (PyAV), one random-access reader (decord) and
one streaming reader (PyAV, which also reads images).

    writer = VideoWriter(path, fps, width, height)      # lossless RGB H.264, bit-exact; or preview_crf=
    frames = read_video(path)                           # (T, H, W, 3) uint8, from a file or MP4 bytes
    with open_video(path) as reader: reader.get_batch(rows)   # chosen rows (the data loader, the benchmark)
    for rgb in iter_frames(path): ...                   # in order, one at a time (bounded memory)

Why two decoders: decord seeks to any row cheaply (training windows), PyAV streams a file of any length
in order without holding it and reads single images too; both give the same pixels for the lossless
recordings (tests/test_collect.py compares them on a recording).

On the ground floor so that every room, from the recorder to inference, writes and reads video alike.
"""

from __future__ import annotations

import io
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator

import numpy as np

from wantofight.interrupts import ctrl_c_held

VIDEO_CODEC = "libx264rgb"
VIDEO_OPTIONS = {"crf": "0", "preset": "ultrafast"}
"""Lossless RGB H.264: every decoded pixel equals the emulator's (checked by `wtf replay --verify`)."""
PREVIEW_CODEC = "libx264"
PREVIEW_OPTIONS = {"preset": "veryfast"}
"""Lossy H.264 for previews people watch (`wtf inspect-clip`, the gallery, the benchmark's videos)."""


class VideoWriter:
    """Streams RGB frames into an MP4: every MP4 the project writes goes through this class.

    The default is the recordings' lossless H.264 in RGB, bit-exact (equal frames give equal bytes)
    and on one encoder thread (workers scale by process). `preview_crf` makes a lossy preview instead
    (H.264 yuv420p at that crf, index first so a browser streams it) for files only people watch.
    `target` is a path or a binary file object (e.g. `io.BytesIO` for clips held in memory).
    """

    def __init__(self, target: Path | BinaryIO, fps: int, width: int, height: int, *,
                 preview_crf: int | None = None):
        import av

        target = str(target) if isinstance(target, Path) else target
        if preview_crf is None:
            # bitexact: no creation time or encoder version in the file, so equal frames give equal bytes.
            self.container = av.open(target, "w", format="mp4", options={"fflags": "+bitexact"})
            self.stream = self.container.add_stream(VIDEO_CODEC, rate=fps)
            self.stream.pix_fmt = "rgb24"
            self.stream.options = dict(VIDEO_OPTIONS)
            self.stream.codec_context.thread_count = 1
        else:  # yuv420p: the pixel format browsers and phones play; faststart: the index before the data
            self.container = av.open(target, "w", format="mp4", options={"movflags": "+faststart"})
            self.stream = self.container.add_stream(PREVIEW_CODEC, rate=fps)
            self.stream.pix_fmt = "yuv420p"
            self.stream.options = {"crf": str(preview_crf), **PREVIEW_OPTIONS}
        self.stream.width, self.stream.height = width, height
        self._frame_type = av.VideoFrame

    def write(self, rgb: np.ndarray) -> None:
        """rgb: (H, W, 3) uint8."""
        # Zero-copy: the encoder copies the picture during encode(), before `rgb` can change.
        frame = self._frame_type.from_numpy_buffer(np.ascontiguousarray(rgb), format="rgb24")
        for packet in self.stream.encode(frame):
            self.container.mux(packet)

    def close(self) -> None:
        for packet in self.stream.encode():
            self.container.mux(packet)
        self.container.close()


class VideoError(ValueError):
    """A video.mp4 that is missing, empty, truncated or not a video; the message names its episode."""


def video_frame_count(video: Path) -> int:
    """Frames in an MP4 from its index: the one check every reader of a recording makes before decoding
    (a truncated or empty file has no index and fails here, in one line, not in the decoder)."""
    import av

    if not video.is_file():
        raise VideoError(f"{video.parent}: missing video.mp4")
    try:
        with av.open(str(video)) as container:
            return int(container.streams.video[0].frames)
    except (av.error.FFmpegError, IndexError) as err:
        raise VideoError(f"{video.parent}: unreadable video.mp4 ({err})") from None


def iter_frames(source: Path | bytes) -> Iterator[np.ndarray]:
    """Every frame of a video (or image) file or of MP4 bytes in order, (H, W, 3) uint8 RGB, one at a time."""
    import av

    with av.open(io.BytesIO(source) if isinstance(source, bytes) else str(source)) as container:
        stream = container.streams.video[0]
        stream.thread_count = 1
        for frame in container.decode(stream):
            yield frame.to_ndarray(format="rgb24")


@contextmanager
def open_video(source: Path | bytes, num_threads: int = 0) -> Iterator:
    """`with open_video(src) as reader:` a decord VideoReader on an MP4 file or MP4 bytes, freed when
    the block ends. decord frees its C objects (the reader, each batch) in `__del__`, where a Ctrl-C
    would be printed as a traceback and dropped, so the block runs with Ctrl-C held until it ends
    (`interrupts.ctrl_c_held`); keep it to the decoding. The reader's `_handle` is set before its
    `__init__` runs, so a reader that failed to open frees nothing."""
    import decord

    with ctrl_c_held():
        reader = decord.VideoReader.__new__(decord.VideoReader)
        reader._handle = None
        try:
            reader.__init__(str(source) if isinstance(source, Path) else io.BytesIO(source), ctx=decord.cpu(0),
                            num_threads=num_threads)
            yield reader
        finally:
            reader.__del__()  # here, not whenever the last reference goes
            reader._handle = None


def read_video(source: Path | bytes) -> np.ndarray:
    """All frames of an MP4 file or of MP4 bytes: (T, H, W, 3) uint8."""
    with open_video(source) as reader:
        return reader.get_batch(list(range(len(reader)))).asnumpy()
