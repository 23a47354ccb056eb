"""`wtf encode`: the command-line face of `datasets/` (the latent cache)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root `wtf` app."""
