"""Shared helpers for command modules: one console, one way to fail."""

from __future__ import annotations

from typing import Iterable, NoReturn

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


def typed_options(ctx: typer.Context, names: Iterable[str]) -> set[str]:
    """The options among `names` that the user typed (so `--resume` can refuse conflicting ones)."""
    # Compared by name: Typer may bundle its own click, whose ParameterSource enum is a different class.
    return {n for n in names if getattr(ctx.get_parameter_source(n), "name", None) == "COMMANDLINE"}
