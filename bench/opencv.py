"""OpenCV against the hand-written picture code it replaced, measured side by side in one run (not a test).

Pictures come from a match recorded by the project's own collector, rendered with the key HUD
(`wtf inspect --episode`). Each comparison prints the time of every candidate (median of interleaved
rounds), its ratio to the old code, and whether the pictures are identical (max pixel difference):

- PNG writing: the old zlib writer (kept here as the reference) vs `cv2.imencode` as wantofight/images.py
  calls it, and OpenCV's defaults;
- PNG reading: the old reader vs `cv2.imdecode` vs PyAV, and `cv2.imdecode` after `import decord`;
- upscaling a HUD video: `repeat` vs `cv2.resize` nearest neighbour, with one thread and with OpenCV's own;
- the HUD's text: our 3×5 bitmap font vs `cv2.putText` at the same 5 px cap height (time, how many of
  the 36 letters and digits stay distinct, a picture of both in bench/results/opencv-text.png);
- the HUD's key cells: NumPy slices over all frames vs `cv2.rectangle` per frame;
- GIF: Pillow (what `wtf inspect --out x.gif` uses) vs `cv2.imencodeanimation`;
- the whole `render_hud` of a clip, OpenCV upscaling vs `repeat`.

    python bench/opencv.py > bench/results/opencv.txt
"""

from __future__ import annotations

import io
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"


# ---------------------------------------------------------------------------------------------
# The hand-written code that wantofight/images.py replaced (annotate/inspect_clip.py before it), verbatim


def handwritten_png(image: np.ndarray) -> bytes:
    image = np.ascontiguousarray(image, dtype=np.uint8)
    h, w, _ = image.shape
    raw = np.concatenate([np.zeros((h, 1), dtype=np.uint8), image.reshape(h, w * 3)], axis=1)  # filter 0 per row

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw.tobytes(), 6)) + chunk(b"IEND", b"")


def handwritten_read_png(data: bytes) -> np.ndarray:
    pos, idat, size = 8, b"", None
    while pos < len(data):
        length = struct.unpack(">I", data[pos:pos + 4])[0]
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    w, h = size
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + w * 3)
    return raw[:, 1:].reshape(h, w, 3)


def repeat_upscale(frames: np.ndarray, scale: int) -> np.ndarray:
    return frames.repeat(scale, axis=-3).repeat(scale, axis=-2)


def glyph_at_a_time_draw_text(image: np.ndarray, y: int, x: int, text: str, color) -> None:
    from wantofight.hud import ADVANCE, FONT

    h, w = image.shape[-3], image.shape[-2]
    color = np.asarray(color, dtype=np.uint8)
    for i, char in enumerate(text.upper()):
        glyph = FONT.get(char, FONT["?"])
        x0 = x + i * ADVANCE
        if x0 >= w:
            break
        ys, xs = np.nonzero(glyph)
        ys, xs = ys + y, xs + x0
        keep = (ys >= 0) & (ys < h) & (xs >= 0) & (xs < w)
        image[..., ys[keep], xs[keep], :] = color


# ---------------------------------------------------------------------------------------------
# Measuring


def measure(candidates: dict, rounds: int = 7) -> dict[str, tuple[float, object]]:
    """name -> (median seconds, last result); candidates run interleaved, round after round, so a busy
    machine slows them alike."""
    times: dict[str, list[float]] = {name: [] for name in candidates}
    results = {}
    for _ in range(rounds):
        for name, fn in candidates.items():
            start = time.perf_counter()
            results[name] = fn()
            times[name].append(time.perf_counter() - start)
    return {name: (statistics.median(t), results[name]) for name, t in times.items()}


def max_diff(a: np.ndarray, b: np.ndarray) -> str:
    if a.shape != b.shape:
        return f"shape {a.shape} vs {b.shape}"
    return str(int(np.abs(a.astype(np.int16) - b.astype(np.int16)).max()))


def report(title: str, rows: list[tuple[str, float, str]], reference: str) -> None:
    """rows: (name, seconds, note); ratios are the reference's time over each candidate's (>1: faster)."""
    base = dict((name, t) for name, t, _ in rows)[reference]
    print(f"\n{title}")
    for name, seconds, note in rows:
        print(f"  {name:50s} {seconds * 1e3:9.2f} ms  x{base / seconds:5.2f}  {note}")


# ---------------------------------------------------------------------------------------------
# Pictures


