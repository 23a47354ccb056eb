"""Open a two-player stable-retro environment for a built-in or imported game.

stable-retro allows one emulator per process: callers close the env before making another,
and parallel collection uses one worker process per emulator.
"""

from __future__ import annotations

from pathlib import Path

GAMES_DIR = Path(__file__).parent / "games"


def builtin_integrations() -> Path:
    """The folder that holds the built-in games' stable-retro integrations (`<Name>-Nes/`)."""
    return GAMES_DIR / "duel" / "integration"


def register_builtin() -> None:
    """Make stable-retro see the built-in games (idempotent)."""
    import stable_retro

    path = str(builtin_integrations())
    if path not in _registered:
        stable_retro.data.Integrations.add_custom_path(path)
        _registered.add(path)


_registered: set[str] = set()


def make_env(retro_game: str, state: str = "Start", players: int = 2):
    """A stable-retro env with every button passed through unfiltered (`Actions.ALL`).

    `retro_game` is stable-retro's name (`Duel-Nes`, `Airstriker-Genesis-v0`); `state` a savestate
    name of the integration or an absolute path to a `.state` file.
    """
    import stable_retro

    register_builtin()
    return stable_retro.make(
        game=retro_game,
        state=state,
        players=players,
        inttype=stable_retro.data.Integrations.ALL,
        use_restricted_actions=stable_retro.Actions.ALL,
        render_mode=None,
    )
