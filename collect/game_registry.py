"""Which games `wtf collect` can drive: the built-in ones and imported stable-retro games.

A built-in game is a folder `collect/games/<name>/` with a `game.json` (its knowledge as data:
moves, state ids, box sizes, lag) and a stable-retro integration under `integration/`.
An imported game is any stable-retro integration whose ROM the user imported with
`python -m stable_retro.import PATH`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from wantofight.collect.emulator import GAMES_DIR, register_builtin
from wantofight.collect.keys import ButtonTable, button_table


class GameError(ValueError):
    """An unknown game, a missing ROM or an unknown state; the message says what is valid."""


@dataclass(frozen=True)
class GameSpec:
    """A game the collector can run."""

    name: str
    """The name users type: `duel`, or the stable-retro name of an imported game."""
    retro_game: str
    """stable-retro's name (`Duel-Nes`, `Airstriker-Genesis-v0`)."""
    platform: str
    """stable-retro platform (`Nes`, `Genesis`, `Snes`, `FBNeo`)."""
    builtin: bool
    players: int
    """How many players the integration supports (1 or 2)."""
    default_state: str
    info: dict = field(default_factory=dict, compare=False, repr=False)
    """The built-in game's `game.json` (empty for imported games)."""

    @property
    def buttons(self) -> ButtonTable:
        return button_table(self.platform)

    @property
    def screen_ram_lag(self) -> int | None:
        """Frames by which the screen trails RAM (measured for built-in games, unknown otherwise)."""
        return self.info.get("screen_ram_lag_frames")

    def integration_dir(self) -> Path:
        import stable_retro

        register_builtin()
        rom = stable_retro.data.get_romfile_path(self.retro_game, stable_retro.data.Integrations.ALL)
        return Path(rom).parent

    def scenario_path(self) -> Path | None:
        path = self.integration_dir() / "scenario.json"
        return path if path.is_file() else None

    def integration_version(self) -> str:
        """Identifies the integration's files: sha1 of data.json + scenario.json + metadata.json."""
        digest = hashlib.sha1()
        for name in ("data.json", "scenario.json", "metadata.json"):
            path = self.integration_dir() / name
            digest.update(path.read_bytes() if path.is_file() else b"")
        return digest.hexdigest()[:12]

    def rom_sha1(self) -> str:
        rom = next(p for p in self.integration_dir().glob("rom.*") if p.suffix != ".sha")
        return hashlib.sha1(rom.read_bytes()).hexdigest()

    def states(self) -> list[str]:
        import stable_retro

        register_builtin()
        return stable_retro.data.list_states(self.retro_game, stable_retro.data.Integrations.ALL)

    def resolve_state(self, state: str | None) -> str:
        """A state name of the integration, or an absolute path to a `.state` file."""
        if state is None:
            return self.default_state
        if Path(state).is_absolute() and Path(state).is_file():
            return state
        known = self.states()
        if state not in known:
            raise GameError(f"unknown state {state!r} for {self.name}; valid states: {', '.join(known)}")
        return state


@cache
def builtin_games() -> dict[str, GameSpec]:
    games = {}
    for path in sorted(GAMES_DIR.glob("*/game.json")):
        info = json.loads(path.read_text())
        games[info["name"]] = GameSpec(
            name=info["name"],
            retro_game=info["retro_game"],
            platform=info["platform"],
            builtin=True,
            players=2,
            default_state="Start",
            info=info,
        )
    return games


def _retro_name(name: str) -> str | None:
    """stable-retro's full name for `name`, accepting it with or without the `-v0` suffix."""
    import stable_retro

    known = set(stable_retro.data.list_games(stable_retro.data.Integrations.ALL))
    for candidate in (name, f"{name}-v0"):
        if candidate in known:
            return candidate
    return None


