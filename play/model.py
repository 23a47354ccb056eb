"""`wtf play --checkpoint`: people play the model; its streaming generation draws the game.

The window (play/window.py) runs in the main thread at --fps rows per second: every row it reads
both players' keys and shows the next generated frame. A worker thread generates chunk after chunk
of 8 frames over the model's rolling KV cache (`stream_keyed_chunks` of inference/generation.py, the
`wtf generate` path). It takes a chunk's keys when it starts the chunk: the rows the window read
since it took the last chunk's, spread over the chunk's 8 rows (each row ORs its share, so a tap is
never lost). It starts a chunk once the window has begun showing the one before, so generation runs
at most a chunk ahead of the screen and keys pressed while a chunk generates drive the next one.

Latency, key to screen: up to one chunk of waiting for the next take, the chunk's generation, then
whatever of the chunk before it is still to be shown: 1-2 chunks (8-16 rows) when generation keeps
up with --fps, more when it does not (the window then waits on the model; docs/play.md).

`--side-by-side` runs the emulator on the same rows' keys next to it, from the prompt's own start:
an episode folder's start.state (its row 0 is the prompt), or the game's start savestate.
"""

from __future__ import annotations

import bisect
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from wantofight.collect.game_registry import GameError, GameSpec, game_files, resolve_game
from wantofight.interrupts import SafeStop
from wantofight.play.window import Timing, Window, import_pygame

ROLLING = 2.0
"""Seconds over which the on-screen frames/s is measured."""


class ModelPlayError(RuntimeError):
    """A model session that cannot start; the message names the bad input."""


@dataclass(frozen=True)
class ModelPlaySettings:
    """One `wtf play --checkpoint` session."""

    checkpoint: str
    """A run folder, a checkpoint folder or a shipped model's name (inference/generation.py resolve_checkpoint)."""
    first_frames: Path | None = None
    """An episode folder (its row 0), an image or a video (its first frame); None: the emulator's row 0."""
    refs: tuple[str, ...] | None = None
    """One reference image per player; None: the game's own (collect/games/duel/refs)."""
    game: str = "duel"
    state: str | None = None
    """Start savestate for the emulator's row 0 and --side-by-side (default: the game's start)."""
    side_by_side: bool = False
    steps: int = 4
    sampler: str | None = None
    seed: int = 0
    device: str = "cpu"
    fps: int = 30
    """Rows per second: the frame rate of the model's training data (wtf collect's default 30)."""
    scale: int = 3

    def __post_init__(self) -> None:
        if self.fps not in (30, 60):
            raise ModelPlayError(f"--fps {self.fps} is not supported; valid: 60, 30")
        if not 1 <= self.scale <= 8:
            raise ModelPlayError(f"--scale must be 1 to 8, got {self.scale}")
        if self.steps < 1:
            raise ModelPlayError(f"--steps must be at least 1, got {self.steps}")


@dataclass
class ModelPlayResult:
    rows: int
    """Rows shown after the prompt frame."""
    chunks: list[np.ndarray] = field(repr=False, default_factory=list)
    """Each generated chunk's key masks, (8, 2) uint16, in order."""
    chunk_seconds: list[float] = field(default_factory=list)
    """Generation time of each chunk (keys taken → frames decoded)."""
    chunk_taken_at: list[float] = field(default_factory=list)
    """When each chunk's keys were taken (time.perf_counter)."""
    seconds: float = 0.0
    """Wall time from the first generated row on screen to the last, pauses left out."""
    emulator_x: list[int] = field(default_factory=list)
    """--side-by-side: P1's x in the emulator at each row shown (row 0 first)."""
    timing: Timing | None = field(repr=False, default=None)
    interrupted: bool = False


# ---------------------------------------------------------------------------------------------
# Keys: rows read by the window → one chunk for the generator