def hud_view(tmp: Path):
    from wantofight.annotate.inspect_clip import episode_view
    from wantofight.collect.run import RunSettings, collect

    run = tmp / "run"
    collect(RunSettings(policy="scripted", p2_policy="random", episodes=1, max_frames=400, fps=30, seed=1), run,
            workers=1, progress=False)
    return episode_view(next((run / "episodes").iterdir()), start=100, frames=161)


def png_section(view) -> None:
    import cv2

    from wantofight.images import png_bytes, read_png
    from wantofight.annotate.inspect_clip import contact_sheet

    pictures = {
        "contact sheet, scale 1": contact_sheet(view, scale=1, every=12),
        "contact sheet, scale 2": contact_sheet(view, scale=2, every=12),
        "gallery poster (one HUD frame, scale 1)": view.render(1, slice(80, 81))[0],
    }
    for label, image in pictures.items():
        bgr = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
        timed = measure({
            "hand-written zlib writer (level 6, no filter)": lambda: handwritten_png(image),
            "cv2.imencode, images.png_bytes (6, no filter)": lambda: png_bytes(image),
            "cv2.imencode, OpenCV defaults": lambda: cv2.imencode(".png", bgr)[1].tobytes(),
            "cv2.imencode (6, libpng's adaptive filters)": lambda: cv2.imencode(
                ".png", bgr, [cv2.IMWRITE_PNG_COMPRESSION, 6])[1].tobytes(),
        })
        rows = []
        for name, (seconds, data) in timed.items():
            note = f"{len(data):8d} bytes, max pixel difference {max_diff(read_png(data), image)}"
            rows.append((name, seconds, note))
        report(f"PNG writing: {label} {image.shape[1]}x{image.shape[0]}", rows,
               "hand-written zlib writer (level 6, no filter)")

    image = pictures["contact sheet, scale 2"]
    data = handwritten_png(image)
    timed = measure({
        "hand-written reader (its own files only)": lambda: handwritten_read_png(data),
        "cv2.imdecode": lambda: cv2.cvtColor(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR),
                                             cv2.COLOR_BGR2RGB),
        "PyAV, images.read_png": lambda: read_png(data),
    })
    report("PNG reading: contact sheet, scale 2",
           [(n, s, f"max pixel difference {max_diff(r, image)}") for n, (s, r) in timed.items()],
           "hand-written reader (its own files only)")
    probe = ("import decord, cv2, numpy as np, sys; data = sys.stdin.buffer.read(); "
             "print(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR) is not None)")
    after = subprocess.run([sys.executable, "-c", probe], input=data, capture_output=True)
    print(f"  cv2.imdecode in a process that imported decord first: decoded={after.stdout.decode().strip()} "
          f"({after.stderr.decode().strip().splitlines()[-1] if after.stderr.strip() else 'no error'})")


def upscale_section(view) -> None:
    import cv2

    from wantofight.images import upscale

    canvas = view.render(1)  # (161, H, W, 3): the HUD before its upscale
    for scale in (2, 3):
        for threads in (1, cv2.getNumThreads()):
            cv2.setNumThreads(threads)

            def exact():
                out = np.empty((len(canvas), canvas.shape[1] * scale, canvas.shape[2] * scale, 3), np.uint8)
                for image, target in zip(canvas, out):
                    cv2.resize(image, target.shape[1::-1], dst=target, interpolation=cv2.INTER_NEAREST_EXACT)
                return out

            timed = measure({
                "repeat along both axes (the old code)": lambda: repeat_upscale(canvas, scale),
                "cv2.resize INTER_NEAREST, images.upscale": lambda: upscale(canvas, scale),
                "cv2.resize INTER_NEAREST_EXACT": exact,
            }, rounds=5)
            reference = timed["repeat along both axes (the old code)"][1]
            report(f"Upscaling a {canvas.shape[0]}-frame HUD video {canvas.shape[2]}x{canvas.shape[1]} by {scale}, "
                   f"OpenCV threads {threads}",
                   [(n, s, f"max pixel difference {max_diff(r, reference)}") for n, (s, r) in timed.items()],
                   "repeat along both axes (the old code)")
    cv2.setNumThreads(-1)


