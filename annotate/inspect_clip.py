"""`wtf inspect`: one clip (from a curriculum dataset) or one raw episode, rendered with the key HUD.

Outputs, chosen by the file suffix:
- `.mp4`: H.264 (yuv420p, plays in every browser and player), the clip's fps;
- `.gif`: animated GIF (needs Pillow, which the `curate` extra's matplotlib brings);
- `.png`: a contact sheet, every k-th frame with its HUD, in a grid (PNG written by OpenCV).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from wantofight.hud import hud_layout, render_hud
from wantofight.images import write_png
from wantofight.outputs import written

SUFFIXES = (".mp4", ".gif", ".png")
CHUNK_FRAMES = 64
"""Frames rendered at a time when streaming to MP4/GIF (bounds memory on long episodes)."""


class InspectError(ValueError):
    """A clip or episode that cannot be found or rendered; the message says what to do."""


@dataclass
class ClipView:
    """What the HUD needs about a stretch of recorded rows: decoded frames plus per-row labels."""

    name: str
    frames: np.ndarray
    """(T, H, W, 3) uint8."""
    p1_keys: list
    p2_keys: list
    start_index: int
    fps: int
    p1_pressed: list | None = None
    p2_pressed: list | None = None
    p1_effective: list | None = None
    p2_effective: list | None = None
    p1_action: list | None = None
    p2_action: list | None = None
    events: list = field(default_factory=list)

    def render(self, scale: int = 2, rows: slice | None = None) -> np.ndarray:
        """HUD frames for `rows` (default all) with the timeline spanning the whole view."""
        rows = rows or slice(0, len(self.frames))
        pick = lambda values: None if values is None else list(values)[rows]  # noqa: E731
        labels = None
        if self.p1_action is not None or self.p2_action is not None:
            labels = (pick(self.p1_action), pick(self.p2_action))
        pressed = {}
        for p in (1, 2):
            given = getattr(self, f"p{p}_pressed")
            if given is None:  # derive edges over the whole view, so a chunk's first row is right
                keys = np.asarray(getattr(self, f"p{p}_keys"), dtype=np.uint16)
                given = keys & ~np.concatenate([[0], keys[:-1]]).astype(np.uint16)
            pressed[p] = pick(given)
        return render_hud(
            self.frames[rows], pick(self.p1_keys), pick(self.p2_keys), pick(self.p1_effective),
            pick(self.p2_effective), labels, self.events, start_index=self.start_index + rows.start, scale=scale,
            p1_pressed=pressed[1], p2_pressed=pressed[2],
            timeline_span=(self.start_index, len(self.frames)),
        )


# ---------------------------------------------------------------------------------------------
# Finding clips


def shard_files(ds_dir: Path) -> list[Path]:
    """The dataset's shards (`DS_DIR/<tier>/<split>-NNNNN.parquet`; hidden part and temp files skipped)."""
    ds_dir = Path(ds_dir)
    if not ds_dir.is_dir():
        raise InspectError(f"{ds_dir} is not a folder; give a dataset written by `wtf build-curriculum --out`")
    files = sorted(p for p in ds_dir.glob("*/*.parquet") if not p.parent.name.startswith("."))
    if not files:
        raise InspectError(f"{ds_dir} holds no shards (*/*.parquet); build one with `wtf build-curriculum`")
    return files