def spread(samples: list[tuple[int, int]], rows: int, held: tuple[int, int]) -> np.ndarray:
    """Masks read by the window since the last chunk → `rows` rows of (P1, P2) masks, (rows, 2) uint16.

    Each row ORs its share of the samples (more samples than rows: a tap lands in its row); with fewer,
    samples repeat; with none, every row holds `held`, the last keys read."""
    if not samples:
        return np.tile(np.asarray(held, np.uint16), (rows, 1))
    masks = np.asarray(samples, np.uint16)  # (n, 2)
    n = len(masks)
    out = np.zeros((rows, 2), np.uint16)
    for i in range(rows):
        lo = i * n // rows
        out[i] = np.bitwise_or.reduce(masks[lo:max((i + 1) * n // rows, lo + 1)], axis=0)
    return out


class KeyFeed:
    """The window adds each row's masks; the worker takes a chunk's worth when it starts a chunk."""

    def __init__(self, rows: int):
        self.rows = rows
        self.lock = threading.Lock()
        self.samples: list[tuple[int, int]] = []
        self.held = (0, 0)

    def add(self, masks: tuple[int, int]) -> None:
        with self.lock:
            self.samples.append(masks)
            self.held = masks

    def take(self) -> np.ndarray:
        with self.lock:
            samples, self.samples = self.samples, []
            return spread(samples, self.rows, self.held)


# ---------------------------------------------------------------------------------------------
# The worker: generation in its own thread


class Generation(threading.Thread):
    """Streams chunks into `frames` as (frame, masks) rows; an exception goes into `frames` too."""

    def __init__(self, loaded, prompt, refs, feed: KeyFeed, settings: ModelPlaySettings):
        super().__init__(daemon=True, name="wtf-play-generation")
        self.loaded, self.prompt, self.refs, self.feed, self.settings = loaded, prompt, refs, feed, settings
        self.frames: queue.Queue = queue.Queue()
        self.stop = threading.Event()
        self.chunks: list[np.ndarray] = []
        self.chunk_seconds: list[float] = []
        self.taken_at: list[float] = []

    def key_chunks(self):
        rows = self.loaded.config.chunk_frames
        while not self.stop.is_set():
            while self.frames.qsize() > rows and not self.stop.is_set():  # at most a chunk ahead of the screen
                time.sleep(0.002)
            if self.stop.is_set():
                return
            self.taken_at.append(time.perf_counter())
            masks = self.feed.take()
            self.chunks.append(masks)
            yield masks

    def run(self) -> None:
        from wantofight.inference.generation import stream_keyed_chunks

        s = self.settings
        try:
            prompt_masks = np.zeros((self.prompt.shape[2], 2), np.uint16)
            stream = stream_keyed_chunks(self.loaded, self.prompt, prompt_masks, self.key_chunks(), self.refs,
                                         s.steps, s.sampler, s.seed)
            for i, (frames, masks) in enumerate(stream):
                if i > 0:
                    self.chunk_seconds.append(time.perf_counter() - self.taken_at[i - 1])
                for frame, row in zip(frames, masks):
                    self.frames.put(("row", frame, (int(row[0]), int(row[1]))))
                if self.stop.is_set():
                    break
        except Exception as err:  # the window re-raises it
            self.frames.put(("error", err, None))


# ---------------------------------------------------------------------------------------------
# The emulator beside it


class EmulatorPanel:
    """The game stepped one row at a time with given keys (no recording): `--side-by-side`, and the
    prompt frame when none is given. Row 0 is the screen after `frame_skip` steps with no keys."""

    def __init__(self, game: GameSpec, state: str, start: bytes | None, fps: int, first_skip: int | None = None):
        """first_skip: emulator steps of row 0 when it differs from the session's (an episode recorded at
        another fps, whose row 0 is the prompt)."""
        from wantofight.collect.emulator import make_env

        self.game, self.skip = game, 60 // fps
        self.next_skip = first_skip or self.skip
        self.env = make_env(game.retro_game, state=state, players=game.players)
        self.env.em.set_state(start if start is not None else self.env.initial_state)
        self.env.data.reset()

    def row(self, masks: tuple[int, int]) -> np.ndarray:
        em = self.env.em
        for p in range(self.game.players):
            em.set_button_mask(self.game.buttons.to_buttons(masks[p]), p)
        for _ in range(self.next_skip):
            em.step()
        self.next_skip = self.skip
        return em.get_screen()

    def ram(self) -> dict[str, int]:
        return self.env.data.lookup_all()

    def close(self) -> None:
        self.env.close()


# ---------------------------------------------------------------------------------------------
# A session


def default_refs(game: GameSpec) -> tuple[str, ...]:
    """The built-in game's reference images, P1's fighter first (game.json `fighters`)."""
    refs = game_files("refs").get(game.name, [])
    if len(refs) != 2:
        raise ModelPlayError(f"{game.name} ships no reference images: pass --refs P1.png,P2.png")
    return tuple(map(str, refs))


def first_frame(settings: ModelPlaySettings, game: GameSpec, state: str) -> tuple[np.ndarray, bytes | None, int | None]:
    """The prompt frame (H, W, 3), and the savestate and row-0 steps the emulator starts from to show it
    (None: `state`, the session's own)."""
    import json

    from wantofight.collect import episode_files as files
    from wantofight.inference.generation import read_frames

    source = settings.first_frames
    if source is not None and source.is_dir():
        if not all((source / name).is_file() for name in ("video.mp4", "start.state", "meta.json")):
            raise ModelPlayError(f"--first-frames {source}: not an episode folder (video.mp4, start.state, meta.json)")
        skip = json.loads((source / "meta.json").read_text()).get("frame_skip")
        return read_frames(source / "video.mp4", limit=1)[0], files.read_state(source / "start.state"), skip
    if source is not None:
        return read_frames(source, limit=1)[0], None, None
    panel = EmulatorPanel(game, state, None, settings.fps)
    try:
        return panel.row((0, 0)), None, None
    finally:
        panel.close()


def play_model(settings: ModelPlaySettings) -> ModelPlayResult:
    """Play the model in a window; raises ModelPlayError / GenerationError / FileNotFoundError on bad input
    and DisplayError without a display, all before the window opens."""
    from wantofight.play.controls import KeyMap
    from wantofight.inference.generation import load_generator, prompt_frames, reference_images

    import_pygame()
    try:
        game = resolve_game(settings.game)
        state = game.resolve_state(settings.state)
    except GameError as err:
        raise ModelPlayError(str(err)) from None
    loaded = load_generator(settings.checkpoint, device=settings.device)
    refs = reference_images(list(settings.refs or default_refs(game)), loaded.config)
    frame, start, first_skip = first_frame(settings, game, state)
    prompt = prompt_frames(frame[None], loaded.config, 1)  # (1, 3, 1, H, W)
    size = (loaded.config.height, loaded.config.width)
    emulator = EmulatorPanel(game, state, start, settings.fps, first_skip) if settings.side_by_side else None
    try:
        picture = compose(frame_for_model(frame, size), emulator.row((0, 0)) if emulator else None, size)
        window = Window(f"wtf play - {loaded.config.height}x{loaded.config.width} model", picture.shape[:2],
                        KeyMap.load(), (0, 1), settings.fps, settings.scale)
        worker = Generation(loaded, prompt, refs, KeyFeed(loaded.config.chunk_frames), settings)
        try:
            with SafeStop() as stop:
                window.stop_requested = lambda: stop.requested
                result = _run(window, worker, emulator, picture, size)
                result.interrupted = stop.requested
        finally:
            worker.stop.set()
            window.close()  # before waiting for a chunk under way to finish
            worker.join(timeout=60)
        result.chunks = list(worker.chunks[:len(worker.chunk_seconds)])
        result.chunk_seconds = list(worker.chunk_seconds)
        result.chunk_taken_at = list(worker.taken_at[:len(worker.chunk_seconds)])
        return result
    finally:
        if emulator is not None:
            emulator.close()


def frame_for_model(frame: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """A game frame at the model's size, as its training data saw it (datasets/frames.py, stretch)."""
    from wantofight.datasets.frames import stretch_uint8

    return stretch_uint8(frame[None], size)[0]


def compose(generated: np.ndarray, emulator: np.ndarray | None, size: tuple[int, int]) -> np.ndarray:
    """The picture above the HUD: GENERATED, or EMULATOR | GENERATED with --side-by-side, titled."""
    from wantofight.hud import add_titles, side_by_side

    if emulator is None:
        return add_titles(generated[None], [(0, "GENERATED")], scale=1)[0]
    return side_by_side([("EMULATOR", frame_for_model(emulator, size)[None]), ("GENERATED", generated[None])],
                        scale=1)[0]


def _run(window: Window, worker: Generation, emulator: EmulatorPanel | None, picture: np.ndarray,
         size: tuple[int, int]) -> ModelPlayResult:
    """The window's loop: one row per tick, the next generated frame when there is one."""
    result = ModelPlayResult(rows=0, timing=window.timing)
    emulated = None
    if emulator is not None:  # its row 0, stepped for the first picture, is the prompt's row
        emulated = emulator.env.em.get_screen()
        result.emulator_x.append(int(emulator.ram().get("p1_x", 0)))
    worker.start()
    keys = (0, 0)
    shown: list[float] = []  # when each row the worker sent went on screen; the prompt frame first
    try:
        while not window.quit:
            try:
                kind, item, masks = worker.frames.get_nowait()
            except queue.Empty:
                kind = None  # the model is behind: the last picture stays
            if kind == "error":
                raise item
            if kind == "row":
                if shown and emulator is not None:
                    emulated = emulator.row(masks)
                    result.emulator_x.append(int(emulator.ram().get("p1_x", 0)))
                shown.append(time.perf_counter())
                keys = masks
                picture = compose(item, emulated, size)
            row = max(len(shown) - 1, 0)
            window.tick(row, picture, keys, status=f"ROW {row}  {status(shown, worker.chunk_seconds)}")
            if not window.quit:
                worker.feed.add(window.masks)
    finally:
        worker.stop.set()
    result.rows = max(len(shown) - 1, 0)
    if len(shown) > 2:
        result.seconds = shown[-1] - shown[1] - sum(seconds for _, seconds in window.timing.pauses)
    return result


def status(shown: list[float], chunk_seconds: list[float]) -> str:
    """`GEN 29.7 FPS 212 MS/CHUNK`: rows shown per second over the last ROLLING seconds, and the mean
    generation time of the last 4 chunks."""
    if len(shown) < 2:
        return "GEN: STARTING"
    now = time.perf_counter()
    recent = len(shown) - max(bisect.bisect_left(shown, now - ROLLING), 1)  # rows shown in the window, prompt aside
    span = min(ROLLING, now - shown[1])
    fps = recent / span if span > 0 else 0.0
    ms = 1000 * sum(chunk_seconds[-4:]) / len(chunk_seconds[-4:]) if chunk_seconds else 0.0
    return f"GEN {fps:.1f} FPS  {ms:.0f} MS/CHUNK"
