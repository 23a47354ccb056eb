"""`wtf browse`: a static HTML gallery of a dataset's clips, and a small localhost server for it.

    OUT/
      index.html  clip.html  gallery.js  gallery.css   (copied from annotate/web/)
      data/clips.js          every clip's filter fields, one compact array per clip (`WTF_DATA`)
      data/clip/<id>.js      one clip's labels, keys and events (`WTF_CLIP`), for its page
      media/<id>.mp4         the clip with the key HUD (H.264, plays in browsers)
      media/<id>.png         its poster (the middle frame with the HUD)
      exclude.json           flags, written by the server (the exclude format of docs/curriculum.md)

Data files are JavaScript (`window.WTF_DATA = …`) loaded by `<script>` tags, so the gallery works
opened from disk (browsers refuse `fetch` on `file://`). The grid pages through the clip index in
the browser, so only one page of thumbnails exists at a time; media for 100k clips is the slow part,
so `--limit` renders the first N and `--lazy` (with `--serve`) renders each clip when first asked.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import threading
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

from wantofight.annotate.inspect_clip import clip_view, read_clip, shard_files, write_mp4
from wantofight.images import png_bytes
from wantofight.outputs import write_atomic

WEB_DIR = Path(__file__).parent / "web"
WEB_FILES = ("index.html", "clip.html", "gallery.js", "gallery.css")
INDEX_COLUMNS = ("id", "tier", "split", "moves", "side", "events", "episode", "policy", "frames", "media")
META_COLUMNS = (
    "clip_id", "tier", "split", "run", "episode_id", "p1_policy", "p2_policy", "p1_move", "p2_move", "side",
    "actor", "num_frames", "start_frame", "fps", "event_types",
)  # fmt: skip
EXCLUDE_FILE = "exclude.json"


class GalleryError(ValueError):
    """A gallery that cannot be built or served; the message says why."""


# ---------------------------------------------------------------------------------------------
# Building


def build_gallery(ds_dir: Path, out: Path, limit: int | None = None, lazy: bool = False, scale: int = 1,
                  progress=None) -> dict:
    """Write the gallery for DS_DIR into `out`; media for the first `limit` clips (all by default,
    none with `lazy`). Returns {"clips", "media", "out"}. `progress(total)` then `progress(None)` per clip."""
    import pyarrow.parquet as pq

    ds_dir, out = Path(ds_dir), Path(out)
    files = shard_files(ds_dir)
    rows = []
    for path in files:
        parquet = pq.ParquetFile(path)
        names = [c for c in META_COLUMNS if c in parquet.schema_arrow.names]
        rows += parquet.read(columns=names).to_pylist()
    rows.sort(key=lambda r: (r["tier"], r["split"], r["run"] or "", r["episode_id"], r["start_frame"], r["clip_id"]))
    out.mkdir(parents=True, exist_ok=True)
    (out / "data" / "clip").mkdir(parents=True, exist_ok=True)
    (out / "media").mkdir(exist_ok=True)
    for name in WEB_FILES:
        shutil.copyfile(WEB_DIR / name, out / name)

    wanted = [] if lazy else [r["clip_id"] for r in rows][: limit if limit is not None else None]
    todo = {c for c in wanted if not media_done(out, c)}
    if progress is not None:
        progress(len(todo))
    for path in files if todo else []:  # one pass over the shards, a row group at a time
        for batch in pq.ParquetFile(path).iter_batches(batch_size=8):
            for clip_id in set(batch.column("clip_id").to_pylist()) & todo:
                index = batch.column("clip_id").to_pylist().index(clip_id)
                write_row_media(batch.slice(index, 1).to_pylist()[0], out, scale)
                if progress is not None:
                    progress(None)
    with_media = set(wanted)
    index = {
        "dataset": str(ds_dir.resolve()), "lazy": lazy, "columns": list(INDEX_COLUMNS),
        "rows": [index_row(r, r["clip_id"] in with_media) for r in rows],
    }  # fmt: skip
    write_js(out / "data" / "clips.js", "WTF_DATA", index)
    return {"clips": len(rows), "media": len(with_media), "out": str(out)}


def index_row(row: dict, media: bool) -> list:
    moves = [m for m in (row["p1_move"], row["p2_move"]) if m]
    episode = f"{row['run']}/{row['episode_id']}" if row.get("run") else row["episode_id"]
    policy = f"{row['p1_policy']} vs {row['p2_policy']}"
    return [row["clip_id"], row["tier"], row["split"], moves, row["side"], row["event_types"] or [], episode, policy,
            row["num_frames"], media]  # fmt: skip


def media_done(out: Path, clip_id: str) -> bool:
    return all((out / p).is_file() for p in media_paths(clip_id))


def media_paths(clip_id: str) -> tuple[str, str, str]:
    return f"media/{clip_id}.mp4", f"media/{clip_id}.png", f"data/clip/{clip_id}.js"


def write_clip_media(ds_dir: Path, out: Path, clip_id: str, scale: int = 1) -> None:
    """The clip's HUD video, poster and detail file (each written under a temporary name and renamed)."""
    write_row_media(read_clip(ds_dir, clip_id), out, scale)


