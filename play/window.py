"""The play window: the game's frame scaled up with both players' key HUD under it, paced at the
recording's frame rate.

Each row goes: show the frame and HUD → wait for the row's deadline → read the input the next row
will receive. Reading as late as possible keeps input-to-screen latency short: a key read for row t
is in row t's HUD when row t is shown (about a millisecond after the read), and in the picture one
row later, since the NES shows RAM one frame late (docs/play.md). A row that runs late is
not skipped or repeated: the next starts at once, and after a stall of more than `MAX_BEHIND` rows
(or a pause) the clock restarts instead of racing to catch up.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from wantofight.hud import BACKGROUND, LINE_H, PLAYER_COLORS, TEXT, draw_text, hud_layout, render_hud
from wantofight.play.controls import Controls, KeyMap

MAX_BEHIND = 3
"""Rows a late loop may be behind its clock before the clock restarts."""
HEADLESS_DRIVERS = ("offscreen", "dummy")
NO_DISPLAY_HINT = "run it in a desktop session, or under Xvfb: xvfb-run -a wtf play ..."


class DisplayError(RuntimeError):
    """No display to open a window on; the message says what to do."""


@dataclass
class Timing:
    """When each row's input was read and its frame shown (time.perf_counter seconds)."""

    read: dict[int, float] = field(default_factory=dict)
    """Row t → when the keys row t received were read (rows from 1; row 0 has no keys)."""
    shown: dict[int, float] = field(default_factory=dict)
    """Row t → when frame t was on screen (after the window's flip)."""
    pauses: list[tuple[int, float]] = field(default_factory=list)
    """(row, seconds) for each pause, after showing that row."""
    ticks: list[float] = field(default_factory=list)
    """Every input read in order: one per row on the emulator; a model session also ticks while it waits
    for the next generated row."""

    def read_intervals(self) -> np.ndarray:
        """Seconds between consecutive input reads (the emulator's frame times), pauses left out."""
        rows = sorted(self.read)
        resumed = {row + 1 for row, _ in self.pauses}  # the read that ended a pause
        return np.array([self.read[b] - self.read[a] for a, b in zip(rows, rows[1:]) if b not in resumed])

    def rate(self) -> float:
        """Rows per second while playing."""
        intervals = self.read_intervals()
        return float(1.0 / intervals.mean()) if len(intervals) else 0.0


def import_pygame():
    """pygame without its greeting on stdout (the [play] extra), and with a plain framebuffer window.

    SDL otherwise presents the window through OpenGL, which under Xvfb (or any machine without a GPU
    driver) is Mesa's software renderer: a 720x822 flip took 9.2 ms instead of 1.1 ms, and Mesa's
    LLVM, once loaded, makes a later import of Triton's own LLVM (torch compiles with it) crash the
    process. A user's own SDL_FRAMEBUFFER_ACCELERATION is kept."""
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    os.environ.setdefault("SDL_FRAMEBUFFER_ACCELERATION", "0")
    import pygame

    return pygame


def open_display(title: str, size: tuple[int, int]):
    """A pygame window of `size`; raises DisplayError when there is no display (SDL would otherwise
    fall back to an invisible offscreen window). SDL_VIDEODRIVER=offscreen asks for one on purpose."""
    pygame = import_pygame()
    wanted = os.environ.get("SDL_VIDEODRIVER", "")
    driver = None
    if sys.platform.startswith("linux") and not wanted:
        x11, wayland = os.environ.get("DISPLAY"), os.environ.get("WAYLAND_DISPLAY")
        if not x11 and not wayland:
            raise DisplayError(f"no display: DISPLAY is not set; {NO_DISPLAY_HINT}")
        driver = None if wayland else "x11"  # else SDL goes on to try Wayland and prints its own complaint
    try:
        _init_display(pygame, driver)
    except pygame.error as err:
        shown = os.environ.get("WAYLAND_DISPLAY") or os.environ.get("DISPLAY")
        raise DisplayError(f"no display: cannot open a window on {shown or 'any display'} ({err}); "
                           f"{NO_DISPLAY_HINT}") from None
    if pygame.display.get_driver() in HEADLESS_DRIVERS and wanted not in HEADLESS_DRIVERS:
        pygame.display.quit()
        raise DisplayError(f"no display: SDL found only its {pygame.display.get_driver()} driver; {NO_DISPLAY_HINT}")
    pygame.display.set_caption(title)
    return pygame.display.set_mode(size)


def _init_display(pygame, driver: str | None) -> None:
    """pygame.display.init() with SDL_VIDEODRIVER set to `driver` for the call (SDL reads it only then)."""
    if driver is None:
        pygame.display.init()
        return
    os.environ["SDL_VIDEODRIVER"] = driver
    try:
        pygame.display.init()
    finally:
        del os.environ["SDL_VIDEODRIVER"]