def _imported_spec(retro_game: str) -> GameSpec:
    import stable_retro

    meta_path = stable_retro.data.get_file_path(retro_game, "metadata.json", stable_retro.data.Integrations.ALL)
    meta = json.loads(Path(meta_path).read_text()) if meta_path else {}
    player_states = meta.get("default_player_state") or []
    players = 2 if len(player_states) >= 2 else 1
    default = player_states[1] if players == 2 else meta.get("default_state", "")
    base = retro_game.removesuffix("-v0")
    return GameSpec(
        name=retro_game,
        retro_game=retro_game,
        platform=base.rsplit("-", 1)[-1],
        builtin=False,
        players=players,
        default_state=default,
    )


def rom_imported(retro_game: str) -> bool:
    import stable_retro

    try:
        stable_retro.data.get_romfile_path(retro_game, stable_retro.data.Integrations.ALL)
    except FileNotFoundError:
        return False
    return True


def resolve_game(name: str) -> GameSpec:
    """The game called `name`; raises GameError listing the valid names or saying how to import."""
    builtin = builtin_games()
    if name in builtin:
        return builtin[name]
    retro_game = _retro_name(name)
    if retro_game is None:
        valid = ", ".join(list(builtin) + [g.name for g in imported_games()])
        raise GameError(f"unknown game {name!r}; valid games: {valid} (see `wtf games`)")
    if not rom_imported(retro_game):
        raise GameError(
            f"game {retro_game} has a stable-retro integration but its ROM is not imported; "
            "import your ROM with `python -m stable_retro.import PATH`"
        )
    spec = _imported_spec(retro_game)
    button_table(spec.platform)  # fails with the known platforms if there is no table
    return spec


def imported_games(include_one_player: bool = True) -> list[GameSpec]:
    """Imported stable-retro games whose ROM is present and whose platform has a button table."""
    import stable_retro

    from wantofight.collect.keys import available_platforms

    register_builtin()
    platforms = available_platforms()
    specs = []
    builtin_retro = {g.retro_game for g in builtin_games().values()}
    for game in stable_retro.data.list_games(stable_retro.data.Integrations.ALL):
        if game in builtin_retro or game.removesuffix("-v0").rsplit("-", 1)[-1].lower() not in platforms:
            continue
        if not rom_imported(game):
            continue
        spec = _imported_spec(game)
        if include_one_player or spec.players == 2:
            specs.append(spec)
    return specs


# ---------------------------------------------------------------------------------------------
# The built-in games' own files, by name

ASSETS = {"refs": ("reference image", ".png"), "keys": ("key file", ".keys")}
"""Folder of a built-in game (`collect/games/<name>/<kind>/`) -> what its files are, and their suffix."""


def game_files(kind: str) -> dict[str, list[Path]]:
    """Every file of `kind` the built-in games ship, by the name users type: `duel/kai`,
    `duel/walk-under-a`; for `refs` also the game's name alone for its pair, P1's fighter first
    (game.json `fighters`). They are package data, so the names work from any folder."""
    suffix = ASSETS[kind][1]
    named: dict[str, list[Path]] = {}
    for name, spec in builtin_games().items():
        folder = GAMES_DIR / name / kind
        if kind == "refs":
            pair = [folder / f"{fighter}{suffix}" for fighter in spec.info.get("fighters", [])]
            if pair and all(p.is_file() for p in pair):
                named[name] = pair
        named.update({f"{name}/{p.stem}": [p] for p in sorted(folder.glob(f"*{suffix}"))})
    return named


def resolve_game_files(item: str | Path, kind: str) -> list[Path]:
    """A path that exists (it wins), else a built-in game's file(s) by name; raises GameError naming
    `item` and listing the names."""
    if Path(item).is_file():
        return [Path(item)]
    named = game_files(kind)
    if str(item) in named:
        return named[str(item)]
    raise GameError(f"{item}: no such file, nor a built-in {ASSETS[kind][0]}; built-in names: {', '.join(named)}")


def resolve_refs(spec: str) -> list[Path]:
    """`--refs`: comma-separated reference images, each a path or a built-in name (`duel/kai`); a
    built-in game's name (`duel`) stands for its pair."""
    return [path for item in spec.split(",") if item for path in resolve_game_files(item, "refs")]


def resolve_key_file(spec: str | Path) -> Path:
    """A key file: a path, or a built-in name (`duel/walk-under-a`)."""
    return resolve_game_files(spec, "keys")[0]