def text_section() -> None:
    import cv2

    from wantofight import hud

    chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    fonts = {"FONT_HERSHEY_PLAIN": cv2.FONT_HERSHEY_PLAIN, "FONT_HERSHEY_SIMPLEX": cv2.FONT_HERSHEY_SIMPLEX}

    def ink_height(font, scale: float) -> int:
        canvas = np.zeros((40, 40), np.uint8)
        cv2.putText(canvas, "H", (4, 30), font, scale, 255, 1, cv2.LINE_8)
        rows = np.nonzero((canvas > 127).any(axis=1))[0]
        return int(rows.max() - rows.min() + 1) if len(rows) else 0

    scales = {}

    def cv2_scale(font) -> float:  # the smallest scale whose capital H draws GLYPH_H (5) px of ink, as in our font
        if font not in scales:
            scales[font] = next(s for s in np.arange(0.1, 2, 0.005) if ink_height(font, float(s)) >= hud.GLYPH_H)
        return float(scales[font])

    def ink(bitmap: np.ndarray) -> bytes:  # OpenCV's text is antialiased: ink is what is over half bright
        ys, xs = np.nonzero(bitmap)
        return b"" if not len(ys) else bitmap[ys.min():ys.max() + 1, xs.min():xs.max() + 1].tobytes()

    def glyphs_ours() -> set:
        out = set()
        for c in chars:
            canvas = np.zeros((9, 9, 3), np.uint8)
            hud.draw_text(canvas, 2, 2, c, (255, 255, 255))
            out.add(ink(canvas[..., 0] > 0))
        return out

    def glyphs_cv2(font) -> set:
        out = set()
        for c in chars:
            canvas = np.zeros((16, 16), np.uint8)
            cv2.putText(canvas, c, (2, 2 + hud.GLYPH_H), font, cv2_scale(font), 255, 1, cv2.LINE_8)
            out.add(ink(canvas > 127))
        return out

    words = ["ATTACK:HEAVY_PUNCH", "WALK_FORWARD", "ROW 12345  FRAME 160 OF 161 HIT 1>2", "EMULATOR", "GENERATED"]

    def blank() -> np.ndarray:
        return np.zeros((48, 240, 3), np.uint8)

    def draw_ours():
        frame = blank()
        for i, w in enumerate(words):
            hud.draw_text(frame, 2 + i * 8, 2, w, hud.TEXT)
        return frame

    def draw_before():
        frame = blank()
        for i, w in enumerate(words):
            glyph_at_a_time_draw_text(frame, 2 + i * 8, 2, w, hud.TEXT)
        return frame

    def draw_cv2(font):
        def run():
            frame = blank()
            for i, w in enumerate(words):
                cv2.putText(frame, w, (2, 7 + i * 8), font, cv2_scale(font), hud.TEXT, 1, cv2.LINE_8)
            return frame
        return run

    timed = measure({"hud.draw_text, 3x5 bitmap": draw_ours, "before: one glyph at a time": draw_before,
                     **{f"cv2.putText {name}": draw_cv2(f) for name, f in fonts.items()}}, rounds=21)
    rows = [("hud.draw_text, 3x5 bitmap", timed["hud.draw_text, 3x5 bitmap"][0],
             f"{len(glyphs_ours())}/36 letters and digits distinct, "
             f"'{words[0]}' {hud.text_width(words[0])} px wide"),
            ("hud.draw_text before (one glyph at a time)", timed["before: one glyph at a time"][0],
             "max pixel difference " + max_diff(timed["before: one glyph at a time"][1],
                                                timed["hud.draw_text, 3x5 bitmap"][1]))]
    for name, font in fonts.items():
        width = cv2.getTextSize(words[0], font, cv2_scale(font), 1)[0][0]
        rows.append((f"cv2.putText {name} (scale {cv2_scale(font):.3f})", timed[f"cv2.putText {name}"][0],
                     f"{len(glyphs_cv2(font))}/36 letters and digits distinct, '{words[0]}' {width} px wide"))
    report(f"HUD text at a {hud.GLYPH_H} px cap height ({len(words)} lines)", rows, "hud.draw_text, 3x5 bitmap")
    grey = np.zeros((16, 60), np.uint8)
    plain = cv2.FONT_HERSHEY_PLAIN
    cv2.putText(grey, "FRAME 160", (1, 10), plain, cv2_scale(plain), 255, 1, cv2.LINE_8)
    print(f"  cv2.putText draws antialiased even with LINE_8: {len(np.unique(grey))} grey levels in 'FRAME 160'; "
          "our font: 2 (ink, background)")

    # The picture: each line drawn by both, 4x so a reader can see the pixels.
    panel = np.full((len(words) * 3 * 9 + 4, 170, 3), hud.BACKGROUND, np.uint8)
    for i, w in enumerate(words):
        y = 2 + i * 27
        hud.draw_text(panel, y, 2, w, hud.TEXT)
        for j, font in enumerate(fonts.values()):
            cv2.putText(panel, w, (2, y + 9 * (j + 1) + hud.GLYPH_H), font, cv2_scale(font), hud.TEXT, 1, cv2.LINE_8)
    from wantofight.images import upscale, write_png

    write_png(RESULTS / "opencv-text.png", upscale(panel, 4))
    print("  picture: bench/results/opencv-text.png (per line: our font, then cv2 PLAIN, then cv2 SIMPLEX; 4x)")