def write_row_media(row: dict, out: Path, scale: int = 1) -> None:
    clip_id = row["clip_id"]
    view = clip_view(row)
    hud = view.render(scale)
    video, poster, detail = (out / p for p in media_paths(clip_id))
    write_mp4(video, [hud], view.fps)
    write_atomic(poster, png_bytes(hud[len(hud) // 2]))
    write_js(detail, "WTF_CLIP", clip_detail(row))


def clip_detail(row: dict) -> dict:
    """What the clip page shows besides the video: metadata, per-frame labels and keys, events."""
    skip = {"video", "source_meta", "events"}
    meta = {k: v for k, v in row.items() if k not in skip and not isinstance(v, list)}
    meta["event_types"] = row["event_types"]
    frames = {k: row[k] for k in ("p1_keys", "p2_keys", "p1_pressed", "p2_pressed", "p1_action", "p2_action",
                                   "p1_effective", "p2_effective")}  # fmt: skip
    return {"meta": meta, "frames": frames, "events": row["events"] or []}


def write_js(path: Path, name: str, value) -> None:
    text = f"window.{name} = {json.dumps(value, separators=(',', ':'), default=_json_default)};\n"
    write_atomic(path, text.encode())


def _json_default(value):
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    raise TypeError(f"not JSON: {type(value)}")


# ---------------------------------------------------------------------------------------------
# Flags


def exclude_document(flags: dict[str, str]) -> dict:
    """clip_id → reason as the exclude file that `build-curriculum --exclude` reads."""
    return {"version": 1, "clips": [{"clip_id": c, "reason": r} for c, r in sorted(flags.items())]}


def parse_flags(data) -> dict[str, str]:
    """An exclude document (or what the page posts) → clip_id → reason; raises GalleryError if malformed."""
    if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(data.get("clips"), list):
        raise GalleryError('expected {"version": 1, "clips": [{"clip_id": ..., "reason": ...}]}')
    flags = {}
    for i, item in enumerate(data["clips"]):
        if not isinstance(item, dict) or not isinstance(item.get("clip_id"), str):
            raise GalleryError(f"clips[{i}] has no clip_id string")
        flags[item["clip_id"]] = str(item.get("reason") or "")
    return flags


def read_flags(path: Path) -> dict[str, str]:
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        return parse_flags(json.loads(path.read_text()))
    except (OSError, json.JSONDecodeError) as err:
        raise GalleryError(f"{path}: unreadable ({err})") from None


def write_flags(path: Path, flags: dict[str, str]) -> None:
    write_atomic(Path(path), (json.dumps(exclude_document(flags), indent=2) + "\n").encode())


# ---------------------------------------------------------------------------------------------
# Serving


def make_server(out: Path, ds_dir: Path, port: int = 0, exclude: Path | None = None, scale: int = 1):
    """A localhost HTTP server for the gallery in `out` (call `serve_forever()`; port 0 picks one).

    Besides the files: `GET /api/flags` and `POST /api/flags` (an exclude document) read and write
    the exclude file (default OUT/exclude.json); a missing `media/<id>.*` or `data/clip/<id>.js` is
    rendered from DS_DIR on first request."""
    out, ds_dir = Path(out).resolve(), Path(ds_dir)
    exclude = Path(exclude) if exclude else out / EXCLUDE_FILE
    lock = threading.Lock()

    class Handler(SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(out), **kwargs)

        def log_message(self, format, *args):  # noqa: A002 - the base class's name
            pass

        def end_headers(self):
            self.send_header("Cache-Control", "no-store")
            self.send_header("Accept-Ranges", "bytes")
            super().end_headers()

        def send_head(self):
            """Files, and byte ranges of them: a browser seeks in a video only when ranges are served."""
            match = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", "").strip())
            path = Path(self.translate_path(self.path))
            if match is None or match.groups() == ("", "") or not path.is_file():
                return super().send_head()
            data = path.read_bytes()
            first, last = match.groups()
            if first:
                start, end = int(first), min(int(last) if last else len(data) - 1, len(data) - 1)
            else:  # a suffix: the last N bytes
                start, end = max(0, len(data) - int(last)), len(data) - 1
            if start > end:
                self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            self.send_response(HTTPStatus.PARTIAL_CONTENT)
            self.send_header("Content-Type", self.guess_type(str(path)))
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
            self.send_header("Content-Length", str(end - start + 1))
            self.end_headers()
            return io.BytesIO(data[start:end + 1])

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path == "/api/flags":
                with lock:
                    return self.send_json(exclude_document(read_flags(exclude)))
            clip_id = lazy_clip_id(path)
            if clip_id is not None and not media_done(out, clip_id):
                try:
                    with lock:
                        if not media_done(out, clip_id):
                            write_clip_media(ds_dir, out, clip_id, scale=scale)
                except ValueError as err:
                    return self.send_error(HTTPStatus.NOT_FOUND, str(err).splitlines()[0])
            return super().do_GET()

        def do_POST(self):
            if self.path.split("?", 1)[0] != "/api/flags":
                return self.send_error(HTTPStatus.NOT_FOUND)
            length = int(self.headers.get("Content-Length") or 0)
            try:
                flags = parse_flags(json.loads(self.rfile.read(length) or b"null"))
            except (GalleryError, json.JSONDecodeError) as err:
                return self.send_json({"error": str(err)}, HTTPStatus.BAD_REQUEST)
            with lock:
                write_flags(exclude, flags)
            return self.send_json({**exclude_document(flags), "file": str(exclude)})

        def send_json(self, value, status=HTTPStatus.OK):
            body = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return QuietServer(("127.0.0.1", port), Handler)


class QuietServer(ThreadingHTTPServer):
    """Only localhost; a browser that drops a video download halfway is not an error."""

    daemon_threads = True

    def handle_error(self, request, client_address):
        import sys

        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


def lazy_clip_id(path: str) -> str | None:
    """The clip id of a per-clip file path (`/media/<id>.mp4|png`, `/data/clip/<id>.js`), else None."""
    for prefix, suffixes in (("/media/", (".mp4", ".png")), ("/data/clip/", (".js",))):
        if path.startswith(prefix):
            name = path[len(prefix):]
            for suffix in suffixes:
                if name.endswith(suffix):
                    clip_id = name[: -len(suffix)]
                    if clip_id and all(c in "0123456789abcdef" for c in clip_id):
                        return clip_id
    return None