class Window:
    """Shows rows, paces them and reads the controls. `on_row` is the recorder's row hook."""

    def __init__(self, title: str, frame_shape: tuple[int, int], keymap: KeyMap, humans: tuple[int, ...], fps: int,
                 scale: int, labels=None):
        """frame_shape: the (H, W) of the picture above the HUD; humans: the players the controls play
        (0 = P1); labels: RAM → (P1 text, P2 text) under each key row, or None (`on_row` uses them)."""
        h, w = frame_shape
        self.layout = hud_layout(h, w, scale=1)
        # The HUD without its event timeline (nothing has happened yet): frame, key rows, actions, one
        # status line where the clip HUD keeps its counter.
        self.base = (self.layout.timeline_y, self.layout.width)  # (H, W) before scaling
        self.size = (self.base[1] * scale, self.base[0] * scale)  # pygame's (width, height)
        self.screen = open_display(title, self.size)
        import pygame

        self.pygame = pygame
        self.controls = Controls(keymap, humans)  # after the window: pygame reads keys from it
        self.labels = labels
        self.period = 1.0 / fps
        self.canvas = np.empty((*self.base, 3), dtype=np.uint8)  # (H, W, 3)
        self.panels: dict[tuple, np.ndarray] = {}
        self.previous = (0, 0)
        self.masks = (0, 0)
        self.paused = self.quit = False
        self.stop_requested = lambda: False
        self.recording = False
        self.timing = Timing()
        self.next_read: float | None = None
        """When the next row's input is due (perf_counter seconds)."""

    def close(self) -> None:
        self.pygame.display.quit()

    # ------------------------------------------------------------------------------------------
    # The recorder's row hook

    def on_row(self, row: int, screen: np.ndarray, ram: dict[str, int], keys: tuple[int, int]) -> bool:
        """Show row `row`, wait for the next row's time, read its input; True when the player quit."""
        labels = self.labels(ram) if self.labels else (None, None)
        rec = "REC  " if self.recording else ""
        return self.tick(row, screen, keys, labels, f"{rec}ROW {row}")

    def tick(self, row: int, picture: np.ndarray, keys: tuple[int, int], labels=(None, None), status: str = "") -> bool:
        """One row of any session: show `picture` (H, W, 3) with the HUD of `keys`, wait for the next row's
        time, read the input (`self.masks`), hold here while paused; True when the player quit."""
        self.show(row, picture, keys, labels, status)
        self.wait()
        self.poll()
        if self.paused and not self.quit:
            paused_at = time.perf_counter()
            while self.paused and not self.quit:
                self.show(row, picture, keys, labels, status)
                time.sleep(self.period)
                self.poll()
            self.show(row, picture, keys, labels, status)
            self.timing.pauses.append((row, time.perf_counter() - paused_at))
            self.next_read = time.perf_counter() + self.period  # the clock restarts after a pause
        self.timing.read[row + 1] = time.perf_counter()
        self.timing.ticks.append(self.timing.read[row + 1])
        return self.quit

    def wait(self) -> None:
        """Sleep until the next row is due; a loop more than MAX_BEHIND rows late restarts the clock."""
        now = time.perf_counter()
        if self.next_read is None or now - self.next_read > MAX_BEHIND * self.period:
            self.next_read = now
        elif now < self.next_read:
            time.sleep(self.next_read - now)
        self.next_read += self.period

    def poll(self) -> None:
        """Handle window events (pause, quit, controllers) and read both players' masks."""
        for event in self.pygame.event.get():
            wish = self.controls.on_event(event)
            if wish == "quit":
                self.quit = True
            elif wish == "pause":
                self.paused = not self.paused
        if self.stop_requested():
            self.quit = True
        self.masks = self.controls.masks()

    # ------------------------------------------------------------------------------------------
    # Drawing

    def show(self, row: int, picture: np.ndarray, keys: tuple[int, int], labels, status: str) -> None:
        h, w = picture.shape[:2]
        canvas = self.canvas
        canvas[:] = self.panel(keys, labels)
        canvas[:h, :w] = picture
        y = self.layout.index_y
        canvas[y - 1:y + LINE_H, :] = BACKGROUND
        state = "PAUSED  P: RESUME  ESC: QUIT" if self.paused else "P: PAUSE  ESC: QUIT"
        draw_text(canvas, y, 2, f"{status}  {state}", PLAYER_COLORS[1] if self.paused else TEXT)
        image = self.pygame.image.frombuffer(canvas.data, (self.base[1], self.base[0]), "RGB")
        self.screen.blit(self.pygame.transform.scale(image, self.size), (0, 0))
        self.pygame.display.flip()
        self.timing.shown.setdefault(row, time.perf_counter())
        self.previous = keys

    def panel(self, keys: tuple[int, int], labels: tuple[str | None, str | None]) -> np.ndarray:
        """The HUD for these keys (new presses bordered) and labels, cropped above the event timeline;
        cached, as a row's panel usually repeats the last one's."""
        pressed = (keys[0] & ~self.previous[0], keys[1] & ~self.previous[1])
        key = (keys, pressed, labels)
        panel = self.panels.get(key)
        if panel is None:
            if len(self.panels) > 4096:
                self.panels.clear()
            blank = np.zeros((1, self.layout.frame_height, self.layout.frame_width, 3), dtype=np.uint8)
            hud = render_hud(blank, [keys[0]], [keys[1]], labels=([labels[0]], [labels[1]]), scale=1,
                             p1_pressed=[pressed[0]], p2_pressed=[pressed[1]])
            panel = self.panels[key] = hud[0, :self.base[0], :self.base[1]]
        return panel


def state_labels(game_info: dict | None):
    """RAM → (P1, P2) action text from the game's state and move names (`attack:light_punch`), or None
    for a game without them."""
    if not game_info or "state_ids" not in game_info:
        return None
    states = {v: k for k, v in game_info["state_ids"].items()}
    moves = {m["id"]: m["name"] for m in game_info.get("moves", [])}
    attack = game_info["state_ids"].get("attack")

    def labels(ram: dict[str, int]) -> tuple[str | None, str | None]:
        out = []
        for p in ("p1", "p2"):
            state = ram.get(f"{p}_state")
            text = states.get(state)
            if state == attack and ram.get(f"{p}_move") in moves:
                text = f"attack:{moves[ram[f'{p}_move']]}"
            out.append(text)
        return out[0], out[1]

    return labels