def cells_section(view) -> None:
    import cv2

    from wantofight import hud

    canvas = view.render(1)
    mask = np.arange(len(canvas)) % 3 == 0  # a key held on a third of the frames
    y, x, h, w = 230, 60, hud.CELL_H, hud.CELL_W

    def numpy_fill():
        out = canvas.copy()
        cells = out[mask, y:y + h, x:x + w]
        cells[:] = hud.PLAYER_COLORS[1]
        cells[:, 0, :] = cells[:, -1, :] = hud.NEW_BORDER
        cells[:, :, 0] = cells[:, :, -1] = hud.NEW_BORDER
        out[mask, y:y + h, x:x + w] = cells
        return out

    def cv2_fill():
        out = canvas.copy()
        for t in np.nonzero(mask)[0]:
            cv2.rectangle(out[t], (x, y), (x + w - 1, y + h - 1), hud.PLAYER_COLORS[1], cv2.FILLED)
            cv2.rectangle(out[t], (x, y), (x + w - 1, y + h - 1), hud.NEW_BORDER, 1)
        return out

    timed = measure({"NumPy slices over all frames (hud.py)": numpy_fill, "cv2.rectangle per frame": cv2_fill},
                    rounds=21)
    reference = timed["NumPy slices over all frames (hud.py)"][1]
    report(f"One key cell with its border on {mask.sum()} of {len(canvas)} frames",
           [(n, s, f"max pixel difference {max_diff(r, reference)}") for n, (s, r) in timed.items()],
           "NumPy slices over all frames (hud.py)")


def gif_section(view) -> None:
    import cv2
    from PIL import Image

    frames = view.render(1, slice(0, 60))

    def pillow():
        buffer = io.BytesIO()
        images = [Image.fromarray(f) for f in frames]
        images[0].save(buffer, format="GIF", save_all=True, append_images=images[1:], duration=30, loop=0,
                       optimize=False)
        return buffer.getvalue()

    def opencv():
        animation = cv2.Animation()
        animation.frames = [cv2.cvtColor(f, cv2.COLOR_RGB2BGR) for f in frames]
        animation.durations = [30] * len(frames)
        return cv2.imencodeanimation(".gif", animation)[1].tobytes()

    def decoded(data: bytes) -> np.ndarray:
        gif = Image.open(io.BytesIO(data))
        out = []
        for i in range(gif.n_frames):
            gif.seek(i)
            out.append(np.asarray(gif.convert("RGB")))
        return np.stack(out)

    timed = measure({"Pillow (wtf inspect --out x.gif)": pillow, "cv2.imencodeanimation": opencv}, rounds=5)
    report(f"GIF of {len(frames)} HUD frames ({len(np.unique(frames.reshape(-1, 3), axis=0))} colours)",
           [(n, s, f"{len(r):8d} bytes, max pixel difference {max_diff(decoded(r), frames)}")
            for n, (s, r) in timed.items()], "Pillow (wtf inspect --out x.gif)")


def render_section(view) -> None:
    from wantofight import hud

    def with_repeat():
        hud.upscale = repeat_upscale
        try:
            return view.render(2)
        finally:
            hud.upscale = upscale

    upscale = hud.upscale
    timed = measure({"render_hud, upscaled by repeat (old)": with_repeat,
                     "render_hud, images.upscale": lambda: view.render(2)}, rounds=5)
    reference = timed["render_hud, upscaled by repeat (old)"][1]
    report(f"The whole HUD of a {len(view.frames)}-frame clip at scale 2",
           [(n, s, f"max pixel difference {max_diff(r, reference)}") for n, (s, r) in timed.items()],
           "render_hud, upscaled by repeat (old)")


def main() -> None:
    import cv2

    print(f"OpenCV {cv2.__version__} ({cv2.getNumThreads()} threads by default), NumPy {np.__version__}; "
          "times are medians of interleaved rounds; x = old time / this time (above 1: faster)")
    with tempfile.TemporaryDirectory() as tmp:
        view = hud_view(Path(tmp))
    print(f"pictures: {len(view.frames)} rows of a recorded scripted-vs-random match, "
          f"{view.frames.shape[2]}x{view.frames.shape[1]}, with the key HUD")
    png_section(view)
    upscale_section(view)
    text_section()
    cells_section(view)
    gif_section(view)
    render_section(view)


if __name__ == "__main__":
    main()
