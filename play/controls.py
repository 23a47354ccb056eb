"""Who presses what: the keyboard and game controllers read into both players' 16-slot masks.

The map is data (`keymap.json`, shown in docs/play.md): a pygame key name for every slot of each
player (docs/contracts.md's layout), the window's own keys (pause, quit), and controller buttons by
SDL index. A row's mask is every mapped key held when the row's input is read, plus every key that
went down since the last read, so a tap shorter than a frame still lands in one row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from wantofight.collect.keys import SLOT_INDEX, SLOTS

KEYMAP_FILE = Path(__file__).parent / "keymap.json"
DIRECTIONS = ("UP", "DOWN", "LEFT", "RIGHT")


class KeyMapError(ValueError):
    """A key map that names an unknown slot or key, or gives one key two jobs."""


@dataclass(frozen=True)
class KeyMap:
    """Key names (pygame's, as `pygame.key.key_code` takes them) for the players' slots and the window."""

    players: tuple[dict[str, str], dict[str, str]]
    """P1's and P2's slot name → key name."""
    pause: tuple[str, ...]
    quit: tuple[str, ...]
    controller_buttons: tuple[str, ...]
    """Slot filled by controller button i (SDL joystick index order); the d-pad and left stick give directions."""
    stick_threshold: float
    """How far the left stick must lean (0-1) to press a direction."""

    def __post_init__(self) -> None:
        used: dict[str, str] = {}
        for player, slots in enumerate(self.players):
            for slot, key in slots.items():
                if slot not in SLOT_INDEX:
                    raise KeyMapError(f"p{player + 1}: unknown slot {slot!r}; valid: {', '.join(SLOTS)}")
                self._claim(used, key, f"p{player + 1} {slot}")
        for name in self.pause:
            self._claim(used, name, "pause")
        for name in self.quit:
            self._claim(used, name, "quit")
        unknown = [s for s in self.controller_buttons if s not in SLOT_INDEX]
        if unknown:
            raise KeyMapError(f"controller: unknown slot {unknown[0]!r}; valid: {', '.join(SLOTS)}")

    @staticmethod
    def _claim(used: dict[str, str], key: str, job: str) -> None:
        if key in used:
            raise KeyMapError(f"key {key!r} is mapped to both {used[key]} and {job}")
        used[key] = job

    @classmethod
    def load(cls, path: Path = KEYMAP_FILE) -> "KeyMap":
        data = json.loads(Path(path).read_text())
        keyboard, window, controller = data["keyboard"], data["window"], data["controller"]
        return cls(
            players=(dict(keyboard["p1"]), dict(keyboard["p2"])), pause=tuple(window["pause"]),
            quit=tuple(window["quit"]), controller_buttons=tuple(controller["buttons"]),
            stick_threshold=float(controller["stick_threshold"]),
        )


def controller_mask(buttons: list[bool], hat: tuple[int, int], stick: tuple[float, float], keymap: KeyMap) -> int:
    """One controller's state → a 16-slot mask. hat: SDL's (x, y) with y = +1 up; stick: (x, y), y = +1 down."""
    mask = 0
    for index, slot in enumerate(keymap.controller_buttons):
        if index < len(buttons) and buttons[index]:
            mask |= 1 << SLOT_INDEX[slot]
    x, y = stick
    lean = keymap.stick_threshold
    pressed = {
        "LEFT": hat[0] < 0 or x <= -lean, "RIGHT": hat[0] > 0 or x >= lean,
        "UP": hat[1] > 0 or y <= -lean, "DOWN": hat[1] < 0 or y >= lean,
    }
    for slot in DIRECTIONS:
        if pressed[slot]:
            mask |= 1 << SLOT_INDEX[slot]
    return mask


class Controls:
    """Reads the keyboard and controllers each row (pygame must be initialised with a window).

    Controllers go to the human players in order: the first controller plays the first human player.
    """

    def __init__(self, keymap: KeyMap, humans: tuple[int, ...]):
        import pygame

        self.pygame, self.keymap, self.humans = pygame, keymap, humans
        self.codes = [{pygame.key.key_code(key): 1 << SLOT_INDEX[slot] for slot, key in slots.items()}
                      for slots in keymap.players]  # per player: key code → slot bit
        self.pause_keys = {pygame.key.key_code(k) for k in keymap.pause}
        self.quit_keys = {pygame.key.key_code(k) for k in keymap.quit}
        self.tapped: set[int] = set()
        self.controllers: dict[int, object] = {}  # instance id → pygame Joystick
        pygame.joystick.init()

    def on_event(self, event) -> str | None:
        """Take one pygame event; returns "pause" or "quit" when it asks for one."""
        pg = self.pygame
        if event.type == pg.QUIT or (event.type == pg.KEYDOWN and event.key in self.quit_keys):
            return "quit"
        if event.type == pg.KEYDOWN:
            if event.key in self.pause_keys:
                return "pause"
            self.tapped.add(event.key)
        elif event.type == pg.JOYDEVICEADDED:
            stick = pg.joystick.Joystick(event.device_index)
            self.controllers[stick.get_instance_id()] = stick
        elif event.type == pg.JOYDEVICEREMOVED:
            self.controllers.pop(event.instance_id, None)
        return None

    def masks(self) -> tuple[int, int]:
        """Both players' masks for the row being read; clears the taps."""
        held = self.pygame.key.get_pressed()
        masks = [0, 0]
        for player, codes in enumerate(self.codes):
            for code, bit in codes.items():
                if held[code] or code in self.tapped:
                    masks[player] |= bit
        self.tapped.clear()
        for stick, player in zip(self.controllers.values(), self.humans):
            masks[player] |= self._read(stick)
        return masks[0], masks[1]

    def _read(self, stick) -> int:
        buttons = [bool(stick.get_button(i)) for i in range(stick.get_numbuttons())]
        hat = stick.get_hat(0) if stick.get_numhats() else (0, 0)
        axes = (stick.get_axis(0), stick.get_axis(1)) if stick.get_numaxes() >= 2 else (0.0, 0.0)
        return controller_mask(buttons, hat, axes, self.keymap)