def read_clip(ds_dir: Path, clip_id: str) -> dict:
    """One clip row (every column) by id. Only row groups whose clip_id statistics match are read."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    dataset = ds.dataset([str(p) for p in shard_files(ds_dir)], format="parquet")
    table = dataset.to_table(filter=pc.field("clip_id") == clip_id)
    if table.num_rows == 0:
        raise InspectError(
            f"no clip {clip_id!r} in {ds_dir}; list ids with: wtf query {ds_dir} \"select clip_id, tier, p1_move, "
            f"p2_move from clips limit 20\""
        )
    return table.slice(0, 1).to_pylist()[0]


def clip_view(row: dict) -> ClipView:
    from wantofight.annotate.video import decode_mp4

    frames = decode_mp4(row["video"])
    return ClipView(
        name=row["clip_id"], frames=frames, p1_keys=row["p1_keys"], p2_keys=row["p2_keys"],
        start_index=row["start_frame"], fps=row["fps"], p1_pressed=row["p1_pressed"], p2_pressed=row["p2_pressed"],
        p1_effective=row["p1_effective"], p2_effective=row["p2_effective"], p1_action=row["p1_action"],
        p2_action=row["p2_action"], events=row["events"] or [],
    )  # fmt: skip


def episode_view(path: Path, start: int = 0, frames: int | None = None) -> ClipView:
    """Rows [start, start + frames) of a raw recording; labels from its annotation, or computed in
    memory (nothing is written into the recording) when it has none."""
    from wantofight.annotate.annotate import annotate_episode, is_annotated, read_annotation
    from wantofight.annotate.episode import EpisodeError, load_episode
    from wantofight.video import iter_frames

    path = Path(path)
    try:
        episode = load_episode(path)
    except EpisodeError as err:
        raise InspectError(str(err)) from None
    rows = episode.rows
    if not 0 <= start < rows:
        raise InspectError(f"--start {start} is outside the episode's rows 0..{rows - 1}")
    end = rows if frames is None else min(rows, start + frames)
    annotation = None
    try:
        annotation = read_annotation(path) if is_annotated(path, episode) else annotate_episode(episode)
    except Exception:  # an imported game without game.json still gets keys and frames
        annotation = None
    picked = []
    for t, rgb in enumerate(iter_frames(path / "video.mp4")):
        if t >= end:
            break
        if t >= start:
            picked.append(rgb)
    view = ClipView(
        name=f"{episode.episode_id}", frames=np.stack(picked), start_index=start, fps=int(episode.meta["fps"]),
        p1_keys=episode.columns["p1_keys"][start:end].tolist(), p2_keys=episode.columns["p2_keys"][start:end].tolist(),
    )  # fmt: skip
    if annotation is not None:
        columns = annotation.frames.to_pydict()
        for name in ("p1_pressed", "p2_pressed", "p1_effective", "p2_effective", "p1_action", "p2_action"):
            if name in columns:
                setattr(view, name, columns[name][start:end])
        view.events = [e for e in annotation.events.to_pylist() if e["start_frame"] < end and e["end_frame"] > start]
    return view


# ---------------------------------------------------------------------------------------------
# Writing


def write_view(view: ClipView, out: Path, scale: int = 2, every: int | None = None, columns: int = 4,
               progress=None) -> Path:
    """Render `view` to `out` (.mp4, .gif or .png contact sheet); returns `out`."""
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in SUFFIXES:
        raise InspectError(f"--out {out}: unknown format {suffix!r}; valid: {', '.join(SUFFIXES)}")
    if scale < 1:
        raise InspectError(f"--scale must be at least 1, got {scale}")
    out.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".png":
        write_png(out, contact_sheet(view, scale=scale, every=every, columns=columns))
        return out
    chunks = (view.render(scale, slice(a, min(a + CHUNK_FRAMES, len(view.frames))))
              for a in range(0, len(view.frames), CHUNK_FRAMES))
    if suffix == ".mp4":
        write_mp4(out, chunks, view.fps, progress=progress)
    else:
        write_gif(out, chunks, view.fps)
    return out


def contact_sheet(view: ClipView, scale: int = 2, every: int | None = None, columns: int = 4) -> np.ndarray:
    """Every `every`-th frame (default: about 16 tiles) with its HUD, in a grid: (H, W, 3) uint8."""
    t_len = len(view.frames)
    every = every or max(1, -(-t_len // 16))
    if every < 1:
        raise InspectError(f"--every must be at least 1, got {every}")
    picks = list(range(0, t_len, every))
    tiles = [view.render(scale, slice(t, t + 1))[0] for t in picks]
    columns = max(1, min(columns, len(tiles)))
    rows = -(-len(tiles) // columns)
    th, tw, _ = tiles[0].shape
    gap = 4
    sheet = np.full((rows * (th + gap) - gap, columns * (tw + gap) - gap, 3), 8, dtype=np.uint8)
    for i, tile in enumerate(tiles):
        r, c = divmod(i, columns)
        sheet[r * (th + gap):r * (th + gap) + th, c * (tw + gap):c * (tw + gap) + tw] = tile
    return sheet


def write_mp4(out: Path, chunks, fps: int, crf: int = 18, progress=None) -> None:
    """(T, H, W, 3) uint8 chunks → a browser-playable MP4 (the project's one writer as a lossy preview:
    H.264 yuv420p, index first so it streams), written under a temporary name and renamed."""
    from wantofight.video import VideoWriter

    with written(Path(out)) as tmp:
        writer = None
        for chunk in chunks:
            if writer is None:  # the size is the first chunk's
                writer = VideoWriter(tmp, int(fps), chunk.shape[2], chunk.shape[1], preview_crf=crf)
            for rgb in chunk:
                writer.write(rgb)
            if progress is not None:
                progress(len(chunk))
        if writer is None:
            raise InspectError(f"{out}: no frames to write")
        writer.close()


def write_gif(out: Path, chunks, fps: int) -> None:
    try:
        from PIL import Image
    except ImportError:
        raise InspectError("writing .gif needs Pillow (pip install -e \".[curate]\"); .mp4 and .png do not") from None
    images = [Image.fromarray(rgb) for chunk in chunks for rgb in chunk]
    duration = max(20, round(1000 / fps / 10) * 10)  # GIF delays are in 1/100 s; browsers clamp below 20 ms
    images[0].save(out, save_all=True, append_images=images[1:], duration=duration, loop=0, optimize=False)


def describe(view: ClipView, scale: int) -> str:
    h, w = hud_layout(view.frames.shape[1], view.frames.shape[2], scale).output_shape
    return f"{view.name}: {len(view.frames)} frames from row {view.start_index}, {w}×{h} at {view.fps} fps"

