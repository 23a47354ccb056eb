"""Shared helpers for command modules: one console, one way to fail."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

console = Console()
errors = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error naming the bad thing and exit non-zero."""
    errors.print(f"[bold red]error:[/] {message}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def warn(message: str) -> None:
    """Print a one-line warning (a skipped episode, a corrupt row) and carry on."""
    errors.print(f"[yellow]warning:[/] {message}", soft_wrap=True, highlight=False)
