"""`wtf annotate`, `wtf build-curriculum`: the command-line face of `annotate/`."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root `wtf` app."""
