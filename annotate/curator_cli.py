"""`wtf inspect`, `wtf stats`, `wtf browse`, `wtf query`: the curator tools."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root `wtf` app."""
